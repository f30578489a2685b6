"""A step's question: the model's own answer, computed from the trace, and the reveal that compares
the learner's guess with it (how far it was).

A number question's answer is its expression's value; a token question's ``values`` give one number
per token and the model's answer is the token with the largest (``pick = "max"``) or smallest; a
cell question's ``values`` are a matrix (an attention map) and the answer is its largest or
smallest cell. Values that are not finite (masked scores) never count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.core.model_facts import fmt_number
from explorer.core.tours.expressions import Env, ExpressionError, as_number, evaluate
from explorer.core.tours.templates import Shown
from explorer.core.tours.tourfile import Question
from explorer.core.views import token_label


@dataclass(frozen=True)
class Reveal:
    """The model's answer beside the learner's guess.

    Attributes
    ----------
    text : str          the sentences to show.
    answer : object     the model's answer: a number, a token row, or a (row, col) cell.
    right : bool        whether the guess is the answer (a number: within 1% of it).
    shown : tuple of Shown   every value the text writes, with the expression it came from.
    """

    text: str
    answer: object
    right: bool
    shown: tuple[Shown, ...]


def _values(question: Question, env: Env, ndim: int) -> np.ndarray:
    values = np.asarray(evaluate(question.values, env), dtype=np.float64)
    if values.ndim != ndim:
        want = "one value per token" if ndim == 1 else "a matrix (rows by columns)"
        raise ExpressionError(f"{question.values!r} gives shape {values.shape}; a {question.kind} question needs {want}")
    if not np.isfinite(values).any():
        raise ExpressionError(f"{question.values!r} has no finite value")
    return values


def model_answer(question: Question, env: Env):
    """The model's answer: a number, a token row (int) or a cell (row, col).

    Raises
    ------
    ExpressionError
        When the expression fails or gives the wrong kind of value.
    """
    if question.kind == "number":
        value = as_number(evaluate(question.answer, env))
        if value is None:
            raise ExpressionError(f"{question.answer!r} is not a number")
        return value
    values = _values(question, env, 1 if question.kind == "token" else 2)
    masked = np.where(np.isfinite(values), values, -np.inf if question.pick == "max" else np.inf)
    flat = int(np.argmax(masked) if question.pick == "max" else np.argmin(masked))
    return flat if values.ndim == 1 else tuple(int(i) for i in np.unravel_index(flat, values.shape))


def reveal(question: Question, guess, env: Env) -> Reveal:
    """Compare ``guess`` (a number, a token row, or a (row, col) cell) with the model's answer.

    Raises
    ------
    ExpressionError
        When the answer cannot be computed, or the guess is outside the tokens or the matrix.
    """
    answer = model_answer(question, env)
    if question.kind == "number":
        return _number(question, float(guess), answer)
    values = _values(question, env, 1 if question.kind == "token" else 2)
    if question.kind == "token":
        guess = int(guess)
        if not 0 <= guess < values.shape[0]:
            raise ExpressionError(f"token {guess} is outside the {values.shape[0]} tokens")
        return _choice(question, values, guess, answer, lambda i: _tok(env, i))
    cell = (int(guess[0]), int(guess[1]))
    if not (0 <= cell[0] < values.shape[0] and 0 <= cell[1] < values.shape[1]):
        raise ExpressionError(f"cell {cell} is outside the {values.shape[0]} × {values.shape[1]} matrix")
    return _choice(question, values, cell, answer, lambda c: f"row {_tok(env, c[0])}, column {_tok(env, c[1])}")


def _tok(env: Env, i: int) -> str:
    return f"{i} '{token_label(env.tokens[i])}'" if 0 <= i < len(env.tokens) else str(i)


def _number(question: Question, guess: float, answer) -> Reveal:
    off = abs(guess - answer)
    shown = [Shown(question.answer, answer, fmt_number(answer)), Shown(f"|guess - ({question.answer})|", off,
                                                                       fmt_number(off))]
    text = f"The model's value: {fmt_number(answer)}. Your answer {fmt_number(guess)} is {fmt_number(off)} away"
    if answer:
        share = off / abs(answer)
        shown.append(Shown(f"|guess - ({question.answer})| / |{question.answer}|", share, f"{share:.0%}"))
        text += f" ({share:.0%} of the value)"
    right = off <= 0.01 * abs(answer) if answer else off == 0
    return Reveal(text + "." + (" Right!" if right else ""), answer, right, tuple(shown))


def _choice(question: Question, values: np.ndarray, guess, answer, name) -> Reveal:
    """A token or a cell: the model's choice and value, the guess's value, how far and its rank."""
    best, mine = float(values[answer]), float(values[guess])
    finite = values[np.isfinite(values)]
    rank = int((finite > mine).sum() if question.pick == "max" else (finite < mine).sum()) + 1
    src = question.values
    shown = [Shown(f"({src})[{answer}]", best, fmt_number(best))]
    text = f"The model's answer: {name(answer)}, {fmt_number(best)}."
    if guess == answer:
        return Reveal(text + " Your choice is the same. Right!", answer, True, tuple(shown))
    if not np.isfinite(mine):
        return Reveal(text + f" Your choice, {name(guess)}, has no value here (masked).", answer, False, tuple(shown))
    diff = abs(best - mine)
    shown += [Shown(f"({src})[{guess}]", mine, fmt_number(mine)), Shown("difference", diff, fmt_number(diff))]
    side = "less" if question.pick == "max" else "more"
    text += (f" Your choice, {name(guess)}, has {fmt_number(mine)}: {fmt_number(diff)} {side}, "
             f"number {rank} of {finite.size}.")
    if values.ndim == 1:
        text += f" It is {abs(guess - answer)} token{'s' * (abs(guess - answer) != 1)} away."
    return Reveal(text, answer, False, tuple(shown))
