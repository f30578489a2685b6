"""The sentences of the Why attention? lesson, each written from its numbers (no Qt here).

Nothing here is fixed text about the models: every figure, token and comparison word ("more",
"less") comes from :mod:`explorer.core.lessons.why_attention`'s results, so a sentence is true of the
two models it was computed for.
"""

from __future__ import annotations

from typing import Callable

from explorer.core.lessons.why_attention import Blocks, ParameterCurve, PhraseShift

Name = Callable[[int], str]  # a token id to how it is shown


def _q(name: Name, token_id: int) -> str:
    return f"“{name(int(token_id))}”"


def blocks_sentence(b: Blocks, name: Name, d_model: int, d_mlp: int, d_head: int) -> str:
    """What the two blocks and the transformer's shared matrices say."""
    a, c = b.places
    same = a == c
    if same:
        first = (f"Place {a} twice: the model before attention meets {_q(name, b.token_id)} with one block, "
                 f"W_in[{a}] ({d_model} × {d_mlp}); pick two places to compare.")
    else:
        first = (f"The model before attention multiplies {_q(name, b.token_id)} by W_in[{a}] at place {a} and "
                 f"by W_in[{c}] at place {c}: two learned {d_model} × {d_mlp} blocks, as different as "
                 f"‖W_in[{a}] − W_in[{c}]‖ = {b.difference:.2f} ‖W_in[{a}]‖ (cosine {b.block_cosine:.2f}); what "
                 f"the token adds to the hidden layer at the two places has cosine {b.contribution_cosine:.2f}.")
    return (first + f" The transformer reads it with one W_Q, one W_K and one W_V ({d_model} × {d_head} each) "
            f"wherever it stands; only its input moves, by the positional row (its query at the two places: "
            f"cosine {b.q_cosine:.2f}).")


def phrase_sentence(shift: PhraseShift, name: Name, labels: dict[str, str]) -> str:
    """How far each model's prediction after the phrase moved, and which moved more.

    ``labels``: the model names of ``shift.predictions`` as they are shown ("the transformer", ...).
    """
    phrase = " ".join(name(i) for i in shift.phrase)
    if not shift.lead:
        return (f"“{phrase}” is your whole text, so it cannot move later in the window: type more before it "
                "(or choose a shorter phrase).")
    parts = []
    for key, p in shift.predictions.items():
        same = "the same top token" if p.top_early == p.top_late else (
            f"{_q(name, p.top_early)} becomes {_q(name, p.top_late)}")
        parts.append(f"{labels[key]}: {same}, total variation {p.tv:.3f}")
    (k1, p1), (k2, p2) = sorted(shift.predictions.items(), key=lambda kv: -kv[1].tv)[:2]
    if abs(p1.tv - p2.tv) < 0.005:
        verdict = "Both moved about as much."
    else:
        verdict = (f"{labels[k1][0].upper() + labels[k1][1:]} moved more ({p1.tv:.3f} against {p2.tv:.3f}).")
    return (f"After “{phrase}” first in the window, and again last in it after {len(shift.lead)} tokens of your "
            f"text: " + "; ".join(parts) + ". " + verdict)


def parameter_sentence(curve: ParameterCurve, labels: dict[str, str], window_key: str, transformer_key: str) -> str:
    """Both models' sizes at their own window and at the largest, and what grows."""
    def at(key: str, n: int) -> int:
        return int(curve.totals[key][list(curve.windows).index(n)])

    n, last = curve.at, int(curve.windows[-1])
    w_first = int(curve.growing[window_key][-1])
    t_table = int(curve.growing[transformer_key][-1])
    return (f"At n = {n}: {at(window_key, n):,} parameters for {labels[window_key]}, {at(transformer_key, n):,} "
            f"for {labels[transformer_key]}. At n = {last:,} the first one's first layer alone is {w_first:,} "
            f"(it grows by {(w_first - int(curve.growing[window_key][0])) // (last - int(curve.windows[0])):,} per "
            f"token of window), {at(window_key, last):,} in all; the transformer's attention weights do not grow, "
            f"only its positional table does ({t_table:,}), {at(transformer_key, last):,} in all.")


def validation_sentence(rows: list[tuple[str, int, float | None]], text: str | None, labels: dict[str, str]) -> str:
    """The stored validation losses side by side, and whether they were measured on one text
    (``text``: its file name, from :func:`~explorer.core.lessons.why_attention.validation_rows`)."""
    missing = [labels[k] for k, _, loss in rows if loss is None]
    if missing:
        return f"No validation loss is recorded for {', '.join(missing)}."
    losses = "; ".join(f"{labels[k]} {loss:.3f}" for k, _, loss in rows)
    where = f"on the same validation text ({text})" if text else "on different validation files: not comparable"
    return f"Validation loss in nats per token, {where}: {losses}."
