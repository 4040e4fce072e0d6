"""A copy of an nsys SQLite export with every table's rows in another order.

    python bench/shuffle_rows.py SRC DST [--seed N]

nsys 2025.6's release notes say its exports no longer keep rows in any order, timestamps
included. This writes such an export from any other: each table's rows re-inserted in a
pseudo-random order (a multiplicative hash of the rowid, fixed by ``--seed``: the same copy
every time, in SQL, without holding the rows in Python: a 316 MB export in about 30 s). The
rows of a table keyed by an ``INTEGER PRIMARY KEY`` (``StringIds``) stay in key order, as
SQLite stores them. Refuses to write over ``DST``. The benchmarks' shuffled exports
(``bench/README.md``, twenty-eighth session) and the tests' (``tests/analysis/damage.py``:
``shuffled_copy``) are made by it.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
from pathlib import Path

PRIME = 4294967311  # (the first prime above 2**32: rowid * multiplier mod it is a permutation)


def shuffle(src: Path, dst: Path, seed: int) -> None:
    """Write ``dst``, ``src`` with its rows in another order (module doc)."""
    shutil.copyfile(src, dst)
    multiplier = 2654435761 + 2 * seed  # (odd, below PRIME: no two rowids land together)
    con = sqlite3.connect(dst)
    try:
        tables = con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        for (table,) in tables:
            con.execute(
                f'CREATE TEMP TABLE shuffled AS SELECT * FROM "{table}" '
                f"ORDER BY (rowid * {multiplier}) % {PRIME}"
            )
            con.execute(f'DELETE FROM "{table}"')
            con.execute(f'INSERT INTO "{table}" SELECT * FROM shuffled')
            con.execute("DROP TABLE shuffled")
        con.commit()
        con.execute("VACUUM")
    finally:
        con.close()


def _head(path: Path) -> bytes:
    """The first 16 bytes of ``path`` (an SQLite file's magic string)."""
    with path.open("rb") as f:
        return f.read(16)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", type=Path)
    p.add_argument("dst", type=Path)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    problem = None
    if a.dst.exists():
        problem = f"{a.dst} exists; give a new path"
    elif not a.src.is_file() or _head(a.src) != b"SQLite format 3\0":
        problem = f"{a.src} is not an SQLite file; give an nsys export (nsys export --type sqlite)"
    if problem:
        print(f"shuffle_rows: {problem}", file=sys.stderr)
        sys.exit(2)
    try:
        shuffle(a.src, a.dst, a.seed)
    except sqlite3.DatabaseError as e:
        a.dst.unlink(missing_ok=True)  # (whole or not at all)
        print(f"shuffle_rows: {a.src}: {e}; give an undamaged nsys export", file=sys.stderr)
        sys.exit(2)
    except BaseException:
        a.dst.unlink(missing_ok=True)
        raise
    print(f"{a.dst}: the rows of {a.src} in another order (seed {a.seed})")


if __name__ == "__main__":
    main()
