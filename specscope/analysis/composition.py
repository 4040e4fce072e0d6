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
opens at ``t = 0`` equals the metric's value for step k. With ``span_us`` the window is
fixed instead: ``[-lead_us, span_us - lead_us]`` for every input (the seed's "400 µs, starting
40 µs before draft-extend's GPU work ends" is ``span_us=400, lead_us=40``).

**Host lane** (:class:`HostLane`). The launching thread's side of the same window: its NVTX
ranges (phases, with their nesting depth), its CUDA API calls, and one link per anchor instance
in view from the API call that launched the anchor's first GPU operation to that operation::

    host  [ draft.prepare ][ draft.replay ]          NVTX phases of the launching thread
          |cudaMemcpyAsync|   |cudaGraphLaunch|      CUDA API calls
                                '--- link --->
    GPU   ..[ A's work ]                      [ B's work ]

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

from specscope.analysis import opsums
from specscope.analysis.callrows import op_launches
from specscope.analysis.coverage import union_coverage
from specscope.analysis.gaps import anchor_extents
from specscope.analysis.memory import CHUNK_ROWS
from specscope.analysis.metrics import name_matches
from specscope.analysis.run import Analysis
from specscope.analysis.steps import frame_anchors, op_anchors, with_anchors
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
class HostLane:
    """The launching thread in the timeline's window; times in µs from the timeline's t = 0.

    ``phases``: its NVTX ranges ``name, start_us, end_us, depth`` (0: outermost).
    ``calls``: its CUDA API calls ``name, start_us, end_us, correlation_id``.
    ``links``: ``anchor, step, call, call_start_us, gpu_start_us, stream_id``: for each anchor
    instance in view, from the start of the API call (``call``) that launched the anchor's
    first GPU operation to that operation's start.
    ``tid``: the thread; ``None`` when the export has no CUDA API calls.
    """

    tid: int | None
    phases: pd.DataFrame
    calls: pd.DataFrame
    links: pd.DataFrame


@dataclass
class GapTimeline:
    """Step ``step``'s operations around gap ``gap`` (times in µs from the end of A's work).

    ``ops``: ``stream_id, start_us, end_us, dur_us, name, category, anchor, step, highlight,
    correlation_id, launch_us, launch_tid`` (start and thread of the API call that launched it).
    ``anchors``: ``name, start_us, end_us, step`` (GPU extent of each anchor instance in view).
    ``gaps``: ``metric, start_us, end_us, gap_us, step``.
    ``host``: the launching thread's NVTX phases, API calls and launch links
    (:class:`HostLane`); ``span_us``: the fixed window's width, None when it follows the step.
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
    host: HostLane | None = None
    span_us: float | None = None


def _anchor_extents(a: Analysis) -> tuple[np.ndarray, np.ndarray]:
    """Each anchor instance's first start and last end of GPU work (float64 ns, NaN: none)."""
    ext = anchor_extents(a.steps, a.trace.launches)
    return ext["first_ns"].to_numpy(), ext["last_ns"].to_numpy()


def overlapping(ops: pd.DataFrame, lo: float, hi: float) -> np.ndarray:
    """The positions of the operations that end after ``lo`` and start before ``hi`` (ns; their
    times compared as float64, as with a float), in trace order, a chunk of operations at a
    time: a window's few, without a temporary of every operation's (a report's views of 20 M
    operations made 500 MiB of them at once)."""
    start, end = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
    rows = [
        np.flatnonzero((end[c : c + CHUNK_ROWS] > lo) & (start[c : c + CHUNK_ROWS] < hi)) + c
        for c in range(0, len(ops), CHUNK_ROWS)
    ]
    return np.concatenate(rows) if rows else np.zeros(0, dtype=np.intp)


def _op_frame(a: Analysis, lo: float, hi: float, t0: float, highlight: str | None):
    """The device's operations overlapping ``[lo, hi]`` (ns), in µs from ``t0``."""
    names = a.steps.anchors["name"].to_numpy(dtype=object)
    ops = a.steps.ops.iloc[overlapping(a.steps.ops, lo, hi)]
    o = with_anchors(a.steps, ops.sort_values(["start_ns", "stream_id"], kind="stable"))
    hl = name_matches(o, highlight) if highlight else np.zeros(len(o), dtype=bool)
    anchor_idx = o["anchor"].to_numpy()
    start = (o["start_ns"].to_numpy() - t0) / 1e3
    end = (o["end_ns"].to_numpy() - t0) / 1e3
    launch, launch_tid = op_launches(a.trace, o)
    return pd.DataFrame(
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
            "correlation_id": o["correlation_id"].to_numpy(),
            "launch_us": (launch - t0) / 1e3,
            "launch_tid": launch_tid,
        }
    )


def _gap_frame(a: Analysis, first, last, lo: float, hi: float, t0: float) -> pd.DataFrame:
    """The gaps between consecutive anchor instances that overlap ``[lo, hi]``."""
    names = a.steps.anchors["name"].to_numpy(dtype=object)
    a_steps = a.steps.anchors["step"].to_numpy()
    s, e = last[:-1], first[1:]  # (gap j - 1: from instance j - 1 to instance j)
    with np.errstate(invalid="ignore"):
        seen = ~np.isnan(s) & ~np.isnan(e) & (e > lo) & (s < hi)
    rows = [
        (f"gap_us:{names[j - 1]}->{names[j]}", (s[j - 1] - t0) / 1e3, (e[j - 1] - t0) / 1e3,
         (e[j - 1] - s[j - 1]) / 1e3, int(a_steps[j]))
        for j in np.flatnonzero(seen) + 1
    ]  # fmt: skip
    return pd.DataFrame(rows, columns=["metric", "start_us", "end_us", "gap_us", "step"])


def _nesting_depth(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Depth of each range (sorted by start, then longest first) in the stack of enclosing ones
    (in C where :mod:`.opsums` is built: the thread's every range, 0.9 M at 20 M GPU ops; what
    follows is the reference)."""
    if (fast := opsums.nesting_depth(start, end)) is not None:
        return fast
    depth = np.zeros(len(start), dtype=int)
    stack: list[float] = []
    for i, (s, e) in enumerate(zip(start, end, strict=True)):
        while stack and stack[-1] <= s:
            stack.pop()
        depth[i] = len(stack)
        stack.append(e)
    return depth


_LINK_COLUMNS = ["anchor", "step", "call", "call_start_us", "gpu_start_us", "stream_id"]
_CALL_MARGIN_NS = 1_000
"""The calls read for a window ``[lo, hi]`` are those within this much of it (in ns), a superset
of the calls in view, which are then picked by their times in µs exactly as before."""


def _launch_heads(a: Analysis, lo: float, hi: float) -> pd.DataFrame:
    """Each anchor instance's first GPU operation (the earliest start; the first in trace order
    of equal ones), index: the instance, where that operation starts after ``lo`` and its
    launch call before ``hi`` (ns). Only the instances that can be in view are grouped: none
    of whose operations starts by ``lo`` (else its first does), and none that starts on the
    CPU by ``hi`` (the call of each of its operations starts inside it)."""
    ops = a.steps.ops
    start = ops["start_ns"].to_numpy()
    n = len(a.steps.anchors)
    candidate = np.zeros(n + 1, dtype=bool)  # (the last entry: anchor -1, never one)
    candidate[:n] = a.steps.anchors["start_ns"].to_numpy() < hi
    chunks = range(0, len(ops), CHUNK_ROWS)  # (the anchors a chunk at a time: steps.op_anchors)
    for c in chunks:
        anchor = op_anchors(a.steps, c, c + CHUNK_ROWS)
        candidate[anchor[start[c : c + CHUNK_ROWS] <= lo]] = False
    candidate[n] = False
    keep = [candidate[op_anchors(a.steps, c, c + CHUNK_ROWS)] for c in chunks]
    o = with_anchors(a.steps, ops[np.concatenate(keep) if keep else np.zeros(0, dtype=bool)])
    first = o.loc[o.groupby("anchor")["start_ns"].idxmin()]
    first = first.assign(api_start_ns=op_launches(a.trace, first)[0])  # (its call's start)
    return first[(first["start_ns"] > lo) & (first["api_start_ns"] < hi)].set_index("anchor")


def _launch_links(a: Analysis, first: pd.DataFrame, calls: pd.DataFrame, t0: float):
    """One row per anchor instance whose launch (API call start to first GPU start) overlaps
    the window: ``first``, its first GPU operation (:func:`_launch_heads`), and the API call
    that launched it, named from ``calls`` (the thread's, every one of those operations'
    among them) (:class:`HostLane`'s ``links``)."""
    if not len(first):
        return pd.DataFrame(columns=_LINK_COLUMNS)
    anchors = a.steps.anchors
    call_name = dict(zip(calls["correlation_id"], calls["name"], strict=True))
    rows = []
    for j in first.index:
        op = first.loc[j]
        if np.isnan(op["api_start_ns"]):
            continue
        rows.append(
            (
                anchors["name"].iat[j],
                int(anchors["step"].iat[j]),
                str(call_name.get(op["correlation_id"], "launch")),
                (op["api_start_ns"] - t0) / 1e3,
                (op["start_ns"] - t0) / 1e3,
                op["stream_id"],
            )
        )
    return pd.DataFrame(rows, columns=_LINK_COLUMNS)


def host_lane(a: Analysis, lo: float, hi: float, t0: float) -> HostLane:
    """The launching thread's NVTX phases, API calls and anchor launch links in ``[lo, hi]``
    (ns), in µs from ``t0`` (module doc). Of the thread's calls only those near the window and
    those that launched a link's operation are read (:meth:`.Trace.thread_api`)."""
    tid, pid = a.steps.tid, a.steps.pid
    nv = a.trace.nvtx
    nv = nv[(nv["pid"] == pid) & (nv["tid"] == tid)].sort_values(
        ["start_ns", "end_ns"], ascending=[True, False], kind="stable"
    )
    depth = _nesting_depth(nv["start_ns"].to_numpy(), nv["end_ns"].to_numpy())
    inside = (nv["end_ns"].to_numpy() > lo) & (nv["start_ns"].to_numpy() < hi)
    nv = nv[inside]
    phases = pd.DataFrame(
        {
            "name": nv["name"].astype(str).to_numpy(),
            "start_us": (nv["start_ns"].to_numpy() - t0) / 1e3,
            "end_us": (nv["end_ns"].to_numpy() - t0) / 1e3,
            "depth": depth[inside],
        }
    )
    heads = _launch_heads(a, lo, hi)
    launched = heads["correlation_id"].to_numpy()

    def near(start: np.ndarray, end: np.ndarray, corr: np.ndarray) -> np.ndarray:
        mask = (end >= lo - _CALL_MARGIN_NS) & (start <= hi + _CALL_MARGIN_NS)
        return mask | np.isin(corr, launched)

    api = a.trace.thread_api(pid, tid, near)
    calls = pd.DataFrame(
        {
            "name": api["name"].astype(str).to_numpy(),
            "start_us": (api["start_ns"].to_numpy() - t0) / 1e3,
            "end_us": (api["end_ns"].to_numpy() - t0) / 1e3,
            "correlation_id": api["correlation_id"].to_numpy(),
        }
    )
    links = _launch_links(a, heads, calls, t0)
    view = (calls["end_us"] > (lo - t0) / 1e3) & (calls["start_us"] < (hi - t0) / 1e3)
    has_api = a.trace.has("CUPTI_ACTIVITY_KIND_RUNTIME")
    return HostLane(
        tid=int(tid) if has_api else None,
        phases=phases.reset_index(drop=True),
        calls=calls[view].reset_index(drop=True),
        links=links,
    )


def gap_timeline(
    a: Analysis,
    step: int,
    gap: str,
    *,
    lead_us: float = 40.0,
    highlight: str | None = None,
    span_us: float | None = None,
) -> GapTimeline:
    """Step ``step``'s GPU operations aligned on gap ``gap`` (see the module doc).

    ``lead_us``: how much before the end of A's work to start; ``highlight``: a regex of kernel
    names whose operations get ``highlight = True``; ``span_us``: a fixed window width (µs;
    default: to the end of step ``step``'s GPU window).
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
    lo = t0 - lead_us * 1e3
    if span_us is None:
        hi = max(step_window(a.metrics, step)[1], first[i])
    else:
        hi = lo + span_us * 1e3
    seen = ~np.isnan(first) & (last > lo) & (first < hi)
    anchor_frame = pd.DataFrame(
        {
            "name": names[seen],
            "start_us": (first[seen] - t0) / 1e3,
            "end_us": (last[seen] - t0) / 1e3,
            "step": a_steps[seen],
        }
    )
    return GapTimeline(
        step=step,
        gap=gap,
        gap_us=(first[i] - t0) / 1e3,
        lead_us=lead_us,
        start_us=-lead_us,
        end_us=(hi - t0) / 1e3,
        ops=_op_frame(a, lo, hi, t0, highlight),
        anchors=anchor_frame,
        gaps=_gap_frame(a, first, last, lo, hi, t0),
        host=host_lane(a, lo, hi, t0),
        span_us=span_us,
    )


COMPOSITION = ("graph_us", "eager_kernel_us", "memcpy_us", "memset_us", "idle_us")


def step_composition(a: Analysis, step: int) -> pd.Series:
    """Step ``step``'s window split into :data:`COMPOSITION` (µs; module doc); sums to window."""
    w0, w1 = step_window(a.metrics, step)
    ops = a.steps.ops
    rows = overlapping(ops, w0, w1)  # (clipped to the window, the others are empty)
    start = np.clip(ops["start_ns"].to_numpy()[rows].astype("float64"), w0, w1)
    end = np.clip(ops["end_ns"].to_numpy()[rows].astype("float64"), w0, w1)
    kind = ops["kind"].array[rows]  # (a categorical's codes compared: no text of each kind)

    def of_kind(name: str) -> np.ndarray:
        if not isinstance(kind, pd.Categorical):
            return np.asarray(kind.astype(str)) == name
        code = kind.categories.get_indexer([name])[0]
        return kind.codes == code if code >= 0 else np.zeros(len(kind), dtype=bool)

    kernel = of_kind("kernel")
    in_graph = ops["in_graph"].to_numpy(dtype=bool)[rows]
    groups = [
        of_kind("graph") | (kernel & in_graph),
        kernel & ~in_graph,
        of_kind("memcpy"),
        of_kind("memset"),
    ]
    inside = end > start
    mask = np.zeros(len(rows), dtype=bool)
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
    idx = frame_anchors(a.steps, o)
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


def gap_without_values(source: str, a: Analysis, gap: str) -> SpecError:
    """The error for ``gap``, a gap metric no step of ``a`` has a value of: the export has no
    CUDA activity (no gap between GPU work at all), else the gaps of this run that have values."""
    if a.without_cuda:
        return SpecError(f"{source}: no GPU work in the export (recorded without -t cuda, or "
                         "on a machine without a GPU): no gap between GPU work; record with "
                         "-t cuda")  # fmt: skip
    frame = a.metrics.frame
    have = [c for c in frame.columns if c.startswith("gap_us:") and frame[c].notna().any()]
    return SpecError(f"{source}: no value of {gap!r} in any step; gaps of this run: "
                     f"{', '.join(have) or 'none'}")  # fmt: skip


@dataclass
class MedianStep:
    """The median step of one input by ``gap``, with everything the report draws of it."""

    step: int
    gap: str
    timeline: GapTimeline
    composition: pd.Series
    operations: pd.DataFrame


def median_step_view(
    a: Analysis,
    gap: str,
    *,
    lead_us: float = 40.0,
    highlight: str | None = None,
    span_us: float | None = None,
) -> MedianStep:
    """Pick the median step by ``gap`` (:func:`median_step`) and compute its views
    (``span_us``: the timeline's fixed width, see :func:`gap_timeline`)."""
    parse_gap(gap)
    if gap not in a.metrics.frame or a.metrics.frame[gap].isna().all():
        raise gap_without_values(str(a.trace.path), a, gap)
    step = median_step(a.metrics, gap)
    return MedianStep(
        step=step,
        gap=gap,
        timeline=gap_timeline(a, step, gap, lead_us=lead_us, highlight=highlight, span_us=span_us),
        composition=step_composition(a, step),
        operations=step_operations(a, step),
    )
