"""The CUDA API call that launched each GPU operation: lookups by (process, correlation id).

A GPU operation and the call that launched it share a correlation id within one process
(CUPTI numbers each process' calls on its own), so a pair (pid, correlation id) finds the call.
:meth:`.loader.Trace.launches` looks up many pairs with one of these lookups, chosen once for
an export's calls (:func:`call_rows`):

- each process' ids dense, none twice: a table per process indexed by id (:class:`IdTables`);
- one process' ids in order but sparse (an eager PyTorch export): a search among the ids as
  they are (:class:`SortedIds`);
- else a search among the calls sorted by pair.

A few pairs (a step marker's launches: under 1/:data:`FEW_CALLS` of the calls) are found
without a table of every call (:func:`rows_of_few`). The calls of several processes (the
ranks of a tensor-parallel server) are put together per process once (:func:`calls_by_process`),
each one's then a stretch (:func:`process_stretches`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from specscope.analysis.devices import grouped_rows
from specscope.analysis.memory import CHUNK_ROWS, dense, few_distinct, increasing, one_valued
from specscope.analysis.opsread import PID_MASK as _PID_MASK

if TYPE_CHECKING:
    import pandas as pd

    from specscope.analysis.loader import Trace


FEW_CALLS = 16
"""Launch calls looked up for fewer than 1/16 of the calls are found by :func:`rows_of_few`."""


def rows_of_few(
    a_gtid: np.ndarray,
    a_corr: np.ndarray,
    pid: np.ndarray,
    corr: np.ndarray,
    in_id_order: bool | None = None,
) -> np.ndarray:
    """:func:`call_rows` ``(pid(a_gtid), a_corr)(pid, corr)`` for a few pairs: the calls
    whose correlation id is one asked for, found in one pass (``np.isin``), then the pairs
    among those; a search each where one process' ids are in order (``in_id_order``:
    :func:`ids_increasing`, worked out when None). No table or sort of every call (an eager
    export's step marker: 11 k of its 4 M calls). The same rows: every call of an asked pair
    is among those, in their order."""
    a_pid = call_pids(a_gtid)
    if ids_increasing(a_pid, a_corr) if in_id_order is None else in_id_order:  # (a search each)
        return SortedIds(int(a_pid[0]), a_corr)(pid, corr)
    found = np.flatnonzero(np.isin(a_corr, corr[corr > 0]))
    rows = call_rows(a_pid[found], a_corr[found])(pid, corr)
    hit = rows >= 0
    rows[hit] = found[rows[hit]]
    return rows


def call_rows(
    a_pid: np.ndarray,
    a_corr: np.ndarray,
    in_id_order: bool | None = None,
    stretches: dict[int, slice] | None = None,
):
    """Return ``rows(pid, corr)``: for each (pid, corr > 0), the first row of the API calls
    (a_pid, a_corr) with the same pair, -1 if none. Pairs are compared as ``pid << 38 | corr``.
    ``in_id_order``: :func:`ids_increasing` of the calls, worked out when None; ``stretches``:
    each process' rows where its calls are one stretch (:func:`process_stretches`).

    Each process' correlation ids dense and none twice: a table indexed by process and id, one
    stretch per process, no sort, no search (:func:`_id_tables`). One process' ids in order but
    sparse (an eager PyTorch export): a search among them as they are
    (:class:`SortedIds`). Else the pairs are searched among the calls sorted by pair (by
    process alone where that sorts them: :func:`_key_order`)."""
    if not len(a_pid):
        return lambda pid, corr: np.full(len(pid), -1, dtype=np.int64)
    by_table = _id_tables(a_pid, a_corr, stretches=stretches)
    if by_table is not None:
        return by_table
    if ids_increasing(a_pid, a_corr) if in_id_order is None else in_id_order:
        return SortedIds(int(a_pid[0]), a_corr)
    a_keys = (a_pid << CORR_BITS) | a_corr
    order = _key_order(a_pid, a_keys)
    sorted_keys = a_keys if order is None else a_keys[order]

    def by_search(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        keys = (pid.astype(np.int64) << CORR_BITS) | corr
        i = np.clip(np.searchsorted(sorted_keys, keys), 0, len(sorted_keys) - 1)
        hit = (corr > 0) & (sorted_keys[i] == keys)
        return np.where(hit, i if order is None else order[i], -1)

    return by_search


def call_pids(a_gtid: np.ndarray) -> np.ndarray:
    """The process of each CUDA API call, from its globalTid; one element repeated (a view)
    where the calls are all of one thread (:func:`.memory.one_value_view`: a shift of the
    view would make an array of every call's, 8 bytes each)."""
    if a_gtid.strides == (0,) and len(a_gtid):
        return np.broadcast_to((a_gtid[:1] >> 24) & _PID_MASK, a_gtid.shape)
    pids = a_gtid >> 24
    pids &= _PID_MASK  # (in place: one array of every call's, not two)
    return pids


def calls_by_process(calls: list[np.ndarray]) -> list[np.ndarray]:
    """The CUDA API calls (the columns of :attr:`.loader.Trace._runtime`) with each process' calls
    together, the processes in pid order, each one's calls in the order they had (a stable
    sort by process); as they are where one process made them all, where each one's come
    together already, or where more than 64 processes made them.

    An export of tensor-parallel ranks holds their calls interleaved in time. Each rank's
    analysis reads its own process' calls several times (its API call counts, its thread's
    last call, the calls of its steps' views): a mask of every call, then a copy of its
    own, each time (4 ranks of 2 M GPU operations: 0.1 s of 1.3 s of analyses). Grouped,
    they are one stretch of the columns (:func:`process_stretches`), read in place; the
    reordering is :func:`.devices.grouped_rows`, one pass per column, each column's pages
    given back as it is read where ``calls`` alone held it (the list is emptied then)."""
    if process_stretches(calls[2]) is not None:  # (one process, or each one's together already)
        return calls
    pids = call_pids(calls[2])
    lo, hi = int(pids.min()), int(pids.max())
    if hi - lo < 1 << 16:  # (pids near one another, as a server's ranks are: counted, and
        pids -= lo  # each one's place looked up in a table of their range: no sort, and no
        present = np.flatnonzero(np.bincount(pids))  # temporary of every call's but these)
        if not 1 < len(present) <= 64:
            return calls
        place = np.zeros(hi - lo + 1, dtype=np.int8)  # (signed: the C moves read it)
        place[present] = np.arange(len(present), dtype=np.int8)
        index = place[pids]
    else:
        found = sorted(few_distinct(pids, 64) or [])
        if not 1 < len(found) <= 64:
            return calls
        index = np.searchsorted(np.array(found, dtype=pids.dtype), pids).astype(np.int8)
    del pids
    n = len(calls)
    columns = {"process": index} | {str(k): c for k, c in enumerate(calls)}
    calls.clear()  # (the columns the dict's alone: each given up as it moves)
    grouped = grouped_rows(columns, "process")
    return [grouped[str(k)] for k in range(n)]


def calls_in_id_order(calls: list[np.ndarray], stretches: dict[int, slice]) -> list[np.ndarray]:
    """The CUDA API calls (the columns of :attr:`.loader.Trace._runtime`, each process' calls
    one stretch: ``stretches``) with each process' calls in correlation id order, where they
    were not: a stable sort of that stretch, in place (equal ids keep their order).

    nsys writes one process' calls in id order, which the lookups of the operations' calls,
    the duplicate check and the views' searches count on for their fast paths
    (:class:`SortedIds`); nsys 2025.6 no longer promises any order of the rows, and a 2 M
    operations' export with its rows shuffled took 3x as long without this (the results are
    the same either way). One process' calls in order (the usual export) cost one pass over
    their ids."""
    for rows in stretches.values():
        if increasing(calls[3][rows], strict=False):
            continue
        order = _stable_order(calls[3][rows])
        for k, column in enumerate(calls):
            if column.strides == (0,):  # (a column of one value: the same in any order)
                continue
            if not column.flags.writeable:  # (a read's buffer: sorted in a copy)
                calls[k] = column = column.copy()
            column[rows] = column[rows][order]
    return calls


def _stable_order(ids: np.ndarray) -> np.ndarray:
    """``np.argsort(ids, kind="stable")``: where the ids fit 32 bits, by a plain sort of each
    id with its position below it (int64 keys, all distinct: equal ids stay in their order;
    4 M calls' ids in 0.09 s, where the stable argsort took 0.59 s)."""
    if not 0 < len(ids) < 1 << 32 or not -(1 << 31) <= int(ids.min()) <= int(ids.max()) < 1 << 31:
        return np.argsort(ids, kind="stable")
    keys = ids.astype(np.int64) << 32
    keys |= np.arange(len(ids), dtype=np.int64)
    keys.sort()
    keys &= 0xFFFFFFFF  # (the positions, in the ids' order)
    return keys


MOST_RUNS = 4096
"""More runs of one process' calls than this: :func:`process_stretches` looks no further."""


def process_stretches(gtid: np.ndarray) -> dict[int, slice] | None:
    """The rows of each process' CUDA API calls where each one's are together
    (:func:`calls_by_process`; one process: all of them), from the calls' globalTids
    ``gtid``; None where a process' calls are not one stretch. A chunk at a time (no array
    of every call's process: 320 MB at 40 M calls)."""
    n = len(gtid)
    if n == 0:
        return {}
    if gtid.strides == (0,):
        return {(int(gtid[0]) >> 24) & _PID_MASK: slice(0, n)}
    runs: list[list[int]] = []  # [pid, first row] of each run of one process' calls
    for lo in range(0, n, CHUNK_ROWS):
        pid = call_pids(gtid[lo : lo + CHUNK_ROWS])
        if not runs or int(pid[0]) != runs[-1][0]:
            runs.append([int(pid[0]), lo])
        breaks = np.flatnonzero(pid[1:] != pid[:-1]) + 1
        if len(runs) + len(breaks) > MOST_RUNS:
            return None  # (interleaved: no pass per run)
        runs += [[int(pid[at]), lo + at] for at in breaks.tolist()]
    if len({pid for pid, _ in runs}) < len(runs):
        return None  # (a process' calls in several runs: not grouped)
    ends = [first for _, first in runs[1:]] + [n]
    return {pid: slice(first, end) for (pid, first), end in zip(runs, ends, strict=True)}


def ids_increasing(a_pid: np.ndarray, a_corr: np.ndarray) -> bool:
    """Whether the calls are of one process, their correlation ids increasing (as nsys writes
    one process' calls): each id once, looked up as they are (:class:`SortedIds`)."""
    return bool(len(a_pid)) and one_valued(a_pid) and increasing(a_corr)


@dataclass(frozen=True, eq=False)
class SortedIds:
    """:func:`call_rows`'s lookup where every call is of process ``pid`` and their correlation
    ``ids`` increase (as nsys writes one process' calls), but sparsely (CUPTI gives ids to the
    driver calls it does not record: 6.5 ids per recorded call in an eager PyTorch export): a
    search among the ids as they are, without sorting them. Called as ``rows(pid, corr)`` (a
    search per pair, the reference); :func:`.opsums.sorted_lookup` finds each id from the
    last one's place in C."""

    pid: int
    ids: np.ndarray

    def __call__(self, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        a_corr = self.ids
        i = np.minimum(np.searchsorted(a_corr, corr), len(a_corr) - 1)
        hit = (corr > 0) & (pid == self.pid) & (a_corr[i] == corr)
        return np.where(hit, i, -1)


def _key_order(a_pid: np.ndarray, a_keys: np.ndarray) -> np.ndarray | None:
    """The stable order of the calls by key (``pid << 38 | corr``): None where they are in it
    already; by process alone where that sorts them (a few processes' calls interleaved, each
    in id order: a radix sort of their process' index), else by key."""
    if increasing(a_keys):
        return None
    pids = few_distinct(a_pid)
    if pids is not None:
        index = np.zeros(len(a_pid), dtype=np.uint8)  # each call's process, by pid order
        for k, p in enumerate(sorted(pids)):
            index[a_pid == p] = k
        order = np.argsort(index, kind="stable")
        if increasing(a_keys[order]):
            return order
    return np.argsort(a_keys, kind="stable")


def _id_tables(
    a_pid: np.ndarray,
    a_corr: np.ndarray,
    most: int = 64,
    stretches: dict[int, slice] | None = None,
):
    """:func:`call_rows`'s lookup by tables: per process (up to ``most``), the call rows
    indexed by correlation id from its lowest, one stretch of a table after another; None where
    a process' ids are not dense (:func:`.memory.dense`), out of range, or one is there twice.
    One process (the usual export) looks up without a search for its stretch; several (the
    ranks of a tensor-parallel server) find it by a search among their few pids.
    ``stretches``: each process' rows where its calls are one stretch
    (:func:`process_stretches`), found without a pass per process."""
    if stretches is not None:
        pids = list(stretches)
    else:
        pids = [int(a_pid[0])] if one_valued(a_pid) else few_distinct(a_pid, most)
    if not pids or not (0 <= int(a_corr.min()) and int(a_corr.max()) < 2**CORR_BITS):
        return None
    pids = np.sort(np.array(pids, dtype=np.int64))
    row_type = np.int32 if len(a_corr) < np.iinfo(np.int32).max else np.int64  # (half the
    # table: its pages are written once, then read at random)
    lows, spans, rows = [], [], []
    for p in pids:
        # (one process: every call, no copy of their ids, and its rows made only once the ids
        # are found dense: sparse ones, an eager export's, need no row of each call)
        if stretches is not None:
            mine = stretches[int(p)]
        else:
            mine = None if len(pids) == 1 else np.flatnonzero(a_pid == p)
        ids = a_corr if mine is None else a_corr[mine]
        lo, hi = int(ids.min()), int(ids.max())
        if not dense(hi - lo + 1, len(ids)):
            return None
        lows.append(lo)
        spans.append(hi - lo + 1)
        rows.append((mine, ids))
    bases = np.concatenate([[0], np.cumsum(spans)[:-1]]).astype(np.int64)
    table = np.full(int(sum(spans)), -1, dtype=row_type)
    for base, lo, (mine, ids) in zip(bases, lows, rows, strict=True):
        if mine is None:
            mine = np.arange(len(a_corr), dtype=row_type)
        elif isinstance(mine, slice):
            mine = np.arange(mine.start, mine.stop, dtype=row_type)
        table[np.subtract(ids, lo - int(base), dtype=np.int64)] = mine
    if np.count_nonzero(table >= 0) != len(a_corr):  # an id twice: not exact
        return None
    return IdTables(pids, np.array(lows, dtype=np.int64), np.array(spans, dtype=np.int64),
                    bases, table)  # fmt: skip


@dataclass(frozen=True, eq=False)
class IdTables:
    """:func:`_id_tables`' lookup: per process (``pids``, sorted) a stretch of ``table`` from
    ``bases[k]`` holding the call row of each correlation id from ``lows[k]`` on (``spans[k]``
    ids; -1: no call). Called as ``rows(pid, corr)``; :func:`.opsums.launch_lookup` reads the
    same tables in C."""

    pids: np.ndarray
    lows: np.ndarray
    spans: np.ndarray
    bases: np.ndarray
    table: np.ndarray

    def __call__(self, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        pids = self.pids
        if len(pids) == 1:  # (one process: its stretch without a search)
            k, known = 0, pid == pids[0]
        else:
            k = np.minimum(np.searchsorted(pids, pid), len(pids) - 1)
            known = pids[k] == pid
        offset = corr - self.lows[k]
        ok = known & (offset >= 0) & (offset < self.spans[k]) & (corr > 0)
        offset += self.bases[k]
        offset[~ok] = 0
        row = self.table[offset]
        row[~ok] = -1
        return row


CORR_BITS = 38  # (pid, correlation id) pairs are matched as pid << 38 | correlationId


def op_launches(trace: Trace, ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`.loader.Trace.launches` of each operation of ``ops`` (rows of ``trace.ops``):
    the start (NaN: none) and thread (-1) of the CUDA API call that launched it."""
    return trace.launches(ops["pid"].to_numpy(), ops["correlation_id"].to_numpy())
