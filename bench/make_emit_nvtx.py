"""Write a long copy of ``tests/data/real/emit_nvtx.sqlite``: its NVTX ranges (PyTorch's
``emit_nvtx``: a text of its own per range) repeated COPIES times after one another, each copy's
texts given other operator ids, so that every text stays distinct, as a long capture's are.
Only the NVTX table grows (840 ranges a copy: 1200 copies, about a million ranges, 150 MB).

    python bench/make_emit_nvtx.py /tmp/emit_big.sqlite [COPIES] [--string-ids]
    /usr/bin/time -f "%e s %M KB" specscope analyze /tmp/emit_big.sqlite   # then time it

``--string-ids``: each text kept in ``StringIds`` and named by the range's ``textId``, as nsys
keeps the texts of its own ``--pytorch`` ranges (``tests/data/real/pytorch_functions``): a
million strings there.

It refuses to write over an existing file.
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "tests" / "data" / "real" / "emit_nvtx.sqlite"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("copies", nargs="?", type=int, default=1200)
    p.add_argument("--string-ids", action="store_true", help="the texts in StringIds")
    args = p.parse_args()
    if args.out.exists():
        p.error(f"{args.out} exists; give a new path")
    part = args.out.with_name(args.out.name + ".part")
    shutil.copyfile(SOURCE, part)
    part.chmod(0o644)
    with closing(sqlite3.connect(part)) as con:
        cols = [r[1] for r in con.execute("PRAGMA table_info(NVTX_EVENTS)")]
        span = con.execute("SELECT max(end) - min(start) + 1000 FROM NVTX_EVENTS").fetchone()[0]
        n = con.execute("SELECT max(rowid) FROM NVTX_EVENTS").fetchone()[0]
        moved = {"start": f"start + ? * {span}", "end": f"end + ? * {span}",
                 "text": "replace(text, 'op_id = ', 'op_id = ' || ? || '0')"}  # fmt: skip
        select = ", ".join(moved.get(c, c) for c in cols)
        sql = f"INSERT INTO NVTX_EVENTS ({', '.join(cols)}) SELECT {select} FROM NVTX_EVENTS"
        for k in range(1, args.copies):
            con.execute(f"{sql} WHERE rowid <= ?", (k, k, k, n))
        con.commit()
        if args.string_ids:
            _texts_to_string_ids(con)
        total = con.execute("SELECT count(*) FROM NVTX_EVENTS").fetchone()[0]
    part.rename(args.out)
    print(f"{args.out}: {total} NVTX ranges")


def _texts_to_string_ids(con: sqlite3.Connection) -> None:
    """Each distinct NVTX text a new ``StringIds`` row, each range's text replaced by its id."""
    base = con.execute("SELECT coalesce(max(id), 0) + 1 FROM StringIds").fetchone()[0]
    con.execute("CREATE TEMP TABLE texts (id INTEGER PRIMARY KEY, text TEXT UNIQUE)")
    con.execute("INSERT INTO temp.texts (text) SELECT DISTINCT text FROM NVTX_EVENTS"
                " WHERE text IS NOT NULL")  # fmt: skip
    con.execute(f"INSERT INTO StringIds (id, value) SELECT {base} + id, text FROM temp.texts")
    con.execute(f"UPDATE NVTX_EVENTS SET textId = (SELECT {base} + t.id FROM temp.texts t"
                " WHERE t.text = NVTX_EVENTS.text), text = NULL"
                " WHERE text IS NOT NULL")  # fmt: skip
    con.commit()


if __name__ == "__main__":
    main()
