"""Damaged copies of the real exports, for the validation and fuzz tests, and copies with
their rows in another order (:func:`shuffled_copy`).

nsys declares most columns ``NOT NULL``; :func:`loosen` rebuilds a table without constraints
(same columns, same row order) so that a test can write what a damaged file could hold.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np


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
    """``src`` copied to ``dst`` with every table's rows in a random order (seeded; the rows of
    a table keyed by an ``INTEGER PRIMARY KEY`` stay in key order, as SQLite stores them)."""
    shutil.copyfile(src, dst)
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(dst)
    try:
        tables = con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        for (table,) in tables:
            rows = con.execute(f'SELECT * FROM "{table}"').fetchall()
            if len(rows) < 2:
                continue
            con.execute(f'DELETE FROM "{table}"')
            marks = ", ".join("?" * len(rows[0]))
            con.executemany(
                f'INSERT INTO "{table}" VALUES ({marks})',
                [rows[i] for i in rng.permutation(len(rows))],
            )
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()
    return dst
