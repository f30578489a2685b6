"""The worksheet: a tour (or the current view) as one self-contained HTML file, for printing or
handing in: each step's figure (a PNG the app drew, embedded as a ``data:`` URI), the text it ran
on and its sentences with the learner's numbers, and each question with the learner's answer and
the reveal, or a space to write one.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass

CSS = """
body { font-family: sans-serif; max-width: 60em; margin: 2em auto; color: #111; background: #fff; line-height: 1.45; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
.meta { color: #444; margin-top: 0; }
section { page-break-inside: avoid; border-top: 1px solid #bbb; padding-top: 0.8em; margin-top: 1.2em; }
h2 { font-size: 1.15em; margin: 0 0 0.4em 0; }
.text { font-family: monospace; background: #f3f3f3; padding: 0.3em 0.5em; white-space: pre-wrap; }
img { max-width: 100%; border: 1px solid #ccc; }
.question { border-left: 4px solid #2f65ca; padding: 0.2em 0.8em; margin: 0.8em 0; }
.answer-space { border: 1px dashed #888; height: 3em; margin-top: 0.4em; }
.reveal { color: #0a4d1c; }
.missing { color: #a00000; }
"""


@dataclass(frozen=True)
class Page:
    """One section of a worksheet.

    Attributes
    ----------
    title : str
    model : str                  the model it ran on, in words.
    text : str                   the text it ran on.
    paragraphs : tuple of str    the step's sentences, with their numbers.
    image_png : bytes or None    the figure (a PNG), embedded as a data: URI.
    image_alt : str              what the figure shows.
    question : str               the question ("" for none).
    answer : str                 the learner's answer ("" for none yet: a space to write it).
    reveal : str                 the model's answer and how far the guess was ("" before the reveal).
    problems : tuple of str      numbers that could not be computed on this text.
    """

    title: str
    model: str
    text: str
    paragraphs: tuple[str, ...]
    image_png: bytes | None = None
    image_alt: str = ""
    question: str = ""
    answer: str = ""
    reveal: str = ""
    problems: tuple[str, ...] = ()


def data_uri(png: bytes) -> str:
    """A PNG as a ``data:image/png;base64,...`` URI."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _page(number: int, page: Page) -> str:
    e = html.escape
    parts = [f"<section><h2>{number}. {e(page.title)}</h2>",
             f'<p class="meta">Model: {e(page.model)}</p>']
    if page.text:
        parts.append(f'<p class="text">{e(page.text)}</p>')
    if page.image_png:
        parts.append(f'<img src="{data_uri(page.image_png)}" alt="{e(page.image_alt)}">')
    parts += [f"<p>{e(p)}</p>" for p in page.paragraphs if p.strip()]
    parts += [f'<p class="missing">{e(p)}</p>' for p in page.problems]
    if page.question:
        parts.append(f'<div class="question"><p><b>Question.</b> {e(page.question)}</p>')
        if page.answer:
            parts.append(f"<p>Answer: {e(page.answer)}</p>")
        else:
            parts.append('<div class="answer-space"></div>')
        if page.reveal:
            parts.append(f'<p class="reveal">{e(page.reveal)}</p>')
        parts.append("</div>")
    parts.append("</section>")
    return "\n".join(parts)


def worksheet_html(title: str, about: str, pages: list[Page]) -> str:
    """The whole worksheet as one HTML document (no external files: styles inline, images as data: URIs)."""
    e = html.escape
    body = "\n".join(_page(k + 1, p) for k, p in enumerate(pages))
    intro = f"<p>{e(about)}</p>" if about.strip() else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
            f"<style>{CSS}</style></head>\n<body><h1>{e(title)}</h1>\n"
            f'<p class="meta">Made by Transformer Explorer: every number computed from the model on this text.</p>'
            f"\n{intro}\n{body}\n</body></html>\n")
