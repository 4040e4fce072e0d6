"""Write rows to a results database in one transaction: a reader sees all of them or none.

sqlite-utils' ``with db.conn:`` opens no transaction of its own (Python's ``sqlite3`` begins one
implicitly only before an ``INSERT``, and ``insert_all`` commits every batch), so a writer killed
half-way leaves half a run behind. Here every write goes through :func:`transaction`:

- the connection runs in autocommit mode (``isolation_level=None``) and the transaction is opened
  explicitly with ``BEGIN IMMEDIATE``: the write lock is taken up front, so two writers never
  both hold a read lock and wait for each other (the "database is locked" deadlock);
- a busy timeout of :data:`BUSY_TIMEOUT_S` makes a second writer wait for the first one's
  ``COMMIT`` instead of failing at once;
- any exception (or a killed process: SQLite's rollback journal) rolls everything back.

Tables are created with the column types sqlite-utils would give them (``TEXT``, ``INTEGER``,
``FLOAT``), so the ``sqlite-utils`` CLI reads them as before; a column missing from an older
table is added with ``ALTER TABLE`` inside the same transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from specscope.errors import SpecscopeError

BUSY_TIMEOUT_S = 600.0
"""How long a writer waits for another writer's transaction before giving up (seconds)."""

_BATCH = 5000  # rows per executemany call (one transaction whatever the count)


def sql_type(value: object) -> str:
    """The column type sqlite-utils gives a Python value (``bool`` counts as an integer)."""
    if isinstance(value, bool | int):
        return "INTEGER"
    if isinstance(value, float):
        return "FLOAT"
    return "TEXT"


def plain(value: object) -> object:
    """A value SQLite can store: numpy scalars as Python numbers, lists and dicts as JSON
    (what sqlite-utils stores for them)."""
    if isinstance(value, list | dict | tuple):
        return json.dumps(value)
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        return value.item()
    return value


@contextmanager
def transaction(db_path: str | Path) -> Iterator[sqlite3.Connection]:
    """A connection to ``db_path`` (created if absent) inside ``BEGIN IMMEDIATE``; committed on
    a normal exit, rolled back on an exception (module doc)."""
    try:
        con = sqlite3.connect(str(db_path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
    except sqlite3.Error as e:
        raise SpecscopeError(f"{db_path}: cannot open the results database ({e})") from None
    try:
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            raise SpecscopeError(
                f"{db_path}: cannot write the results database ({e}); check that the folder "
                "is writable and that no other program holds the database open"
            ) from None
        try:
            yield con
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
    finally:
        con.close()


def ensure_table(
    con: sqlite3.Connection,
    table: str,
    columns: Mapping[str, str],
    pk: str | None = None,
    references: Mapping[str, str] | None = None,
) -> None:
    """Create ``table`` with ``columns`` (name -> SQL type), or add the ones it lacks.

    ``pk``: an ``INTEGER PRIMARY KEY`` column; ``references``: column -> ``"table(col)"``.
    """
    refs = references or {}
    have = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    if not have:
        defs = []
        for name, kind in columns.items():
            extra = " PRIMARY KEY" if name == pk else ""
            if name in refs:
                extra += f" REFERENCES {refs[name]}"
            defs.append(f'"{name}" {kind}{extra}')
        con.execute(f'CREATE TABLE "{table}" ({", ".join(defs)})')
        return
    for name, kind in columns.items():
        if name not in have:
            con.execute(f'ALTER TABLE "{table}" ADD COLUMN "{name}" {kind}')


def insert_rows(
    con: sqlite3.Connection, table: str, names: list[str], rows: Iterable[tuple]
) -> int | None:
    """Insert ``rows`` (tuples in the order of ``names``); the rowid of the last one."""
    cols = ", ".join(f'"{n}"' for n in names)
    sql = f'INSERT INTO "{table}" ({cols}) VALUES ({", ".join("?" * len(names))})'
    batch: list[tuple] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= _BATCH:
            con.executemany(sql, batch)
            batch = []
    if batch:
        con.executemany(sql, batch)
    return con.execute("SELECT last_insert_rowid()").fetchone()[0]


def _prepare(con: sqlite3.Connection, table: str, rows: list[dict], pk: str | None) -> list[str]:
    """Create ``table`` for ``rows`` (dicts) or add the columns it lacks; the column names."""
    columns: dict[str, str] = {}
    for row in rows:
        for k, v in row.items():
            if v is not None or k not in columns:
                columns[k] = sql_type(v) if v is not None else columns.get(k, "TEXT")
    have = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
    if not have:
        defs = [f'"{k}" {t}{" PRIMARY KEY" if k == pk else ""}' for k, t in columns.items()]
        con.execute(f'CREATE TABLE "{table}" ({", ".join(defs)})')
    else:
        ensure_table(con, table, columns)
    return list(columns)


def insert_dicts(
    con: sqlite3.Connection, table: str, rows: list[dict], pk: str | None = None
) -> None:
    """Insert ``rows`` (dicts), creating ``table`` or adding columns as the rows need (what
    sqlite-utils' ``insert_all(..., alter=True)`` does); with ``pk``, a row whose ``pk`` is
    already there replaces its columns (``upsert_all``)."""
    if not rows:
        return
    rows = [{k: plain(v) for k, v in row.items()} for row in rows]
    names = _prepare(con, table, rows, pk)
    cols = ", ".join(f'"{n}"' for n in names)
    sql = f'INSERT INTO "{table}" ({cols}) VALUES ({", ".join("?" * len(names))})'
    if pk is not None:
        updates = ", ".join(f'"{n}" = excluded."{n}"' for n in names if n != pk)
        sql += f' ON CONFLICT("{pk}") DO UPDATE SET {updates}'
    con.executemany(sql, [tuple(row.get(n) for n in names) for row in rows])
