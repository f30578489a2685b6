"""Tour files: a guided tour of the app written by a teacher, as TOML, read and checked once.

::

    title = "Attention in five steps"
    model = "tinystories-1L1H"          # optional: a shipped model, a file beside the tour, or "loaded"

    [[step]]
    title = "Which token does 'named' look at?"
    panel = "attention"                 # any registered panel (``--panel`` names)
    text = "once upon a time there was a little girl named"
    highlight = { token = "last" }      # token / row = N or an expression; cell = [i, j]; box = "blocks.0.attn.q"
    say = "Its largest weight is {max(blocks[0].attn.attn_weights[0, last]):.3f}."

    [step.question]                     # optional, answered before the reveal
    ask = "Click the token it gives the most weight."
    kind = "token"                      # token (click a chip or a row), cell (click a map's cell), number (type it)
    values = "blocks[0].attn.attn_weights[0, last]"   # token: one value per token; cell: a matrix
    pick = "max"                        # the model's answer is the largest value (or "min")
    explain = "It gives {token(argmax(blocks[0].attn.attn_weights[0, last]))!r}..."   # after the reveal

A number question has ``answer = "expression"`` instead of ``values``. Every number a step shows
is an expression computed when it is shown (:mod:`explorer.core.tours.templates`); the prose may
not write one. :func:`load_tour` reports every problem of a file in one :class:`TourError`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Collection

from explorer.core.tours.expressions import ExpressionError, is_trace_name, parse
from explorer.core.tours.files import ModelRef, resolve_model
from explorer.core.tours.templates import check

TOUR_KEYS = {"title", "about", "model", "step"}
STEP_KEYS = {"title", "panel", "say", "model", "text", "layer", "head", "highlight", "question"}
HIGHLIGHT_KEYS = {"token", "row", "cell", "box"}
QUESTION_KEYS = {"ask", "kind", "answer", "values", "pick", "explain"}
KINDS = ("number", "token", "cell")
MAX_LISTED = 12  # problems listed in one message


class TourError(ValueError):
    """A tour file that cannot be used: the message names the file and lists its problems."""


@dataclass(frozen=True)
class Question:
    """What a step asks before the reveal: ``kind`` number (``answer`` an expression) or token / cell
    (``values`` an expression of one value per token, or a matrix; the model's answer is its
    ``pick``, max or min)."""

    ask: str
    kind: str
    answer: str = ""
    values: str = ""
    pick: str = "max"
    explain: str = ""


@dataclass(frozen=True)
class Step:
    """One step: the model and text to show, the panel, what to highlight, the sentences, a question.

    ``model`` None keeps the loaded model; ``text`` None keeps the text; ``highlight`` maps one of
    token, row, cell, box to its value (positions may be expressions).
    """

    title: str
    panel: str
    say: str
    model: ModelRef | None = None
    text: str | None = None
    layer: int | None = None
    head: int | None = None
    highlight: tuple[tuple[str, object], ...] = ()
    question: Question | None = None


@dataclass(frozen=True)
class Tour:
    """A whole tour: its title, an introduction, its steps and where it was read from."""

    title: str
    about: str
    steps: tuple[Step, ...]
    path: Path


def load_tour(path: str | Path, panels: Collection[str]) -> Tour:
    """Read and check a tour file.

    Parameters
    ----------
    path : the .toml file.
    panels : the names of the registered panels a step may show.

    Raises
    ------
    TourError
        When the file cannot be read, is not TOML, or has any problem (all are listed, up to
        :data:`MAX_LISTED`): an unknown key, panel or model, a bad expression, a number written
        in the prose, a question without its answer.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TourError(f"{path.name}: cannot read the tour file ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise TourError(f"{path.name}: not a text file (a tour is TOML, UTF-8)") from None
    except tomllib.TOMLDecodeError as exc:
        raise TourError(f"{path.name}: not valid TOML: {exc}") from None
    problems: list[str] = []
    tour = _tour(data, path, set(panels), problems)
    if problems:
        listed = "\n".join(f"• {p}" for p in problems[:MAX_LISTED])
        more = f"\n… and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        raise TourError(f"{path.name} is not a usable tour ({len(problems)} problem"
                        f"{'s' * (len(problems) != 1)}):\n{listed}{more}")
    return tour


def _tour(data: dict, path: Path, panels: set[str], problems: list[str]) -> Tour:
    _unknown(data, TOUR_KEYS, "the tour", problems)
    title = _text(data, "title", "the tour", problems, required=True)
    default = _model(data.get("model"), path, "the tour", problems)
    raw = data.get("step")
    if not isinstance(raw, list) or not raw or not all(isinstance(s, dict) for s in raw):
        problems.append("the tour has no steps: add [[step]] tables")
        raw = []
    steps = tuple(_step(s, k + 1, path, panels, default, problems) for k, s in enumerate(raw))
    return Tour(title, _text(data, "about", "the tour", problems), steps, path)


def _step(data: dict, number: int, path: Path, panels: set[str], default, problems: list[str]) -> Step:
    where = f"step {number}" + (f" ({data['title']!r})" if isinstance(data.get("title"), str) else "")
    _unknown(data, STEP_KEYS, where, problems)
    panel = _text(data, "panel", where, problems, required=True)
    if panel and panel not in panels:
        problems.append(f"{where}: unknown panel {panel!r}; the panels are {', '.join(sorted(panels))}")
    say = _text(data, "say", where, problems, required=True)
    problems += [f"{where}, say: {p}" for p in check(say)]
    model = _model(data["model"], path, where, problems) if "model" in data else default
    text = data.get("text")
    if text is not None and not isinstance(text, str):
        problems.append(f"{where}: text must be a string")
        text = None
    numbers = {k: data.get(k) for k in ("layer", "head")}
    for key, value in numbers.items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            problems.append(f"{where}: {key} must be a whole number, 0 or more")
            numbers[key] = None
    return Step(_text(data, "title", where, problems, required=True), panel, say, model, text, numbers["layer"],
                numbers["head"], _highlight(data.get("highlight"), where, problems),
                _question(data.get("question"), where, problems))


def _highlight(data, where: str, problems: list[str]) -> tuple[tuple[str, object], ...]:
    if data is None:
        return ()
    if not isinstance(data, dict):
        problems.append(f"{where}: highlight must be a table, e.g. {{ token = 3 }}")
        return ()
    _unknown(data, HIGHLIGHT_KEYS, f"{where}, highlight", problems)
    out = []
    for key, value in data.items():
        if key == "box":
            if not isinstance(value, str) or not is_trace_name(value):
                problems.append(f"{where}: highlight box {value!r} is not a dotted trace name (e.g. blocks.0.attn.q)")
                continue
        elif key == "cell":
            if not isinstance(value, list) or len(value) != 2:
                problems.append(f"{where}: highlight cell must be [row, column]")
                continue
            for v in value:
                _position(v, f"{where}, highlight cell", problems)
        elif key in HIGHLIGHT_KEYS:
            _position(value, f"{where}, highlight {key}", problems)
        out.append((key, value))
    return tuple(out)


def _question(data, where: str, problems: list[str]) -> Question | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        problems.append(f"{where}: question must be a table ([step.question])")
        return None
    where = f"{where}, question"
    _unknown(data, QUESTION_KEYS, where, problems)
    kind = data.get("kind", "number")
    if kind not in KINDS:
        problems.append(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
    needed = "answer" if kind == "number" else "values"
    if not isinstance(data.get(needed), str):
        problems.append(f"{where}: a {kind} question needs {needed} = \"an expression\"")
    pick = data.get("pick", "max")
    if pick not in ("max", "min"):
        problems.append(f"{where}: pick must be \"max\" or \"min\"")
    for key in ("answer", "values"):
        if isinstance(data.get(key), str):
            _expression(data[key], f"{where}, {key}", problems)
    ask, explain = _text(data, "ask", where, problems, required=True), _text(data, "explain", where, problems)
    problems += [f"{where}: {p}" for text in (ask, explain) for p in check(text)]
    return Question(ask, str(kind), str(data.get("answer", "")), str(data.get("values", "")), str(pick), explain)


def _model(value, path: Path, where: str, problems: list[str]) -> ModelRef | None:
    if value is None or value == "loaded":
        return None
    try:
        return resolve_model(value, path.parent)
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        return None


def _text(data: dict, key: str, where: str, problems: list[str], required: bool = False) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        problems.append(f"{where}: {key} must be {'a non-empty' if required else 'a'} string")
        return ""
    return value


def _unknown(data: dict, known: set[str], where: str, problems: list[str]) -> None:
    for key in data:
        if key not in known:
            problems.append(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")


def _position(value, where: str, problems: list[str]) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        problems.append(f"{where}: a position is a number or an expression, not {value!r}")
    elif isinstance(value, str):
        _expression(value, where, problems)


def _expression(source: str, where: str, problems: list[str]) -> None:
    try:
        parse(source)
    except ExpressionError as exc:
        problems.append(f"{where}: {exc}")
