"""``python -m explorer.gallery OUT_DIR [--models ...] [--sizes ...]``: every screen of the app, as PNGs.

Walks the real main window (:mod:`explorer.qt.screens.walk`) over models × themes × sizes × panels and
their tabs, saves each screen's picture (``widget.grab()``) and writes ``OUT_DIR/index.html``: a table
with a thumbnail per screen, linking the full picture, and what the screen check found on it.

A size ``WxH@2`` is drawn at device pixel ratio 2 (QT_SCALE_FACTOR=2, a WxH logical window), in a
process of its own: Qt reads the scale factor once, when the application starts.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import sys
import time
from pathlib import Path

MODELS = ["builtin:tinystories-1L1H", "builtin:tinystories-4L4H"]
SIZES = ["1400x900", "1280x720", "960x540@2"]
THEMES = ["light", "dark"]
HARMLESS_QT_WARNINGS = ("This plugin does not support propagateSizeHints()",)  # the offscreen platform


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m explorer.gallery", description="Draw every panel and tab of the app "
                                "to PNGs, with an index.html and the screen check's findings per screen.")
    p.add_argument("out_dir", type=Path, help="the folder for the PNGs and index.html")
    p.add_argument("--models", nargs="+", default=MODELS, help="builtin:NAME or checkpoint paths (default: %(default)s)")
    p.add_argument("--sizes", nargs="+", default=SIZES, help="WIDTHxHEIGHT, or WxH@2 for device pixel ratio 2 "
                   "(default: %(default)s)")
    p.add_argument("--themes", nargs="+", default=THEMES, choices=THEMES)
    p.add_argument("--panels", nargs="+", help="only these panels (default: all)")
    p.add_argument("--no-images", action="store_true", help="the findings only (no PNGs, no index.html)")
    p.add_argument("--results-only", metavar="FILE", help=argparse.SUPPRESS)  # a child process's results, as JSON
    return p.parse_args(argv)


def walk_matrix(models, themes, sizes, out_dir: Path, *, images: bool = True, panels=None) -> list:
    """Every (model, theme, size) walked; the ScreenResults, pictures saved under ``out_dir/screens``."""
    from explorer.qt.screens.walk import finish_elsewhere, grab, parse_size, scale_now, start_elsewhere, walk

    pictures = out_dir / "screens"
    if images:
        pictures.mkdir(parents=True, exist_ok=True)

    def save(window, result) -> None:
        result.image = f"screens/{result.screen.slug}.png"
        grab(window, out_dir / result.image)

    # Sizes of another device pixel ratio walk in child processes, started first: they run beside this
    # process's own walk (two cores: the full matrix in about two thirds of the time).
    elsewhere = {name: start_elsewhere(models, themes, name, out_dir, images=images, panels=panels)
                 for name in sizes if parse_size(name)[1] != scale_now()}
    walked = {}
    for size_name in sizes:
        if size_name in elsewhere:
            continue
        size, _ = parse_size(size_name)
        walked[size_name] = [r for model in models for theme in themes
                             for r in walk(model, theme, size, panels=panels, on_screen=save if images else None)]
    for size_name, handle in elsewhere.items():
        walked[size_name] = finish_elsewhere(handle)
    return [r for size_name in sizes for r in walked[size_name]]


def write_index(results: list, out_dir: Path, seconds: float) -> Path:
    """``out_dir/index.html``: one row per screen (model, theme, size, panel/tab, thumbnail, findings);
    beside it ``findings.txt``, a line per finding (``model/theme/size/panel/tab: [kind] widget: detail``)."""
    from explorer.qt.screens.findings import summary_lines

    rows = []
    for r in results:
        s = r.screen
        picture = (f'<a href="{html.escape(r.image)}"><img src="{html.escape(r.image)}" width="320" loading="lazy"></a>'
                   if r.image else "")
        found = "".join(f"<li><b>{f.kind}</b> {html.escape(f.widget)}: {html.escape(f.detail)}</li>" for f in r.findings)
        rows.append(f"<tr><td>{html.escape(s.model)}</td><td>{s.theme}</td><td>{s.size_name}</td>"
                    f"<td>{html.escape(s.panel)}{' / ' + html.escape(s.tab) if s.tab else ''}</td><td>{picture}</td>"
                    f"<td>{len(r.findings)}<ul>{found}</ul></td></tr>")
    head = "".join(f"<p>{html.escape(line)}</p>" for line in summary_lines(results))
    page = ("<!doctype html><meta charset='utf-8'><title>Transformer Explorer: gallery</title>"
            "<style>body{font-family:sans-serif} td{vertical-align:top;border-top:1px solid #999;padding:4px}"
            "ul{margin:0;padding-left:1.2em;font-size:small}</style>"
            f"<h1>Transformer Explorer: every screen</h1>{head}<p>walked in {seconds:.0f} s</p>"
            "<table><tr><th>model</th><th>theme</th><th>size</th><th>panel / tab</th><th>picture</th>"
            "<th>findings</th></tr>" + "\n".join(rows) + "</table>")
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    lines = [f.line(r.screen) for r in results for f in r.findings]
    (out_dir / "findings.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    """Walk, draw and write the index; print the summary. The exit code (0, also when there are findings)."""
    args = parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import torch
    from PySide6.QtWidgets import QApplication

    from PySide6.QtCore import qInstallMessageHandler

    from explorer.qt.screens.findings import summary_lines

    torch.set_num_threads(1)
    qInstallMessageHandler(lambda _mode, _context, message: None if message in HARMLESS_QT_WARNINGS
                           else print(message, file=sys.stderr))
    app = QApplication.instance() or QApplication(sys.argv[:1])  # noqa: F841 (kept alive)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    results = walk_matrix(args.models, args.themes, args.sizes, args.out_dir, images=not args.no_images,
                          panels=args.panels)
    if args.results_only:
        Path(args.results_only).write_text(json.dumps([r.to_json() for r in results]), encoding="utf-8")
        return 0
    seconds = time.perf_counter() - t0
    if not args.no_images:
        print(f"wrote {write_index(results, args.out_dir, seconds)}")
    print("\n".join(summary_lines(results)) + f"\nin {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
