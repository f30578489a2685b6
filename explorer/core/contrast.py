"""Contrast of two colours as WCAG 2.x defines it, for the screen check (``explorer.qt.screens``).

Relative luminance and contrast ratio: Web Content Accessibility Guidelines 2.1, "relative luminance"
and "contrast ratio" (success criteria 1.4.3, text, and 1.4.11, non-text: lines and swatches).
"""

from __future__ import annotations

TEXT_MIN = 4.5  #: text against its background (WCAG 2.1 SC 1.4.3, level AA)
GRAPHIC_MIN = 3.0  #: a plotted line, bar or legend swatch against the plot (SC 1.4.11)

RGB = tuple[float, float, float]  # each channel in [0, 1], sRGB


def _linear(c: float) -> float:
    """One sRGB channel in [0, 1] made linear (WCAG 2.1's formula, with its 0.03928 threshold)."""
    return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4


def luminance(rgb: RGB) -> float:
    """Relative luminance in [0, 1]: 0.2126 R + 0.7152 G + 0.0722 B of the linear channels."""
    r, g, b = (_linear(float(c)) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: RGB, b: RGB) -> float:
    """The contrast ratio (L1 + 0.05) / (L2 + 0.05), L1 the lighter: 1 (same) to 21 (black on white)."""
    la, lb = luminance(a), luminance(b)
    hi, lo = max(la, lb), min(la, lb)
    return (hi + 0.05) / (lo + 0.05)


def over(top: RGB, alpha: float, ground: RGB) -> RGB:
    """``top`` with opacity ``alpha`` (0..1) drawn over ``ground``: the colour one sees."""
    a = min(max(float(alpha), 0.0), 1.0)
    return tuple(t * a + g * (1.0 - a) for t, g in zip(top, ground))  # type: ignore[return-value]
