"""Per-step metrics: one row per decode step; the metric names are specscope's public interface.

All times are µs. "Step k's operations" are the GPU operations projected onto step k
(:mod:`specscope.analysis.steps`) on the selected device.

**Window, busy, idle** ::

    GPU  step k:  [a][b]   [c]      [d]      | step k+1: [e] ...
                  ^ first start of step k     ^ first start of step k+1
                  |<------------ window_us -------------->|
    busy_us = length of the union of *all* operations of the device inside the window
              (every stream and process merged; overlapping work counts once)
    idle_us = window_us - busy_us;  occupancy_pct = 100 * busy_us / window_us

The last reported step's window ends at the last end of its own operations. When step k+1's
first operation starts before step k's (other streams), step k's window is empty (0 µs). With
``--cuda-graph-trace=graph`` a replay is one operation and counts as busy.

**Gaps between anchors** (``gap_us:A->B``) ::

    GPU  ... A's work ][    gap    ][ B's work ...
    gap = first start of B's GPU work - last end of A's GPU work   (negative: overlap)

A is the anchor instance immediately before B on the step thread (by CPU start), so the
cross-step pair (last anchor of step k-1 -> first anchor of step k) is attributed to step k.
``cpu_gap_us:A->B`` is the same on the host: start of range B - end of range A. When a pair
occurs more than once in a step, the first occurrence is reported.
What fills a gap and who waited for whom (``gap_busy_us``, ``gap_idle_us``, ``host_lag_us``
per pair, ``launch_latency_us`` per anchor): :mod:`specscope.analysis.gaps`.

**Counts** (operations of the step): ``eager_memcpy`` (memcpys not in a graph; by direction
``eager_memcpy_htod/_dtoh/_dtod/_other``; ``eager_memcpy_bytes``), ``eager_memset``,
``eager_kernels``, ``graph_kernels`` (node mode only), ``graph_launches`` (distinct graph launches),
``kernels:PATTERN`` (kernels whose name matches the regex; in a graph-mode capture the eager
ones only, since the kernels inside a graph replay are not recorded there) and
``kernel_us:PATTERN`` (their summed device time, µs: e.g. the time a rank spends in NCCL
collectives, waiting for the others included),
``api_calls:NAME`` (CUDA API calls of NAME's family started inside the step range on its thread:
``cudaLaunchKernel`` counts ``cuLaunchKernel[Ex]`` too, ``cudaMemcpyAsync`` the ``cuMemcpy*Async``
calls, ``cudaGraphLaunch`` ``cuGraphLaunch``; see :data:`.catalog.API_FAMILIES`).
Unified-memory migrations (memcpy kinds ``Unified Host-to-Device`` ...) are page moves the driver
starts on a fault or a prefetch, not copies a step launched: they are never eager memcpys
(``--totals`` lists them under their ``nsys stats`` names).

Units, directions and PR names of these metrics: :mod:`specscope.analysis.catalog`.

**Host side** (NVTX only, reported even without CUDA data): ``cpu_step_us`` (the step range),
``cpu_us:R`` (total duration of the ranges named R nested in the step on its thread).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from specscope.analysis import opsums
from specscope.analysis.catalog import (  # noqa: F401 (unit: re-exported)
    API_CALLS,
    API_FAMILIES,
    gpu_metrics,
    unit,
)
from specscope.analysis.coverage import coverage_beside, ops_coverage
from specscope.analysis.loader import (
    CHUNK_ROWS,
    COPY_KINDS,
    EAGER_COPY_KINDS,
    KINDS,
    CaptureMode,
    Trace,
)
from specscope.analysis.memory import dense, dense_rows, give_back
from specscope.analysis.opsread import RUNTIME
from specscope.analysis.pairs import pair_columns
from specscope.analysis.spec import anchor_pairs
from specscope.analysis.stepkinds import (
    ONE_TIME_CALLS,
    long_steps,
    long_steps_note,
    odd_steps_note,
)
from specscope.analysis.steps import Steps, interval_index, kept_position
from specscope.analysis.validate import NO_LAUNCH, lost_work_notes, no_launch_note

_GPU_METRICS = tuple(gpu_metrics())  # NaN without CUDA data (catalog: needs_cuda)


@dataclass
class StepMetrics:
    """Per-step metrics (index: step number) and the metrics that could not be measured."""

    frame: pd.DataFrame
    unavailable: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    window_start_ns: pd.Series | None = None  # per step: first start of its GPU work


def name_matches(ops: pd.DataFrame, pattern: str) -> np.ndarray:
    """Rows whose short or demangled name contains a match of the regex ``pattern``."""
    return _matching_rows(ops, _matching_codes(ops, pattern), slice(None))


def _matching_rows(ops: pd.DataFrame, by_code: dict[str, np.ndarray], rows: slice) -> np.ndarray:
    """Of ``rows``, whether each name matches, from :func:`_matching_codes`."""
    name, full = (by_code[c][ops[c].array.codes[rows]] for c in ("name", "full_name"))
    name |= full  # (code -1, missing, indexes the final False)
    return name


def _matching_codes(ops: pd.DataFrame, pattern: str) -> dict[str, np.ndarray]:
    """Per name column: whether each category matches ``pattern``, and False for code -1."""
    rx = re.compile(pattern)
    return {
        col: np.array([bool(rx.search(str(c))) for c in ops[col].cat.categories] + [False])
        for col in ("name", "full_name")
    }


def _gaps(steps: Steps, first: np.ndarray, last: np.ndarray, prefix: str) -> dict[str, np.ndarray]:
    """``prefix``A->B per kept step, from each anchor instance's (first, last) time."""
    return pair_columns(steps, (first[1:] - last[:-1]) / 1e3, prefix)


def per_step_metrics(
    trace: Trace, steps: Steps, count_kernels: tuple[str, ...] | list[str] = ()
) -> StepMetrics:
    """Compute every per-step metric for the kept steps of ``steps`` (see the module doc)."""
    from specscope.analysis import gaps  # (gaps imports metrics)

    spec = steps.spec
    patterns = list(dict.fromkeys([*spec.count_kernels, *count_kernels]))
    out = _host_metrics(trace, steps)
    give_back(len(steps.ops))  # (its NVTX temporaries: 0.14 GB with 0.9 M NVTX events)
    gap_cols = [f"gap_us:{p}" for p in anchor_pairs(spec.anchor_names)]
    gap_cols += gaps.attribution_columns(spec.anchor_names)  # (gaps: its module doc)
    kernel_cols = [f"kernels:{p}" for p in patterns] + [f"kernel_us:{p}" for p in patterns]
    api_cols = [f"api_calls:{n}" for n in API_CALLS]
    if trace.capture_mode is CaptureMode.NO_CUDA or steps.device_id is None:
        why = (
            "the export has no CUDA activity (recorded without -t cuda or on a machine without "
            "a GPU)"
            if trace.capture_mode is CaptureMode.NO_CUDA
            else no_launch_note(trace)
        )
        missing = [*_GPU_METRICS, *gap_cols, *kernel_cols, *api_cols]
        out = _joined(out, dict.fromkeys(missing, np.full(len(out), np.nan)))
        notes = list(steps.notes)
        if trace.has(RUNTIME) and why == NO_LAUNCH:  # (launch calls and no kernel: lost?)
            calls = _api_metrics(trace, steps)
            zeros = np.zeros(len(steps.kept))  # (their GPU work: none)
            notes += lost_work_notes(calls | {"eager_kernels": zeros, "graph_launches": zeros})
        return StepMetrics(out, dict.fromkeys(missing, why), notes)
    rows = len(steps.ops)  # each stage's freed chunks given back before the next (memory.py)
    # the counts first, while a second thread builds the coverage the window metrics query
    counts, unavailable = coverage_beside(
        steps, lambda: _count_metrics(steps, patterns, trace.capture_mode), trace
    )
    give_back(rows)
    window_start = _window_metrics(out, steps)
    for col, values in counts.items():  # (after the window metrics, as the columns go)
        out[col] = values
    del counts
    give_back(rows)
    ext = gaps.anchor_extents(steps, trace.launches)  # (the gaps and their attribution's)
    give_back(rows)
    cols = _gap_metrics(steps, gap_cols, ext)
    attribution = gaps.gap_attribution(steps, ext)
    give_back(rows)
    cols.update((col, attribution[col].to_numpy()) for col in attribution.columns)
    if trace.has(RUNTIME):
        cols.update(_api_metrics(trace, steps))
    else:  # (unknown, not none: a partial export)
        api = [f"api_calls:{family}" for family in API_FAMILIES]
        cols.update(dict.fromkeys(api, np.full(len(steps.kept), np.nan)))
        unavailable |= dict.fromkeys(api, NO_API_CALLS)
    out = _joined(out, cols)
    steps.__dict__.pop("_coverage", None)  # (only the metrics above query it: 4 B per op)
    give_back(rows)
    costs = _one_time_costs(trace, steps, out.index[long_steps(out)])
    notes = list(steps.notes) + lost_work_notes(out) + odd_steps_note(out)
    notes += long_steps_note(out, costs)
    if patterns and trace.capture_mode is CaptureMode.GRAPH:
        notes.append(
            "graph mode: kernels:/kernel_us: count eager launches only (kernels inside graph "
            "replays are not recorded; --cuda-graph-trace=node shows them)"
        )
    return StepMetrics(out, unavailable, notes, window_start)


def _one_time_costs(trace: Trace, steps: Steps, numbers: pd.Index) -> list[tuple[int, str, float]]:
    """(step, name, µs) of the longest one-time CUDA API call (:data:`.stepkinds.ONE_TIME_CALLS`,
    summed per name) the steps' thread started in each of the steps ``numbers``; only those
    calls read (:meth:`.Trace.thread_api`)."""
    if not len(numbers) or steps.tid < 0 or not trace.has(RUNTIME):
        return []
    rows = steps.all_steps.set_index("step").loc[numbers]
    lo, hi = rows["start_ns"].to_numpy(), rows["end_ns"].to_numpy()

    def inside(t: np.ndarray, _end, _corr) -> np.ndarray:
        at = np.searchsorted(lo, t, side="right") - 1
        ok = at >= 0
        ok[ok] = t[ok] < hi[at[ok]]
        return ok

    calls = trace.thread_api(steps.pid, steps.tid, inside)
    name = calls["name"].astype(object).to_numpy()
    once = np.isin(name, list(ONE_TIME_CALLS))
    if not once.any():
        return []
    t = calls["start_ns"].to_numpy()[once]
    step = np.asarray(numbers)[np.searchsorted(lo, t, side="right") - 1]
    us = (calls["end_ns"].to_numpy()[once] - t) / 1e3
    per = pd.DataFrame({"step": step, "name": name[once], "us": us})
    per = per.groupby(["step", "name"], sort=True)["us"].sum().reset_index()
    top = per.sort_values(["step", "us"], ascending=[True, False]).drop_duplicates("step")
    return [(int(s), str(n), float(u)) for s, n, u in top.itertuples(index=False)]


NO_API_CALLS = (
    "the export has no CUDA API calls (no CUPTI_ACTIVITY_KIND_RUNTIME table: exported with "
    "nsys export --tables?); export the report again with them"
)


def _host_metrics(trace: Trace, steps: Steps) -> pd.DataFrame:
    """``cpu_step_us``, ``cpu_us:R`` and ``cpu_gap_us:A->B`` (index: the kept steps), from NVTX
    alone; built in one piece, so that hundreds of range names make one block."""
    spec, kept = steps.spec, steps.kept
    all_steps = steps.all_steps.set_index("step")
    cols: dict[str, np.ndarray] = {}
    cols["cpu_step_us"] = (
        all_steps.loc[kept, "end_ns"] - all_steps.loc[kept, "start_ns"]
    ).to_numpy() / 1e3
    # the thread's other ranges (of the spec's domain): three columns of them, not the frame
    nvtx = trace.nvtx
    mine = (nvtx["pid"].to_numpy() == steps.pid) & (nvtx["tid"].to_numpy() == steps.tid)
    if spec.domain is not None:
        mine &= (nvtx["domain"] == spec.domain).to_numpy()
    mine &= (nvtx["name"] != spec.step).to_numpy()
    start, end = nvtx["start_ns"].to_numpy()[mine], nvtx["end_ns"].to_numpy()[mine]
    s_start, s_end = all_steps["start_ns"].to_numpy(), all_steps["end_ns"].to_numpy()
    in_step = interval_index(s_start, s_end, start)
    ok = in_step >= 0
    ok[ok] &= end[ok] <= s_end[in_step[ok]]
    rows = np.flatnonzero(mine)[ok]
    del mine
    nested = pd.DataFrame(
        {
            "step": in_step[ok],
            # (objects: pandas' default string dtype would copy each name into Arrow where
            # pyarrow is loaded, as for steps.py's anchors)
            "name": pd.Series(np.asarray(nvtx["name"].array[rows], dtype=object), dtype=object),
            "ns": end[ok] - start[ok],
        }
    )
    del start, end, in_step, ok, rows
    # summed in ns, whole numbers (exact in any order), then µs: the same sums whatever order
    # the export's rows are in (nsys 2025.6 no longer promises one)
    cpu = nested.groupby(["step", "name"])["ns"].sum().unstack(fill_value=0) / 1e3
    for name in cpu.columns:
        cols[f"cpu_us:{name}"] = cpu[name].reindex(kept, fill_value=0.0).to_numpy()
    a = steps.anchors
    for pair in anchor_pairs(spec.anchor_names):
        cols[f"cpu_gap_us:{pair}"] = np.full(len(kept), np.nan)
    cols.update(_gaps(steps, a["start_ns"].to_numpy(), a["end_ns"].to_numpy(), "cpu_gap_us:"))
    return pd.DataFrame(cols, index=pd.Index(kept, name="step"))


def _window_metrics(out: pd.DataFrame, steps: Steps) -> pd.Series:
    """``window_us``, ``busy_us``, ``idle_us``, ``occupancy_pct``; returns each window's start."""
    ops, kept = steps.ops, steps.kept
    start, end = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
    # first start / last end of each step's GPU work (over all steps, skipped ones included)
    first, last = group_first_last(ops["step"].to_numpy(), len(steps.all_steps), start, end)
    w_start = first[kept]
    w_end = np.r_[w_start[1:], np.nan]
    w_end[-1] = last[kept[-1]]
    w_end = np.maximum(w_end, w_start)  # next step's work started first: an empty window
    valid = ~np.isnan(w_start) & ~np.isnan(w_end)
    busy = np.full(len(kept), np.nan)
    ends_starts = ops_coverage(steps)(np.r_[w_end[valid], w_start[valid]])
    busy[valid] = ends_starts[: valid.sum()] - ends_starts[valid.sum() :]
    out["window_us"] = (w_end - w_start) / 1e3
    out["busy_us"] = busy / 1e3
    out["idle_us"] = out["window_us"] - out["busy_us"]
    out["occupancy_pct"] = 100 * out["busy_us"] / out["window_us"].where(out["window_us"] > 0)
    return pd.Series(w_start, index=kept)


def group_first_last(
    group: np.ndarray, n: int, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per group 0..n-1: the first ``start`` and the last ``end`` of its rows, as float64 (NaN:
    no rows). Rows of group -1 belong to none."""
    if (fast := opsums.first_last(group, n, start, end)) is not None:
        first, last = fast  # (one C loop: opsums.py; what follows is its reference)
    else:  # one more slot at the end, where group -1 lands (index -1): no filtered copies
        first = np.full(n + 1, np.iinfo(np.int64).max, dtype=np.int64)
        last = np.full(n + 1, np.iinfo(np.int64).min, dtype=np.int64)
        np.minimum.at(first, group, start)
        np.maximum.at(last, group, end)
    empty = last[:n] == np.iinfo(np.int64).min  # no row: the last end was never raised
    first, last = first[:n].astype(np.float64), last[:n].astype(np.float64)
    first[empty] = last[empty] = np.nan
    return first, last


def _count_metrics(
    steps: Steps, patterns: list[str], mode: CaptureMode
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Eager memcpy/memset/kernel, graph kernel/launch and ``kernels:PATTERN`` counts per kept
    step, in column order; and the metrics that are unavailable in this capture mode (with
    why)."""
    kept = steps.kept
    counts = _class_counts(steps, patterns)
    by_class = counts["by_class"]
    memcpy, memset, kernel = KINDS.index("memcpy"), KINDS.index("memset"), KINDS.index("kernel")
    eager_codes = [COPY_KINDS.index(d) + 1 for d in EAGER_COPY_KINDS]  # unified: not eager
    out = {"eager_memcpy": by_class[:, memcpy, 0][:, eager_codes].sum(axis=1)}
    for code, d in zip(eager_codes, EAGER_COPY_KINDS, strict=True):  # (int64 copies: no view
        out[f"eager_memcpy_{d}"] = by_class[:, memcpy, 0, code].astype(np.int64)  # keeps them)
    out["eager_memcpy_bytes"] = counts["eager_bytes"]
    out["eager_memset"] = by_class[:, memset, 0].sum(axis=1)
    out["eager_kernels"] = by_class[:, kernel, 0].sum(axis=1)
    out["graph_kernels"] = by_class[:, kernel, 1].sum(axis=1)
    out["graph_launches"] = _distinct_per_step(*counts["launches"], len(kept))
    for pattern in patterns:
        out[f"kernels:{pattern}"] = counts[f"kernels:{pattern}"]
        out[f"kernel_us:{pattern}"] = counts[f"kernel_us:{pattern}"] / 1e3
    if mode is not CaptureMode.GRAPH:
        return out, {}
    # graph mode: kernel rows are the eager launches (a replay is one GRAPH_TRACE row), so the
    # pattern counts stand for eager kernels; only the graph-internal count cannot be known
    why = "graph-internal kernels are invisible with --cuda-graph-trace=graph; record in node mode"
    out["graph_kernels"] = np.full(len(kept), np.nan)
    return out, {"graph_kernels": why}


def _class_counts(steps: Steps, patterns: list[str]) -> dict:
    """The sums behind :func:`_count_metrics`, per kept step, added up over chunks of
    ``CHUNK_ROWS`` ops (bounded temporaries): ``by_class`` (ops per step and class = (kind,
    in_graph, copy kind + 1), int32, shape (steps, kinds, 2, copy kinds + 1)), ``eager_bytes``,
    ``kernels:P`` and ``kernel_us:P`` (ns) per pattern, and ``launches``: the (step position,
    correlation id) of graph ops, consecutive repeats dropped (they count once anyway)."""
    ops, kept = steps.ops, steps.kept
    where = kept_position(steps)  # each op's step -> its position among the kept, -1 if none
    step = ops["step"].to_numpy()
    kind = ops["kind"].array.codes  # codes of loader.KINDS
    copy = ops["copy_kind"].array.codes  # codes of loader.COPY_KINDS, -1: not a memcpy
    in_graph = ops["in_graph"].to_numpy()
    nbytes = _column(ops, "bytes")  # (sparse in a trace's frame: memory.dense_rows)
    start, end, corr = (ops[c].to_numpy() for c in ("start_ns", "end_ns", "correlation_id"))
    n_copy = len(COPY_KINDS) + 1
    n_class = len(KINDS) * 2 * n_copy
    memcpy, kernel = KINDS.index("memcpy"), KINDS.index("kernel")
    unified = COPY_KINDS.index("unified")
    matching = {p: _matching_codes(ops, p) for p in patterns}  # (a bool per op: per chunk)
    columns = (step, where, kind, in_graph, copy, nbytes, corr, start, end)
    if (fast := _class_counts_c(ops, len(kept), columns, matching)) is not None:
        return fast  # (the C loops: opsums.py; what follows is their reference)
    by_class = np.zeros(len(kept) * n_class, dtype=np.int32)  # (a step's ops: int32 holds them)
    sums = {"eager_bytes": np.zeros(len(kept))}
    for p in patterns:
        sums[f"kernels:{p}"] = np.zeros(len(kept), dtype=np.int64)
        sums[f"kernel_us:{p}"] = np.zeros(len(kept))
    launches = []
    for lo in range(0, len(ops), CHUNK_ROWS):
        rows = slice(lo, lo + CHUNK_ROWS)
        pos = where[step[rows]]
        counted = pos >= 0
        # one count per step and class: class = (kind, in_graph, copy kind) as one number
        key = kind[rows].astype(np.int16)
        key *= 2
        key += in_graph[rows]
        key *= n_copy
        key += copy[rows]
        key += 1
        key = np.add(pos * n_class, key, dtype=np.int64)[counted]
        if len(key):  # counted over the keys' range only (a chunk's ops: a few steps)
            low, high = int(key.min()), int(key.max())
            if dense(high - low + 1, len(key)):
                key -= low
                counts = np.bincount(key)
                by_class[low : low + len(counts)] += counts
            else:  # steps far apart (a chunk of the copies of every step): no wide temporary
                where_key, counts = np.unique(key, return_counts=True)
                by_class[where_key] += counts
        del key
        k, g = kind[rows], in_graph[rows]
        eager_copy = counted & (k == memcpy) & ~g & (copy[rows] != unified)
        chunk_bytes = dense_rows(nbytes, lo, lo + CHUNK_ROWS)
        sums["eager_bytes"] += np.bincount(
            pos[eager_copy], weights=chunk_bytes[eager_copy], minlength=len(kept)
        )
        graph_op = np.flatnonzero(counted & g)
        g_pos, g_corr = pos[graph_op], corr[rows][graph_op]
        new = np.ones(len(g_pos), dtype=bool)
        new[1:] = (g_pos[1:] != g_pos[:-1]) | (g_corr[1:] != g_corr[:-1])
        launches.append((g_pos[new], g_corr[new]))
        is_kernel = counted & (k == kernel)
        for p in patterns:
            sel = is_kernel & _matching_rows(ops, matching[p], rows)
            sums[f"kernels:{p}"] += np.bincount(pos[sel], minlength=len(kept))
            dur = end[rows][sel] - start[rows][sel]
            sums[f"kernel_us:{p}"] += np.bincount(pos[sel], weights=dur, minlength=len(kept))
    sums["by_class"] = by_class.reshape(len(kept), len(KINDS), 2, n_copy)
    sums["launches"] = tuple(
        np.concatenate([p[i] for p in launches] or [np.zeros(0, dtype=np.int64)]) for i in range(2)
    )
    return sums


def _column(ops: pd.DataFrame, name: str):
    """Column ``name`` of ``ops`` as a numpy array, or as the sparse array it is (no array of
    every row's values)."""
    values = ops[name].array
    return values if isinstance(values, pd.arrays.SparseArray) else ops[name].to_numpy()


def _class_counts_c(ops: pd.DataFrame, n_kept: int, columns: tuple, matching: dict) -> dict | None:
    """:func:`_class_counts` by the C loops of :mod:`.opsums`, or None where they cannot run
    (the reference then runs)."""
    step, where, kind, in_graph, copy, nbytes, corr, start, end = columns
    n_copy = len(COPY_KINDS) + 1
    memcpy, unified = KINDS.index("memcpy"), COPY_KINDS.index("unified")
    counts = opsums.class_counts(step, where, kind, len(KINDS), in_graph, copy, n_copy, nbytes,
                                 corr, memcpy, unified, n_kept)  # fmt: skip
    if counts is None:
        return None
    by_class, eager, launch_pos, launch_corr = counts
    sums = {"eager_bytes": eager}
    names = tuple(ops[c].array.codes for c in ("name", "full_name"))
    for p, by_code in matching.items():
        tables = (by_code["name"][:-1], by_code["full_name"][:-1])  # (without code -1's entry)
        got = opsums.pattern_sums(
            step, where, kind, KINDS.index("kernel"), names, tables, start, end, n_kept
        )
        if got is None:
            return None
        sums[f"kernels:{p}"], sums[f"kernel_us:{p}"] = got
    sums["by_class"] = by_class.reshape(n_kept, len(KINDS), 2, n_copy)
    sums["launches"] = (launch_pos, launch_corr)
    return sums


def _distinct_per_step(pos: np.ndarray, corr: np.ndarray, n: int) -> np.ndarray:
    """Per step position 0..n-1: the number of distinct correlation ids among its rows."""
    if not len(pos):
        return np.zeros(n, dtype=np.int64)
    lo = int(corr.min())
    span = int(corr.max()) - lo + 1
    if dense(span, len(corr)):
        # the usual case: every id in one step (one API call launched its work), so the steps
        # of the ids, looked up in a table indexed by id, are the answer
        offset = corr - lo
        small = np.int32 if n < np.iinfo(np.int32).max else np.int64  # (20 M ops: 64 MB less)
        pos = pos.astype(small, copy=False)
        first = np.full(span, n, dtype=small)
        last = np.full(span, -1, dtype=small)
        np.minimum.at(first, offset, pos)
        np.maximum.at(last, offset, pos)
        seen = last >= 0
        if np.array_equal(first[seen], last[seen]):
            return np.bincount(last[seen], minlength=n)
    if n * span < 2**62:  # (pos, corr) as one int64: a hash-based unique, no sort
        pairs = pd.unique(pos * span + (corr - lo))
        return np.bincount(pairs // span, minlength=n)
    pairs = pd.DataFrame({"pos": pos, "corr": corr}).drop_duplicates()
    return np.bincount(pairs["pos"].to_numpy(), minlength=n)


def _joined(out: pd.DataFrame, cols: dict[str, np.ndarray]) -> pd.DataFrame:
    """``out`` with the columns ``cols`` (values per kept step) after its own, added in one
    piece: a column at a time, hundreds of gap columns (many anchors) would fragment the frame
    (and make pandas warn about it)."""
    return pd.concat([out, pd.DataFrame(cols, index=out.index)], axis=1)


def _gap_metrics(steps: Steps, gap_cols: list[str], ext: pd.DataFrame) -> dict[str, np.ndarray]:
    """``gap_us:A->B`` between the GPU work of consecutive anchor instances (their
    :func:`.gaps.anchor_extents` ``ext``): ``gap_cols`` (NaN where no step has the pair), per
    kept step."""
    a_first, a_last = ext["first_ns"].to_numpy(), ext["last_ns"].to_numpy()
    cols = dict.fromkeys(gap_cols, np.full(len(steps.kept), np.nan))
    cols.update(_gaps(steps, a_first, a_last, "gap_us:"))
    return cols


def _api_metrics(trace: Trace, steps: Steps) -> dict[str, np.ndarray]:
    """``api_calls:NAME``: CUDA API calls started inside each step range on its thread, per
    kept step (the calls a piece at a time: :meth:`.Trace.api_chunks`)."""
    all_steps = steps.all_steps
    s_start, s_end = all_steps["start_ns"].to_numpy(), all_steps["end_ns"].to_numpy()
    counts = {family: np.zeros(len(all_steps), dtype=np.int64) for family in API_FAMILIES}
    ids = trace.api_name_ids(n for family in API_FAMILIES.values() for n in family)
    members = {  # each family's StringIds ids (a name may have several: its _v versions)
        family: np.array([i for i, name in ids.items() if name in names], dtype=np.int64)
        for family, names in API_FAMILIES.items()
    }
    members = {family: family_ids for family, family_ids in members.items() if len(family_ids)}
    disjoint = bool((s_start[1:] >= s_end[:-1]).all())
    fast = _api_counts_c(members, s_start, s_end) if disjoint else None
    for start, _, _, _, name_id in trace.api_pieces(thread=(steps.pid, steps.tid)):
        if fast is not None and fast(start, name_id):
            continue  # (one C loop: opsums.py; what follows is its reference)
        if disjoint:  # each family's calls counted per step from their sorted starts
            for family, family_ids in members.items():
                counts[family] += _in_each(s_start, s_end, start[np.isin(name_id, family_ids)])
            continue
        a_step = interval_index(s_start, s_end, start)
        in_step = a_step >= 0
        for family, family_ids in members.items():
            sel = in_step & np.isin(name_id, family_ids)
            counts[family] += np.bincount(a_step[sel], minlength=len(all_steps))
    if fast is not None:
        for family, c in zip(members, fast.counts, strict=True):
            counts[family] += c
    return {f"api_calls:{family}": c[steps.kept] for family, c in counts.items()}


class _ApiCountsC:
    """:func:`_api_metrics`' counts of the pieces that :func:`.opsums.api_counts` takes (each
    family's calls per step, ``counts``: a row per family of ``members``, in their order)."""

    def __init__(self, family: np.ndarray, s_start: np.ndarray, s_end: np.ndarray, n: int):
        self.family, self.s_start, self.s_end = family, s_start, s_end
        self.counts = np.zeros((n, len(s_start)), dtype=np.int64)

    def __call__(self, start: np.ndarray, name_id: np.ndarray) -> bool:
        return opsums.api_counts(start, name_id, self.family, self.s_start, self.s_end,
                                 self.counts)  # fmt: skip


def _api_counts_c(members: dict, s_start: np.ndarray, s_end: np.ndarray) -> _ApiCountsC | None:
    """The C counts of :func:`_api_metrics` for steps that do not overlap, or None where the
    family of each name id cannot be a small table (ids below 0 or past 16 M)."""
    ids = [i for family_ids in members.values() for i in family_ids.tolist()]
    if not ids or min(ids) < 0 or max(ids) >= 1 << 24:
        return None
    family = np.full(max(ids) + 1, -1, dtype=np.int8)
    for k, family_ids in enumerate(members.values()):
        family[family_ids] = k
    starts, ends = (np.ascontiguousarray(a, dtype=np.int64) for a in (s_start, s_end))
    return _ApiCountsC(family, starts, ends, len(members))


def _in_each(s_start: np.ndarray, s_end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """How many of the times ``t`` each interval ``[s_start, s_end)`` holds (the intervals
    sorted and disjoint: what :func:`.steps.interval_index` then counts per interval). Two
    searches per interval among the times, sorted (calls of one thread usually are already):
    no lookup per time."""
    if not (t[1:] >= t[:-1]).all():
        t = np.sort(t)
    return np.searchsorted(t, s_end, side="left") - np.searchsorted(t, s_start, side="left")
