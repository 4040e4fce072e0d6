"""Fetch all-integer query results from an export as numpy columns, fast.

Reading rows through Python's ``sqlite3`` module costs one Python object per cell, which
dominates the analysis of a large export (about 5 s for 2 M kernels x 9 columns on our 2-core
machines). The ADBC SQLite driver (``pip install 'specscope[fast]'``: ``adbc-driver-sqlite``,
``pyarrow``) runs the same SQL in C and returns Arrow columns, 5-6x faster; it is used when
installed, unless ``SPECSCOPE_SQLITE_READER=sqlite3``. Both open the file read-only
(``file:...?mode=ro``). Queries given here must return integers only (use ``coalesce`` for
nullable columns), so both readers agree exactly.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

import numpy as np


def readonly_uri(path: Path) -> str:
    return f"file:{quote(str(path.resolve()))}?mode=ro"


def columnar_connection(path: Path):
    """An ADBC connection to ``path`` (read-only), or None when ADBC is not installed/wanted."""
    if os.environ.get("SPECSCOPE_SQLITE_READER", "adbc") == "sqlite3":
        return None
    try:
        import adbc_driver_sqlite.dbapi as adbc
    except ImportError:
        return None
    return adbc.connect(readonly_uri(path))


def int_columns(
    con: sqlite3.Connection, columnar, sql: str, ncols: int, chunk: int = 1 << 18
) -> list[np.ndarray]:
    """The ``ncols`` integer columns of ``sql`` as int64 arrays (ADBC if given, else sqlite3)."""
    if columnar is not None:
        cur = columnar.cursor()
        try:
            # 64k-row Arrow batches instead of the driver's 1k: fewer, larger chunks
            cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": "65536"})
            cur.execute(sql)
            table = cur.fetch_arrow_table()
        finally:
            cur.close()
        return [
            np.asarray(table.column(i).to_numpy(zero_copy_only=False), dtype=np.int64)
            for i in range(ncols)
        ]
    parts = []
    cur = con.execute(sql)
    while rows := cur.fetchmany(chunk):  # chunks: the tuples of a big export never all exist
        parts.append(np.array(rows, dtype=np.int64).reshape(-1, ncols))
    arr = np.concatenate(parts) if parts else np.zeros((0, ncols), np.int64)
    return [np.ascontiguousarray(arr[:, i]) for i in range(ncols)]
