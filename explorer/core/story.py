"""A generated story and its branches (no Qt here).

The learner's text is the prompt; each press of Generate appends tokens the model chose, and a
fork replaces one generated token by an alternative the model had and continues from there. Every
branch keeps its own tokens and, for each, what the model had when it chose it (its top
alternatives and their probabilities), so that branches can be compared and switched back to.
The story's ids are the model's own (what it ran on); the text shown is their rendering, and
the session holds them as they are (:mod:`explorer.core.held_tokens`): :func:`branch_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from explorer.core.held_tokens import TokenText, spliced
from explorer.core.views import token_label
from model.generate import Sampling, Step

MAX_BRANCHES = 12  # a small list: the oldest fork is forgotten after this many


@dataclass(frozen=True)
class Generated:
    """One token the model wrote (or the learner chose at a fork), and what it had to choose from.

    Attributes
    ----------
    token_id : int
    prob : float          its probability under the sampling distribution (after temperature,
                          top-k, top-p; 1 for greedy), NaN for a token chosen by the learner.
    model_prob : float    its probability under the model's own softmax, in [0, 1].
    top_ids, top_probs    the model's most likely tokens then, and their (softmax) probabilities.
    sampling : Sampling   how it was chosen.
    forked : bool         chosen by the learner from the alternatives, not by the model.
    """

    token_id: int
    prob: float
    model_prob: float
    top_ids: tuple[int, ...]
    top_probs: tuple[float, ...]
    sampling: Sampling
    forked: bool = False

    @classmethod
    def from_step(cls, step: Step, sampling: Sampling) -> Generated:
        """The record of one step of :func:`model.generate.next_token`."""
        return cls(step.token_id, step.prob, step.model_prob, tuple(int(i) for i in step.top_ids),
                   tuple(float(p) for p in step.top_probs), sampling)

    def alternatives(self) -> list[tuple[int, float]]:
        """(token id, model probability) of every alternative it had, most likely first."""
        return list(zip(self.top_ids, self.top_probs))


@dataclass(frozen=True)
class Branch:
    """One continuation of the prompt: its generated tokens, and where it forked from.

    ``parent`` is the index of the branch it forked from (None for a first branch) and ``fork_at``
    the step where it took another token than its parent.
    """

    steps: tuple[Generated, ...] = ()
    parent: int | None = None
    fork_at: int | None = None

    @property
    def ids(self) -> list[int]:
        """The generated token ids, in order."""
        return [g.token_id for g in self.steps]


@dataclass
class Story:
    """The prompt (the learner's text and its tokens) and the branches generated from it.

    Attributes
    ----------
    prompt : TokenText            the text and its tokens when the story began (the whole text).
    branches : list of Branch     at least one.
    current : int                 the branch shown.
    """

    prompt: TokenText
    branches: list[Branch] = field(default_factory=lambda: [Branch()])
    current: int = 0

    @property
    def prompt_text(self) -> str:
        return self.prompt.text

    @property
    def prompt_ids(self) -> tuple[int, ...]:
        """The prompt's token ids (the whole text, before cropping)."""
        return tuple(int(i) for i in self.prompt.encoding.ids)

    @property
    def branch(self) -> Branch:
        """The branch shown."""
        return self.branches[self.current]

    def ids(self, branch: int | None = None) -> list[int]:
        """The prompt's ids followed by a branch's (default: the current one's) generated ids."""
        return list(self.prompt_ids) + self.branches[self.current if branch is None else branch].ids

    def extend(self, generated: Generated) -> None:
        """Append one token to the current branch."""
        b = self.branch
        self.branches[self.current] = replace(b, steps=b.steps + (generated,))

    def fork(self, step: int, token_id: int) -> int:
        """A new branch: the current one's steps before ``step``, then ``token_id`` (one of the
        alternatives step ``step`` had) in place of what was generated there; it becomes current.

        Returns the new branch's index. The branch it forked from stays as it is. With
        :data:`MAX_BRANCHES` branches already, the oldest one that is not current is dropped.

        Raises
        ------
        IndexError
            For a step outside the current branch.
        """
        b = self.branch
        if not 0 <= step < len(b.steps):
            raise IndexError(f"step {step} is not in the branch (0..{len(b.steps) - 1})")
        was = b.steps[step]
        model_prob = dict(was.alternatives()).get(int(token_id), float("nan"))
        chosen = replace(was, token_id=int(token_id), prob=float("nan"), model_prob=model_prob, forked=True)
        self.branches.append(Branch(b.steps[:step] + (chosen,), parent=self.current, fork_at=step))
        self.current = len(self.branches) - 1
        if len(self.branches) > MAX_BRANCHES:
            self._drop_oldest()
        return self.current

    def _drop_oldest(self) -> None:
        oldest = next(i for i in range(len(self.branches)) if i != self.current)
        del self.branches[oldest]
        self.current -= self.current > oldest
        self.branches = [b if b.parent is None else replace(
            b, parent=None if b.parent == oldest else b.parent - (b.parent > oldest)) for b in self.branches]

    def generated_indices(self, encoding_ids: Sequence[int], branch: int | None = None) -> frozenset[int]:
        """Indices into ``encoding_ids`` (the text's encoding) of the generated tokens it still holds:
        the prompt must be there unchanged, and each generated token at its place (text typed after
        them keeps them; an edit before them ends the match)."""
        n = len(self.prompt_ids)
        if tuple(encoding_ids[:n]) != self.prompt_ids:
            return frozenset()
        shown = set()
        for i, token_id in enumerate(self.branches[self.current if branch is None else branch].ids):
            if n + i >= len(encoding_ids) or int(encoding_ids[n + i]) != token_id:
                break
            shown.add(n + i)
        return frozenset(shown)

    def describe(self, index: int, name: Callable[[int], str]) -> str:
        """A branch in the list: "2 · fork at 5: 'boy' for 'girl' · … the boy ran"."""
        b = self.branches[index]
        tail = " ".join(token_label(name(i), 10) for i in b.ids[-4:])
        if b.fork_at is None:
            how = "greedy" if b.steps and b.steps[0].sampling.greedy else ("sampled" if b.steps else "empty")
            return f"{index + 1} · {how} · {len(b.steps)} tokens · …{tail}"
        parent = self.branches[b.parent].steps[b.fork_at].token_id if b.parent is not None and b.fork_at < len(
            self.branches[b.parent].steps) else None
        was = f" for {token_label(name(parent), 10)!r}" if parent is not None else ""
        chosen = token_label(name(b.steps[b.fork_at].token_id), 10)
        return f"{index + 1} · fork at {b.fork_at + 1}: {chosen!r}{was} · {len(b.steps)} tokens · …{tail}"


def branch_tokens(story: Story, tokenizer, branch: int | None = None) -> TokenText:
    """The text and tokens of a branch: the prompt, then its generated ids as they are (held), their
    rendering in the text (:func:`~explorer.core.held_tokens.spliced`: a character the model
    wrote in several byte tokens is that character; a byte that completes none is U+FFFD)."""
    n = len(story.prompt.encoding)
    return spliced(tokenizer, story.prompt, n, n, story.branches[story.current if branch is None else branch].ids)


def branch_text(story: Story, tokenizer, branch: int | None = None) -> str:
    """The text of a branch (:func:`branch_tokens`)."""
    return branch_tokens(story, tokenizer, branch).text
