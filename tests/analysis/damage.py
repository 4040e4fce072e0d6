"""Damaged copies of the real exports, for the validation and fuzz tests, and copies with
their rows in another order (:func:`shuffled_copy`).

nsys declares most columns ``NOT NULL``; :func:`loosen` rebuilds a table without constraints
(same columns, same row order) so that a test can write what a damaged file could hold.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path


def loosen(con: sqlite3.Connection, table: str) -> None:
    """Rebuild ``table`` without NOT NULL / PRIMARY KEY constraints."""
    con.execute(f'CREATE TABLE "_loose" AS SELECT * FROM "{table}" ORDER BY rowid')
    con.execute(f'DROP TABLE "{table}"')
    con.execute(f'ALTER TABLE "_loose" RENAME TO "{table}"')


def damaged_copy(src: Path, dst: Path, tables: list[str], *sql: str) -> Path:
    """``src`` copied to ``dst``, ``tables`` loosened, then the statements ``sql`` run."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        for t in tables:
            loosen(con, t)
        for statement in sql:
            con.execute(statement)
        con.commit()
    finally:
        con.close()
    return dst


def shuffled_copy(src: Path, dst: Path, seed: int) -> Path:
    """``src`` copied to ``dst`` with every table's rows in another order: ``bench/
    shuffle_rows.py``'s (a seeded hash of the rowid; the rows of a table keyed by an ``INTEGER
    PRIMARY KEY`` stay in key order, as SQLite stores them)."""
    from testdata import bench_module

    bench_module("shuffle_rows").shuffle(src, dst, seed)
    return dst
