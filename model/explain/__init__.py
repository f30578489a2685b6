"""Why this prediction? Logit lens, direct logit attribution, leave-one-out, score terms, what-ifs.

Qt-free arithmetic on a :class:`model.tracing.records.Trace` and the model that made it. The one call
for a panel is :func:`explain`; :func:`what_if` and :func:`standard_what_ifs` re-run the model
with the attention formula changed; :mod:`model.core.interventions` holds the changes the forward
pass understands (ablated heads, hidden keys, τ, scale on/off).
"""

from model.explain.core import Explanation, explain, leave_one_out_sources
from model.explain.dla import DirectLogitAttribution, direct_logit_attribution
from model.explain.lens import LensStage, logit_lens
from model.explain.loo import Interrupted, leave_one_out, stop_if
from model.explain.scores import ScoreTerms, first_token_attention, first_token_mean, score_terms, score_terms_note
from model.explain.whatif import WhatIf, attention_entropy, prediction, standard_what_ifs, what_if

__all__ = [
    "DirectLogitAttribution", "Explanation", "Interrupted", "LensStage", "ScoreTerms", "WhatIf", "attention_entropy",
    "direct_logit_attribution", "explain", "first_token_attention", "first_token_mean", "leave_one_out",
    "leave_one_out_sources", "logit_lens", "prediction", "score_terms", "score_terms_note", "standard_what_ifs", "stop_if",
    "what_if",
]
