"""Fetch all-integer query results from an export as numpy columns, fast and lean.

Reading rows through Python's ``sqlite3`` module costs one Python object per cell, which
dominates the analysis of a large export (about 5 s for 2 M kernels x 9 columns on our 2-core
machines). The ADBC SQLite driver (``pip install 'specscope[fast]'``: ``adbc-driver-sqlite``,
``pyarrow``) runs the same SQL in C and returns Arrow columns, 5-6x faster; it is used when
installed, unless ``SPECSCOPE_SQLITE_READER=sqlite3`` or the inputs of the command are all
plain SQLite files (:func:`prefer_light_reader`: their large tables are read by
:mod:`.pagescan`). Both open the file read-only (``file:...?mode=ro``). Queries given here must
return integers only (use ``coalesce`` for nullable columns), so both readers agree exactly.

Memory: results are streamed in 64k-row Arrow batches, each batch is cast to the column's
requested numpy dtype (``int32``/``int8`` where the values are small) and dropped, so a 20 M-row
scan never holds an Arrow table and an int64 copy of it at once. In a large read, a column that
is usually narrow (:data:`NARROW32`: correlation ids, bytes) or one value in every row
(:data:`SPLIT32_UNIFORM`: the device and the process of a one-GPU capture) is stored so from
the first batch, not narrowed after the read: the 20 M GPU operations' read peaked 0.3 GB
lower (1.43 against 1.13 GiB).

Speed: :func:`int_columns_many` runs several queries (e.g. one table split into ``rowid`` ranges,
see :func:`rowid_ranges`) on threads, one ADBC connection each. SQLite decodes rows in C with
the GIL released, so on a 2-core machine two halves of a table are read in about half the time.

DuckDB was evaluated as a columnar reader (its ``sqlite_scanner`` extension, which PyPI ships
only as the third-party ``duckdb-ext-sqlite`` wheel pinned to one DuckDB version): it read the
2 M-kernel table no faster than ADBC (3.0 s against 2.2-3.2 s, 2 threads; ``bench/README.md``),
so it is not used.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import numpy as np

from specscope.analysis import memory
from specscope.analysis.readcols import (
    DURATION32,
    NARROW16,
    NARROW32,
    NARROWED,
    SPLIT16,
    SPLIT32,
    SPLIT32_UNIFORM,
    SPLIT32_UNIFORM8_16,
    SPLIT32_UNIFORM16,
    UNIFORM64,
    Durations,
    TooWide,
    Uniform,
    allocate,
    call_ends,
    check_fits,
    dtypes_of,
    flat_dtypes,
    put,
    rows_of,
)

_BATCH_ROWS = "65536"
SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite file."""
NULL_INT = int(np.iinfo(np.int64).min)
"""What both readers return for a NULL cell of an int64 column (the queries ``coalesce``
nullable columns; raw times may still be NULL in a damaged export, and
:mod:`specscope.analysis.validate` drops such rows)."""


def _arrow_ints(column) -> np.ndarray:
    """An Arrow column as numpy, NULLs as :data:`NULL_INT`; ValueError for text or blobs."""
    import pyarrow as pa

    if pa.types.is_null(column.type):
        return np.full(len(column), NULL_INT, dtype=np.int64)
    if not (pa.types.is_integer(column.type) or pa.types.is_floating(column.type)):
        raise ValueError(f"a {column.type} value where the export should hold an integer")
    if column.null_count:
        import pyarrow.compute as pc  # (only here: its import holds the read threads up)

        column = pc.fill_null(column.cast(pa.int64(), safe=False), NULL_INT)
    return column.to_numpy(zero_copy_only=False)


def _int_rows(rows: list[tuple], width: int) -> np.ndarray:
    """sqlite3 rows as an int64 array, NULLs as :data:`NULL_INT` (what ADBC gives);
    ValueError for text or blobs."""
    try:
        return np.array(rows, dtype=np.int64).reshape(-1, width)
    except (TypeError, ValueError, OverflowError):
        pass
    cells = np.array(rows, dtype=object).reshape(-1, width)
    for v in cells.ravel():
        if v is not None and not isinstance(v, int | float):
            raise ValueError(f"a {type(v).__name__} value where the export should hold an integer")
    cells[cells == None] = NULL_INT  # noqa: E711 (elementwise)
    return cells.astype(np.int64)


def readonly_uri(path: Path) -> str:
    """The URI that opens ``path`` read-only without creating anything beside it.

    A WAL-mode database (header bytes 18-19 = 2) opened with ``mode=ro`` makes SQLite create
    its ``-wal`` and ``-shm`` files next to it; when there is no ``-wal`` file (nothing pending
    to read from one), ``immutable=1`` reads the file alone and creates nothing.
    """
    path = path.resolve()
    uri = f"file:{quote(str(path))}?mode=ro"
    try:
        with path.open("rb") as f:
            header = f.read(20)
    except OSError:
        return uri
    wal = len(header) == 20 and header[18:20] == b"\x02\x02"
    if wal and not path.with_name(path.name + "-wal").exists():
        uri += "&immutable=1"
    return uri


class Columnar:
    """A read-only ADBC connection to one export, through the driver manager's low-level API.

    ``adbc_driver_manager.dbapi`` imports ``pyarrow.dataset`` and with it pandas (0.3-0.5 s);
    this wrapper needs only pyarrow, so a read can start before pandas is imported
    (:mod:`specscope.analysis.prefetch`)."""

    def __init__(self, path: Path):
        import adbc_driver_manager
        import adbc_driver_sqlite

        self._db = adbc_driver_sqlite.connect(readonly_uri(path))
        self._con = adbc_driver_manager.AdbcConnection(self._db)

    def batches(self, sql: str) -> Iterator:
        """The Arrow record batches of ``sql``, 64k rows each (the driver's default is 1k)."""
        import adbc_driver_manager
        import pyarrow as pa

        stmt = adbc_driver_manager.AdbcStatement(self._con)
        try:
            stmt.set_options(**{"adbc.sqlite.query.batch_rows": _BATCH_ROWS})
            stmt.set_sql_query(sql)
            handle, _ = stmt.execute_query()
            reader = pa.RecordBatchReader._import_from_c(handle.address)
            try:
                yield from reader
            finally:
                reader.close()
        finally:
            stmt.close()

    def close(self) -> None:
        self._con.close()
        self._db.close()


_light = False


def plain_exports(paths: Sequence[str | Path]) -> bool:
    """Whether ``paths`` are plain SQLite files (not folders, missing or xz-compressed)."""
    for p in paths:
        try:
            with open(p, "rb") as f:
                if f.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                    return False
        except OSError:
            return False
    return bool(paths)


def prefer_light_reader(paths: Sequence[str | Path]) -> bool:
    """Read the exports at ``paths`` with the ``sqlite3`` module and keep pyarrow out of this
    process when they are :func:`plain_exports`; True when it did. Call it before pandas is
    imported (a command's first step): it does nothing once pandas or pyarrow is, nor when
    ``SPECSCOPE_SQLITE_READER`` chooses the reader. Results are the same either way (the
    readers agree exactly, see the module doc); only the start-up is shorter.

    Importing pyarrow costs 0.06-0.12 s (pandas imports it whenever it is installed). What
    ADBC read fast, the GPU operations, CUDA API calls and NVTX events, is read by page scans
    (:mod:`.pagescan`) whatever the reader; what is left for SQL is a few small tables, which
    the ``sqlite3`` module reads in less than that. Where a page scan meets what it does not
    decode, that table is read by the ``sqlite3`` module, 5x slower than ADBC
    (``SPECSCOPE_SQLITE_READER=adbc`` keeps ADBC for such an export)."""
    global _light
    if "SPECSCOPE_SQLITE_READER" in os.environ or {"pandas", "pyarrow"} & sys.modules.keys():
        return False
    if not plain_exports(paths):
        return False
    sys.modules["pyarrow"] = None  # pandas then imports without it, as where it is not installed
    try:
        import pandas  # noqa: F401  (the command imports it next anyway)
    except ImportError:  # a pandas that cannot do without pyarrow: the usual path after all
        del sys.modules["pyarrow"]
        for name in [m for m in sys.modules if m == "pandas" or m.startswith("pandas.")]:
            del sys.modules[name]
        return False
    _light = True
    return True


def columnar_connection(path: Path) -> Columnar | None:
    """An ADBC connection to ``path`` (read-only), or None when ADBC is not installed/wanted
    (``SPECSCOPE_SQLITE_READER=sqlite3``, or :func:`prefer_light_reader` chose ``sqlite3``)."""
    if _light or os.environ.get("SPECSCOPE_SQLITE_READER", "adbc") == "sqlite3":
        return None
    try:
        import adbc_driver_manager  # noqa: F401
        import adbc_driver_sqlite  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return None
    return Columnar(path)


def read_threads() -> int:
    """Threads for :func:`int_columns_many`: ``SPECSCOPE_READ_THREADS``, else the CPUs (≤ 4)."""
    env = os.environ.get("SPECSCOPE_READ_THREADS")
    if env:
        return max(1, int(env))
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))


def rowid_bounds(con: sqlite3.Connection, table: str) -> tuple[int | None, int | None]:
    """The smallest and largest rowid of ``table`` (None, None when it is empty): two B-tree
    seeks, nothing on a large table. (Two queries: SQLite seeks for a lone ``min()`` or
    ``max()``, but scans for both at once.)"""
    lo = con.execute(f"SELECT min(rowid) FROM {table}").fetchone()[0]
    hi = con.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
    return lo, hi


def rowid_ranges(con: sqlite3.Connection, table: str, parts: int) -> list[tuple[str, int]]:
    """``WHERE`` clauses splitting ``table`` into ``parts`` rowid ranges (in rowid order), each
    with an upper bound of its row count (the width of the range)."""
    lo, hi = rowid_bounds(con, table)
    if lo is None:
        return [("", 0)]
    if parts <= 1:
        return [("", hi - lo + 1)]
    bounds = np.linspace(lo, hi + 1, parts + 1).astype(np.int64)
    return [
        (f" WHERE rowid >= {int(a)} AND rowid < {int(b)}", int(b - a))
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        if b > a
    ]


def _concat(parts: list[list[np.ndarray]], ncols: int, dtypes: list[np.dtype]) -> list:
    """Column-wise concatenation of per-batch arrays, freeing each column's pieces as it goes."""
    out = []
    for i in range(ncols):
        pieces = [p[i] for p in parts]
        for p in parts:
            p[i] = None
        out.append(np.concatenate(pieces) if pieces else np.zeros(0, dtypes[i]))
        del pieces
    return out


def _adbc_batches(columnar, sql: str, ncols: int, dtypes: list[np.dtype], into=None) -> list:
    """The batches of ``sql`` as numpy columns; with ``into`` (preallocated arrays), written
    there instead and the row count returned."""
    parts, n = [], 0
    for batch in columnar.batches(sql):
        width = min(ncols, batch.num_columns)
        cols = [_arrow_ints(batch.column(i)) for i in range(width)]
        if into is None:  # copies: no Arrow buffer outlives its batch
            parts.append([np.array(c, dtype=dtypes[i]) for i, c in enumerate(cols)])
        else:
            n = _put_batch(into, n, batch.num_rows, cols, ncols, ValueError)
        del batch, cols
    return parts if into is None else n


def _put_batch(into: list, n: int, m: int, cols: list, ncols: int, overflow) -> int:
    """Write the ``m`` rows of ``cols`` (the first columns of a batch) to rows n..n+m of the
    arrays ``into``, the columns a query does not return as 0; the rows written so far.
    ``overflow``: the exception class for more rows than ``into`` holds."""
    if n + m > rows_of(into[0]):
        raise overflow("more rows than the rowid range allows")
    for i, c in enumerate(cols):
        check_fits(into[i], c, i)
        put(into[i], n, m, c)
    for i in range(len(cols), ncols):  # columns the query does not return
        put(into[i], n, m, 0)
    return n + m


def _scan_batches(query, ncols: int, into) -> int:
    """Like :func:`_adbc_batches` into ``into`` for a page scan (:class:`.opsscan.ScanQuery`:
    ``batches()`` gives lists of int64 columns); a part with more rows than its bound is not
    decoded (:class:`.pagescan.Unsupported`: its SQL is read instead)."""
    from specscope.analysis.pagescan import Unsupported

    n = 0
    for cols in query.batches():
        n = _put_batch(into, n, len(cols[0]), cols[:ncols], ncols, Unsupported)
    return n


def _sqlite3_batches(
    con: sqlite3.Connection, sql: str, ncols: int, dtypes: list[np.dtype], chunk: int, into=None
):
    parts, n = [], 0
    cur = con.execute(sql)
    width = min(ncols, len(cur.description))
    while rows := cur.fetchmany(chunk):  # chunks: the tuples of a big export never all exist
        arr = _int_rows(rows, len(cur.description))
        if into is None:
            parts.append([arr[:, i].astype(dtypes[i]) for i in range(width)])
        else:
            if n + len(arr) > rows_of(into[0]):
                raise ValueError("more rows than the rowid range allows")
            for i in range(ncols):
                column = arr[:, i] if i < width else 0
                check_fits(into[i], column, i)
                put(into[i], n, len(arr), column)
            n += len(arr)
    return parts if into is None else n


def int_columns(
    con: sqlite3.Connection,
    columnar,
    sql: str,
    ncols: int,
    chunk: int = 1 << 16,
    dtypes: Sequence | None = None,
) -> list[np.ndarray]:
    """The ``ncols`` integer columns of ``sql`` as arrays (ADBC if given, else sqlite3).

    ``dtypes``: one numpy dtype per column (default int64); values must fit.
    """
    dts = dtypes_of(ncols, dtypes)
    if columnar is not None:
        parts = _adbc_batches(columnar, sql, ncols, dts)
    else:
        parts = _sqlite3_batches(con, sql, ncols, dts, chunk)
    return _concat(parts, ncols, dts)


def int_columns_many(
    con: sqlite3.Connection,
    connect,
    queries: Sequence[tuple[str, int]],
    ncols: int,
    dtypes: Sequence | None = None,
    threads: int = 1,
    on_done=None,
) -> list[np.ndarray]:
    """Like :func:`int_columns` for the rows of several queries, concatenated in query order;
    a column of dtype :data:`SPLIT32` or :data:`SPLIT32_UNIFORM` comes back as two arrays
    (high and low halves), one of :data:`NARROW32` as int32 or int64 (:data:`NARROW16`: int16
    or int64), one of :data:`DURATION32` as uint32 durations or int64 ends.

    ``queries``: (sql, upper bound of its row count) pairs, e.g. from :func:`rowid_ranges`, or
    (page-scan part, bound) pairs (:class:`.opsscan.ScanQuery`: read without a connection; where
    one meets what it does not decode, every part is read by its SQL instead); the
    result arrays are allocated once and each query fills its own slice, so the peak memory is
    the result itself (plus one batch per thread). A query may return fewer than ``ncols``
    columns: the missing trailing ones are 0 in its rows (cheaper than selecting constants).
    ``connect()`` returns a new ADBC connection (or None: the sqlite3 module, one query at a
    time); with ADBC, up to ``threads`` queries run at once, each on its own connection.
    ``on_done(done, total)`` is called as each query finishes (for progress). A
    :data:`NARROW32` column with a value int32 cannot hold (a :data:`NARROW16` one, int16) is
    read again as int64 (the whole read once more: such columns are chosen where that does not
    happen).
    """
    from specscope.analysis.pagescan import Unsupported

    dts, wide = dtypes_of(ncols, dtypes), set()
    while True:
        try:
            return _read_many(con, connect, queries, ncols, dts, wide, threads, on_done)
        except TooWide as e:
            if dts[e.column] not in NARROWED or e.column in wide:
                raise ValueError(f"column {e.column} does not fit its dtype") from None
            wide.add(e.column)
        except Unsupported:  # a page scan met what it does not decode: every part by SQL
            queries = [(q if isinstance(q, str) else q.sql, b) for q, b in queries]


def _read_many(con, connect, queries, ncols: int, dts: list, wide: set, threads: int, on_done):
    """:func:`int_columns_many`, :data:`NARROW32` and :data:`NARROW16` columns ``wide`` as
    int64."""
    finished = itertools.count(1)  # next() is atomic in CPython: safe across the threads
    offsets = np.r_[0, np.cumsum([b for _, b in queries], dtype=np.int64)]
    total = int(offsets[-1])
    large = total >= memory.ONE_VALUE_MIN_ROWS

    def column(i: int, d):  # (the result array of column i, or its pair, or its writer)
        empty = allocate
        if d in (NARROW32, NARROW16):
            narrow = np.int32 if d == NARROW32 else np.int16
            return empty(total, narrow if large and i not in wide else np.int64)
        if d == DURATION32:
            if not large or dts[0] != np.dtype(np.int64):
                return empty(total, np.int64)
            return Durations(total, out[0])
        if d == UNIFORM64:
            return Uniform(total, np.int64) if large else empty(total, np.int64)
        half = np.int16 if large and i not in wide else np.int32  # (SPLIT16's halves)
        if d in (SPLIT32_UNIFORM, SPLIT32_UNIFORM16, SPLIT32_UNIFORM8_16):
            small = np.int8 if d == SPLIT32_UNIFORM8_16 else None
            high = Uniform(total, small=small) if large else empty(total, np.int32)
            return high, empty(total, np.int32 if d == SPLIT32_UNIFORM else half)
        if d in (SPLIT32, SPLIT16):
            width = half if d == SPLIT16 else np.int32
            return empty(total, width), empty(total, width)
        return empty(total, d)

    out: list = []
    for i, d in enumerate(dts):  # (in order: a DURATION32 column refers to the first)
        out.append(column(i, d))
    sql = any(isinstance(q, str) for q, _ in queries)  # (page scans need no connection)
    first = connect() if sql else None

    def run(i: int, columnar) -> int:
        rows = slice(offsets[i], offsets[i + 1])
        into = [tuple(a[rows] for a in t) if isinstance(t, tuple) else t[rows] for t in out]
        try:
            if not isinstance(queries[i][0], str):
                return _scan_batches(queries[i][0], ncols, into)
            if columnar is None:
                return _sqlite3_batches(con, queries[i][0], ncols, dts, 1 << 16, into)
            return _adbc_batches(columnar, queries[i][0], ncols, dts, into)
        finally:
            if on_done is not None:
                on_done(next(finished), len(queries))

    if (sql and first is None) or threads <= 1 or len(queries) <= 1:
        counts = []
        try:
            for i in range(len(queries)):
                counts.append(run(i, first))
        finally:
            if first is not None:
                first.close()
    else:
        more = min(threads, len(queries)) - 1
        conns = [first] + [connect() if sql else None for _ in range(more)]
        free = list(conns)

        def task(i: int) -> int:
            c = free.pop()  # list.pop/append are atomic: one connection per running task
            try:
                return run(i, c)
            finally:
                free.append(c)

        try:
            with ThreadPoolExecutor(len(conns)) as pool:
                counts = list(pool.map(task, range(len(queries))))
        finally:
            for c in conns:
                if c is not None:
                    c.close()
    flat = [a for t in out for a in (t if isinstance(t, tuple) else (t,))]
    keep = None
    if sum(counts) != total:  # rowids with holes (the usual case has none)
        keep = np.concatenate(
            [np.arange(offsets[i], offsets[i] + n, dtype=np.int64) for i, n in enumerate(counts)]
        )
    flat = [a.result(keep) if isinstance(a, Uniform | Durations) else a if keep is None
            else a[keep] for a in flat]  # fmt: skip
    if large and sum(counts) < memory.ONE_VALUE_MIN_ROWS:  # holes left a small read
        flat = [
            a.astype(np.int64)
            if d in (NARROW32, NARROW16)
            else call_ends(flat[0], a)
            if d == DURATION32
            else a.astype(np.int32)
            if a.dtype in (np.int8, np.int16)
            else np.ascontiguousarray(a)  # (views: arrays)
            for a, d in zip(flat, flat_dtypes(dts), strict=True)
        ]
    return flat
