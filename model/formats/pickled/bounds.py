"""Bounding the work a pickle asks for before it is loaded: no hash or constructor over a huge value.

A pickle can build, in a few hundred bytes, a tuple whose items are one shared tuple, whose items
are one shared tuple, and so on 64 times: 2^64 values, built in microseconds because the memo
shares them. Nothing is wrong until something walks the value: hashing it (as a dict key or a set
member, which happens *while* the pickle loads, inside ``torch.load`` or ``pickle.load``) or
handing it to a constructor (``set(...)``, ``OrderedDict(...)``). Such a walk never ends and
cannot be interrupted.

:func:`check_pickle_work` reads the opcodes without running anything, follows the stack and the
memo as the unpickler would (which value contains which, shared values shared), and at each
opcode that hashes values or calls something (SETITEM(S), DICT, ADDITEMS, FROZENSET, REDUCE,
NEWOBJ, BUILD, ...) counts what a walk of those values visits, a shared value once per reference.
It refuses the pickle when one such walk would exceed :data:`WALK_LIMIT` values, or when the
counting itself would exceed :data:`TOTAL_LIMIT`. Real checkpoints stay far below: their keys are
strings and their constructors take a few small tuples.
"""

from __future__ import annotations

import io
import pickletools
from typing import IO

WALK_LIMIT = 1_000_000  # values one hash or constructor call may walk
TOTAL_LIMIT = 50_000_000  # values counted over the whole pickle
MAX_OPCODES = 50_000_000
# Opcodes that hash what they take (keys, set members) or pass it to a callable.
_CHECKED = {"SETITEM", "SETITEMS", "DICT", "ADDITEMS", "FROZENSET", "REDUCE", "NEWOBJ", "NEWOBJ_EX",
            "BUILD", "INST", "OBJ"}
_TO_MARK = {"TUPLE", "LIST", "DICT", "INST", "OBJ", "FROZENSET", "POP_MARK"}


class PickleTooComplex(ValueError):
    """A pickle that asks to hash or construct from a value too large to walk."""


class _Node:
    """A value the pickle builds: what it contains (mutable containers grow as the pickle goes on)."""

    __slots__ = ("children",)

    def __init__(self, children: list | None = None) -> None:
        self.children = children if children is not None else []


class _Counter:
    def __init__(self) -> None:
        self.total = 0

    def walk(self, nodes: list[_Node], opname: str) -> None:
        """Count what walking ``nodes`` visits (a shared node once per reference), within the limits."""
        if all(not n.children for n in nodes):
            return
        cost: dict[int, int] = {}
        seen_on_path: set[int] = set()
        found = 0
        for root in nodes:
            found += self._cost(root, cost, seen_on_path)
            if found > WALK_LIMIT:
                raise PickleTooComplex(f"a {opname} over more than {WALK_LIMIT:,} values (shared values "
                                       "counted each time they are referenced)")

    def _cost(self, root: _Node, cost: dict[int, int], on_path: set[int]) -> int:
        """1 + the children's costs, iteratively (a deep pickle must not overflow the stack)."""
        stack = [(root, False)]
        while stack:
            node, done = stack.pop()
            key = id(node)
            if done:
                on_path.discard(key)
                total = 1 + sum(cost.get(id(c), 1) for c in node.children)
                cost[key] = min(total, WALK_LIMIT + 1)
                continue
            if key in cost or key in on_path:
                continue
            self.total += 1 + len(node.children)
            if self.total > TOTAL_LIMIT:
                raise PickleTooComplex(f"more than {TOTAL_LIMIT:,} values to check")
            on_path.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in node.children if id(c) not in cost)
        return cost[id(root)]


class _Machine:
    """The unpickler's stack, marks and memo, holding :class:`_Node` s instead of values. As in
    pickle's own Python unpickler, MARK starts a new stack and the opcodes that take "everything
    since the mark" take that stack whole: nothing below a mark is reachable."""

    def __init__(self, counter: _Counter) -> None:
        self.stack: list[_Node] = []
        self.marks: list[list[_Node]] = []
        self.memo: dict = {}
        self.counter = counter

    def pop_mark(self) -> list[_Node]:
        items = self.stack
        self.stack = self.marks.pop()
        return items

    def pop(self, n: int) -> list[_Node]:
        if n > len(self.stack):
            raise IndexError("stack underflow")
        taken = self.stack[len(self.stack) - n:] if n else []
        del self.stack[len(self.stack) - n:]
        return taken

    def step(self, op, arg) -> None:
        name, stack, walk = op.name, self.stack, self.counter.walk
        if name == "MARK":
            self.marks.append(stack)
            self.stack = []
        elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
            self.memo[arg] = stack[-1]
        elif name == "MEMOIZE":
            self.memo[len(self.memo)] = stack[-1]
        elif name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(self.memo.get(arg) or _Node())
        elif name == "DUP":
            stack.append(stack[-1])
        elif name == "APPEND":
            item = self.pop(1)[0]
            self.stack[-1].children.append(item)
        elif name == "SETITEM":
            key, value = self.pop(2)
            walk([key], name)
            self.stack[-1].children += [key, value]
        elif name == "BUILD":
            state = self.pop(1)[0]
            walk([state], name)
            self.stack[-1].children.append(state)
        elif name in ("APPENDS", "SETITEMS", "ADDITEMS"):
            items = self.pop_mark()
            if name != "APPENDS":
                walk(items[0::2] if name == "SETITEMS" else items, name)
            self.stack[-1].children.extend(items)
        else:  # every other opcode: takes its inputs and pushes what it builds from them
            taken = self.pop_mark() if name in _TO_MARK else self.pop(len(op.stack_before))
            if name in _CHECKED:
                walk(taken[0::2] if name == "DICT" else taken, name)
            self.stack.extend(_Node(list(taken)) for _ in op.stack_after)


def check_pickle_work(stream: IO[bytes], pickles: int = 1, strict: bool = False) -> None:
    """Refuse a pickle whose loading would hash or construct from a value too large to walk.

    Parameters
    ----------
    stream : binary file
        Positioned at the first pickle; read up to the end of the ``pickles``-th (torch's legacy
        format writes five in a row).
    pickles : int
    strict : bool
        True refuses a malformed pickle here (ValueError) instead of leaving it to the loader,
        which may first try to allocate what a damaged length field says.

    Raises
    ------
    PickleTooComplex
        Saying which opcode would walk too much. A malformed pickle is not refused here unless
        ``strict`` (the loader will say so); the check stops at the first opcode it cannot read.
    ValueError
        With ``strict``, for a malformed pickle.
    """
    counter = _Counter()
    ops = 0
    for _ in range(pickles):
        machine = _Machine(counter)
        try:
            for op, arg, _pos in pickletools.genops(stream):
                ops += 1
                if ops > MAX_OPCODES:
                    raise PickleTooComplex(f"more than {MAX_OPCODES:,} pickle opcodes")
                machine.step(op, arg)
        except PickleTooComplex:
            raise
        except Exception as exc:  # a malformed pickle (or the end of the data): the loader reports it
            if strict:
                raise ValueError(f"a malformed pickle ({exc})") from None
            return


def check_pickle_bytes(data: bytes, pickles: int = 1, strict: bool = False) -> None:
    """:func:`check_pickle_work` on bytes in memory."""
    check_pickle_work(io.BytesIO(data), pickles, strict)
