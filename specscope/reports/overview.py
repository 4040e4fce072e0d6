"""The campaign overview as Markdown: renders the frames of :mod:`specscope.campaign.tables`.

Nothing is computed here beyond formatting (and the ratio columns the frames already hold).
Every column says which mode its figures come from: ``[graph]`` / ``[node]`` (nsys
``--cuda-graph-trace``), ``[unprofiled]`` (no nsys), ``[allocator]`` (torch's allocator).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from specscope.reports.markdown import display_name, md_text


def _num(x: float, digits: int = 0) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    if digits == 0 and abs(x) < 100 and not float(x).is_integer():
        digits = 1
    return f"{x:,.{digits}f}".replace(",", " ")


def _times(x: float) -> str:
    text = _num(x, 2)
    return text if text == "n/a" else text + "×"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right_from: int = 2) -> str:
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(map(md_text, header)) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(map(md_text, r)) + " |" for r in rows]
    return "\n".join(lines)


def overview_table(frame: pd.DataFrame) -> str:
    """Cell x variant rows of :func:`specscope.campaign.tables.overview`."""
    digits = {"draft metadata MB [allocator]": 2, "step ms p50 [unprofiled]": 2}
    rows = []
    for (cell, variant), r in frame.iterrows():
        rows.append([cell, variant, *(_num(r[c], digits.get(c, 0)) for c in frame.columns)])
    return _table(["cell", "variant", *frame.columns], rows)


def inflation_table(frame: pd.DataFrame) -> str:
    """Node- vs graph-mode medians of each gap and idle."""
    rows = [
        [
            r.cell,
            r.variant,
            display_name(r.metric),
            _num(r.graph_us),
            _num(r.node_us),
            _num(r.node_minus_graph_us),
            _times(r.node_over_graph),
        ]
        for r in frame.itertuples(index=False)
    ]
    header = ["cell", "variant", "metric", "graph µs", "node µs", "node − graph µs", "node/graph"]
    return _table(header, rows, right_from=3)


def overhead_table(frame: pd.DataFrame) -> str:
    """Step time unprofiled (NVTX off/on) and under each trace mode."""
    rows = [
        [
            r.cell,
            r.variant,
            _num(r.nvtx_off_ms, 2),
            _num(r.nvtx_on_ms, 2),
            _num(r.nvtx_overhead_pct, 1) + " %",
            _num(r.graph_ms, 2),
            _times(r.graph_over_unprofiled),
            _num(r.node_ms, 2),
            _times(r.node_over_unprofiled),
        ]
        for r in frame.itertuples(index=False)
    ]
    header = [
        "cell",
        "variant",
        "unprofiled, NVTX off ms",
        "unprofiled, NVTX on ms",
        "NVTX overhead",
        "graph mode ms",
        "graph/unprof.",
        "node mode ms",
        "node/unprof.",
    ]
    return _table(header, rows)


def targets_table(frame: pd.DataFrame, baseline: str, variant: str) -> str:
    """Each target: both medians, the measured value, the goal, met or missed."""
    rows = []
    for r in frame.itertuples(index=False):
        scale = 1e6 if r.metric == "draft_metadata_bytes" else 1.0
        digits = 2 if scale != 1.0 else 0
        measured = _times(r.value) if r.kind == "ratio" else _num(r.value, 2)
        goal = ("≤ " + _num(r.goal, 1) + "×") if r.kind == "ratio" else ("= " + _num(r.goal))
        met = "n/a" if r.met is None else ("met" if r.met else "**missed**")
        mode = "allocator" if r.metric == "draft_metadata_bytes" else r.mode
        rows.append(
            [
                r.target,
                mode,
                _num(r.baseline / scale, digits),
                _num(r.variant / scale, digits),
                measured,
                goal,
                met,
            ]
        )
    header = ["target", "mode", baseline, variant, "measured", "goal", "result"]
    return _table(header, rows)


def not_run_list(frame: pd.DataFrame) -> str:
    """The runs without a result, grouped by status and reason."""
    if frame.empty:
        return "Every planned run was recorded and analysed."
    lines = []
    for (status, error), group in frame.fillna("").groupby(["status", "error"], sort=False):
        why = f" ({error})" if error else ""
        lines.append(f"- {len(group)} {status}{why}: " + ", ".join(f"`{i}`" for i in group["id"]))
    return "\n".join(lines)


def overview_markdown(
    title: str,
    provenance: str,
    overview: pd.DataFrame,
    inflation: pd.DataFrame,
    overhead: pd.DataFrame,
    targets: pd.DataFrame | None,
    not_run: pd.DataFrame,
    *,
    baseline: str,
    variant: str,
    target_cell: str,
) -> str:
    """The whole ``overview.md``."""
    parts = [
        f"# {title}",
        "",
        provenance,
        "",
        "Medians per step over all repetitions (steps pooled). [graph]/[node]: nsys "
        "--cuda-graph-trace mode of the figure; [unprofiled]: `specscope run` without nsys "
        "(CUDA events); [allocator]: torch's allocated bytes for the draft metadata.",
        "",
        "## Overview",
        "",
        overview_table(overview),
        "",
    ]
    if targets is not None:
        parts += [
            f"## Targets: {variant} vs {baseline}, {target_cell}",
            "",
            targets_table(targets, baseline, variant),
            "",
        ]
    parts += [
        "## Node-mode inflation (node-mode median / graph-mode median)",
        "",
        inflation_table(inflation),
        "",
        "## Capture and instrumentation overhead (step time p50, CUDA events)",
        "",
        overhead_table(overhead),
        "",
        "## Not run",
        "",
        not_run_list(not_run),
        "",
    ]
    return "\n".join(parts)
