"""How much of a time range the union of many GPU operations covers, fast and in bounded memory.

``busy_us`` of a step window and ``gap_busy_us`` of a gap (:mod:`specscope.analysis.metrics`,
:mod:`specscope.analysis.gaps`) are the length of the union of the device's operations inside
an interval. :func:`union_coverage` sorts the operations by start once and keeps a prefix (the
furthest end so far and the holes before each start), so that the covered time before any
instant is a binary search; :func:`ops_coverage` builds it once per :class:`Steps` and shares
it between the metrics. Above :data:`WHOLE_COVERAGE_MAX` operations each query is a chunked
pass over the prefix instead (memory bounded by ``CHUNK_ROWS``).
"""

from __future__ import annotations

import numpy as np

from specscope.analysis import opsums, parallel
from specscope.analysis.memory import CHUNK_ROWS, one_valued
from specscope.analysis.parallel import beside

WHOLE_COVERAGE_MAX = 1 << 22
"""Up to this many operations (4 M), :func:`ops_coverage` keeps the whole prefix (three arrays of
the operations' size: 100 MB at 4 M) and answers every later query without another pass."""


def ops_coverage(steps):
    """:func:`union_coverage` of ``steps.ops``, built once per :class:`Steps` (the window and
    the gap metrics both query it). Up to :data:`WHOLE_COVERAGE_MAX` operations the prefix
    arrays are kept whole and each query costs a binary search; above, each query is a chunked
    pass (bounded memory)."""
    cache = steps.__dict__
    if "_coverage" not in cache:
        cache["_coverage"] = _coverage_of(*_times(steps))
    return cache["_coverage"]


def coverage_beside(steps, work, trace=None):
    """``work()``, with :func:`ops_coverage` of ``steps`` built meanwhile on a second thread
    (:func:`.parallel.beside`: large exports): most of its time is numpy's sort and
    accumulations, which let go of the GIL, so on two cores the two overlap (20 M ops: 0.5 s
    of 0.7 s). Where :func:`coverage_ahead` of ``trace`` started the build of these very
    operations, that one. The same coverage either way; an error of either is raised."""
    if "_coverage" in steps.__dict__:
        return work()
    starts, ends = _times(steps)  # (frame read on this thread)
    built = _taken_ahead(trace, starts, ends)
    if built is None:
        whole = len(starts) <= WHOLE_COVERAGE_MAX and _few_in_all(trace)
        built = beside(len(steps.ops), _coverage_of, starts, ends, whole)
    try:
        result = work()
    finally:
        covered = built.result()
    steps.__dict__["_coverage"] = covered
    return result


def coverage_ahead(trace) -> None:
    """Start building the coverage of every operation of ``trace`` on a second thread now,
    where they are all of one device (the steps' operations will be those, the frame's own
    columns) and few enough for the whole prefix (:data:`WHOLE_COVERAGE_MAX`), for
    :func:`coverage_beside` to take: the steps are found meanwhile. Built beside the counts
    alone (0.02 s at 2 M ops), the coverage (0.04-0.12 s: the tables' sorted runs merged into
    three arrays, 48 MB) kept the metrics waiting. Left to :func:`dropped_ahead` where no
    analysis takes it."""
    ops = trace.ops
    n = len(ops)
    wanted = max(parallel.BESIDE_MIN_ROWS, 1) <= n <= WHOLE_COVERAGE_MAX  # (a thread: large)
    if "_coverage_ahead" in trace.__dict__ or not wanted:
        return
    if not one_valued(ops["device_id"].to_numpy()):
        return  # (several devices: each analysis' operations are its device's)
    starts, ends = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
    trace.__dict__["_coverage_ahead"] = (starts, ends, beside(n, _coverage_of, starts, ends))


def dropped_ahead(trace) -> None:
    """Drop what :func:`coverage_ahead` started for ``trace`` and no analysis took."""
    trace.__dict__.pop("_coverage_ahead", None)


def _taken_ahead(trace, starts: np.ndarray, ends: np.ndarray):
    """The build :func:`coverage_ahead` started, where it is of ``starts`` and ``ends`` (the
    same memory), else None; taken once."""
    ahead = None if trace is None else trace.__dict__.pop("_coverage_ahead", None)
    if ahead is None or not (_same(ahead[0], starts) and _same(ahead[1], ends)):
        return None
    return ahead[2]


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are views of the same elements."""
    ai, bi = a.__array_interface__, b.__array_interface__
    return (ai["data"], ai["shape"], ai["strides"], ai["typestr"]) == (
        bi["data"], bi["shape"], bi["strides"], bi["typestr"]
    )  # fmt: skip


def _times(steps) -> tuple[np.ndarray, np.ndarray]:
    ops = steps.ops
    return ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()


def _few_in_all(trace) -> bool:
    """Whether the export of ``trace`` (None: not known) holds at most
    :data:`WHOLE_COVERAGE_MAX` operations in all. Each process of a larger one (a TP server's
    ranks, analysed two at a time: :mod:`.eachprocess`) queries its coverage by chunked passes,
    however few its own operations: two whole prefixes side by side were 114 MiB of the
    analysis' peak at 8 ranks of 2.5 M operations (``bench/README.md``, twenty-second
    session), two chunked passes over a rank's operations 0.02-0.05 s."""
    return trace is None or len(trace.ops) <= WHOLE_COVERAGE_MAX


def _coverage_of(starts: np.ndarray, ends: np.ndarray, whole: bool | None = None):
    """:func:`union_coverage` of the operations, its prefix kept whole where ``whole`` (None:
    where they are at most :data:`WHOLE_COVERAGE_MAX`), else queried by chunked passes."""
    if whole is None:
        whole = len(starts) <= WHOLE_COVERAGE_MAX
    return union_coverage(starts, ends, len(starts) if whole else CHUNK_ROWS)


def union_coverage(starts: np.ndarray, ends: np.ndarray, chunk: int = CHUNK_ROWS):
    """Return ``covered(t)``: length of the union of the intervals that lies before ``t``.

    In start order, ``emax[i]`` is the end of the union of intervals 0..i, and ``holes[i]`` the
    total idle time inside it: the union of 0..i covers ``emax[i] - s[0] - holes[i]``. An
    interval that starts after all earlier ones ended leaves a hole of ``s[i] - emax[i - 1]``.
    The intervals that start by ``t`` (0..i) cover their union less what lies after ``t`` (all
    of it one stretch from ``t`` to ``emax[i]``, since each covers from its start <= t on).

    Memory: only the start order is kept (int32, or a :class:`MergedOrder`; none when
    ``starts`` is sorted); each call of ``covered`` works through it in chunks of ``chunk``
    intervals, carrying ``emax`` and ``holes`` from chunk to chunk, so no array of the whole
    size is built per call (on 20 M GPU ops, three of them were 0.5 GB). Pass all the times of
    interest in one call.
    """
    if len(starts) == 0:
        return lambda t: np.zeros(len(t))
    n = len(starts)
    dtype = np.result_type(starts, ends)
    if chunk >= n and (merged := opsums.coverage_merged(starts, ends)) is not None:
        return _covered_whole(*merged, dtype)  # (a few sorted runs merged in C: opsums.py)
    order = start_order(starts, merged=chunk < n)
    first = starts[0] if order is None else starts[order[0]]
    if chunk >= n:  # one chunk: the prefix is built once, each query a binary search
        order = None if order is None else np.asarray(order)
        if (fast := opsums.coverage_prefix(starts, ends, order)) is not None:
            s, emax, holes = fast  # (one C loop: opsums.py; what follows is its reference)
        else:
            s = starts if order is None else starts[order]
            emax, holes = _prefix(s, ends if order is None else ends[order], None, 0, dtype)
        return _covered_whole(s, emax, holes, dtype)

    def covered(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t)
        out = np.zeros(len(t), dtype=np.result_type(dtype, t))
        by_time = np.argsort(t, kind="stable")
        t_sorted = t[by_time]
        emax_before, holes_before = None, 0
        for lo in range(0, n, chunk):
            rows = slice(lo, lo + chunk) if order is None else order[lo : lo + chunk]
            s = starts[rows]
            emax, holes = _prefix(s, ends[rows], emax_before, holes_before, dtype)
            # the times whose last interval starting by them is in this chunk
            nxt = lo + chunk
            upper = None if nxt >= n else starts[nxt if order is None else order[nxt]]
            a = np.searchsorted(t_sorted, s[0], side="left")
            b = len(t_sorted) if upper is None else np.searchsorted(t_sorted, upper, "left")
            if b > a:
                out[by_time[a:b]] = _covered_at(s, emax, holes, first, t_sorted[a:b])
            emax_before, holes_before = emax[-1], holes[-1]
        return out

    return covered


def _covered_whole(s: np.ndarray, emax: np.ndarray, holes: np.ndarray, dtype):
    """:func:`union_coverage`'s ``covered`` from the whole prefix (starts ``s`` in order)."""

    def covered_whole(t: np.ndarray) -> np.ndarray:
        t = np.asarray(t)
        if (fast := opsums.covered_at(s, emax, holes, t)) is not None:
            return fast  # (one C loop, each time searched from the last: opsums.py; what
            # follows is its reference)
        out = np.zeros(len(t), dtype=np.result_type(dtype, t))
        some = t >= s[0]  # before the first start: nothing covered yet
        out[some] = _covered_at(s, emax, holes, s[0], t[some])
        return out

    return covered_whole


def start_order(starts: np.ndarray, merged: bool = False) -> np.ndarray | MergedOrder | None:
    """``np.argsort(starts, kind="stable")`` as int32 (where under 2**31 rows), None when
    ``starts`` is sorted already.

    GPU operations come table by table (kernels, then memcpys, memsets), each table in start
    order: a few sorted runs, one of them most of the rows. Above :data:`WHOLE_COVERAGE_MAX`
    rows, or where ``merged`` (a chunked coverage: each rank of a large export's, whose
    memory two analyses at once hold), the other rows are sorted alone and merged into the
    longest run, which is never sorted nor searched: the order is a :class:`MergedOrder`, which
    gives any stretch of it from the few rows of the rest (20 M ops: no order of the whole
    size, 80 MB, nor a sort buffer of it; 2.5 M: 29 MiB less at once). Below, the sort is
    faster (4 against 18 ms at 2 M)."""
    n = len(starts)
    breaks = _breaks(starts)
    if not len(breaks):
        return None
    dtype = np.int32 if n < np.iinfo(np.int32).max else np.int64
    bounds = np.r_[0, breaks + 1, n]
    longest = int(np.argmax(np.diff(bounds)))
    a, b = int(bounds[longest]), int(bounds[longest + 1])
    if (n <= WHOLE_COVERAGE_MAX and not merged) or 2 * (b - a) < n:  # (no run of most: a sort)
        return np.argsort(starts, kind="stable").astype(dtype, copy=False)
    rest = np.r_[np.arange(a, dtype=dtype), np.arange(b, n, dtype=dtype)]
    rest = rest[np.argsort(starts[rest], kind="stable")]
    run, rest_starts = starts[a:b], starts[rest]
    ins = np.where(
        rest < a,
        np.searchsorted(run, rest_starts, side="left"),
        np.searchsorted(run, rest_starts, side="right"),
    )
    return MergedOrder(n, a, rest, ins + np.arange(len(rest)))


def _breaks(starts: np.ndarray) -> np.ndarray:
    """The rows after which ``starts`` decreases, a chunk at a time (no mask of every row's:
    20 MB at 20 M ops)."""
    found = [np.zeros(0, dtype=np.int64)]
    for lo in range(0, len(starts) - 1, CHUNK_ROWS):
        hi = min(lo + CHUNK_ROWS, len(starts) - 1)
        found.append(np.flatnonzero(starts[lo + 1 : hi + 1] < starts[lo:hi]) + lo)
    return np.concatenate(found)


class MergedOrder:
    """The start order of :func:`start_order`'s merge: the rows ``a..`` of the longest sorted
    run, and the ``rest`` (the other rows, in start order) each at its position in the
    order, ``at`` (strictly increasing). Each row of the rest goes before the run's rows from
    its insertion point on (equal starts: rows before the run go before the run's, rows after
    it after), so::

        rest row j -> position at[j] = j + (its insertion point in the run)
        run rows   -> the other positions, in order

    Indexing with a slice gives that stretch of the order as an array, with an int one row;
    ``np.asarray`` all of it."""

    def __init__(self, n: int, a: int, rest: np.ndarray, at: np.ndarray):
        self.n, self.a, self.rest, self.at = n, a, rest, at

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key):
        if isinstance(key, slice):
            lo, hi, step = key.indices(self.n)
            if step != 1:
                raise ValueError("a MergedOrder is sliced in order")
            return self._rows(lo, max(lo, hi))
        i = key + self.n if key < 0 else key
        if not 0 <= i < self.n:
            raise IndexError(key)
        return self._rows(i, i + 1)[0]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        rows = self._rows(0, self.n)
        return rows if dtype is None else rows.astype(dtype)

    def _rows(self, lo: int, hi: int) -> np.ndarray:
        """The rows at positions lo..hi of the order."""
        j0, j1 = np.searchsorted(self.at, [lo, hi], side="left")
        out = np.empty(hi - lo, dtype=self.rest.dtype)
        of_rest = np.zeros(hi - lo, dtype=bool)
        of_rest[self.at[j0:j1] - lo] = True
        out[of_rest] = self.rest[j0:j1]
        # the run's rows before lo: the positions before lo less the rest's there (j0)
        out[~of_rest] = np.arange(self.a + lo - j0, self.a + hi - j1, dtype=out.dtype)
        return out


def _prefix(s: np.ndarray, e: np.ndarray, emax_before, holes_before, dtype):
    """``emax`` and ``holes`` (:func:`union_coverage`) of intervals in start order (``s``,
    ``e``), continuing those of the intervals before them (``emax_before`` None: none)."""
    emax = np.maximum.accumulate(e)
    holes = np.empty(len(s), dtype=dtype)
    if emax_before is None:
        holes[0] = 0
    else:
        np.maximum(emax, emax_before, out=emax)
        holes[0] = max(s[0] - emax_before, 0)
    np.subtract(s[1:], emax[:-1], out=holes[1:])
    np.maximum(holes, 0, out=holes)
    np.cumsum(holes, out=holes)
    holes += holes_before
    return emax, holes


def _covered_at(s, emax, holes, first, q: np.ndarray) -> np.ndarray:
    """Covered time before each ``q`` (each at or after ``s[0]``) from the prefix of the
    intervals starting ``s`` (:func:`union_coverage`)."""
    j = np.searchsorted(s, _as_times_of(s, q), side="right") - 1
    end = emax[j]
    return (end - first) - holes[j] - np.maximum(end - q, 0)


def _as_times_of(s: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``q`` for a binary search in the integer times ``s``: float times (the windows' and
    gaps' bounds, NaN-free here) as their floor in int64, which has the same place among
    integers, where numpy would convert all of ``s`` to float64 for each search (2 M GPU ops:
    22 ms a search, 16 MB each); other times as they are."""
    if q.dtype.kind != "f" or s.dtype.kind not in "iu" or not len(q):
        return q
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    if not (lo < q.min() and q.max() < hi):  # (beyond int64: a comparison as numpy makes it)
        return q
    return np.floor(q).astype(np.int64)
