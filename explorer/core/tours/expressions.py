"""The tour files' small expression language: numbers computed from the trace when a step is shown.

An expression is Python-like arithmetic over named quantities of the trace, parsed with :mod:`ast`
and evaluated by a whitelist (never ``eval``): numbers and strings, ``+ - * / // % **``,
comparisons, indexing and slicing with numpy's rules, and calls of the functions in
:data:`FUNCTIONS` and of the facts in :mod:`explorer.core.tours.facts`. Names:

- the trace's tensors by their dotted names, written as attributes: ``x``, ``tok_emb``,
  ``blocks[0].attn.attn_weights``, ``blocks[-1].resid_post``, ``probs`` (the table is
  :mod:`model.tracing.schema`; ``blocks[N]`` is ``blocks.N``);
- ``T`` (tokens run), ``last`` (T - 1), ``pos`` (the selected token, else the last), ``layer`` and
  ``head`` (the step's, else the session's selection), and every field of the config
  (``d_model``, ``n_heads``, ``d_head``, ``vocab_size``, ``context_length``, ...).

``blocks[layer].attn.attn_weights[head, pos]`` is the selected head's attention row of the
selected token; ``argmax(probs[last])`` the most likely next token's id, ``word(...)`` its text.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np

from model.tokens.names import token_name
from model.tracing.schema import FULL

MAX_EXPONENT = 64  # a ** b with a larger integer b is refused (9 ** 9 ** 9 would never finish)


def _power(a, b):
    if isinstance(b, (int, np.integer)) and not isinstance(b, bool) and abs(int(b)) > MAX_EXPONENT:
        raise ExpressionError(f"an exponent of {int(b):,} is more than a tour needs (at most {MAX_EXPONENT})")
    return operator.pow(a, b)


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: _power}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
SYMBOLS = ("T", "last", "pos", "layer", "head")
#: The schemas whose names a tour may use: the transformer's every row (a model with a schema of its
#: own, such as the model before attention's, adds it here).
SCHEMAS = (FULL,)
#: The first part of every dotted name a trace can have (``blocks`` for the blocks' tensors).
TRACE_ROOTS = frozenset(["blocks"] + [r.name.split(".")[0] for sch in SCHEMAS for r in sch.model])


def is_trace_name(name: str) -> bool:
    """Whether ``name`` is a dotted name some model's trace may have (``blocks.N.`` and a block row,
    or a model-level row of one of :data:`SCHEMAS`)."""
    if name.startswith("blocks."):
        index, _, rest = name[len("blocks."):].partition(".")
        return index.isdigit() and any(r.name == rest for sch in SCHEMAS for r in sch.layer)
    return any(r.name == name for sch in SCHEMAS for r in sch.model)


class ExpressionError(ValueError):
    """An expression that cannot be parsed or computed; the message says where and why."""


@dataclass(frozen=True)
class Env:
    """What an expression can read.

    Attributes
    ----------
    trace : model.Trace            the trace of the step's text.
    tokens : list of str           the trace rows' tokens as the app shows them.
    config : GPTConfig
    checkpoint : model.Checkpoint  (for the facts: parameter counts, the tokenizer).
    layer, head : int              the selected layer and head.
    position : int or None         the selected token row (None: the last).
    """

    trace: Any
    tokens: list
    config: Any
    checkpoint: Any
    layer: int = 0
    head: int = 0
    position: int | None = None

    def symbol(self, name: str):
        """The value of ``T``, ``last``, ``pos``, ``layer`` or ``head``."""
        n = int(self.trace.n_tokens)
        return {"T": n, "last": n - 1, "pos": n - 1 if self.position is None else int(self.position),
                "layer": int(self.layer), "head": int(self.head)}[name]


@dataclass(frozen=True)
class _Path:
    """A dotted trace name being written (``blocks``, ``blocks.0``, ``blocks.0.attn``)."""

    name: str


def _word(env: Env, token_id) -> str:
    return token_name(env.checkpoint.tokenizer, int(token_id))


def _token_id(env: Env, text: str) -> int:
    tok = env.checkpoint.tokenizer
    tid = tok.token_to_id(str(text)) if tok is not None else None
    if tid is None:
        raise ExpressionError(f"{text!r} is not a token of this model's vocabulary")
    return int(tid)


def _token(env: Env, i) -> str:
    i = int(i)
    if not -len(env.tokens) <= i < len(env.tokens):
        raise ExpressionError(f"token({i}): the text has {len(env.tokens)} tokens")
    return env.tokens[i]


def _entropy(_env: Env, p) -> float:
    p = np.asarray(p, dtype=np.float64)
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def _rank(_env: Env, values, index) -> int:
    v = np.asarray(values, dtype=np.float64)
    return int((v > v[int(index)]).sum()) + 1


def _cosine(_env: Env, a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _plain(fn: Callable) -> Callable:
    return lambda _env, *args: fn(*args)


#: The functions an expression may call: name -> fn(env, *args).
FUNCTIONS: dict[str, Callable] = {
    "abs": _plain(np.abs), "max": _plain(np.nanmax), "min": _plain(np.nanmin), "sum": _plain(np.nansum),
    "mean": _plain(np.nanmean), "std": _plain(np.std), "argmax": _plain(lambda a: int(np.nanargmax(a))),
    "argmin": _plain(lambda a: int(np.nanargmin(a))), "norm": _plain(lambda a: float(np.linalg.norm(a))),
    "sqrt": _plain(np.sqrt), "exp": _plain(np.exp), "log": _plain(np.log), "round": _plain(round),
    "len": _plain(len), "int": _plain(int), "float": _plain(float),
    "word": _word, "token": _token, "token_id": _token_id, "entropy": _entropy, "rank": _rank, "cosine": _cosine,
}


def _facts() -> dict[str, Callable]:
    from explorer.core.tours.facts import FACTS

    return FACTS


def known_names(config_fields: tuple[str, ...] | None = None) -> set[str]:
    """Every bare name an expression may use (trace roots, symbols, config fields, functions, facts)."""
    from model.core.config import GPTConfig

    names = {f.name for f in fields(GPTConfig)} | {"d_head"} if config_fields is None else set(config_fields)
    return names | TRACE_ROOTS | set(SYMBOLS) | set(FUNCTIONS) | set(_facts())


def parse(source: str) -> ast.Expression:
    """Parse ``source`` and check that it uses only what the language allows (no evaluation).

    Raises
    ------
    ExpressionError
        For a syntax error, a construct outside the language or an unknown name.
    """
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExpressionError(f"{source!r} is not an expression ({exc.msg})") from None
    known = known_names()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in known:
            raise ExpressionError(f"{source!r}: unknown name {node.id!r}")
        if not isinstance(node, _ALLOWED):
            raise ExpressionError(f"{source!r}: {type(node).__name__} is not part of the tour expressions")
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and not node.keywords):
            raise ExpressionError(f"{source!r}: only the listed functions can be called, without keywords")
    return tree


_ALLOWED = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call, ast.Name, ast.Attribute, ast.Subscript,
            ast.Slice, ast.Tuple, ast.List, ast.Constant, ast.Load, ast.IfExp, ast.BoolOp, ast.And, ast.Or,
            *_BINARY, *_UNARY, *_COMPARE)


def evaluate(source: str, env: Env):
    """The value of ``source`` on ``env`` (a number, string or array).

    Raises
    ------
    ExpressionError
        When it cannot be parsed or computed (an index out of range, a name this trace lacks, ...).
    """
    tree = parse(source)
    try:
        value = _eval(tree.body, env)
    except ExpressionError:
        raise
    except (IndexError, KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
        raise ExpressionError(f"{source!r}: {exc}") from None
    if isinstance(value, _Path):
        raise ExpressionError(f"{source!r}: {value.name!r} is not a tensor of this trace")
    return value


def _eval(node: ast.AST, env: Env):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return _name(node.id, env)
    if isinstance(node, ast.Attribute):
        return _attribute(_eval(node.value, env), node.attr, env)
    if isinstance(node, ast.Subscript):
        return _subscript(_eval(node.value, env), _index(node.slice, env), env)
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if isinstance(left, (str, list, _Path)) or isinstance(right, (str, list, _Path)):
            raise ExpressionError("arithmetic is for numbers and tensors, not words or lists")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, env))
    if isinstance(node, ast.Compare):
        left, out = _eval(node.left, env), True
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, env)
            out, left = out and _COMPARE[type(op)](left, right), right
        return out
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, env) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.IfExp):
        return _eval(node.body, env) if _eval(node.test, env) else _eval(node.orelse, env)
    if isinstance(node, (ast.Tuple, ast.List)):
        return [_eval(e, env) for e in node.elts]
    return _call(node, env)


def _call(node: ast.Call, env: Env):
    name, args = node.func.id, [_eval(a, env) for a in node.args]
    if name in FUNCTIONS:
        return FUNCTIONS[name](env, *args)
    if name in _facts():
        return _facts()[name](env, *args)
    raise ExpressionError(f"{name!r} cannot be called")


def _name(name: str, env: Env):
    if name in SYMBOLS:
        return env.symbol(name)
    if name in TRACE_ROOTS:
        return _resolve(_Path(name), env)
    if hasattr(env.config, name):
        return getattr(env.config, name)
    raise ExpressionError(f"{name!r} is not a value here")


def _resolve(path: _Path, env: Env):
    """The tensor when ``path`` names one, else the path (more parts to come)."""
    try:
        return env.trace[path.name]
    except KeyError:
        if any(n.startswith(path.name + ".") for n in env.trace.names()):
            return path
        raise ExpressionError(f"this trace has no tensor {path.name!r}") from None


def _attribute(value, attr: str, env: Env):
    if not isinstance(value, _Path):
        raise ExpressionError(f".{attr} is only for the trace's dotted names")
    return _resolve(_Path(f"{value.name}.{attr}"), env)


def _subscript(value, index, env: Env):
    if isinstance(value, _Path):
        if value.name != "blocks" or not isinstance(index, (int, np.integer)):
            raise ExpressionError(f"{value.name}[...]: only blocks[N] takes an index")
        n = len(env.trace.blocks)
        if not -n <= int(index) < n:
            raise ExpressionError(f"blocks[{int(index)}]: the model has {n} blocks")
        return _resolve(_Path(f"blocks.{int(index) % n}"), env)
    if isinstance(value, (str, list)):
        return value[index]
    return np.asarray(value)[index]


def _index(node: ast.AST, env: Env):
    if isinstance(node, ast.Slice):
        parts = [None if p is None else int(_eval(p, env)) for p in (node.lower, node.upper, node.step)]
        return slice(*parts)
    if isinstance(node, ast.Tuple):
        return tuple(_index(e, env) for e in node.elts)
    value = _eval(node, env)
    return int(value) if isinstance(value, np.integer) else value


def as_number(value) -> float | int | None:
    """``value`` as a plain Python number (a 0-d array or numpy scalar included), else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return as_number(value.item())
    return None


def finite(value) -> bool:
    """True for a finite number."""
    n = as_number(value)
    return n is not None and math.isfinite(n)
