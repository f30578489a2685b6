"""Which panels apply to the loaded model, and one sentence saying why when one does not (no Qt here).

Every panel opens every model without raising; the views that need attention (queries, keys and
values, scores, heads, a positional encoding to switch off) have nothing to show for the model before
attention (:mod:`model.core.window`), and say so in one sentence computed from its config instead.
"""

from __future__ import annotations

from model.core.architectures import has_attention

#: Per panel name (the PANELS registry's), why it does not apply to the model before attention;
#: ``{n}`` is its window (context_length).
WITHOUT_ATTENTION = {
    "attention": "The model before attention has no attention: it multiplies each of the last {n} tokens by "
                 "that position's own block of W_in, so there are no scores or weights to draw (the Why "
                 "attention? panel shows two such blocks).",
    "qkv": "The model before attention has no queries, keys or values: each of the last {n} tokens meets "
           "its position's own block of W_in instead of one W_Q, W_K, W_V shared by every position.",
    "formula": "There is no attention formula to follow here: the model before attention adds up what each "
               "of its {n} window slots contributes (x_i W_in) instead of weighting values by a softmax.",
    "variants": "The attention variants are computed from W_Q, W_K and W_V, which the model before "
                "attention does not have: it reads its {n} slots through one fixed block each.",
    "positional": "Nothing to switch off here: the model before attention has no positional encoding; where "
                  "a token stands decides which of its {n} blocks of W_in it meets (the Why attention? "
                  "panel moves a phrase through the window).",
    "head-types": "No head types over training: the model before attention has no attention heads to score; "
                  "it reads its {n} window slots through one fixed block each.",
    "why": "The Why panel splits a prediction over attention heads and a residual stream, and the model before "
           "attention has neither: it sums what its {n} window slots contribute to one hidden layer.",
}


def not_applicable(panel: str, config) -> str:
    """Why ``panel`` shows nothing for the model with ``config``: one sentence, or "" when it applies
    (a transformer, no model, or a panel that needs no attention).

    Parameters
    ----------
    panel : str
        A panel's registry name (``explorer.qt.panels.PANELS``), or a view inside one
        (``"head-types"``: the Training panel's head types over training).
    config : GPTConfig, WindowConfig or None
    """
    if config is None or has_attention(config) or panel not in WITHOUT_ATTENTION:
        return ""
    return WITHOUT_ATTENTION[panel].format(n=config.context_length)
