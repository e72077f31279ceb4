"""The operator's report: one self-contained HTML page with inline SVG charts.

Everything is drawn here, in a few small functions: no JavaScript library, no external URL, no
font from the network (a Content-Security-Policy in the page forbids loading anything). The
only script is a few inline lines that mark the page as drawn, for the headless-browser test.

Definitions follow DESIGN.md section 5: the OOM rate counts executions whose first
recommendation was too small; relative slack is (slice memory - peak used) / slice memory on
successful first attempts; reserved GiB·h is slice memory x count x duration.

The package: `items` (a recommendation and its outcome, and what a set of them adds up to),
`ticks`, `svg` (primitives), `charts`, `tables`, `style`, and `page`, which puts them together.
"""

from recommender.report.page import render_report

__all__ = ["render_report"]
