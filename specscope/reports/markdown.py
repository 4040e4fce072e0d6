"""The PR-ready Markdown table of ``specscope compare --format markdown``; renders only.

One row per metric (its display name), one column per side (the median per step) and one
``change`` column per later side, then a provenance line::

    | Metric | Before | After | change |
    | --- | ---: | ---: | ---: |
    | Gap: draft-extend → draft | 884 µs | 619 µs | −30.0 % |
    ...

    GPU NVIDIA H200 · nsys 2025.3.2.0 · capture mode node · commits 1a2b3c4 → 5d6e7f8 ·
    steps counted: Before 200, After 200 · medians per step

Every number comes from :class:`specscope.analysis.compare.Comparison`; nothing is computed
here beyond formatting.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from specscope.analysis import catalog
from specscope.analysis.compare import Comparison
from specscope.analysis.spec import (
    DEFAULT_PRESET,
    known_names,
    load_preset,
    report_defaults,
    spec_from_dict,
)
from specscope.reports.text import unit_text, with_minus

# The rows of the table users paste into PRs for the default preset (kept for callers; a
# comparison's own default rows are its spec's: :func:`default_rows`).
DEFAULT_ROWS = load_preset(DEFAULT_PRESET).report.rows


_MD_ESCAPES = {"\\": "\\\\", "|": "\\|", "`": "\\`", "<": "&lt;", ">": "&gt;", "\n": " ", "\r": " "}


def md_text(text: object) -> str:
    """``text`` safe in Markdown prose and table cells: ``|`` cannot split a cell, a backtick
    cannot open a code span, ``<``/``>`` cannot open raw HTML, a newline cannot end the row."""
    return "".join(_MD_ESCAPES.get(ch, ch) for ch in str(text))


def md_code(text: object) -> str:
    """``text`` as an inline code span (fenced with more backticks than it holds), one line."""
    text = " ".join(str(text).splitlines())
    fence = "`" * (max((len(r) for r in re.findall("`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def display_name(metric: str) -> str:
    """The PR name of ``metric``: a preset's ``[report.names]``, else the catalog's label, else
    the metric name itself."""
    name = known_names().get(metric) or catalog.label(metric)
    if name is None and metric.startswith("cpu_gap_us:"):  # the host side of a named gap
        gap = known_names().get(metric[4:])
        pair = metric.partition(":")[2].replace("->", " → ")
        name = f"Host {gap[0].lower()}{gap[1:]}" if gap else f"Host gap: {pair}"
    return name or metric


def default_rows(comparisons: Sequence[Comparison]) -> tuple[str, ...]:
    """The PR table's default rows: the report defaults of the baseline run's spec
    (:func:`specscope.analysis.spec.report_defaults`); where no run had CUDA activity
    (:attr:`.Analysis.without_cuda`: NVTX ranges recorded on a CPU), their host counterparts
    (:func:`host_rows`) instead of GPU metrics that no step has."""
    runs = comparisons[0].before
    rows = report_defaults(spec_from_dict(runs[0].spec) if runs else None).rows
    every = [a for c in comparisons for a in (*c.before, *c.after)]
    return host_rows(rows) if every and all(a.without_cuda for a in every) else rows


def host_rows(rows: Sequence[str]) -> tuple[str, ...]:
    """The host metrics that stand for the PR table's ``rows``: the step's time on the host,
    then each gap's ``cpu_gap_us`` (the host time between the two anchor ranges)."""
    gaps = [f"cpu_{r}" for r in rows if r.startswith("gap_us:")]
    return ("cpu_step_us", *gaps)


def format_value(value: float, unit: str) -> str:
    """``884 µs``, ``60.0 µs`` (one decimal below 100), ``4``, ``42.4 %``, ``n/a`` for NaN."""
    if value is None or math.isnan(value):
        return "n/a"
    if unit == "us":
        text = f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"
    elif unit == "%":
        text = f"{value:.1f}"
    else:
        text = f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}"
    suffix = unit_text(unit).suffix
    return with_minus(text) + (f" {suffix}" if suffix else "")


def format_change(rel_pct: float, before: float, after: float) -> str:
    """``−30.0 %``, ``+5.0 %``, ``0.0 %``; ``new`` when the before median is 0; ``n/a``."""
    if any(v is None or math.isnan(v) for v in (before, after)):
        return "n/a"
    if math.isnan(rel_pct):
        return "new" if before == 0 else "n/a"
    if round(rel_pct, 1) == 0:
        return "0.0 %"
    return with_minus(f"{rel_pct:+.1f}") + " %"


def _rows(comparisons: Sequence[Comparison], metrics: Sequence[str] | None) -> list[str]:
    present = [m for m in comparisons[0].metrics.index]
    for c in comparisons[1:]:
        present += [m for m in c.metrics.index if m not in present]
    if metrics is None:
        return [m for m in default_rows(comparisons) if m in present] or present
    return list(metrics)


# the optional columns after each ``change`` column (``compare --columns``), in this order
EXTRA_COLUMNS = ("verdict", "ci")


def mode_tag(comparisons: Sequence[Comparison]) -> str:
    """`` [graph]``/`` [node]``: the capture mode of every run when it is one of those two (the
    modes whose gaps differ, :func:`~specscope.analysis.catalog.capture_mode_matters`), else
    empty (no graphs, no CUDA, or mixed modes)."""
    modes = {r.capture_mode for c in comparisons for r in (*c.before, *c.after)}
    return f" [{modes.pop()}]" if modes in ({"graph"}, {"node"}) else ""


def format_ci(low: float, high: float, unit: str) -> str:
    """The CI of the absolute change, ``[−150, −130] µs``; ``n/a`` without one."""
    if any(v is None or math.isnan(v) for v in (low, high)):
        return "n/a"
    text = [format_value(v, unit) for v in (low, high)]
    suffix = unit_text(unit).suffix
    bare = [t.removesuffix(f" {suffix}") if suffix else t for t in text]
    return f"[{bare[0]}, {bare[1]}]" + (f" {suffix}" if suffix else "")


def _header(comparisons: Sequence[Comparison], columns: Sequence[str], confidence: float):
    """``Metric | first | later | change [| verdict] [| CI] ...``; a change against a side other
    than the first (``compare --chain``) says which: ``change vs B``."""
    first = comparisons[0].labels[0]
    header = ["Metric", first]
    for c in comparisons:
        change = "change" if c.labels[0] == first else f"change vs {c.labels[0]}"
        header += [c.labels[1], change]
        header += ["verdict" if col == "verdict" else f"{confidence:.0%} CI" for col in columns]
    return header


def _cells(c: Comparison, metric: str, first: bool, columns: Sequence[str]) -> list[str]:
    """One comparison's cells of ``metric``'s row (with the before value for the first)."""
    if metric not in c.metrics.index:
        return (["n/a"] if first else []) + ["n/a"] * (2 + len(columns))
    row = c.metrics.loc[metric]
    before = row["before_p50"] if row["before_n"] else math.nan
    after = row["after_p50"] if row["after_n"] else math.nan
    cells = [format_value(before, row["unit"])] if first else []
    cells += [format_value(after, row["unit"]), format_change(row["rel_change_pct"], before, after)]
    for col in columns:
        if col == "verdict":
            cells.append(md_text(row["verdict"].value))
        else:
            cells.append(format_ci(row["ci_low"], row["ci_high"], row["unit"]))
    return cells


def markdown_table(
    comparisons: Sequence[Comparison],
    metrics: Sequence[str] | None = None,
    columns: Sequence[str] = (),
    confidence: float = 0.95,
) -> str:
    """The table: rows ``metrics`` (default: :func:`default_rows` present in the comparison),
    each named by :func:`display_name` and, when its value depends on the capture mode, tagged
    with :func:`mode_tag`; ``columns`` (of :data:`EXTRA_COLUMNS`) add the verdict and the
    ``confidence`` CI of the change after each change column."""
    if unknown := [col for col in columns if col not in EXTRA_COLUMNS]:
        raise ValueError(f"unknown column(s) {', '.join(unknown)}")
    columns = [col for col in EXTRA_COLUMNS if col in columns]
    header = _header(comparisons, columns, confidence)
    lines = [
        "| " + " | ".join(md_text(h) for h in header) + " |",
        "| --- |" + " ---: |" * (len(header) - 1),
    ]
    tag = mode_tag(comparisons)
    for metric in _rows(comparisons, metrics):
        name = display_name(metric) + (tag if catalog.capture_mode_matters(metric) else "")
        cells = [md_text(name)]
        for i, c in enumerate(comparisons):
            cells += _cells(c, metric, i == 0, columns)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _distinct(values: list) -> str | None:
    known = list(dict.fromkeys(str(v) for v in values if v is not None))
    return " / ".join(known) if known else None


def provenance(comparisons: Sequence[Comparison]) -> str:
    """GPU, nsys version, capture mode, commits (when known), steps counted per side."""
    sides = [(comparisons[0].labels[0], comparisons[0].before)]
    sides += [(c.labels[1], c.after) for c in comparisons]
    runs = [r for _, side in sides for r in side]
    parts = []
    for label, value in (
        ("GPU", _distinct([r.gpu for r in runs])),
        ("nsys", _distinct([r.nsys_version for r in runs])),
        ("capture mode", _distinct([r.capture_mode for r in runs])),
    ):
        parts.append(f"{label} {value or 'unknown'}")
    commits = [_distinct([r.commit[:12] if r.commit else None for r in side]) for _, side in sides]
    if any(commits):
        parts.append("commits " + " → ".join(c or "unknown" for c in commits))
    batch = _distinct([r.batch_size for r in runs])
    if batch:
        parts.append(f"batch size {batch}")
    counted = []
    for label, side in sides:
        runs_note = f" in {len(side)} runs" if len(side) > 1 else ""
        counted.append(f"{label} {sum(r.n_steps for r in side)}{runs_note}")
    skipped = _distinct([r.skipped for r in runs])
    skip_note = f" (after {skipped} warm-up skipped)" if skipped and skipped != "0" else ""
    parts.append("steps counted: " + ", ".join(counted) + skip_note)
    parts.append("medians per step")
    return md_text(" · ".join(parts))


def render(
    comparisons: Sequence[Comparison],
    metrics: Sequence[str] | None = None,
    columns: Sequence[str] = (),
    confidence: float = 0.95,
) -> str:
    """The table (:func:`markdown_table`), a blank line, and the provenance line."""
    table = markdown_table(comparisons, metrics, columns, confidence)
    return f"{table}\n\n{provenance(comparisons)}\n"
