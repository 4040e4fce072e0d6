"""The median step up close: its operations aligned on a gap, its time by category, its kernels.

These are the numbers ``specscope report`` draws (:mod:`specscope.reports` only renders them).

**Gap-aligned timeline** (:func:`gap_timeline`). For a gap ``gap_us:A->B`` and a step k, the
instance of B in step k whose preceding anchor instance is A (the one the metric reports) fixes
the origin: ``t = 0`` is the last end of A's GPU work, as users line steps up by hand
("starting 40 µs before the draft-extend graph ends")::

    GPU   ..[ A's work ]            [ B's work ] ... rest of step k ...|
                       ^ t = 0      ^ t = gap_us                        ^ end of step k's window
          ^ t = -lead_us

Every GPU operation of the device that overlaps ``[-lead_us, end]`` is kept, where ``end`` is
the end of step k's GPU window (:func:`specscope.analysis.summary.step_window`), with its
:class:`OpCategory`. Anchors are the GPU extents (first start, last end) of the anchor
instances in view; gaps are the intervals between consecutive anchor instances, so the gap that
opens at ``t = 0`` equals the metric's value for step k.

**Composition** (:func:`step_composition`). Step k's window (``window_us``) is split so that
the parts add up to it: each instant is given to the first category busy at that instant, in the
order graph work (graph kernels; graph replays in graph mode), eager kernels, memcpys, memsets;
the rest is idle (equal to ``idle_us``)::

    graph   [=====]        [====]
    eager      [==]  [=]                      graph_us = 9, eager_us = 1 (the overlap is graph's),
    memcpy              [=]        [==]       memcpy_us = 3, idle_us = window - 13
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
import pandas as pd

from specscope.analysis.metrics import name_matches, union_coverage
from specscope.analysis.run import Analysis
from specscope.analysis.summary import median_step, step_window
from specscope.errors import SpecError


class OpCategory(str, enum.Enum):
    """What a GPU operation is, as the timeline colours it."""

    GRAPH_KERNEL = "graph kernel"
    GRAPH_REPLAY = "graph replay"  # graph mode: one operation per replay
    EAGER_KERNEL = "eager kernel"
    MEMCPY_HTOD = "memcpy HtoD"
    MEMCPY_DTOH = "memcpy DtoH"
    MEMCPY_DTOD = "memcpy DtoD"
    MEMCPY_OTHER = "memcpy other"
    MEMSET = "memset"


_MEMCPY = {
    "htod": OpCategory.MEMCPY_HTOD,
    "dtoh": OpCategory.MEMCPY_DTOH,
    "dtod": OpCategory.MEMCPY_DTOD,
}


def categories(ops: pd.DataFrame) -> np.ndarray:
    """The :class:`OpCategory` value (a string) of each operation (loader columns)."""
    kind = ops["kind"].astype(str).to_numpy()
    in_graph = ops["in_graph"].to_numpy(dtype=bool)
    copy = ops["copy_kind"].astype(object).to_numpy()
    out = np.empty(len(ops), dtype=object)
    for i, (k, g, c) in enumerate(zip(kind, in_graph, copy, strict=True)):
        if k == "kernel":
            cat = OpCategory.GRAPH_KERNEL if g else OpCategory.EAGER_KERNEL
        elif k == "graph":
            cat = OpCategory.GRAPH_REPLAY
        elif k == "memcpy":
            cat = _MEMCPY.get(c, OpCategory.MEMCPY_OTHER)
        else:
            cat = OpCategory.MEMSET
        out[i] = cat.value
    return out


def parse_gap(metric: str) -> tuple[str, str]:
    """``gap_us:A->B`` -> ``(A, B)``; SpecError for anything else."""
    head, _, pair = metric.partition(":")
    a, sep, b = pair.partition("->")
    if head != "gap_us" or not sep or not a or not b:
        raise SpecError(f"{metric!r} is not a gap metric; give one like gap_us:A->B")
    return a, b


@dataclass
class GapTimeline:
    """Step ``step``'s operations around gap ``gap`` (times in µs from the end of A's work).

    ``ops``: ``stream_id, start_us, end_us, dur_us, name, category, anchor, step, highlight``.
    ``anchors``: ``name, start_us, end_us, step`` (GPU extent of each anchor instance in view).
    ``gaps``: ``metric, start_us, end_us, gap_us, step``.
    """

    step: int
    gap: str
    gap_us: float
    lead_us: float
    start_us: float
    end_us: float
    ops: pd.DataFrame
    anchors: pd.DataFrame
    gaps: pd.DataFrame


def _anchor_extents(a: Analysis) -> tuple[np.ndarray, np.ndarray]:
    ops, n = a.steps.ops, len(a.steps.anchors)
    on = ops["anchor"].to_numpy() >= 0
    g = pd.DataFrame(
        {
            "a": ops["anchor"].to_numpy()[on],
            "s": ops["start_ns"].to_numpy()[on],
            "e": ops["end_ns"].to_numpy()[on],
        }
    )
    first = g.groupby("a")["s"].min().reindex(range(n)).to_numpy(dtype="float64")
    last = g.groupby("a")["e"].max().reindex(range(n)).to_numpy(dtype="float64")
    return first, last


def gap_timeline(
    a: Analysis, step: int, gap: str, *, lead_us: float = 40.0, highlight: str | None = None
) -> GapTimeline:
    """Step ``step``'s GPU operations aligned on gap ``gap`` (see the module doc).

    ``lead_us``: how much before the end of A's work to start; ``highlight``: a regex of kernel
    names whose operations get ``highlight = True``.
    """
    before, after = parse_gap(gap)
    anchors = a.steps.anchors
    names = anchors["name"].to_numpy(dtype=object)
    a_steps = anchors["step"].to_numpy()
    first, last = _anchor_extents(a)
    hits = [
        i
        for i in range(1, len(anchors))
        if a_steps[i] == step and names[i] == after and names[i - 1] == before
    ]
    if not hits or np.isnan(last[hits[0] - 1]) or np.isnan(first[hits[0]]):
        raise SpecError(f"step {step} has no {gap} with GPU work on both sides")
    i = hits[0]
    t0 = last[i - 1]
    w_end = max(step_window(a.metrics, step)[1], first[i])
    lo, hi = t0 - lead_us * 1e3, w_end

    ops = a.steps.ops
    sel = (ops["end_ns"].to_numpy() > lo) & (ops["start_ns"].to_numpy() < hi)
    o = ops[sel].sort_values(["start_ns", "stream_id"], kind="stable")
    hl = name_matches(o, highlight) if highlight else np.zeros(len(o), dtype=bool)
    anchor_idx = o["anchor"].to_numpy()
    start = (o["start_ns"].to_numpy() - t0) / 1e3
    end = (o["end_ns"].to_numpy() - t0) / 1e3
    op_frame = pd.DataFrame(
        {
            "stream_id": o["stream_id"].to_numpy(),
            "start_us": start,
            "end_us": end,
            "dur_us": end - start,
            "name": o["name"].astype(str).to_numpy(),
            "category": categories(o),
            "anchor": np.where(anchor_idx >= 0, names[np.clip(anchor_idx, 0, None)], "")
            if len(names)
            else "",
            "step": o["step"].to_numpy(),
            "highlight": hl,
        }
    )
    seen = ~np.isnan(first) & (last > lo) & (first < hi)
    anchor_frame = pd.DataFrame(
        {
            "name": names[seen],
            "start_us": (first[seen] - t0) / 1e3,
            "end_us": (last[seen] - t0) / 1e3,
            "step": a_steps[seen],
        }
    )
    rows = []
    for j in range(1, len(anchors)):
        s, e = last[j - 1], first[j]
        if np.isnan(s) or np.isnan(e) or e <= lo or s >= hi:
            continue
        metric = f"gap_us:{names[j - 1]}->{names[j]}"
        rows.append((metric, (s - t0) / 1e3, (e - t0) / 1e3, (e - s) / 1e3, int(a_steps[j])))
    gaps = pd.DataFrame(rows, columns=["metric", "start_us", "end_us", "gap_us", "step"])
    return GapTimeline(
        step=step,
        gap=gap,
        gap_us=(first[i] - t0) / 1e3,
        lead_us=lead_us,
        start_us=-lead_us,
        end_us=(hi - t0) / 1e3,
        ops=op_frame,
        anchors=anchor_frame,
        gaps=gaps,
    )


COMPOSITION = ("graph_us", "eager_kernel_us", "memcpy_us", "memset_us", "idle_us")


def step_composition(a: Analysis, step: int) -> pd.Series:
    """Step ``step``'s window split into :data:`COMPOSITION` (µs; module doc); sums to window."""
    w0, w1 = step_window(a.metrics, step)
    ops = a.steps.ops
    start = np.clip(ops["start_ns"].to_numpy(dtype="float64"), w0, w1)
    end = np.clip(ops["end_ns"].to_numpy(dtype="float64"), w0, w1)
    kind = ops["kind"].astype(str).to_numpy()
    kernel = kind == "kernel"
    in_graph = ops["in_graph"].to_numpy(dtype=bool)
    groups = [
        (kind == "graph") | (kernel & in_graph),
        kernel & ~in_graph,
        kind == "memcpy",
        kind == "memset",
    ]
    inside = end > start
    mask = np.zeros(len(ops), dtype=bool)
    covered_before = 0.0
    parts = []
    for g in groups:
        mask |= g & inside
        cov = union_coverage(start[mask], end[mask])
        total = float(cov(np.array([w1]))[0] - cov(np.array([w0]))[0])
        parts.append((total - covered_before) / 1e3)
        covered_before = total
    parts.append((w1 - w0 - covered_before) / 1e3)
    return pd.Series(parts, index=list(COMPOSITION), name=step)


def step_operations(a: Analysis, step: int) -> pd.DataFrame:
    """The operations launched in step ``step``, per name: what the report's kernel table shows.

    Columns: ``name, category, anchor`` (anchor range, "" outside one), ``count, total_us,
    mean_us, max_us``; sorted by ``total_us``, largest first.
    """
    ops = a.steps.ops
    o = ops[ops["step"].to_numpy() == step]
    names = a.steps.anchors["name"].to_numpy(dtype=object)
    idx = o["anchor"].to_numpy()
    f = pd.DataFrame(
        {
            "name": o["name"].astype(str).to_numpy(),
            "category": categories(o),
            "anchor": np.where(idx >= 0, names[np.clip(idx, 0, None)], "") if len(names) else "",
            "dur_us": (o["end_ns"] - o["start_ns"]).to_numpy() / 1e3,
        }
    )
    g = f.groupby(["name", "category", "anchor"], sort=False)["dur_us"]
    out = g.agg(count="size", total_us="sum", mean_us="mean", max_us="max").reset_index()
    return out.sort_values("total_us", ascending=False, kind="stable").reset_index(drop=True)


@dataclass
class MedianStep:
    """The median step of one input by ``gap``, with everything the report draws of it."""

    step: int
    gap: str
    timeline: GapTimeline
    composition: pd.Series
    operations: pd.DataFrame


def median_step_view(
    a: Analysis, gap: str, *, lead_us: float = 40.0, highlight: str | None = None
) -> MedianStep:
    """Pick the median step by ``gap`` (:func:`median_step`) and compute its views."""
    parse_gap(gap)
    if gap not in a.metrics.frame or a.metrics.frame[gap].isna().all():
        have = [c for c in a.metrics.frame.columns if c.startswith("gap_us:")]
        raise SpecError(
            f"{a.trace.path}: no value of {gap!r} in any step; gaps of this run: "
            f"{', '.join(have) or 'none'}"
        )
    step = median_step(a.metrics, gap)
    return MedianStep(
        step=step,
        gap=gap,
        timeline=gap_timeline(a, step, gap, lead_us=lead_us, highlight=highlight),
        composition=step_composition(a, step),
        operations=step_operations(a, step),
    )
