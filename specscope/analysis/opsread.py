"""The read of an export's GPU operations, CUDA API calls and NVTX events, and starting it early.

The first two tables are most of a large export (2 M GPU ops: 60-70 % of ``specscope analyze``'s
time goes to reading them). This module holds their queries and the read itself, and imports
neither pandas nor :mod:`specscope.analysis.loader`, so that :func:`prefetch` can start the read
on background threads while the rest of the program is still being imported (``import pandas``
takes 0.3-0.5 s on our 2-core machines, about as long as the read of 2 M GPU ops)::

    main thread    | imports (pandas, specscope.analysis...) | load() | Trace.ops: take() ...
    ops thread(s)  | KERNEL leaf runs (rowid ranges), MEMCPY, MEMSET -----------|
    second thread  | CUDA API calls, then NVTX events --------|

The read threads run in a forked child process where :mod:`.forkread` allows it (Linux, exports
up to 4 GiB), whose arrays this process maps when it takes them: on threads of this process,
the read waited for the GIL while pandas was imported.

Each of the three is read by a page scan (:mod:`.opsscan`, :mod:`.pagescan`: the tables' B-tree
pages decoded in numpy, 2-2.5x less CPU than ADBC), or by SQL where the scan refuses a table
(or ``SPECSCOPE_SQLITE_READER`` names a SQL reader); the arrays are the same either way.

:class:`specscope.analysis.loader.Trace` takes each prefetched read of its file when there is
one (:func:`take`) and otherwise runs the same query itself, so the frames are the same either
way. A prefetch that fails for any reason is dropped: the loader's own read then raises the
usual one-line error.

**The ops query** (one per table, the KERNEL table split into ``rowid`` ranges) returns the
int64 columns of :data:`OP_COLUMNS`. Device and stream ids, and the short and full name codes,
are int32 values packed in pairs as ``high << 32 | low``; ``misc = pid (24 bits) << 32 | exec
(15 bits) << 16 | kind (code of KINDS) << 12 | in_graph << 8 | copyKind (8 bits)``, where exec
(only when asked for: ``execs``) is a graph node's executable graph (``graphNodeId >> 32``, node
mode; :data:`EXEC_SATURATED` where it does not fit), so that the graph launches come from the
same read (:mod:`.launches`). Each result cell costs the ADBC reader more (50-100 ns) than the
shifts that pack it; the page scan computes the same packed columns from the decoded ones
(:func:`.opsscan.op_values`).
"""

from __future__ import annotations

import re
import sqlite3
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from specscope.analysis import forkread, opsscan, progress
from specscope.analysis.memory import narrow_ids, narrow_ints, one_value_view
from specscope.analysis.readcols import (
    DURATION32,
    NARROW16,
    NARROW32,
    SPLIT16,
    SPLIT32_UNIFORM,
    SPLIT32_UNIFORM8_16,
    SPLIT32_UNIFORM16,
    UNIFORM64,
    allocate_with,
    as_durations,
)
from specscope.analysis.sqlread import (
    SQLITE_MAGIC,
    columnar_connection,
    int_columns,
    int_columns_many,
    read_threads,
    readonly_uri,
    rowid_ranges,
)

KINDS = ["kernel", "memcpy", "memset", "graph"]
PID_MASK = 0xFFFFFF
LOW32 = 0xFFFFFFFF  # the low half of a packed pair
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
OP_COLUMNS = ("start", "end", "correlationId", "deviceId:streamId", "names", "misc", "bytes")
"""The columns of the ops query (int64 each; the packed pairs come back as two int32 halves).
Tables without bytes (kernels, graph replays) leave the last one out: the reader fills in 0."""
_OP_DTYPES = ("i8", DURATION32, NARROW32, SPLIT32_UNIFORM8_16, SPLIT16, SPLIT32_UNIFORM16, NARROW32)
# (the ends as durations, uint32, where they fit: 4 bytes an op less until the loader makes them
# ends, after the regrouping of a TP server's ranks; correlation ids and bytes int32 where they
# fit, the device and the process of a large read
# one value where all ops share it: 16 bytes an op less while the ops are read, 320 MB at 20 M;
# streams, name ids and flags int16 where they fit: 8 bytes less, 150 MB at 20 M; the devices of
# several GPUs int8 where they fit: 3 bytes less, 57 MiB at 20 M of 8 ranks. Flags with
# exec ids do not fit: their low half stays int32, _op_dtypes)


def _op_dtypes(execs: bool) -> tuple:
    """:data:`_OP_DTYPES`, the flags' low half int32 where it carries exec ids (bits 16-30)."""
    return _OP_DTYPES[:5] + (SPLIT32_UNIFORM,) + _OP_DTYPES[6:] if execs else _OP_DTYPES


# Per op kind, in the order of KINDS: table, packed name codes (short << 32 | full), copyKind,
# ", bytes" or "". Name codes: kernels use StringIds; memcpy -10 - copyKind; memset -2; graph
# -1000 - graphId (short = full).
_OP_TABLES = [
    (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        f"(coalesce(shortName, demangledName, -3) << 32)"
        f" | (coalesce(demangledName, shortName, -3) & {LOW32})",
        "0",
        "",
    ),
    (
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        f"((-10 - coalesce(copyKind, 0)) << 32) | ((-10 - coalesce(copyKind, 0)) & {LOW32})",
        "copyKind",
        ", coalesce(bytes, 0)",
    ),
    ("CUPTI_ACTIVITY_KIND_MEMSET", f"(-2 << 32) | (-2 & {LOW32})", "0", ", coalesce(bytes, 0)"),
    (
        "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
        f"((-1000 - coalesce(graphId, 0)) << 32) | ((-1000 - coalesce(graphId, 0)) & {LOW32})",
        "0",
        "",
    ),
]
_OPTIONAL_COLUMNS = (
    "correlationId",
    "deviceId",
    "streamId",
    "globalPid",
    "globalTid",
    "copyKind",
    "bytes",
    "graphId",
    "shortName",
    "demangledName",
    "nameId",
)
EXEC_SATURATED = 0x7FFF
"""The exec-id field of misc (bits 16-30) for an exec id it cannot hold (negative, or this
or more): where a graph op has it, the launches are grouped by SQL instead (:mod:`.launches`)."""
_EXEC_ID = (
    f"CASE WHEN graphNodeId >> 32 BETWEEN 0 AND {EXEC_SATURATED - 1} THEN graphNodeId >> 32"
    f" ELSE {EXEC_SATURATED} END"
)
_RUNTIME_SQL = (
    "SELECT start, end, coalesce(globalTid, 0), coalesce(correlationId, 0),"
    f" coalesce(nameId, -1) FROM {RUNTIME}"
)


def adapt(sql: str, have: set[str]) -> str:
    """``sql`` with every optional column the table lacks read as NULL: exports of other nsys
    versions leave some out (the ``coalesce`` around each gives its default)."""
    for col in _OPTIONAL_COLUMNS:
        if col not in have:
            sql = re.sub(rf"\b{col}\b", "NULL", sql)
    return sql


def table_columns(con: sqlite3.Connection, table: str) -> set[str]:
    """The column names of ``table``."""
    return {r[1] for r in con.execute(f"PRAGMA table_info({table})")}


def runtime_sql(have: set[str]) -> str:
    """The query of :func:`read_runtime` for a RUNTIME table with the columns ``have``."""
    return adapt(_RUNTIME_SQL, have)


_RUNTIME_DTYPES = ("i8", DURATION32, UNIFORM64, NARROW32, NARROW16)
"""Of the page scans of the CUDA API calls: start, end (each call's duration, uint32, where
they fit: :data:`.readcols.DURATION32`), globalTid (one thread's calls: one value), correlation
id and name id (int32 and int16 where they fit, as :mod:`.memory` narrows them)."""


def read_runtime(
    con: sqlite3.Connection, columnar, sql: str, path: Path | None = None
) -> list[np.ndarray]:
    """start, end, globalTid, correlationId, nameId of every CUDA API call (one scan; int64,
    narrower on large exports: :mod:`.memory`; the ends as durations where a page scan reads
    them so, :data:`.readcols.DURATION32`), read by ``sql`` (:func:`runtime_sql`), or
    with ``path`` (the export's file) by a page scan where its pages are decoded
    (:func:`.opsscan.runtime_parts`)."""
    cols, threads = None, read_threads()
    parts = opsscan.scanned_parts(path, opsscan.runtime_parts, sql, threads)
    if parts:  # pieces of the table on threads, into columns as narrow as they end up (a
        # piece a scan refuses is read by its SQL, on a connection of this thread's own)
        own = sqlite3.connect(readonly_uri(path), uri=True) if con is None else None
        try:
            cols = int_columns_many(con or own, lambda: None, parts, 5, _RUNTIME_DTYPES,
                                    threads=threads)  # fmt: skip
        finally:
            if own is not None:
                own.close()
    if cols is None:
        cols = int_columns(con, columnar, sql, 5)
        cols[1] = as_durations(cols[0], cols[1])  # (as the page scans read them)
    cols[2] = one_value_view(cols[2])  # one launching thread: one element
    cols[3], cols[4] = narrow_ints(cols[3]), narrow_ids(cols[4])  # correlation id, name id
    progress.report("CUDA API calls", 1, 1)
    return cols


NVTX = "NVTX_EVENTS"
NVTX_PUSHPOP, NVTX_STARTEND, NVTX_DOMAIN_CREATE = 59, 60, 75
# push/pop and start/end ranges of the NVTX text-marker API (NVTXT), which nsys's own reports
# read as ranges beside 59/60 (kernel_helper.py of nsys 2023.4): ranges here too
NVTXT_PUSHPOP, NVTXT_STARTEND = 70, 71
NVTX_COLUMNS = 9
NVTX_EVENT_TYPES = (NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND, NVTX_DOMAIN_CREATE)
NVTX_TYPES = f"eventType IN ({', '.join(map(str, NVTX_EVENT_TYPES))})"
"""The SQL condition on ``eventType`` of the NVTX events read: ranges and domain creations."""


def nvtx_text(have: set[str]) -> str:
    """The SQL of an NVTX event's explicit ``text`` for an ``NVTX_EVENTS`` table with the
    columns ``have`` (``NULL`` in exports that keep every name in ``textId``)."""
    return "text" if "text" in have else "NULL"


def nvtx_sql(have: set[str]) -> str:
    """The query of the NVTX events read (:attr:`.loader.Trace._nvtx_all`) for an
    ``NVTX_EVENTS`` table with the columns ``have``: start, end (0 when open), open, name code
    (``textId``; -1 without), globalTid, domain id, event type, whether ``text`` is set,
    rowid; ranges and domain creations only, in rowid order."""
    text_id, text = ("textId" if "textId" in have else "NULL"), nvtx_text(have)
    domain_id = "domainId" if "domainId" in have else "0"
    return (
        f"SELECT start, coalesce(end, 0), end IS NULL, coalesce({text_id}, -1),"
        f" coalesce(globalTid, 0), coalesce({domain_id}, 0), eventType, {text} IS NOT NULL,"
        f" rowid FROM {NVTX} WHERE {NVTX_TYPES} ORDER BY rowid"
    )


def op_queries(
    con: sqlite3.Connection,
    tables: frozenset[str],
    threads: int,
    execs: bool = False,
    path: Path | None = None,
) -> list[tuple]:
    """The ops queries (module doc): (SQL, bound on its rows) per rowid range of each table,
    or with ``path`` (the export's file) page scans of the same rows where the table's pages
    are decoded (:mod:`.opsscan`: an :class:`.opsscan.ScanQuery` in place of the SQL); with
    ``execs``, misc carries the graph ops' exec ids (otherwise 0: they cost SQLite 40 ns
    per op, 4 % of the read, and only graph launches need them).

    The KERNEL table is split into 4 ranges per thread, so that the threads stay busy to the
    end even while the CUDA API calls are read beside them."""
    graph_trace = _OP_TABLES[KINDS.index("graph")][0]
    if execs and graph_trace in tables:  # graph mode: a launch is a row there, no ids needed
        execs = con.execute(f"SELECT 1 FROM {graph_trace} LIMIT 1").fetchone() is None
    parts = []
    for kind, (table, names, copy_kind, nbytes) in enumerate(_OP_TABLES):
        if table not in tables:
            continue
        have = table_columns(con, table)
        graph, exec_id = "0", ""
        if "graphNodeId" in have and kind != KINDS.index("graph"):
            graph = "graphNodeId IS NOT NULL"
            exec_id = f" | (({_EXEC_ID}) << 16)" if execs else ""
        graph = "1" if kind == KINDS.index("graph") else graph
        select = adapt(
            f"SELECT start, end, coalesce(correlationId, 0),"
            f" (coalesce(deviceId, 0) << 32) | (coalesce(streamId, 0) & {LOW32}), {names},"
            f" (((coalesce(globalPid, 0) >> 24) & {PID_MASK}) << 32){exec_id}"
            f" | ({kind} << 12) | (({graph}) << 8) | (coalesce({copy_kind}, 0) & 255){nbytes}"
            f" FROM {table}",
            have,
        )
        split = 4 * threads if kind == KINDS.index("kernel") and threads > 1 else 1
        scanned = opsscan.scanned_parts(path, opsscan.scan_parts, table, kind, select, split, execs)
        if scanned is None:  # by SQL
            scanned = [(select + where, bound) for where, bound in rowid_ranges(con, table, split)]
        parts += scanned
    return parts


def read_ops(
    con: sqlite3.Connection, path: Path, tables: frozenset[str], threads: int, execs: bool
) -> list[np.ndarray]:
    """Every GPU operation of the export at ``path`` (``tables``: those it has) as the columns
    of :data:`OP_COLUMNS`, the packed pairs as their two int32 halves: start, end, corr,
    device, stream, short, full, pid, flags (the low half of misc), bytes. ``execs``: with
    the exec ids in the flags (:func:`op_queries`)."""
    return int_columns_many(
        con,
        lambda: columnar_connection(path),
        op_queries(con, tables, threads, execs, path),
        len(OP_COLUMNS),
        _op_dtypes(execs),
        threads=threads,
        on_done=lambda done, total: progress.report("GPU operations", done, total),
    )


# --------------------------------------------------------------------------- reading ahead
_pending: dict[Path, dict[str, Future]] = {}
PREFETCH_MIN_BYTES = 32 << 20
"""Smaller exports are not read ahead: their read is shorter than the imports it would hide,
and it would import pyarrow (0.1 s) even where the loader could do without."""


def prefetch(path: str | Path, execs: bool = False) -> None:
    """Start reading the GPU operations, the CUDA API calls and the NVTX events of the export
    at ``path`` on background threads (module doc): the operations on one, the other two one
    after the other on a second (they are done long before the operations); those threads run
    in a child process where :mod:`.forkread` allows it (there the GIL is the child's own, and
    the imports of the main thread do not hold up the read); :func:`take` gets each.
    ``execs``: read the graph ops' exec ids too (:func:`op_queries`), for an analysis that
    will want the graph launches (one without a step spec, or with graph markers in it).
    Does nothing for a file that is not plain SQLite (an xz-compressed export is decompressed
    by the loader first), for one smaller than :data:`PREFETCH_MIN_BYTES`, and where the reads
    are SQL (``SPECSCOPE_SQLITE_READER``) without the ADBC reader (the sqlite3 module's
    connections stay in their thread). Page scans need neither ADBC nor pyarrow; a read ahead
    that falls back to SQL without ADBC fails, and the loader reads that table itself. A path
    whose operations are being read ahead and not taken yet (:func:`pending`) is not read
    again; one whose operations were taken is read anew (what is left of its last read goes)."""
    path = Path(path)
    try:
        if pending(path) or path.stat().st_size < PREFETCH_MIN_BYTES:
            return
        with path.open("rb") as f:
            if f.read(16) != SQLITE_MAGIC:
                return
        scans = opsscan.wanted()
        columnar = None if scans else columnar_connection(path)
    except Exception:
        return  # the loader says what is wrong with the file
    if columnar is None and not scans:
        return
    if scans and forkread.wanted(path):  # (no ADBC connection was opened to cross the fork)
        try:
            child = forkread.Child(lambda: _read_here(path, execs), allocate_with)
        except OSError:
            pass
        else:
            _pending[path.resolve()] = {what: _Forked(child, what) for what in READS}
            return
    _pending[path.resolve()] = _start(path, execs, columnar)


READS = ("ops", "runtime", "nvtx")


def _start(path: Path, execs: bool, columnar) -> dict[str, Future]:
    """The reads of :func:`prefetch` started on threads of this process."""
    ops, small = ThreadPoolExecutor(1), ThreadPoolExecutor(1)
    tables = small.submit(_tables, path)  # (the sqlite3 connection stays in its thread)
    futures = {
        "ops": ops.submit(_read_ops_ahead, path, tables, execs),
        "runtime": small.submit(
            _read_small, path, tables, RUNTIME, read_runtime, columnar, runtime_sql
        ),
        "nvtx": small.submit(_read_small, path, tables, NVTX, read_nvtx, columnar, nvtx_sql),
    }
    if columnar is not None:
        small.submit(columnar.close)  # after both reads
    ops.shutdown(wait=False)
    small.shutdown(wait=False)
    return futures


def _read_here(path: Path, execs: bool) -> dict[str, object]:
    """The reads of :func:`prefetch` run to the end (in a child process: :mod:`.forkread`);
    a read that failed is None, as one of a table the export lacks."""
    futures = _start(path, execs, None)
    out = {}
    for what, future in futures.items():
        try:
            out[what] = future.result()
        except Exception:
            out[what] = None
    return out


class _Forked:
    """The read ``what`` of a :class:`.forkread.Child`, taken like a Future's result."""

    def __init__(self, child: forkread.Child, what: str):
        self.child, self.what = child, what

    def result(self):
        """The read, given up by the child's result (taken once: :func:`take`), so that its
        arrays are held by the loader alone: a column the loader replaces (each device's rows
        together, say) gives its pages back then, or is written over (:func:`.devices.by_device`
        reuses the memory of a column only it holds), not once every read is taken."""
        reads = self.child.result()
        if reads is None:
            raise RuntimeError("the read ahead failed")  # (take: the loader reads itself)
        return reads.pop(self.what)


def pending(path: Path, what: str = "ops") -> bool:
    """Whether the read ``what`` of ``path`` (its operations by default) was started by
    :func:`prefetch` and not taken."""
    return what in _pending.get(path.resolve(), {})


def take(path: Path, what: str):
    """The prefetched read ``what`` of ``path``, waiting for it to finish; None without a
    usable one (not prefetched, taken already, failed: the loader reads again and reports the
    error), or where the export has no such table. ``ops``: (the columns of :func:`read_ops`,
    whether they carry exec ids); ``runtime``: the columns of :func:`read_runtime`; ``nvtx``:
    those of :func:`nvtx_sql`'s query."""
    reads = _pending.get(path.resolve(), {})
    future = reads.pop(what, None)
    if not reads:  # every read of the file taken
        _pending.pop(path.resolve(), None)
    if future is None:
        return None
    try:
        return future.result()
    except Exception:
        return None


def _tables(path: Path) -> dict[str, set[str]]:
    """Table name -> its columns, for the tables the reads ahead need."""
    con = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        wanted = {RUNTIME, NVTX, *(t[0] for t in _OP_TABLES)}
        return {t: (table_columns(con, t) if t in wanted else set()) for t in names}
    finally:
        con.close()


def _read_small(path: Path, tables: Future, table: str, read, columnar, sql_of):
    """``read(None, columnar, sql_of(columns of table), path)`` (None without the table): one
    of the loader's own reads (:func:`read_runtime`, the NVTX events), through ADBC or a
    page scan."""
    have = tables.result().get(table)
    return None if have is None else read(None, columnar, sql_of(have), path)


def read_nvtx(con, columnar, sql: str, path: Path | None = None) -> list[np.ndarray]:
    """The columns of :func:`nvtx_sql`'s query ``sql`` (int64), or with ``path`` (the export's
    file) by a page scan where its pages are decoded (:func:`.opsscan.nvtx_parts`)."""
    cols = opsscan.read_scanned(path, NVTX_COLUMNS, opsscan.nvtx_parts, sql)
    return int_columns(con, columnar, sql, NVTX_COLUMNS) if cols is None else cols


def _read_ops_ahead(path: Path, tables: Future, execs: bool) -> tuple[list[np.ndarray], bool]:
    """The ops read of :func:`prefetch`, on a connection of its own."""
    con = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        return read_ops(con, path, frozenset(tables.result()), read_threads(), execs), execs
    finally:
        con.close()
