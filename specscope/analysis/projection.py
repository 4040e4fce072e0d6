"""GPU work projected onto NVTX ranges, and how deep each range is nested: what ``specscope
ranges`` shows so that a user can tell which range is a real step.

**Projection** (as ``nsys stats -r nvtx_gpu_proj_sum`` does it) ::

    host thread  [---------------- range R ----------------]
                   launch a   launch b          launch c
    GPU                 [a]        [b]                    [c]
                        |<----- projected span of R ----->|

A GPU operation belongs to range R when the CUDA API call that launched it started inside R on
R's thread (the rule of every per-step metric, :mod:`specscope.analysis.steps`). An operation
counts for every range that encloses its launch, nested ones included. Per range instance:
``gpu_ops`` (operations), ``gpu_us`` (their summed device time) and ``gpu_proj_us`` (first GPU
start to last GPU end of those operations; 0 without any).

**Depth** ::

    [------------------------ step ------------------------]      depth 0
      [-- draft.prepare --][-- draft.replay --]                   depth 1
                              [- inner -]                         depth 2

A range's depth is the number of ranges of the same thread that enclose it (start before or at
its start, end at or after its end; of two ranges with identical bounds the first recorded
encloses the second). Only closed ranges count (``Trace.nvtx``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specscope.analysis.loader import Trace


def range_depths(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Depth of each range of one thread (module doc), in the input order."""
    order = np.lexsort((-ends, starts))  # by start, the longer first
    depth = np.zeros(len(starts), dtype=np.int64)
    open_ends: list[int] = []  # ends of the ranges enclosing the current one
    for i in order:
        while open_ends and open_ends[-1] < ends[i]:
            open_ends.pop()
        depth[i] = len(open_ends)
        open_ends.append(int(ends[i]))
    return depth


def top_level(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Positions of the ranges of one thread at depth 0 (:func:`range_depths` == 0) in start
    order: a range is enclosed exactly when an earlier one (by start, the longer first) ends
    at or after its end, so one running maximum finds them without the stack."""
    order = np.lexsort((-ends, starts))
    ends_sorted = ends[order]
    enclosing_end = np.r_[-np.inf, np.maximum.accumulate(ends_sorted)[:-1]]
    return order[ends_sorted > enclosing_end]


def _chunk_projection(
    r_start: np.ndarray, r_end: np.ndarray, launch: np.ndarray, g_start: np.ndarray,
    g_end: np.ndarray, acc: tuple[np.ndarray, ...],
) -> None:  # fmt: skip
    """Add to ``acc`` (per range of one thread: operations, summed device ns, least GPU start,
    greatest GPU end) the operations of one chunk whose launch (sorted ``launch``) lies inside
    each range, start <= launch <= end. Only the ranges that can hold one of the chunk's
    launches are looked up (their times compared as the search compares them, as float64)."""
    n, busy, first, last = acc
    near = np.flatnonzero(
        (r_start.astype(np.float64) <= launch[-1]) & (r_end.astype(np.float64) >= launch[0])
    )
    lo = np.searchsorted(launch, r_start[near], side="left")
    hi = np.searchsorted(launch, r_end[near], side="right")
    dur = np.concatenate([[0], np.cumsum(g_end - g_start)])
    n[near] += hi - lo
    busy[near] += dur[hi] - dur[lo]
    some = hi > lo
    near, lo, hi = near[some], lo[some], hi[some]
    if len(near):
        last[near] = np.maximum(last[near], _range_reduce(np.maximum, g_end, lo, hi))
        first[near] = np.minimum(first[near], _range_reduce(np.minimum, g_start, lo, hi))


def _range_reduce(ufunc: np.ufunc, values: np.ndarray, lo: np.ndarray, hi: np.ndarray):
    """``ufunc.reduce(values[lo[k]:hi[k]])`` for every k (each ``lo < hi``), in one
    ``reduceat`` over the bounds interleaved (its odd results, between two slices, unused).
    Right in any order; fast where ``lo`` increases (the unused slices then add up to the values
    at most once: :func:`range_instances` gives each thread's ranges in order of their starts)."""
    padded = np.r_[values, values[-1:]]  # an index == len(values) is valid in reduceat
    return ufunc.reduceat(padded, np.ravel(np.c_[lo, hi]))[::2]


def _projections(
    trace: Trace, ranges: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]
) -> tuple[dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]], set[int]]:
    """Per thread (pid, tid) of ``ranges`` (its ranges' starts and ends): operations, summed
    device ns and projected span ns of each range (module doc), of the operations of process
    pid whose launch call thread tid made; and which of those pids have an operation with a
    recorded launch call (by any thread). The launches are looked up a chunk of operations at
    a time (:meth:`.Trace.launches_in_chunks`), each chunk's projected alone and added: no
    frame of every operation with its launch (20 M GPU operations: 3.2 GiB)."""
    acc = {
        k: (np.zeros(len(s), np.int64), np.zeros(len(s), np.int64),
            np.full(len(s), np.iinfo(np.int64).max), np.full(len(s), np.iinfo(np.int64).min))
        for k, (s, _) in ranges.items()
    }  # fmt: skip
    ops = trace.ops
    pids, corrs = ops["pid"].to_numpy(), ops["correlation_id"].to_numpy()
    start, end = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
    launched: set[int] = set()
    processes = list(dict.fromkeys(p for p, _ in ranges))
    for lo, launch, call_tid in trace.launches_in_chunks(pids, corrs):
        rows = slice(lo, lo + len(launch))
        for p in processes:  # (each process' operations once, not once per thread of it)
            own = np.flatnonzero((pids[rows] == p) & (call_tid >= 0))
            if not len(own):
                continue
            launched.add(p)
            for t, mine in _by_thread(own, call_tid[own]):  # (only threads that launched)
                if (p, t) not in ranges:
                    continue
                r_start, r_end = ranges[p, t]
                mine = mine[np.argsort(launch[mine], kind="stable")]
                g_start, g_end = start[rows][mine], end[rows][mine]
                _chunk_projection(r_start, r_end, launch[mine], g_start, g_end, acc[p, t])
    projected = {
        k: (n, busy, np.where(n > 0, last - first, 0)) for k, (n, busy, first, last) in acc.items()
    }
    return projected, launched


def _by_thread(rows: np.ndarray, tids: np.ndarray):
    """(tid, the ``rows`` of that tid in their order) for each distinct value of ``tids`` (the
    thread of each row): one sort, not a pass over the rows per thread (an export of 5000
    threads with ranges took 6.7 s so)."""
    order = np.argsort(tids, kind="stable")
    distinct, first = np.unique(tids[order], return_index=True)
    bounds = np.r_[first, len(order)]
    for k, t in enumerate(distinct.tolist()):
        yield t, rows[order[bounds[k] : bounds[k + 1]]]


def range_instances(trace: Trace) -> pd.DataFrame:
    """Every closed NVTX range with ``depth``, ``gpu_ops``, ``gpu_us``, ``gpu_proj_us``
    (module doc) beside ``name, domain, pid, tid, start_ns, end_ns``."""
    nvtx = trace.nvtx
    cols = ["name", "domain", "pid", "tid", "start_ns", "end_ns"]
    out = nvtx[cols].copy()
    for c in ("depth", "gpu_ops"):
        out[c] = np.zeros(len(out), dtype=np.int64)
    for c in ("gpu_us", "gpu_proj_us"):
        out[c] = np.zeros(len(out))
    if out.empty:
        return out
    r_start, r_end = out["start_ns"].to_numpy(), out["end_ns"].to_numpy()
    # each thread's ranges in order of their starts (push/pop ranges come in order of their
    # ends, an export's rows in any order with nsys 2025.6): :func:`_range_reduce`'s unused
    # slices then stay short (in no order, each reached across a chunk of operations: 4.3 s of
    # `ranges` of 2 M operations, 0.1 s in order)
    threads = {
        k: i[np.argsort(r_start[i], kind="stable")]
        for k, i in out.groupby(["pid", "tid"], sort=False).indices.items()
    }
    projected, _ = _projections(trace, {k: (r_start[i], r_end[i]) for k, i in threads.items()})
    cols = {c: out[c].to_numpy().copy() for c in ("depth", "gpu_ops", "gpu_us", "gpu_proj_us")}
    for key, idx in threads.items():  # (each thread's into arrays, set as columns once)
        cols["depth"][idx] = range_depths(r_start[idx], r_end[idx])
        n, busy, span = projected[key]
        cols["gpu_ops"][idx] = n
        cols["gpu_us"][idx] = busy / 1e3
        cols["gpu_proj_us"][idx] = span / 1e3
    for c, values in cols.items():
        out[c] = values
    return out


def nvtx_ranges(trace: Trace) -> pd.DataFrame:
    """Per NVTX range name and domain (what to put in a step spec): ``count`` (ranges),
    ``mean_us`` (mean duration), ``threads`` (distinct threads that opened one), ``depth``
    (mean nesting depth), ``gpu_ops`` (GPU operations per range, mean), ``gpu_us`` (their
    device time per range, mean) and ``gpu_proj_us`` (mean projected span); most frequent
    first, then by name. A step is usually a range of depth 0 with GPU work in every instance.
    Ranges never closed are not counted (``trace.unclosed_ranges``)."""
    r = range_instances(trace)
    r["dur_us"] = (r["end_ns"] - r["start_ns"]) / 1e3
    return (
        r.groupby(["name", "domain"], observed=True)
        .agg(
            count=("dur_us", "size"),
            mean_us=("dur_us", "mean"),
            threads=("tid", "nunique"),
            depth=("depth", "mean"),
            gpu_ops=("gpu_ops", "mean"),
            gpu_us=("gpu_us", "mean"),
            gpu_proj_us=("gpu_proj_us", "mean"),
        )
        .reset_index()
        .sort_values(["count", "name"], ascending=[False, True], kind="stable")
    )


def step_range_candidates(
    trace: Trace, pid: int, *, min_count: int = 3, limit: int = 3
) -> list[tuple[str, int, float]]:
    """NVTX ranges of process ``pid`` that look like steps, for the hint of a zero-config
    analysis that chose something else: ``(name, ranges, GPU operations per range)``, most GPU
    operations first, at most ``limit``.

    A name qualifies when at least ``min_count`` of its ranges sit at depth 0 of their thread
    (no range of the thread encloses them; module doc) and every one of those launched GPU work
    (an operation whose launch call started inside it, on its thread). Per-op ranges (PyTorch's
    ``emit_nvtx``) qualify too, so zero-config takes the first only where no graph cycle or
    kernel pattern repeats (:mod:`.auto`, (d)); elsewhere these are suggestions."""
    nvtx = trace.nvtx
    mine = nvtx[nvtx["pid"] == pid]
    if mine.empty:
        return []
    tops = {}  # thread -> its ranges' rows of `mine` at depth 0, their starts and ends
    for tid, idx in mine.groupby("tid", sort=False).indices.items():
        start, end = mine["start_ns"].to_numpy()[idx], mine["end_ns"].to_numpy()[idx]
        top = top_level(start, end)
        tops[tid] = (idx[top], start[top], end[top])
    n_ops = _calls_within(trace, pid, {tid: t[1:] for tid, t in tops.items()})
    if n_ops is None:
        return []
    rows = [
        pd.DataFrame({"name": mine["name"].to_numpy()[idx], "ops": n_ops[tid]})
        for tid, (idx, _, _) in tops.items()
    ]
    top = pd.concat(rows)
    per_name = top.groupby("name", observed=True)["ops"].agg(["size", "min", "mean"])
    ok = per_name[(per_name["size"] >= min_count) & (per_name["min"] > 0)]
    ok = ok.sort_values(["mean", "size"], ascending=False).head(limit)
    return [(str(n), int(r["size"]), float(r["mean"])) for n, r in ok.iterrows()]


def _calls_within(
    trace: Trace, pid: int, ranges: dict[int, tuple[np.ndarray, np.ndarray]]
) -> dict[int, np.ndarray] | None:
    """Per thread of ``ranges`` (its ranges' starts and ends), how many operations of process
    ``pid`` its calls launched inside each range (start <= call start <= end; the operations
    of :func:`_projections`); None where no operation of ``pid`` has a recorded launch call."""
    projected, launched = _projections(trace, {(pid, tid): r for tid, r in ranges.items()})
    return {tid: projected[pid, tid][0] for tid in ranges} if pid in launched else None
