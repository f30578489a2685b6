"""What the screen check finds: one :class:`Finding` per fault, on one :class:`Screen`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: The kinds of finding, in the order the summaries list them.
KINDS = ("cut", "scroll", "height", "legend", "contrast", "sentence", "error")


@dataclass(frozen=True)
class Screen:
    """One screen of the matrix: a model, a theme, a window size, and a panel with one of its tabs in front.

    ``size`` is the window's logical size, ``scale`` its device pixel ratio (2: a 960 × 540 window is
    1,920 × 1,080 pixels).
    """

    model: str
    theme: str
    size: tuple[int, int]
    scale: int
    panel: str
    tab: str = ""

    @property
    def size_name(self) -> str:
        """"1400x900", or "960x540@2" at device pixel ratio 2."""
        w, h = self.size
        return f"{w}x{h}" + (f"@{self.scale}" if self.scale != 1 else "")

    @property
    def where(self) -> str:
        """"model/theme/size/panel[/tab]": the screen in a finding's line."""
        return "/".join([self.model, self.theme, self.size_name, self.panel] + ([self.tab] if self.tab else []))

    @property
    def slug(self) -> str:
        """A file name for the screen's picture (letters, digits, '-' and '_')."""
        return "".join(c if c.isalnum() or c in "-_" else "_" for c in self.where.replace("/", "__"))


@dataclass(frozen=True)
class Finding:
    """One fault on a screen.

    Parameters
    ----------
    kind : str    one of :data:`KINDS`.
    widget : str  the widget or plot item, as a reader finds it (class, object name or text).
    detail : str  what is wrong, with the numbers (pixels, contrast ratio, the sentence and the recomputed claim).
    """

    kind: str
    widget: str
    detail: str

    def line(self, screen: Screen | None = None) -> str:
        return (f"{screen.where}: " if screen else "") + f"[{self.kind}] {self.widget}: {self.detail}"


@dataclass
class ScreenResult:
    """A screen walked: its findings and, in the gallery, its picture (a path relative to the index)."""

    screen: Screen
    findings: list[Finding] = field(default_factory=list)
    image: str = ""

    def to_json(self) -> dict:
        d = asdict(self)
        d["screen"]["size"] = list(self.screen.size)
        return d

    @classmethod
    def from_json(cls, d: dict) -> ScreenResult:
        s = dict(d["screen"], size=tuple(d["screen"]["size"]))
        return cls(Screen(**s), [Finding(**f) for f in d["findings"]], d.get("image", ""))


def count_by_kind(results: list[ScreenResult]) -> dict[str, int]:
    """How many findings of each kind (every kind of :data:`KINDS`, zeros included)."""
    counts = dict.fromkeys(KINDS, 0)
    for r in results:
        for f in r.findings:
            counts[f.kind] = counts.get(f.kind, 0) + 1
    return counts


def summary_lines(results: list[ScreenResult]) -> list[str]:
    """The matrix walked (models × themes × sizes × panels/tabs = N screens) and the findings per kind."""
    def distinct(key) -> list:
        return list(dict.fromkeys(key(r.screen) for r in results))

    models, themes = distinct(lambda s: s.model), distinct(lambda s: s.theme)
    sizes, views = distinct(lambda s: s.size_name), distinct(lambda s: (s.panel, s.tab))
    counts = count_by_kind(results)
    return [f"screens: {len(models)} models × {len(themes)} themes × {len(sizes)} sizes × {len(views)} panels/tabs "
            f"= {len(results)} screens ({', '.join(models)}; {', '.join(themes)}; {', '.join(sizes)})",
            "findings: " + ", ".join(f"{k} {n}" for k, n in counts.items()) + f" (total {sum(counts.values())})"]
