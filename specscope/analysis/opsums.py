"""The per-step sums over GPU operations in one C loop each (``opsums.c``), where it is built.

The window, count and gap metrics reduce the operations by step or anchor instance: first
start and last end per step (:func:`.metrics.group_first_last`), ops per step and class
(:func:`.metrics._class_counts`), the head operation of each anchor instance
(:func:`.gaps.anchor_extents`), the union coverage's prefix and its queries
(:mod:`.coverage`); after them, the totals per name and kind that a comparison keeps of a
shed analysis (:attr:`.run.Analysis.op_totals`). Before them, the operations frame needs each
operation's launch call (:meth:`.loader.Trace.launches`), its names' categorical codes
(:func:`.opnames.unique_inverse`) and each device's rows together
(:func:`.devices.by_device`). In numpy each is a dozen passes over the operations, with a
temporary per operation each and ``ufunc.at`` (slow scattered updates); the C loops make one
pass (2 M GPU ops: ``bench/bench_opsums.py`` times each against its reference).

Each function here returns None where the C loop cannot be used: :mod:`.native` did not build
it (no compiler, ``SPECSCOPE_NATIVE=0``), a column is not a contiguous array of the dtypes the
loop reads, or the loop met a value outside the range its reference handles. The caller then
runs its numpy code, the reference, which stays beside it; the results are the same to the bit
(``tests/analysis/test_opsums.py`` compares them on random and real operations).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from specscope.analysis import native
from specscope.analysis.memory import CHUNK_ROWS, dense_rows
from specscope.analysis.pagerelease import STRETCH_BYTES, read_once

_P = ctypes.c_void_p
_I = ctypes.c_int64
_W = ctypes.c_int
_SIGNATURES = {
    "first_last": [_I, _P, _W, _I, _P, _P, _P, _P],
    "class_counts": [_I, _P, _W, _P, _I, _P, _I, _P, _P, _P, _W, _P, _W, _I, _I, _I, _I]
    + [_P, _P, _P, _P],
    "pattern_sums": [_I, _P, _W, _P, _I, _P, _I, _P, _W, _P, _I, _P, _W, _P, _I, _P, _P, _I]
    + [_P, _P],
    "pair_totals": [_I, _P, _W, _P, _I, _P, _W, _I, _P, _I, _P, _P, _P, _P, _P],
    "anchor_heads": [_I, _P, _W, _I, _P, _P, _P, _P, _P, _P, _I],  # (tied uint8, offset)
    "coverage_prefix": [_I, _P, _P, _P, _W, _P, _P, _P],
    "coverage_merge": [_I, _P, _P, _P, _I, _P, _P, _P, _P],
    "device_slots": [_I, _P, _W, _I, _P, _I, _P],
    "scatter_rows": [_I, _P, _P, _P, _W, _P],
    "scatter_places": [_I, _P, _P, _I, _P, _W, _P],
    "codes_present": [_I, _P, _W, _I, _I, _P],
    "codes_remap": [_I, _P, _W, _I, _I, _P, _P, _W],
    "launch_lookup": [_I, _P, _W, _I, _P, _W, _I, _P, _P, _P, _P, _P, _W, _I, _I, _P, _P, _I]
    + [_P, _P],
    "sorted_lookup": [_I, _P, _W, _I, _P, _W, _I, _P, _W, _I, _P, _P, _I, _P, _P],
    "interval_lookup": [_I, _P, _I, _P, _P, _P, _W],
    "covered_at": [_I, _P, _P, _P, _I, _P, _P],
    "nesting_depth": [_I, _P, _P, _P, _P],
    "api_counts": [_I, _P, _P, _W, _P, _I, _I, _P, _P, _P],
}


def _function(name: str):
    """The C function ``name`` of ``opsums.c``, typed, or None (not built)."""
    lib, _ = native.built(native.OPSUMS)
    if lib is None:
        return None
    try:
        fn = getattr(lib, name)
    except AttributeError:
        return None
    fn.restype = ctypes.c_int64
    fn.argtypes = _SIGNATURES[name]
    return fn


def _ints(*columns: np.ndarray) -> bool:
    """Whether each is a contiguous integer array of 1, 2, 4 or 8 bytes (what ``at`` reads)."""
    return all(
        isinstance(c, np.ndarray)
        and c.dtype.kind == "i"
        and c.dtype.itemsize in (1, 2, 4, 8)
        and c.flags.c_contiguous
        for c in columns
    )


def _same_length(*columns: np.ndarray) -> bool:
    """Whether the columns are as long as one another (the loops read n rows of each)."""
    return len({len(c) for c in columns}) == 1


def _exact(dtype, *arrays: np.ndarray) -> bool:
    """Whether each is a contiguous array of exactly ``dtype``."""
    return all(
        isinstance(a, np.ndarray) and a.dtype == dtype and a.flags.c_contiguous for a in arrays
    )


def _p(a: np.ndarray) -> int:
    return a.ctypes.data


def _at(a: np.ndarray, row: int) -> int:
    """The address of ``a[row]`` (a contiguous array)."""
    return a.ctypes.data + row * a.dtype.itemsize


def first_last(
    group: np.ndarray, n: int, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per group 0..n-1 (and one slot more, for group -1) the least ``start`` and the greatest
    ``end`` (int64; ``INT64_MAX``/``INT64_MIN`` where there is no row), as the reference's
    ``minimum.at``/``maximum.at`` leave them; or None."""
    fn = _function("first_last")
    if fn is None or not (_ints(group) and _exact(np.int64, start, end)):
        return None
    if not _same_length(group, start, end):
        return None
    first = np.full(n + 1, np.iinfo(np.int64).max, dtype=np.int64)
    last = np.full(n + 1, np.iinfo(np.int64).min, dtype=np.int64)
    w = group.dtype.itemsize
    if fn(len(group), _p(group), w, n, _p(start), _p(end), _p(first), _p(last)) < 0:
        return None
    return first, last


def class_counts(
    step: np.ndarray,
    where: np.ndarray,
    kind: np.ndarray,
    n_kind: int,
    in_graph: np.ndarray,
    copy: np.ndarray,
    n_copy: int,
    nbytes: np.ndarray,
    corr: np.ndarray,
    memcpy_kind: int,
    unified: int,
    n_kept: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Of :func:`.metrics._class_counts`: ``by_class`` (flat, ``n_kept * n_class``), the eager
    copy bytes per kept step, and the (kept step, correlation id) of the graph operations with
    consecutive repeats dropped; or None. ``where``: :func:`.steps.kept_position`; ``kind`` and
    ``copy`` int8 codes, ``in_graph`` bool; ``nbytes`` an array or a sparse column (taken a
    chunk at a time: :func:`.memory.dense_rows`)."""
    fn = _function("class_counts")
    if fn is None or not (
        _ints(step, corr, nbytes if isinstance(nbytes, np.ndarray) else dense_rows(nbytes, 0, 1))
        and _exact(np.int64, where)
        and _exact(np.int8, kind, copy)
        and _exact(np.bool_, in_graph)
        and _same_length(step, kind, in_graph, copy, nbytes, corr)
    ):
        return None
    by_class = np.zeros(n_kept * n_kind * 2 * n_copy, dtype=np.int32)  # (per step: fits)
    eager = np.zeros(n_kept)
    # the launches of CHUNK_ROWS operations at a time (as the reference takes them, so that the
    # same repeats are dropped), into buffers of that size: nothing of the operations' size
    buffers = np.empty(CHUNK_ROWS, dtype=np.int64), np.empty(CHUNK_ROWS, dtype=np.int64)
    launches: list[tuple[np.ndarray, np.ndarray]] = []
    for lo in range(0, len(step), CHUNK_ROWS):
        n = min(CHUNK_ROWS, len(step) - lo)
        chunk_bytes = dense_rows(nbytes, lo, lo + n)  # (a sparse column: this chunk's)
        got = fn(
            n, _at(step, lo), step.dtype.itemsize, _p(where), len(where),
            _at(kind, lo), n_kind, _at(in_graph, lo), _at(copy, lo),
            _p(chunk_bytes), chunk_bytes.dtype.itemsize, _at(corr, lo), corr.dtype.itemsize,
            n_copy, memcpy_kind, unified, n_kept, _p(by_class), _p(eager), *map(_p, buffers),
        )  # fmt: skip
        if got < 0:
            return None
        launches.append((buffers[0][:got].copy(), buffers[1][:got].astype(corr.dtype)))
    pos, ids = (np.concatenate([p[i] for p in launches] or [np.zeros(0, np.int64)]) for i in (0, 1))
    return by_class, eager, pos, ids


def pattern_sums(
    step: np.ndarray,
    where: np.ndarray,
    kind: np.ndarray,
    kernel_kind: int,
    names: tuple[np.ndarray, np.ndarray],
    matching: tuple[np.ndarray, np.ndarray],
    start: np.ndarray,
    end: np.ndarray,
    n_kept: int,
) -> tuple[np.ndarray, np.ndarray] | None:
    """``kernels:P`` (int64) and ``kernel_us:P`` (ns, float64) per kept step for one pattern:
    ``names`` the short and full name codes of each operation, ``matching`` whether each code
    matches (the reference's tables, whose extra last entry, for code -1, is left out here);
    or None."""
    fn = _function("pattern_sums")
    (name, full), (name_ok, full_ok) = names, matching
    if fn is None or not (
        _ints(step, name, full)
        and _exact(np.int64, where, start, end)
        and _exact(np.int8, kind)
        and _exact(np.bool_, name_ok, full_ok)
        and _same_length(step, kind, name, full, start, end)
    ):
        return None
    count, ns = np.zeros(n_kept, dtype=np.int64), np.zeros(n_kept)
    got = fn(
        len(step), _p(step), step.dtype.itemsize, _p(where), len(where), _p(kind), kernel_kind,
        _p(name), name.dtype.itemsize, _p(name_ok), len(name_ok),
        _p(full), full.dtype.itemsize, _p(full_ok), len(full_ok),
        _p(start), _p(end), n_kept, _p(count), _p(ns),
    )  # fmt: skip
    return None if got < 0 else (count, ns)


def pair_totals(
    step: np.ndarray,
    where: np.ndarray,
    name: np.ndarray,
    n_name: int,
    kind: np.ndarray,
    n_kind: int,
    start: np.ndarray,
    end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Of :func:`.run.op_totals`, without a temporary per operation: per (``name``, ``kind``)
    code pair (``name * n_kind + kind``) of the operations of kept steps (``where``:
    :func:`.steps.kept_position`), their count (int64), the sum of their durations in µs (summed
    in whole ns, exactly, as :func:`.run._pair_totals` sums them, then divided) and the first
    such operation (-1 none); or None."""
    fn = _function("pair_totals")
    if fn is None or not (
        _ints(step, name)
        and _exact(np.int64, where, start, end)
        and _exact(np.int8, kind)
        and _same_length(step, name, kind, start, end)
    ):
        return None
    n_pairs = max(n_name, 0) * max(n_kind, 1)
    count, first = np.zeros(n_pairs, dtype=np.int64), np.full(n_pairs, -1, dtype=np.int64)
    total = np.zeros(n_pairs, dtype=np.int64)
    got = fn(
        len(step), _p(step), step.dtype.itemsize, _p(where), len(where),
        _p(name), name.dtype.itemsize, n_name, _p(kind), n_kind,
        _p(start), _p(end), _p(count), _p(total), _p(first),
    )  # fmt: skip
    return None if got != 0 else (count, total / 1e3, first)


def anchor_state(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The state :func:`anchor_heads` carries over chunks of rows, for ``n`` instances: first
    start, last end, head row (-1: no rows yet) and tied (uint8)."""
    head = np.full(n, -1, dtype=np.int64)
    return np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), head, np.zeros(n, np.uint8)


def anchor_heads(
    anchor: np.ndarray,
    n: int,
    start: np.ndarray,
    end: np.ndarray,
    state: tuple | None = None,
    offset: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Per anchor instance 0..n-1: first start, last end (int64), the first row in trace order
    starting first (-1: no rows) and whether another row starts then too (uint8: the caller
    picks among those by their launch calls, as :func:`.gaps.anchor_extents` says), into
    ``state`` (:func:`anchor_state`), carried over calls for chunks of rows (``offset``: the
    number of the chunk's first row); the state, or None."""
    fn = _function("anchor_heads")
    if fn is None or not (
        _ints(anchor) and _exact(np.int64, start, end) and _same_length(anchor, start, end)
    ):
        return None
    state = anchor_state(n) if state is None else state
    got = fn(
        len(anchor), _p(anchor), anchor.dtype.itemsize, n, _p(start), _p(end),
        *map(_p, state), offset,
    )  # fmt: skip
    return None if got < 0 else state


MERGE_MAX_RUNS = 16
"""Starts in up to this many sorted runs (GPU operations: one a table, each in start order)
are merged by :func:`coverage_merged`; more are sorted."""


def coverage_merged(
    starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`coverage_prefix` of intervals in start order where their starts are a few
    sorted runs, merged in one pass (no sort of the rows, no order of them); or None."""
    fn = _function("coverage_merge")
    if fn is None or not _exact(np.int64, starts, ends):
        return None
    n = len(starts)
    if not n or len(ends) != n:
        return None
    breaks = np.flatnonzero(starts[1:] < starts[:-1])
    if len(breaks) >= MERGE_MAX_RUNS:
        return None
    bounds = np.concatenate([[0], breaks + 1, [n]]).astype(np.int64)
    pos = np.empty(len(bounds) - 1, dtype=np.int64)
    s, emax, holes = (np.empty(n, dtype=np.int64) for _ in range(3))
    got = fn(n, _p(starts), _p(ends), _p(bounds), len(pos), _p(pos), _p(s), _p(emax), _p(holes))
    return None if got < 0 else (s, emax, holes)


def coverage_prefix(
    starts: np.ndarray, ends: np.ndarray, order: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The starts in ``order`` (None: as they are), ``emax`` and ``holes`` of
    :func:`.coverage.union_coverage` (int64), in one pass where the reference gathers and
    accumulates in seven; or None."""
    fn = _function("coverage_prefix")
    if fn is None or not _exact(np.int64, starts, ends):
        return None
    if not _same_length(starts, ends):
        return None
    if order is not None and not (_ints(order) and len(order) == len(starts)):
        return None
    n = len(starts)
    s, emax, holes = (np.empty(n, dtype=np.int64) for _ in range(3))
    rows = (None, 8) if order is None else (_p(order), order.dtype.itemsize)
    got = fn(n, _p(starts), _p(ends), *rows, _p(s), _p(emax), _p(holes))
    return None if got < 0 else (s, emax, holes)


def _strided(a: np.ndarray) -> int | None:
    """The stride of ``a`` in elements where it is 1 (contiguous) or 0 (one value repeated:
    :func:`.memory.one_value_view`), else None."""
    if not isinstance(a, np.ndarray) or a.ndim != 1:
        return None
    if len(a) <= 1 or a.strides[0] == a.dtype.itemsize:
        return 1
    return 0 if a.strides[0] == 0 else None


def _launch_strides(pid, corr, a_start, a_gtid, start, tid) -> tuple[int, int] | None:
    """The strides of ``pid`` and ``a_gtid`` (:func:`_strided`) where the columns of a launch
    lookup are what its C loops read (the operations' pid and id, the calls' start and
    globalTid, the results' start and thread), else None."""
    pid_stride, gtid_stride = _strided(pid), _strided(a_gtid)
    if (
        pid_stride is None
        or gtid_stride is None
        or pid.dtype.kind != "i"
        or a_gtid.dtype != np.int64
        or not (_ints(corr) and _exact(np.int64, a_start))
        or not (_exact(np.float64, start) and _exact(np.int32, tid))
        or len(a_gtid) != len(a_start)
        or not _same_length(pid, corr, start, tid)
    ):
        return None
    return pid_stride, gtid_stride


def launch_lookup(
    pid: np.ndarray,
    corr: np.ndarray,
    tables,
    a_start: np.ndarray,
    a_gtid: np.ndarray,
    start: np.ndarray,
    tid: np.ndarray,
) -> bool:
    """Fill ``start`` (float64, NaN where no call) and ``tid`` (int32, -1) of each operation
    (``pid``, ``corr``) from the calls' starts and globalTids, looked up in ``tables``
    (:class:`.callrows.IdTables`), as :meth:`.loader.Trace.launches` does; False where the C
    loop cannot (``start`` and ``tid`` then as they were)."""
    fn = _function("launch_lookup")
    table = tables.table
    strides = _launch_strides(pid, corr, a_start, a_gtid, start, tid)
    if (
        fn is None
        or strides is None
        or not _ints(table)
        or not _exact(np.int64, tables.pids, tables.lows, tables.spans, tables.bases)
        or not len(tables.pids)
    ):
        return False
    pid_stride, gtid_stride = strides
    got = fn(
        len(pid), _p(pid), pid.dtype.itemsize, pid_stride, _p(corr), corr.dtype.itemsize,
        len(tables.pids), _p(tables.pids), _p(tables.lows), _p(tables.spans), _p(tables.bases),
        _p(table), table.dtype.itemsize, len(table), len(a_start), _p(a_start),
        _p(a_gtid), gtid_stride, _p(start), _p(tid),
    )  # fmt: skip
    if got < 0:
        start[:] = np.nan
        tid[:] = -1
        return False
    return True


FAR_FROM_SORTED = 16
"""Keys of which more than one in this many is smaller than the one before are far from
sorted (:func:`_search_order`)."""


def _search_order(keys: np.ndarray) -> np.ndarray | None:
    """An order that sorts ``keys`` (equal ones in any order) where they are far from sorted
    (:data:`FAR_FROM_SORTED`), else None: for the C loops that search each key from the last
    one's place (a gallop: a few steps between near keys, a cache miss each between random
    ones). An export's operations come nearly in launch order; nsys 2025.6 no longer promises
    any order of the rows, and a 2 M operations' export with its rows shuffled spent 2.1 s in
    :func:`sorted_lookup` (0.1 s in order) before its keys were looked up sorted."""
    n = len(keys)
    if n < 1024 or np.count_nonzero(keys[1:] < keys[:-1]) <= n // FAR_FROM_SORTED:
        return None
    return np.argsort(keys)


def sorted_lookup(
    pid: np.ndarray,
    corr: np.ndarray,
    ids,
    a_start: np.ndarray,
    a_gtid: np.ndarray,
    start: np.ndarray,
    tid: np.ndarray,
) -> bool:
    """:func:`launch_lookup` where the calls are looked up in ``ids`` (:class:`.loader
    .SortedIds`: one process' increasing, sparse correlation ids): each operation's id found
    from the previous one's place (a gallop, then halving) rather than by a search from the
    middle of every call; False where the C loop cannot (``start`` and ``tid`` as they were)."""
    fn = _function("sorted_lookup")
    a_corr = ids.ids
    strides = _launch_strides(pid, corr, a_start, a_gtid, start, tid)
    if fn is None or strides is None or not _ints(a_corr) or len(a_corr) != len(a_start):
        return False
    if (order := _search_order(corr)) is not None:  # (looked up sorted, given back in place)
        own_start, own_tid = start[order], tid[order]  # (a miss leaves them as they were)
        own_pid = pid if pid.strides == (0,) else pid[order]
        if not sorted_lookup(own_pid, corr[order], ids, a_start, a_gtid, own_start, own_tid):
            return False
        start[order], tid[order] = own_start, own_tid
        return True
    pid_stride, gtid_stride = strides
    fn(
        len(pid), _p(pid), pid.dtype.itemsize, pid_stride, _p(corr), corr.dtype.itemsize,
        int(ids.pid), _p(a_corr), a_corr.dtype.itemsize, len(a_corr), _p(a_start),
        _p(a_gtid), gtid_stride, _p(start), _p(tid),
    )  # fmt: skip
    return True


def interval_lookup(t: np.ndarray, starts: np.ndarray, ends: np.ndarray, out: np.ndarray) -> bool:
    """Fill ``out`` (int32 or int64) with :func:`.steps.interval_index` of each launch time
    ``t`` (float64 ns, whole) among the intervals (``starts`` sorted, ``ends``; int64), each
    searched from the last one's place, as :func:`.steps._lookup_runs` would; False where the
    C loop cannot (``out`` then undefined: the reference fills it)."""
    fn = _function("interval_lookup")
    if (
        fn is None
        or not (_exact(np.float64, t) and _exact(np.int64, starts, ends))
        or not (_exact(np.int32, out) or _exact(np.int64, out))
        or not _same_length(t, out)
        or len(starts) != len(ends)
    ):
        return False
    if (order := _search_order(t)) is not None:  # (looked up sorted, given back in place)
        own = np.empty_like(out)
        if not interval_lookup(t[order], starts, ends, own):
            return False
        out[order] = own
        return True
    got = fn(len(t), _p(t), len(starts), _p(starts), _p(ends), _p(out), out.dtype.itemsize)
    return got >= 0


def covered_at(
    s: np.ndarray, emax: np.ndarray, holes: np.ndarray, q: np.ndarray
) -> np.ndarray | None:
    """:func:`.coverage.union_coverage`'s answer at the float times ``q`` from its whole prefix
    (``s``, ``emax``, ``holes``: int64, ``s`` sorted and not empty), each time searched from the
    last one's place; None where the C loop cannot (the reference then runs)."""
    fn = _function("covered_at")
    if (
        fn is None
        or not (_exact(np.int64, s, emax, holes) and _exact(np.float64, q))
        or not _same_length(s, emax, holes)
        or not len(s)
    ):
        return None
    out = np.empty(len(q), dtype=np.float64)
    got = fn(len(s), _p(s), _p(emax), _p(holes), len(q), _p(q), _p(out))
    return None if got < 0 else out


def api_counts(
    start: np.ndarray,
    name: np.ndarray,
    family: np.ndarray,
    s_start: np.ndarray,
    s_end: np.ndarray,
    counts: np.ndarray,
) -> bool:
    """Add to ``counts`` (int64, families x steps) the calls (``start``, ``name`` id) whose
    name's ``family`` (int8 per name id, -1 none) is one and whose start lies in a step
    [``s_start``, ``s_end``) (steps sorted and not overlapping), as
    :func:`.metrics._api_metrics` counts them; False where the C loop cannot (``counts`` then
    as they were)."""
    fn = _function("api_counts")
    if (
        fn is None
        or not (_exact(np.int64, start, s_start, s_end, counts) and _ints(name))
        or not _exact(np.int8, family)
        or not _same_length(start, name)
        or len(s_start) != len(s_end)
        or counts.ndim != 2
        or counts.shape[1] != len(s_start)
        or (len(family) and int(family.max()) >= counts.shape[0])
    ):
        return False
    before = counts.copy()
    got = fn(len(start), _p(start), _p(name), name.dtype.itemsize, _p(family), len(family),
             len(s_start), _p(s_start), _p(s_end), _p(counts))  # fmt: skip
    if got < 0:
        counts[:] = before
        return False
    return True


def nesting_depth(start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """:func:`.composition._nesting_depth` of the ranges (``start``, ``end``: int64, in their
    order) in C, or None where it cannot run."""
    fn = _function("nesting_depth")
    if fn is None or not _exact(np.int64, start, end) or not _same_length(start, end):
        return None
    depth, stack = np.empty(len(start), dtype=np.int64), np.empty(len(start), dtype=np.int64)
    fn(len(start), _p(start), _p(end), _p(depth), _p(stack))
    return depth


class DeviceScatter:
    """:func:`.devices.by_device`'s reordering in C: each column's rows moved to their device's
    stretch in one pass (numpy gathers every column by an order of the rows: 0.85 s for the
    8 M GPU operations of 4 ranks). ``device``: the device of each row (integers), ``ids``
    the devices in order and ``counts`` their rows; :attr:`fn` is None, and :meth:`column`
    None, where the C loops cannot run (the reference's gather then: :attr:`rows`)."""

    def __init__(self, device: np.ndarray, ids: np.ndarray, counts: np.ndarray | None = None):
        self.fn = _function("scatter_rows")
        self.device, self.ids = device, ids
        self.lo = int(ids[0]) if len(ids) else 0
        span = int(ids[-1]) - self.lo + 1 if len(ids) else 0
        slots = _function("device_slots")
        if slots is None or not _ints(device) or not 0 < len(ids) <= 256 or span > 1 << 16:
            self.fn = None  # (device ids far apart: no table of their range; the reference)
            span = 0
        self.slot_of = np.full(span, -1, dtype=np.int32)
        if span:
            self.slot_of[ids - self.lo] = np.arange(len(ids), dtype=np.int32)
        if self.fn is not None:
            self.slot = np.empty(len(device), dtype=np.uint8)
            args = (_p(device), device.dtype.itemsize, self.lo, _p(self.slot_of), span)
            if slots(len(device), *args, _p(self.slot)) < 0:
                self.fn = None
        if self.fn is not None:
            # the rows of each place, counted from the slots the moves read: the stretches
            # hold them exactly (``counts`` given: they must be these)
            made = np.zeros(len(ids), dtype=np.int64)
            for a in range(0, len(self.slot), CHUNK_ROWS):  # (np.bincount takes its input as
                # int64: one temporary of every row's slot, 152 MiB at 20 M, at the peak)
                made += np.bincount(self.slot[a : a + CHUNK_ROWS], minlength=len(ids))
            if counts is not None and not np.array_equal(made, counts):
                self.fn = None
            counts = made if counts is None else counts
        if counts is None:  # (no C slots: the reference's count of each device's rows)
            counts = distinct_counts(device)[1]
        self.counts = np.asarray(counts, dtype=np.int64)
        """The rows of each of ``ids``, in their order."""
        self.starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)
        if self.fn is not None and int(np.sum(self.counts)) != len(device):
            self.fn = None
        self.n = len(device)
        if self.fn is not None:  # (the slots say it all: the device ids' column not held on
            self.device = None  # while the columns move, 80 MB at 20 M operations)

    @functools.cached_property
    def rows(self) -> np.ndarray:
        """The order of the rows that puts each device's together: the reference, whose
        gather of each column :func:`.devices.by_device` makes where :meth:`column` cannot."""
        small = np.int32 if self.n < np.iinfo(np.int32).max else np.int64
        if self.device is None:  # (each row's place among ``ids``: its slot)
            return np.argsort(self.slot, kind="stable").astype(small)
        return np.concatenate([np.flatnonzero(self.device == d).astype(small) for d in self.ids])

    def places(self, rows: np.ndarray) -> np.ndarray:
        """Where the rows ``rows`` (increasing) are once moved (int64): in one C pass over the
        slots (``scatter_places``), else the reference, each row's place in :attr:`rows`."""
        fn = _function("scatter_places")
        if self.fn is not None and fn is not None and _ints(rows) and rows.dtype.itemsize >= 4:
            rows = np.ascontiguousarray(rows)
            out, pos = np.empty(len(rows), dtype=np.int64), self.starts.copy()
            w = rows.dtype.itemsize
            if fn(self.n, _p(self.slot), _p(pos), len(rows), _p(rows), w, _p(out)) == 0:
                return out
        place = np.empty(self.n, dtype=np.int64)
        place[self.rows] = np.arange(self.n)
        return place[rows]

    def column(self, values: np.ndarray, give_back: bool = False) -> np.ndarray | None:
        """``values`` with each device's rows together in a new array, or None (``values`` as
        it was). ``give_back``: ``values``' pages go back as the move reads through it (a
        stretch of :data:`.pagerelease.STRETCH_BYTES` at a time, :func:`.pagerelease.read_once`:
        the new array's pages are written in as the old one's go), ``values`` not to be read
        again."""
        if self.fn is None or not isinstance(values, np.ndarray) or values.ndim != 1:
            return None
        if not values.flags.c_contiguous or values.dtype.itemsize not in (1, 2, 4, 8):
            return None
        if len(values) != self.n or values.dtype.hasobject:
            return None
        out = np.empty_like(values)
        pos = self.starts.copy()
        w = values.dtype.itemsize
        step = max(1, STRETCH_BYTES // w) if give_back else max(1, len(values))
        for part in read_once(values, step, give_back):
            a, b = part.start, min(len(values), part.stop)
            if self.fn(b - a, _at(self.slot, a), _p(pos), _at(values, a), w, _p(out)) < 0:
                return None  # (not a width it moves: checked above, before any page went)
        return out


def distinct_counts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``values`` (integers), in order, and how many rows hold each, in numpy:
    counted without a sort where they span under 65 536 (device ids), else ``np.unique``."""
    if not len(values):
        return values[:0], np.zeros(0, dtype=np.int64)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo < 1 << 16:
        counts = np.bincount(values - values.dtype.type(lo))
        ids = np.flatnonzero(counts)
        return ids + lo, counts[ids]
    return np.unique(values, return_counts=True)


def present_values(values: np.ndarray, lo: int, hi: int) -> np.ndarray | None:
    """The distinct ``values`` (integers from ``lo`` to ``hi``), in order, by one C pass
    (``codes_present``) without a temporary of every value's (numpy's ``np.bincount(values -
    lo)`` makes two: 20-90 ms at 8 M device ids here); None where the loop cannot run."""
    fn = _function("codes_present")
    if fn is None or not _ints(values):
        return None
    present = np.zeros(hi - lo + 1, dtype=np.uint8)
    if fn(len(values), _p(values), values.dtype.itemsize, lo, hi - lo + 1, _p(present)) < 0:
        return None
    return np.flatnonzero(present) + lo


def dense_inverse(codes: np.ndarray, lo: int, hi: int, index_dtype) -> tuple | None:
    """``np.unique(codes, return_inverse=True)`` of codes between ``lo`` and ``hi``, the
    inverse as ``index_dtype`` of the number of distinct codes (a callable: n -> dtype), in
    two C passes (:func:`.opnames.unique_inverse`, whose numpy passes are the reference);
    or None."""
    present_fn, remap_fn = _function("codes_present"), _function("codes_remap")
    if present_fn is None or remap_fn is None or not _ints(codes):
        return None
    span, w = hi - lo + 1, codes.dtype.itemsize
    present = np.zeros(span, dtype=np.uint8)
    if present_fn(len(codes), _p(codes), w, lo, span, _p(present)) < 0:
        return None
    uniq = np.flatnonzero(present) + lo
    dtype = np.dtype(index_dtype(len(uniq)))
    position = np.cumsum(present, dtype=np.int64) - 1
    inverse = np.empty(len(codes), dtype=dtype)
    got = remap_fn(len(codes), _p(codes), w, lo, span, _p(position), _p(inverse), dtype.itemsize)
    return None if got < 0 else (uniq, inverse)
