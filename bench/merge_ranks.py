"""Join exports of :mod:`make_export` into one export of several processes, as nsys writes a
tensor-parallel run (every rank's process in one file, ``--trace-fork-before-exec=true``).

Input ``k`` becomes rank ``k``: process id ``PID + k`` (``globalPid`` and ``globalTid`` of its
rows), device ``k`` (``deviceId`` of its GPU operations, one ``TARGET_INFO_GPU`` row each).
The inputs run over the same stretch of time, as ranks do, and the rows of each table are
written in start order across the ranks, as a capture interleaves the processes' buffers.
The inputs must share their ``StringIds`` (``make_export.py`` gives every seed the same ones).

    python bench/merge_ranks.py /tmp/bench/ranks4.sqlite /tmp/bench/ops2m.sqlite \\
        /tmp/bench/ops2m_b.sqlite /tmp/bench/ops2m_s3.sqlite /tmp/bench/ops2m_s4.sqlite

Writes ``OUT.partial`` and links it into place when complete; never overwrites ``OUT``.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import time
from pathlib import Path

PID_SHIFT = 24  # globalPid = ... | pid << 24; globalTid = globalPid | tid
PER_RANK = {  # table -> (its process column, whether it has deviceId)
    "CUPTI_ACTIVITY_KIND_KERNEL": ("globalPid", True),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("globalPid", True),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("globalPid", True),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("globalTid", False),
    "NVTX_EVENTS": ("globalTid", False),
}


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f"PRAGMA main.table_info({table})")]


def merge(out: Path, inputs: list[Path]) -> dict[str, int]:
    """Write the export of ranks ``inputs`` at ``out`` (module doc); rows per table."""
    if out.exists():
        raise FileExistsError(f"{out} exists; refusing to overwrite it")
    tmp = out.with_name(out.name + ".partial")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp, isolation_level=None)
    counts: dict[str, int] = {}
    try:
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "cache_size=-262144"):
            con.execute(f"PRAGMA {pragma}")
        for k, path in enumerate(inputs):
            con.execute("ATTACH DATABASE ? AS ?", (f"file:{path}?mode=ro", f"r{k}"))
        strings = [con.execute(f"SELECT id, value FROM r{k}.StringIds ORDER BY id").fetchall()
                   for k in range(len(inputs))]  # fmt: skip
        if any(s != strings[0] for s in strings):
            raise ValueError("the inputs' StringIds differ (make them with bench/make_export.py)")
        tables = [r[0] for r in con.execute("SELECT name, sql FROM r0.sqlite_master "
                                            "WHERE type = 'table'")]  # fmt: skip
        con.execute("BEGIN")
        for table in tables:
            ddl = con.execute("SELECT sql FROM r0.sqlite_master WHERE name = ?", (table,))
            con.execute(ddl.fetchone()[0])
        for table in tables:
            cols = _columns(con, table)
            if table == "TARGET_INFO_GPU":
                for k in range(len(inputs)):
                    con.execute(f"INSERT INTO {table} (vmId, id, name, busLocation) SELECT vmId, "
                                f"{k}, name, printf('0000:%02x:00.0', {k}) FROM r{k}.{table} "
                                "LIMIT 1")  # fmt: skip
            elif table not in PER_RANK:  # the same in every input: the first one's
                con.execute(f"INSERT INTO {table} SELECT * FROM r0.{table}")
            else:
                who, has_device = PER_RANK[table]
                parts = []
                for k in range(len(inputs)):
                    picked = [
                        f"{c} + ({k} << {PID_SHIFT})" if c in (who, "endGlobalTid")
                        else (str(k) if c == "deviceId" and has_device else c)
                        for c in cols
                    ]  # fmt: skip
                    parts.append(f"SELECT {', '.join(picked)} FROM r{k}.{table}")
                con.execute(f"INSERT INTO {table} {' UNION ALL '.join(parts)} ORDER BY start")
            counts[table] = con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        con.execute("COMMIT")
    except BaseException:
        con.close()
        tmp.unlink(missing_ok=True)
        raise
    con.close()
    try:
        os.link(tmp, out)  # fails if ``out`` appeared meanwhile: never overwrite
    except FileExistsError:
        raise FileExistsError(f"{out} exists; refusing to overwrite it") from None
    finally:
        tmp.unlink(missing_ok=True)
    return counts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path, help="the export to write (must not exist)")
    p.add_argument("inputs", type=Path, nargs="+", help="make_export.py exports, one per rank")
    args = p.parse_args(argv)
    missing = [str(i) for i in args.inputs if not i.is_file()]
    if missing:
        print(f"error: no such export: {', '.join(missing)}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        counts = merge(args.out, args.inputs)
    except (FileExistsError, ValueError, sqlite3.Error) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for table, n in counts.items():
        print(f"{table:<30} {n:>12,}")
    size = args.out.stat().st_size
    print(f"{len(args.inputs)} ranks, {size / 1e6:.1f} MB, {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
