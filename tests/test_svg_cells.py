"""File ▸ Export as SVG draws a heatmap's cells as vector rectangles, one per cell, in the colour map's
colours (an embedded bitmap was drawn by librsvg and ImageMagick as a smooth gradient)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from explorer.qt.files.export import export_svg
from explorer.qt.plots.heatmap import DIVERGING, SEQUENTIAL, Heatmap
from explorer_helpers import shown

SVG = "{http://www.w3.org/2000/svg}"


def _cells(path) -> dict[tuple[int, int], tuple[int, int, int]]:
    """(row, col) -> fill colour of every unit rectangle in the SVG (a cell in data coordinates)."""
    cells = {}
    for g in ET.parse(path).getroot().iter(f"{SVG}g"):
        fill = g.get("fill")
        for rect in g.findall(f"{SVG}rect"):
            if fill and fill.startswith("#") and rect.get("width") == "1" and rect.get("height") == "1":
                key = (int(float(rect.get("y"))), int(float(rect.get("x"))))
                cells[key] = tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))
    return cells


@pytest.mark.parametrize("cmap, levels", [(DIVERGING, (-1.0, 1.0)), (SEQUENTIAL, (0.0, 1.0))])
def test_an_svg_export_draws_each_cell_as_a_rectangle_of_its_colour(qtbot, tmp_path, cmap, levels):
    hm = shown(qtbot, Heatmap("a 4 x 4 map", cmap), 320, 320)
    lo, hi = levels
    data = np.linspace(lo, hi, 16, dtype=np.float32).reshape(4, 4)
    data[1, 2] = np.nan  # a masked cell: no rectangle (transparent)
    hm.set_data(data, levels, list("abcd"), None)
    path = tmp_path / "map.svg"
    export_svg(hm, path)
    cells = _cells(path)
    assert len(cells) == 15 and (1, 2) not in cells  # one rectangle per drawn cell
    cmap_ = hm.bar.colorMap()
    for (r, c), rgb in cells.items():
        expected = cmap_.map(np.array([(data[r, c] - lo) / (hi - lo)]), mode="qcolor")[0]
        assert np.abs(np.subtract(rgb, (expected.red(), expected.green(), expected.blue()))).max() <= 4
