"""The CUDA API calls of an export, and the lookup of the call that launched each GPU operation:
the part of :class:`.loader.Trace` that reads ``CUPTI_ACTIVITY_KIND_RUNTIME`` (:class:`ApiCalls`,
a base of it; one concept apart from the loader's opening, operations and NVTX ranges).

The calls are read once, as columns (start, end, globalTid, correlation id, name id:
:attr:`ApiCalls._runtime`, each process' calls together), and given out as

- pieces of arrays (:meth:`ApiCalls.api_pieces`) or frames (:meth:`ApiCalls.api`, ``start_ns,
  end_ns, pid, tid, correlation_id, name``), of every thread or of one, of some names or all;
- the start and thread of the call with a (pid, correlation id): the call that launched a GPU
  operation (:meth:`ApiCalls.launches`; with its end, :meth:`ApiCalls.launch_calls`), by the
  lookups of :mod:`.callrows`.

A call's name is its function's, without the version suffix nsys gives it
(:data:`VERSION_SUFFIX`). An export without the table has zero calls: empty pieces and
frames, no launches (NaN starts, thread -1).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import cached_property

import numpy as np
import pandas as pd

from specscope.analysis import opsread, opsums
from specscope.analysis.callrows import (
    FEW_CALLS,
    IdTables,
    SortedIds,
    call_pids,
    call_rows,
    calls_by_process,
    calls_in_id_order,
    ids_increasing,
    process_stretches,
    rows_of_few,
)
from specscope.analysis.memory import CHUNK_ROWS, one_valued
from specscope.analysis.opnames import categorical
from specscope.analysis.opsread import PID_MASK as _PID_MASK
from specscope.analysis.opsread import RUNTIME, read_runtime, runtime_sql
from specscope.analysis.readcols import call_ends

# CUDA API names carry a version suffix (``cudaGraphLaunch_v10000``) and, for the per-thread
# default stream variants, ``_ptsz``/``_ptds`` before it (``cudaMemcpyAsync_ptsz_v7000``): both
# are stripped, so a call is known by its function's name (:func:`api_name`).
VERSION_SUFFIX = re.compile(r"(?:_pt(?:sz|ds))?(?:_v\d+)?$")
_STREAM_SUFFIXES = ("_ptsz", "_ptds")


def api_name(text: str) -> str:
    """``text`` without its :data:`VERSION_SUFFIX` (``VERSION_SUFFIX.sub("", text)``, the
    definition), in time of the suffix alone: the regex, which may match the empty string,
    is tried at every position of a text (50 ns a character: a million strings of 100, such as
    NVTX texts nsys keeps in StringIds, took 5.4 s). A text ending in a newline, where ``$``
    also matches, is left to the regex."""
    if text.endswith("\n"):
        return VERSION_SUFFIX.sub("", text)
    head, sep, digits = text.rpartition("_v")
    if sep and digits.isdecimal():  # (str.isdecimal: the characters of the regex's \d)
        text = head
    return text[:-5] if text.endswith(_STREAM_SUFFIXES) else text


THREAD_BITS = (_PID_MASK << 24) | _PID_MASK  # the pid and tid of a globalTid


class ApiCalls:
    """The CUDA API calls of :class:`.loader.Trace` (module doc), a base of it: what they read
    of it is its ``has``, ``columns``, ``strings``, ``session_times``, ``read_guarded``,
    ``con``, ``_columnar``, ``path`` and ``sqlite_file``."""

    @cached_property
    def api_names(self) -> dict[int, str]:
        """StringIds id -> the CUDA API function it names, without any ``_v…`` or per-thread
        stream suffix (every string, as a call's name id may be any of them)."""
        return {i: api_name(v) for i, v in self.strings.items()}

    def api_name_ids(self, names: Iterable[str]) -> dict[int, str]:
        """StringIds ids of the CUDA API functions ``names`` (any ``_v…`` suffix)."""
        wanted = set(names)
        return {i: name for i, name in self.api_names.items() if name in wanted}

    def api(self, names: Iterable[str] | None = None) -> pd.DataFrame:
        """CUDA API calls (runtime and driver), only ``names`` when given."""
        return next(self.api_chunks(names, rows=None))

    def api_chunks(
        self,
        names: Iterable[str] | None = None,
        rows: int | None = CHUNK_ROWS,
        thread: tuple[int, int] | None = None,
    ) -> Iterator[pd.DataFrame]:
        """:meth:`api` in pieces: the calls among each ``rows`` rows of the table in turn (at
        least one piece; ``rows`` None: one), so that a pass over millions of calls holds no
        frame of them all (20 M GPU ops came with 4 M calls: 0.2 GB). ``thread``: only the
        calls of this (pid, tid) (one rank's of an export of several: no frame of the
        others')."""
        cols = _API_COLUMNS
        if not self.has(RUNTIME):  # zero calls, with the usual dtypes
            empty = np.zeros(0, dtype=np.int64)
            name = pd.Categorical([], categories=pd.Index([], dtype=object))
            yield pd.DataFrame(dict.fromkeys(cols[:-1], empty) | {"name": name}, columns=cols)
            return
        if names is None:
            ids = self.api_names
        else:
            ids = self.api_name_ids(names)
        for piece in self.api_pieces(None if names is None else list(ids), rows, thread):
            yield _api_frame(piece, ids)

    def thread_api(self, pid: int, tid: int, keep) -> pd.DataFrame:
        """:meth:`api` of thread (``pid``, ``tid``), only the calls ``keep(start, end,
        correlation id)`` (arrays of a piece of the calls) marks True: the rows of the frame
        :meth:`api` gives, in its order, without a frame (and names) of every call first (an
        eager export's timeline wants a step's few of its 4 M calls)."""
        if not self.has(RUNTIME):
            return next(self.api_chunks(rows=None))
        kept = []
        for piece in self.api_pieces(thread=(pid, tid)):  # (one at least)
            mask = keep(piece[0], piece[1], piece[3])
            kept.append([c[mask] for c in piece])
        return _api_frame([np.concatenate([p[k] for p in kept]) for k in range(5)], self.api_names)

    @cached_property
    def _runtime(self) -> list[np.ndarray]:
        """start, end, globalTid, correlationId, nameId of every CUDA API call (one scan; read
        ahead by :func:`.opsread.prefetch` where it was), each process' calls together
        (:func:`calls_by_process`). The ends may be each call's duration
        (uint32: :data:`.readcols.DURATION32`): :func:`.readcols.call_ends` gives them as ends,
        as :meth:`api_pieces` does."""
        read = opsread.take(self.sqlite_file or self.path, "runtime")
        if read is None:
            sql = runtime_sql(self.columns(RUNTIME))
            file = self.sqlite_file or self.path
            read = self.read_guarded(lambda: read_runtime(self.con, self._columnar, sql, file))
        if read[1].dtype == np.uint32:  # durations: the same on any clock
            calls = [*self.session_times(read[0]), *read[1:]]
        else:
            calls = [*self.session_times(read[0], read[1]), *read[2:]]
        if isinstance(read, list):  # (the read ahead's result holds this list: emptied, each
            read.clear()  # column is held by ``calls`` alone, which calls_by_process gives up)
        del read
        stretches = process_stretches(calls[2])
        if stretches is None:  # (several processes' calls interleaved: each one's together)
            calls = calls_by_process(calls)
            stretches = process_stretches(calls[2])
        if stretches is not None:  # (each one's in id order, as nsys writes them)
            calls = calls_in_id_order(calls, stretches)
        self.__dict__["_call_stretches"] = (calls[2], stretches)  # (:meth:`_process_stretches`)
        return calls

    @cached_property
    def _calls_in_id_order(self) -> bool:
        """Whether the CUDA API calls are one process' with their correlation ids increasing
        (:func:`ids_increasing`), worked out once for every lookup of their launch calls (the
        ops' and the graph launches' or a step marker's: one pass over the ids, not one each)."""
        _, _, gtid, corr, _ = self._runtime
        stretches = self._process_stretches()  # (several processes' calls: not one's)
        if stretches is not None and len(stretches) > 1:
            return False
        return ids_increasing(call_pids(gtid), corr)

    def api_pieces(
        self,
        name_ids: Iterable[int] | None = None,
        rows: int | None = CHUNK_ROWS,
        thread: tuple[int, int] | None = None,
    ) -> Iterator[list[np.ndarray]]:
        """The CUDA API calls as arrays (start, end, globalTid, correlation id, name id), of
        :meth:`api_chunks`'s pieces (at least one; none without a RUNTIME table): only those
        whose name id is among ``name_ids`` (StringIds ids, :meth:`api_name_ids`) when given,
        and of ``thread`` (pid, tid) when given. Views where nothing is left out."""
        if not self.has(RUNTIME):
            return
        if name_ids is not None:
            wanted = np.fromiter(name_ids, dtype=np.int64)
        # (a thread's calls: among its process' stretch where each process' are together)
        own = None if thread is None else self._call_stretch(thread[0])
        first, stop = (0, len(self._runtime[0])) if own is None else (own.start, own.stop)
        step = rows or max(stop - first, 1)
        for lo in range(first, max(stop, first + 1), step):
            piece = [c[lo : min(lo + step, stop)] for c in self._runtime]
            piece[1] = call_ends(piece[0], piece[1])  # (durations read: the ends)
            if thread is not None:  # (first: the names of the thread's calls only)
                mine = (piece[2] & THREAD_BITS) == (thread[0] << 24 | thread[1])
                if not mine.all():  # (one thread's calls, the usual export: no copy)
                    piece = [c[mine] for c in piece]
            if name_ids is not None:
                named = np.isin(piece[4], wanted)
                if not named.all():
                    piece = [c[named] for c in piece]
            yield piece

    def _process_stretches(self) -> dict[int, slice] | None:
        """:func:`process_stretches` of the CUDA API calls, worked out once for the calls as
        they are (:func:`.validate.clean` may replace them)."""
        gtid = self._runtime[2]
        kept = self.__dict__.get("_call_stretches")
        if kept is None or kept[0] is not gtid:
            kept = (gtid, process_stretches(gtid))
            self.__dict__["_call_stretches"] = kept
        return kept[1]

    def _call_stretch(self, pid: int) -> slice | None:
        """The rows of process ``pid``'s CUDA API calls in :attr:`_runtime` (none where it
        made none), or None where each process' calls are not one stretch."""
        stretches = self._process_stretches()
        return None if stretches is None else stretches.get(pid, slice(0, 0))

    def thread_calls_end(self, pid: int, tid: int) -> int | None:
        """The latest end (ns) of the CUDA API calls of thread (``pid``, ``tid``); None when it
        made none (a pass over the calls' threads and ends: no frame of them)."""
        ends = [p[1].max() for p in self.api_pieces(thread=(pid, tid)) if len(p[1])]
        return int(max(ends)) if ends else None

    def launches(
        self, pid: np.ndarray, corr: np.ndarray, rows=None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Start (ns, float; NaN if none) and thread (int32; -1) of the CUDA API call of each
        (pid, correlation id): the call that launched a GPU operation (module doc). ``rows``:
        :meth:`launch_rows`, built once for many chunks of operations; without it, a few pairs
        (under 1/16 of the calls) are found without a table of every call."""
        start = np.full(len(pid), np.nan)
        tid = np.full(len(pid), -1, dtype=np.int32)  # tids are 24-bit
        if not self.has(RUNTIME) or not len(pid):
            return start, tid
        a_start, _, a_gtid, a_corr, _ = self._runtime
        if rows is None and len(pid) * FEW_CALLS < len(a_corr):  # (a step's, say)
            row = self._few_call_rows(pid, corr)
            hit = row >= 0
            start[hit], tid[hit] = a_start[row[hit]], a_gtid[row[hit]] & _PID_MASK
            return start, tid
        rows = self.launch_rows() if rows is None else rows
        if isinstance(rows, IdTables):  # (one C loop: opsums.py; what follows, the reference)
            if opsums.launch_lookup(pid, corr, rows, a_start, a_gtid, start, tid):
                return start, tid
        if isinstance(rows, SortedIds):  # (the same, an eager export's sparse ids)
            if opsums.sorted_lookup(pid, corr, rows, a_start, a_gtid, start, tid):
                return start, tid
        for lo in range(0, len(pid), CHUNK_ROWS):  # small temporaries, reused chunk to chunk
            chunk = slice(lo, lo + CHUNK_ROWS)
            row = rows(pid[chunk], corr[chunk])
            hit = row >= 0
            row = row[hit]
            start[chunk][hit] = a_start[row]
            tid[chunk][hit] = a_gtid[row] & _PID_MASK
        return start, tid

    def launches_in_chunks(
        self, pid: np.ndarray, corr: np.ndarray, rows: np.ndarray | None = None
    ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """:meth:`launches` of the pairs (``pid``, ``corr``), or of those at ``rows``,
        :data:`CHUNK_ROWS` pairs at a time with one lookup (:meth:`launch_rows`) for all:
        (the chunk's first position, start, thread) per chunk; none without CUDA API calls.
        Where every operation's call is wanted (operations carry no launch times: module doc),
        in bounded temporaries."""
        lookup = self.launch_rows()
        n = len(pid) if rows is None else len(rows)
        for lo in range(0, n if lookup is not None else 0, CHUNK_ROWS):
            at = slice(lo, lo + CHUNK_ROWS) if rows is None else rows[lo : lo + CHUNK_ROWS]
            yield (lo, *self.launches(pid[at], corr[at], lookup))

    def launch_rows(self):
        """The lookup of :meth:`launches`: ``rows(pid, corr)``, the row of each pair's CUDA API
        call, or None without API calls. One process' calls in id order (as nsys writes them):
        a search among the ids as they are (:class:`SortedIds`, in C from the last one's
        place), no table of every id (:func:`call_rows` builds one for dense ids: 80 MB of
        temporaries at 4 M calls, for a lookup 20 % faster); else :func:`call_rows`, whose
        tables (:class:`IdTables`: several processes' dense ids) are kept for the next."""
        if not self.has(RUNTIME):
            return None
        _, _, a_gtid, a_corr, _ = self._runtime
        if self._calls_in_id_order:
            return SortedIds(int(call_pids(a_gtid)[0]), a_corr)
        kept = self.__dict__.get("_launch_tables")  # (each process' analysis asks again)
        if kept is not None and kept[0] is a_corr:
            return kept[1]
        rows = call_rows(call_pids(a_gtid), a_corr, False, self._process_stretches())
        if isinstance(rows, IdTables):  # (a table of the ids' span: kept; a sort is not)
            self.__dict__["_launch_tables"] = (a_corr, rows)
        return rows

    def _few_call_rows(self, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """:func:`rows_of_few` of the calls: among the calls of the pairs' process alone
        where they are all of one whose calls are one stretch (:meth:`_call_stretch`: one
        rank's step marker, say, in an export of several), else among every call."""
        _, _, a_gtid, a_corr, _ = self._runtime
        own = self._call_stretch(int(pid[0])) if one_valued(pid) else None
        if own is None or own == slice(0, len(a_corr)):
            return rows_of_few(a_gtid, a_corr, pid, corr, self._calls_in_id_order)
        row = rows_of_few(a_gtid[own], a_corr[own], pid, corr)
        row[row >= 0] += own.start
        return row

    def launch_calls(
        self, pid: np.ndarray, corr: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Start and end (ns; NaN if none) and thread (-1) of the CUDA API call of each
        (pid, correlation id)."""
        start, end = np.full(len(pid), np.nan), np.full(len(pid), np.nan)
        tid = np.full(len(pid), -1, dtype=np.int64)
        if not self.has(RUNTIME) or not len(pid):
            return start, end, tid
        a_start, a_end, a_gtid, a_corr, _ = self._runtime
        if len(pid) * FEW_CALLS < len(a_corr):  # (a step marker's launches, say)
            row = self._few_call_rows(pid, corr)
        else:
            row = call_rows(call_pids(a_gtid), a_corr, self._calls_in_id_order)(pid, corr)
        hit = row >= 0
        start[hit], end[hit] = a_start[row[hit]], call_ends(a_start, a_end, row[hit])
        tid[hit] = a_gtid[row[hit]] & _PID_MASK
        return start, end, tid


_API_COLUMNS = ["start_ns", "end_ns", "pid", "tid", "correlation_id", "name"]


def _api_frame(piece: list[np.ndarray], ids: dict[int, str]) -> pd.DataFrame:
    """The frame of :meth:`ApiCalls.api` of the calls ``piece`` (start, end, globalTid,
    correlation id, name id; ``ids``: name id -> name)."""
    start, end, gtid, corr, name_id = piece
    return pd.DataFrame(
        {
            "start_ns": start,
            "end_ns": end,
            "pid": (gtid >> 24) & _PID_MASK,
            "tid": gtid & _PID_MASK,
            "correlation_id": corr,
            "name": categorical(name_id, ids),
        },
        columns=_API_COLUMNS,
    )
