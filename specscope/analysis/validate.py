"""Checks on a loaded export: damaged rows are dropped with a note, never turned into numbers.

A damaged or hand-edited export can hold times no profiler writes. Left in, they give absurd
metrics with exit 0 (a NULL end read as -9.2e18 makes a 9.2e15 µs window; an end before its
start a negative busy time). :func:`clean` runs once after loading and drops, from the GPU
operations, the CUDA API calls and the NVTX ranges, every row whose times are impossible:

=====================  ======================================================================
reason                 rule (times in ns, as in the export)
=====================  ======================================================================
no start time          ``start`` is NULL (read as :data:`~specscope.analysis.sqlread.NULL_INT`)
no end time            ``end`` is NULL (open NVTX ranges are counted apart, as before)
end before start       ``end < start``
beyond the capture     ``end > duration + CAPTURE_SLACK_NS`` or ``start < -CAPTURE_SLACK_NS``,
                       ``duration`` from ``ANALYSIS_DETAILS``; without it, any time beyond
                       ±2^62 ns (146 years)
=====================  ======================================================================

``StringIds`` values that are not text (NULL, a blob) are made readable as they are read
(:func:`readable_strings`, by :attr:`.loader.Trace.strings`). Each drop becomes one note, e.g.
``dropped 3 of 5120 GPU operation rows of the export: 2 end before start, 1 no start time (a
damaged export?)``. What is left has durations ≥ 0 and every window inside the capture, so
occupancy stays within 0-100 %.

:func:`no_launch_note` explains an empty projection: when CUDA API calls share a correlation id
(a damaged export), GPU operations cannot be matched to their launches, and it says so instead
of "no GPU operation was launched inside the steps".

:func:`lost_work_notes` says when the capture lost GPU work: an nsys older than the CUDA driver
can record the launch calls and not what they launched, without any error. nsys 2023.4.4 (CUPTI
12.4) on the H200's CUDA 13 driver recorded every ``cudaGraphLaunch`` in graph mode and none of
the replays (``tests/data/real/nsys2023_mixed_graph.sqlite``: no ``GRAPH_TRACE`` table; node
mode and eager kernels it recorded whole); ``shared/NSYS.md`` saw it keep 4 of 90 kernels. Every
other real export under ``tests/data`` has, in its median step, one kernel per kernel launch
call and one replay per graph launch call. A note for each of :data:`LOST_WORK`::

    median over kept steps of the calls (api_calls:cudaLaunchKernel, :cudaGraphLaunch)
        >= the least (MIN_LAUNCH_CALLS kernel launches, 1 graph launch), and
    median over kept steps of the work (eager_kernels, graph_launches)  <  MIN_RECORDED * that

(medians: a step that records a CUDA graph, whose captured launches run nothing then, is
not the usual step).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specscope.analysis.memory import CHUNK_ROWS, few_distinct, increasing
from specscope.analysis.readcols import call_ends
from specscope.analysis.sqlread import NULL_INT
from specscope.analysis.timeshift import FAR_NS

CAPTURE_SLACK_NS = 1_000_000_000
"""How far outside ``[0, duration]`` of the capture a time may lie (clock skew between CPU and
GPU timestamps, events recorded while the capture stopped)."""
NO_LAUNCH = "no GPU operation was launched inside the steps"
"""Why the steps have no GPU metric where they launched nothing (:func:`no_launch_note`)."""
MIN_LAUNCH_CALLS = 8  # kernel launch calls in the median step below this: too few to judge
MIN_RECORDED = 0.5  # kernels (replays) recorded per launch call in the median step, at least


def capture_bounds(trace) -> tuple[int, int]:
    """``(lowest, highest)`` plausible time of the export (module doc)."""
    duration = trace.capture_end  # (None: no table, a damaged one: the wide bounds)
    if duration is not None:
        return -CAPTURE_SLACK_NS, duration + CAPTURE_SLACK_NS
    return -FAR_NS, FAR_NS


def bad_times(start: np.ndarray, end: np.ndarray, bounds: tuple[int, int]) -> dict[str, np.ndarray]:
    """Reason -> mask of the rows dropped for it (each row under its first reason only)."""
    lo, hi = bounds
    if len(start) == 0 or (
        start.min() >= lo and end.max() <= hi and bool(np.greater_equal(end, start).all())
    ):
        return {}  # the usual case, in three passes (a NULL end is below its start)
    rules = {
        "no start time": start == NULL_INT,
        "no end time": end == NULL_INT,
        "end before start": end < start,
        "beyond the capture": (end > hi) | (start < lo),
    }
    seen = np.zeros(len(start), dtype=bool)
    out = {}
    for reason, mask in rules.items():
        mask &= ~seen
        if mask.any():
            out[reason] = mask
            seen |= mask
    return out


def _note(what: str, total: int, masks: dict[str, np.ndarray]) -> str:
    n = sum(int(m.sum()) for m in masks.values())
    parts = ", ".join(f"{int(m.sum())} {reason}" for reason, m in masks.items())
    return f"dropped {n} of {total} {what} rows of the export: {parts} (a damaged export?)"


def _keep(start, end, bounds, what: str, notes: list[str]) -> np.ndarray | None:
    """Mask of the rows to keep, None when all are (a note for the dropped ones)."""
    masks = bad_times(np.asarray(start), np.asarray(end), bounds)
    if not masks:
        return None
    notes.append(_note(what, len(start), masks))
    return ~np.logical_or.reduce(list(masks.values()))


def clean(trace) -> list[str]:
    """Drop the rows with impossible times from ``trace`` (module doc); the notes.

    Replaces the loaded CUDA API calls, GPU operations and NVTX ranges of ``trace`` (its
    cached frames) before any analysis reads them; the API calls first, so that operations
    are matched to their launches among the valid calls only.
    """
    notes: list[str] = []
    bounds = capture_bounds(trace)
    d = trace.__dict__  # (the strings are readable as read: :attr:`.loader.Trace.strings`)
    if trace.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        runtime = trace._runtime
        keep = _keep(runtime[0], _call_ends(runtime, bounds), bounds, "CUDA API call", notes)
        if keep is not None:
            d["_runtime"] = [c[keep] for c in runtime]
        notes += duplicate_note(trace)
    ops = trace.ops
    keep = _keep(
        ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy(), bounds, "GPU operation", notes
    )
    if keep is not None:
        d["ops"] = ops[keep].reset_index(drop=True)
    nvtx, unclosed = trace._nvtx_all
    keep = _keep(
        nvtx["start_ns"].to_numpy(), nvtx["end_ns"].to_numpy(), bounds, "NVTX range", notes
    )
    if keep is not None:
        d["_nvtx_all"] = (nvtx[keep].reset_index(drop=True), unclosed)
    return notes


def _call_ends(runtime: list[np.ndarray], bounds: tuple[int, int]) -> np.ndarray:
    """The ends of the CUDA API calls ``runtime`` (:attr:`.loader.Trace._runtime`) for
    :func:`bad_times`: where they are durations (:data:`.readcols.DURATION32`: never below
    their start), the latest end when every call starts inside ``bounds`` (a pass a chunk at
    a time: the usual case needs no more, and no array of every end), else every end."""
    start, ends = runtime[0], runtime[1]
    if ends.dtype != np.uint32:
        return ends
    latest = np.iinfo(np.int64).min
    for lo in range(0, len(start), CHUNK_ROWS):
        part = call_ends(start, ends, slice(lo, lo + CHUNK_ROWS))
        latest = max(latest, int(part.max()))
    if len(start) and start.min() >= bounds[0] and latest <= bounds[1]:
        return np.broadcast_to(np.int64(latest), start.shape)  # (passes as every end would)
    return call_ends(start, ends)


def validated(trace) -> list[str]:
    """:func:`clean` ``trace`` once (later calls return the same notes): every analysis of a
    loaded export calls this before it reads a frame."""
    if "_clean_notes" not in trace.__dict__:
        trace.__dict__["_clean_notes"] = clean(trace)
    return list(trace.__dict__["_clean_notes"])


def readable_strings(strings: dict) -> dict[int, str]:
    """``StringIds`` with every value a string: a blob decoded as UTF-8 (invalid bytes
    replaced), a NULL or number shown as ``<string ID>``; rows without an integer id left out.
    ``strings`` itself where every id is an integer and every value a string (any export nsys
    wrote: one pass of type checks, no second dict; a million NVTX texts took 1.1 s so)."""
    if all(type(v) is str and type(i) is int for i, v in strings.items()):
        return strings
    out = {}
    for i, v in strings.items():
        if not isinstance(i, int):
            continue
        out[i] = as_text(v) if isinstance(v, str | bytes) else f"<string {i}>"
    return out


def as_text(value) -> str:
    """A name read from an export as text: a blob decoded as UTF-8 (invalid bytes replaced),
    anything else as ``str`` gives it."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _duplicates(trace) -> int:
    """CUDA API calls (correlation id > 0) sharing their (process, correlation id)."""
    if not trace.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
        return 0
    _, _, gtid, corr, _ = trace._runtime
    if increasing(corr):
        return 0  # the ids in order, each once (one process' calls, as nsys writes them)
    stretches = trace._process_stretches()  # (where each process' calls are together)
    if stretches is not None and all(increasing(corr[s]) for s in stretches.values()):
        return 0  # each process' ids in order, each once (a chunk at a time: the keys below
        # of 8 ranks' 4 M calls took 100 MiB)
    has = corr > 0
    keys = ((gtid[has] >> 24) & 0xFFFFFF) << 38 | corr[has]
    if len(keys) < 2 or bool(np.greater(keys[1:], keys[:-1]).all()):
        return 0  # the usual case: calls in correlation order, each id once
    if _increasing_per_process(keys):  # several processes' calls interleaved in time
        return 0
    return int(pd.Series(keys).duplicated(keep=False).sum())


def _increasing_per_process(keys: np.ndarray) -> bool:
    """Whether the keys (``pid << 38 | corr``) of each process increase (each process' calls
    in correlation order: no id twice), looked at process by process for up to 64 processes
    (4 ranks of 400 000 calls: 0.04 s, where hashing every key took 0.38 s); False when they do
    not, or with more processes."""
    pids = keys >> 38
    found = few_distinct(pids)
    if found is None:
        return False
    for p in found:
        own = keys[pids == p]
        if not bool(np.greater(own[1:], own[:-1]).all()):
            return False
    return True


def duplicate_note(trace) -> list[str]:
    """A note when CUDA API calls share correlation ids (their operations may be misplaced)."""
    n = _duplicates(trace)
    if not n:
        return []
    return [
        f"{n} CUDA API calls share a correlation id with another (a damaged export?): their "
        "GPU operations are matched to the first of them and may land in the wrong step"
    ]


def no_launch_note(trace) -> str:
    """Why no GPU operation was projected onto the steps (module doc)."""
    if _duplicates(trace):
        return (
            "no GPU operation could be matched to a launch inside the steps: CUDA API calls "
            "share correlation ids (a damaged export?)"
        )
    return NO_LAUNCH


LOST_WORK = {  # metric of the calls -> of the GPU work they launch, least calls, words, advice
    "api_calls:cudaLaunchKernel": ("eager_kernels", MIN_LAUNCH_CALLS, "kernel launch calls",
                                   "kernels", ""),
    "api_calls:cudaGraphLaunch": ("graph_launches", 1, "CUDA graph launch calls",
                                  "graph replays", " (or with --cuda-graph-trace=node: nsys 2023.4 "
                                  "recorded the graphs' kernels so)"),
}  # fmt: skip
"""What :func:`lost_work_notes` compares (module doc)."""
LOST_WORK_SAID = "the capture lost GPU work"
"""The words of each note of :func:`lost_work_notes` (how a command that compares finds it)."""


def lost_work_notes(columns) -> list[str]:
    """The notes of a capture that lost GPU work (module doc): for each pair of
    :data:`LOST_WORK`, the median kept step's calls against the work recorded for them, from
    ``columns`` (metric name -> per-step values: the per-step metrics); a pair either of whose
    metrics is missing or has no value is passed over."""
    notes = []
    for calls_metric, (work_metric, least, calls_words, work_words, advice) in LOST_WORK.items():
        if calls_metric not in columns or work_metric not in columns:
            continue
        calls = np.asarray(columns[calls_metric], dtype=np.float64)
        work = np.asarray(columns[work_metric], dtype=np.float64)
        if np.isnan(calls).all() or np.isnan(work).all():  # (no calls read, no GPU metrics)
            continue
        c, w = float(np.nanmedian(calls)), float(np.nanmedian(work))
        if not c >= least or w >= MIN_RECORDED * c:
            continue
        notes.append(
            f"the median step made {c:g} {calls_words} but {w:g} {work_words} were recorded: "
            f"{LOST_WORK_SAID} (an nsys older than the CUDA driver can record the calls "
            f"and few of their {work_words}), so the step's GPU work is undercounted and its idle "
            f"overstated; record with an nsys as new as the driver{advice}"
        )
    return notes
