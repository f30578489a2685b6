"""A step's sentences with numbers from the trace: ``{expression}`` or ``{expression:format}``.

``"the weight is {blocks[0].attn.attn_weights[0, last, 0]:.3f}"`` shows the number computed when
the step is shown; ``{{`` and ``}}`` are literal braces. The format after the last ``:`` outside
brackets is Python's format mini-language (``.3f``, ``,``, ``.1%``); without one, numbers are
written as the Model panel writes them (:func:`explorer.core.model_facts.fmt_number`). Numbers
with a decimal point or a percent sign are not allowed in the prose itself: a tour says
only numbers computed from the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from explorer.core.model_facts import fmt_number
from explorer.core.tours.expressions import Env, ExpressionError, as_number, evaluate, parse

WRITTEN_NUMBER = re.compile(r"\d*[.,]\d+|\d+(\.\d+)?\s*%")  # 0.26, .5, 3,5, 40 %, 12.5%
MISSING = "⟨?⟩"  # in place of a number that could not be computed


class TemplateError(ValueError):
    """A template that cannot be split into prose and placeholders, or whose prose writes a number."""


@dataclass(frozen=True)
class Placeholder:
    """One ``{expression:format}`` of a template."""

    source: str
    spec: str


@dataclass(frozen=True)
class Shown:
    """One value a rendered text shows: the expression, its value and the text written for it."""

    source: str
    value: object
    text: str


@dataclass(frozen=True)
class Rendered:
    """A template on one trace: the text, each value shown, and what could not be computed."""

    text: str
    shown: tuple[Shown, ...]
    errors: tuple[str, ...]


def split(template: str) -> list[str | Placeholder]:
    """The template's prose and placeholders, in order.

    Raises
    ------
    TemplateError
        For an unclosed ``{``, a lone ``}`` or an empty placeholder.
    """
    parts: list[str | Placeholder] = []
    text, i = [], 0
    while i < len(template):
        c = template[i]
        if template.startswith(("{{", "}}"), i):
            text.append(c)
            i += 2
        elif c == "}":
            raise TemplateError(f"a lone '}}' at character {i + 1} (write '}}}}' for a brace)")
        elif c == "{":
            end = _closing(template, i)
            parts += ["".join(text)] if text else []
            text = []
            parts.append(_placeholder(template[i + 1:end]))
            i = end + 1
        else:
            text.append(c)
            i += 1
    return parts + (["".join(text)] if text else [])


def _outside(text: str, start: int = 0):
    """(index, character) of each character of ``text`` from ``start`` that is outside quotes and
    brackets (parentheses and square brackets, counted from ``start``)."""
    depth, quote = 0, None
    for j in range(start, len(text)):
        c = text[j]
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth <= 0:
            yield j, c


def _closing(template: str, start: int) -> int:
    end = next((j for j, c in _outside(template, start + 1) if c == "}"), None)
    if end is None:
        raise TemplateError(f"the '{{' at character {start + 1} is never closed")
    return end


def _placeholder(inner: str) -> Placeholder:
    cut = max((j for j, c in _outside(inner) if c == ":"), default=None)
    source, spec = (inner[:cut], inner[cut + 1:]) if cut is not None else (inner, "")
    if not source.strip():
        raise TemplateError("an empty {} in the text")
    return Placeholder(source.strip(), spec)


def check(template: str) -> list[str]:
    """Problems of a template without a trace: syntax, unknown names, numbers written in the prose."""
    try:
        parts = split(template)
    except TemplateError as exc:
        return [str(exc)]
    problems = []
    for part in parts:
        if isinstance(part, Placeholder):
            try:
                parse(part.source)
            except ExpressionError as exc:
                problems.append(str(exc))
        elif (m := WRITTEN_NUMBER.search(part)) is not None:
            problems.append(f"the number {m.group(0)!r} is written in the text: compute it with {{...}}")
    return problems


def format_value(value, spec: str = "") -> str:
    """A value as a step shows it (numbers through ``spec`` or :func:`fmt_number`).

    Raises
    ------
    ExpressionError
        For an array (a step shows numbers and words: index it) or a bad format.
    """
    number = as_number(value)
    if number is None and isinstance(value, np.ndarray):
        raise ExpressionError(f"an array of shape {value.shape} cannot be shown: index it or reduce it (max, sum, ...)")
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    shown = number if number is not None else value
    try:
        return format(shown, spec) if spec else (fmt_number(shown) if number is not None else str(shown))
    except (ValueError, TypeError) as exc:
        raise ExpressionError(f"format {spec!r}: {exc}") from None


def render(template: str, env: Env) -> Rendered:
    """``template`` with every placeholder computed on ``env``; one that fails shows :data:`MISSING`
    and its message is in ``errors`` (a learner's own text may lack a token the step names)."""
    out, shown, errors = [], [], []
    for part in split(template):
        if isinstance(part, str):
            out.append(part)
            continue
        try:
            value = evaluate(part.source, env)
            text = format_value(value, part.spec)
        except ExpressionError as exc:
            errors.append(str(exc))
            out.append(MISSING)
            continue
        shown.append(Shown(part.source, value, text))
        out.append(text)
    return Rendered("".join(out), tuple(shown), tuple(errors))
