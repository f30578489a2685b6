"""Why attention? The model before attention against the transformer, on the user's own text (no Qt).

The course chapter opens with the model before attention (a fixed-window MLP language model,
:mod:`model.core.window`): "it treats each position in the sequence separately. The same token gets
different parameters depending on where it appears", while attention's parameters are "shared across
all tokens". Four comparisons put numbers from two real models on that argument:

- :func:`blocks_for`: the two blocks of W_in the model before attention multiplies one token by at
  two places of its window, how different they are, and the transformer's one W_Q, W_K, W_V;
- :func:`phrase_shift`: the same phrase first in the window and last in it, after the user's text:
  how much each model's prediction after the phrase changes (total variation);
- :func:`parameter_curve`: each model's parameter count as the window grows (from the configs'
  shapes, ``state_dict_shapes``, the formula the models themselves are built from);
- :func:`validation_rows`: the validation loss each checkpoint stores, and whether both were
  measured on the same validation text.

A place in the window is w = 0 .. n-1 (n = context_length): w = n-1 is the newest token, the one the
prediction follows, and w = 0 the token n-1 places before it. The model before attention meets the
token at place w with its block W_in[w]; the transformer adds its positional row p_w.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from model.core.architectures import has_attention, model_class

#: The windows the parameter curve is drawn over (both ends included).
WINDOWS = (2, 1024)


def n_params(config) -> int:
    """Parameters of a model with ``config`` (tied weights once), from its state dict's shapes."""
    return sum(math.prod(shape) for shape in model_class(config).state_dict_shapes(config).values())


def relative_difference(a: np.ndarray, b: np.ndarray) -> float:
    """‖a − b‖ / ‖a‖ (Frobenius norms, float64): 0 for the same array, about √2 for unrelated ones
    of one size; NaN when a is all zeros."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    norm = float(np.linalg.norm(a64))
    return float(np.linalg.norm(a64 - b64)) / norm if norm > 0 else float("nan")


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine of the angle between two arrays, flattened: 1 same direction, 0 unrelated; NaN for zeros."""
    a64, b64 = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    norm = float(np.linalg.norm(a64) * np.linalg.norm(b64))
    return float(a64 @ b64) / norm if norm > 0 else float("nan")


@dataclass(frozen=True)
class Blocks:
    """One token at two places a and b of the window, in both models.

    Attributes
    ----------
    token_id : int
    places : (int, int)                 a and b, each in 0 .. context_length - 1.
    block_a, block_b : (d_model, d_mlp)  W_in[a], W_in[b] of the model before attention (its share of
                                        the first layer is e W_in[w]).
    difference, block_cosine : float    ‖W_in[a] − W_in[b]‖ / ‖W_in[a]‖, and their cosine.
    contribution_cosine : float         cosine of what the token adds at a and at b (e W_in[a], e W_in[b],
                                        the trace's ``slot_in``).
    shared : dict of str to (d_model, d_head)   the transformer's W_Q, W_K, W_V (layer 0, head 0): one
                                        matrix each, wherever the token stands.
    q_cosine : float                    cosine of the transformer's q for the token at a and at b (the
                                        same W_Q; the input differs by p_a and p_b).
    """

    token_id: int
    places: tuple[int, int]
    block_a: np.ndarray
    block_b: np.ndarray
    difference: float
    block_cosine: float
    contribution_cosine: float
    shared: dict
    q_cosine: float


def blocks_for(window_model, transformer, token_id: int, a: int, b: int) -> Blocks:
    """The token's weights at places ``a`` and ``b`` of the window, in both models.

    The token's contributions and queries are read from traces of a window filled with the token
    (at the last row, place w of the window holds it for every w).

    Raises
    ------
    ValueError
        For a place outside the window of either model or a token outside the vocabulary.
    """
    n = window_model.config.context_length
    if not (0 <= a < n and 0 <= b < n) or max(a, b) >= transformer.config.context_length:
        raise ValueError(f"places {a} and {b} must be in the window 0..{n - 1} of both models")
    filled = [int(token_id)] * n
    slot_in = window_model.trace(filled).slot_in[-1]  # (n, d_mlp): slot w of the last row holds the token
    q = transformer.trace(filled).blocks[0].q[0]  # (n, d_head): the token at every position
    block_a, block_b = window_model.slot_weights(a), window_model.slot_weights(b)
    shared = transformer.blocks[0].attn.head_weights(("W_Q", "W_K", "W_V"))
    return Blocks(int(token_id), (int(a), int(b)), block_a, block_b, relative_difference(block_a, block_b),
                  cosine(block_a, block_b), cosine(slot_in[a], slot_in[b]),
                  {name: w[0] for name, w in shared.items()}, cosine(q[a], q[b]))


@dataclass(frozen=True)
class Prediction:
    """One model's prediction after the phrase, early and late in the window.

    Attributes
    ----------
    early, late : (vocab_size,) float32   the next-token probabilities after the phrase's last token.
    tv : float                            total variation ½ Σ |early − late|, in [0, 1].
    top_early, top_late : int             the most likely token after it, each time.
    """

    early: np.ndarray
    late: np.ndarray
    tv: float
    top_early: int
    top_late: int


@dataclass(frozen=True)
class PhraseShift:
    """The phrase first in the window (nothing before it) and last in it (after ``lead``).

    Attributes
    ----------
    phrase, lead : tuple of int   the phrase's ids and the text before it in the late window.
    predictions : dict of str to Prediction   per model name.
    """

    phrase: tuple[int, ...]
    lead: tuple[int, ...]
    predictions: dict

    @property
    def late_start(self) -> int:
        """The place of the phrase's first token in the late window."""
        return len(self.lead)


def phrase_shift(models: dict, phrase: Sequence[int], lead: Sequence[int]) -> PhraseShift:
    """Run each model on the phrase alone (early: places 0 .. k-1) and on ``lead`` + phrase (late: the
    phrase ends the window), and compare the predictions after the phrase.

    Parameters
    ----------
    models : dict of str to model
        Each with ``trace`` (a GPT or a WindowMLP) and a context of at least len(lead) + len(phrase).
    phrase : sequence of int, at least one id
    lead : sequence of int
        What stands before the phrase in the late window (the user's text before it).

    Raises
    ------
    ValueError
        For an empty phrase, or a late window longer than a model's context.
    """
    phrase, lead = tuple(int(i) for i in phrase), tuple(int(i) for i in lead)
    if not phrase:
        raise ValueError("the phrase needs at least one token")
    out = {}
    for name, model in models.items():
        if len(lead) + len(phrase) > model.config.context_length:
            raise ValueError(f"{len(lead) + len(phrase)} tokens do not fit {name}'s window")
        early = model.trace(list(phrase)).probs[-1]
        late = model.trace(list(lead + phrase)).probs[-1]
        tv = 0.5 * float(np.abs(early.astype(np.float64) - late).sum())
        out[name] = Prediction(early, late, tv, int(np.argmax(early)), int(np.argmax(late)))
    return PhraseShift(phrase, lead, out)


@dataclass(frozen=True)
class ParameterCurve:
    """Parameter counts over windows n (from the configs' shapes).

    Attributes
    ----------
    windows : (N,) int64                 n = WINDOWS[0] .. WINDOWS[1].
    totals : dict of str to (N,) int64   each model's parameter count at each n.
    growing : dict of str to (N,) int64  the part that grows with n: the window model's first layer
                                         (W_in, b_in), the transformer's positional table (0 without one).
    at : int                             the models' own window (their configs' context_length).
    """

    windows: np.ndarray
    totals: dict
    growing: dict
    at: int


def _growing(config) -> int:
    """The parameters of ``config`` that depend on its window."""
    shapes = model_class(config).state_dict_shapes(config)
    names = [k for k in shapes if k.startswith("fc_in.") or k == "pos_emb.weight"]
    return sum(math.prod(shapes[k]) for k in names)


def parameter_curve(configs: dict, windows: tuple[int, int] = WINDOWS) -> ParameterCurve:
    """Each config's parameter count as its window grows from ``windows[0]`` to ``windows[1]``.

    Parameters
    ----------
    configs : dict of str to config
        A GPTConfig and a WindowConfig (any configs with ``context_length``).
    """
    ns = np.arange(windows[0], windows[1] + 1, dtype=np.int64)
    totals, growing = {}, {}
    for name, config in configs.items():
        at = [dataclasses.replace(config, context_length=int(n)) for n in ns]
        totals[name] = np.array([n_params(c) for c in at], np.int64)
        growing[name] = np.array([_growing(c) for c in at], np.int64)
    ctx = {c.context_length for c in configs.values()}
    return ParameterCurve(ns, totals, growing, ctx.pop() if len(ctx) == 1 else 0)


def validation_rows(checkpoints: dict) -> tuple[list[tuple[str, int, float | None]], str | None]:
    """(rows, text): per model (name, parameters, the stored validation loss or None), and the name of
    the validation file they all record (the same sha256), or None when they do not all record one."""
    rows, texts = [], set()
    for name, ckpt in checkpoints.items():
        loss = ckpt.training.get("val_loss")
        rows.append((name, ckpt.model.n_params(), float(loss) if isinstance(loss, (int, float)) else None))
        val = ckpt.training.get("val")
        texts.add((str(val.get("sha256")), str(val.get("path", "?")).rsplit("/", 1)[-1])
                  if isinstance(val, dict) and val.get("sha256") else None)
    return rows, (texts.pop()[1] if len(texts) == 1 and None not in texts else None)


# ---- the lesson as one job of the session --------------------------------------------------------------
TRANSFORMER, WINDOW = "transformer", "window"  # the two models' keys in every result


@dataclass(frozen=True)
class Pair:
    """The two real models the lesson compares: a transformer and the model before attention, with one
    tokenizer (the same vocabulary), each a :class:`model.Checkpoint`."""

    transformer: object
    window: object

    @property
    def models(self) -> dict:
        """{TRANSFORMER: its model, WINDOW: its model}."""
        return {TRANSFORMER: self.transformer.model, WINDOW: self.window.model}

    @property
    def context_length(self) -> int:
        """The window both read (the smaller context)."""
        return min(self.transformer.config.context_length, self.window.config.context_length)

    def encode(self, text: str) -> tuple[int, ...]:
        """The text's last :attr:`context_length` token ids, by the models' tokenizer."""
        ids = self.transformer.tokenizer.encode(text).ids
        return tuple(int(i) for i in ids[-self.context_length:])

    def name(self, token_id: int) -> str:
        """How a token is shown."""
        return self.transformer.tokenizer.display(int(token_id))


def open_pair(transformer_path, window_path) -> Pair:
    """The two checkpoints, opened and checked for the lesson.

    Raises
    ------
    model.CheckpointError
        When a file cannot be opened.
    ValueError
        When the first is not a transformer, the second not the model before attention, or their
        vocabularies differ.
    """
    from model.checkpoint import load_any

    transformer, window = load_any(transformer_path), load_any(window_path)
    if not has_attention(transformer.config) or has_attention(window.config):
        raise ValueError(f"{window.name} must be the model before attention and {transformer.name} a transformer")
    if transformer.tokenizer is None or window.tokenizer is None or \
            transformer.tokenizer.to_json() != window.tokenizer.to_json():
        raise ValueError(f"{transformer.name} and {window.name} do not share one vocabulary")
    return Pair(transformer, window)


@dataclass(frozen=True)
class LessonRequest:
    """What the panel asks for: the pair, the text's ids, the token, its two places, the phrase length."""

    pair: Pair
    ids: tuple[int, ...]
    token_id: int
    places: tuple[int, int]
    phrase_length: int


@dataclass(frozen=True)
class Lesson:
    """The four comparisons for one request."""

    blocks: Blocks
    shift: PhraseShift
    curve: ParameterCurve
    validation: tuple[list, str | None]


def lesson_job(_checkpoint, request: LessonRequest) -> Lesson:
    """The lesson as a session job (``fn(checkpoint, inputs)``; the session's own model is not used:
    the lesson runs the pair on the text)."""
    pair, ids = request.pair, request.ids
    k = max(1, min(int(request.phrase_length), len(ids)))
    phrase, lead = ids[len(ids) - k:], ids[:len(ids) - k]  # late: the text itself, ending with the phrase
    blocks = blocks_for(pair.window.model, pair.transformer.model, request.token_id, *request.places)
    curve = parameter_curve({TRANSFORMER: pair.transformer.config, WINDOW: pair.window.config})
    checkpoints = {TRANSFORMER: pair.transformer, WINDOW: pair.window}
    return Lesson(blocks, phrase_shift(pair.models, phrase, lead), curve, validation_rows(checkpoints))
