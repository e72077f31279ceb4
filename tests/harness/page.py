"""What any HTML page the service writes must be (tests/test_report.py, tests/test_layout.py):
self-contained, well formed, its SVG bars stacked without gaps or overlaps."""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest


class Balanced(HTMLParser):
    """Every element that must close, closes, in order."""

    VOID = frozenset({"meta", "br", "hr", "img", "input", "link", "col", "wbr", "source"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()


def check_page(page: str) -> None:
    """Self-contained and well formed: loads nothing, every tag closes, every SVG is XML."""
    assert page.startswith("<!DOCTYPE html>")
    for needle in ("http://", "https://", "<link", " src=", "@import", "url(", "//fonts"):
        assert needle not in page, needle
    assert "default-src 'none'" in page  # the page's CSP forbids loading anything anyway
    parser = Balanced()
    parser.feed(page)
    parser.close()
    assert not parser.errors and not parser.stack, (parser.errors, parser.stack)
    assert parser.tags.count("script") == 1  # only the self-check
    svgs = re.findall(r"<svg\b.*?</svg>", page, flags=re.S)
    assert svgs
    for svg in svgs:
        root = ET.fromstring(svg)  # raises on anything malformed
        check_bars(root)


def check_bars(root: ET.Element) -> None:
    """No negative sizes; the bars of one column stack without gaps or overlaps."""
    columns: dict[str, list[tuple[float, float]]] = {}
    for rect in root.iter("rect"):
        w, h = float(rect.get("width", "0")), float(rect.get("height", "0"))
        assert w >= 0 and h >= 0, ET.tostring(rect)
        if rect.find("title") is not None:  # a data bar, not a legend swatch
            columns.setdefault(rect.get("x", ""), []).append((float(rect.get("y", "0")), h))
    for bars in columns.values():
        bars.sort(reverse=True)  # bottom first
        for (y_low, _), (y_high, h_high) in itertools.pairwise(bars):
            assert y_low == pytest.approx(y_high + h_high, abs=0.15), bars
