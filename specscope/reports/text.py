"""Display strings every output shares: signed numbers and the names of units.

The CLI tables, the Markdown table, ``report.html`` and the figures format numbers through these
helpers, so a change here changes them all.

- :func:`signed`: ``+5.0`` / ``−3.2`` (a typographic minus, U+2212, in Markdown and HTML; a
  plain ``-`` in terminal tables with ``minus="-"``), ``n/a`` for None and NaN;
- :func:`with_minus`: a formatted number with its leading ``-`` made typographic;
- :data:`UNITS`: per catalog unit (:mod:`specscope.analysis.catalog`), how it reads after a
  value (``884 µs``, a count has none), as a column heading and on a figure's axis.
"""

from __future__ import annotations

import math
from typing import NamedTuple

MINUS = "\u2212"


class UnitText(NamedTuple):
    """How one unit is written: ``suffix`` after a value, ``name`` as a column heading,
    ``axis`` under a figure's axis (per-step quantities say so)."""

    suffix: str
    name: str
    axis: str


UNITS: dict[str, UnitText] = {
    "us": UnitText("µs", "µs", "µs"),
    "%": UnitText("%", "%", "%"),
    "B": UnitText("B", "B", "bytes per step"),
    "count": UnitText("", "count", "count per step"),
}


def unit_text(unit: str) -> UnitText:
    """How ``unit`` is written; an unknown unit reads as itself everywhere."""
    return UNITS.get(unit) or UnitText(unit, unit, unit)


def with_minus(text: str) -> str:
    """``text`` with a leading ``-`` replaced by the typographic minus."""
    return MINUS + text[1:] if text.startswith("-") else text


def signed(x: float | None, digits: int = 1, *, minus: str = MINUS) -> str:
    """``x`` with its sign and ``digits`` decimals (``+5.0``, ``−3.2``; ``-0.0`` reads
    ``+0.0``); ``n/a`` for None and NaN. ``minus="-"`` keeps a plain hyphen."""
    if x is None or math.isnan(x):
        return "n/a"
    text = f"{round(x, digits) + 0.0:+.{digits}f}"
    return with_minus(text) if minus == MINUS else text
