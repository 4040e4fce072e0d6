"""Write a copy of an export with NVTX ranges on thousands of threads: RANGES ``request N`` ranges
(seven names) over THREADS threads of the export's first NVTX process, at random times within its
ranges' span, 1-50 µs long, none launching anything (as a server's request threads annotate
their work beside the one thread that launches the GPU's).

    python bench/make_threads.py /tmp/bench/ops2m.sqlite /tmp/threads.sqlite [--threads 5000]
    /usr/bin/time -f "%e s %M KB" specscope ranges /tmp/threads.sqlite   # then time it

``ranges`` looked each chunk of operations up once per thread with ranges (5000 threads, 200 000
ranges on ``ops2m``: 10.0 s, against 1.0 s without them). It refuses to write over a file.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--threads", type=int, default=5000)
    p.add_argument("--ranges", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.out.exists():
        p.error(f"{args.out} exists; give a new path")
    part = args.out.with_name(args.out.name + ".part")
    shutil.copyfile(args.source, part)
    with closing(sqlite3.connect(part)) as con:
        first, last, gtid = con.execute(
            "SELECT min(start), max(end), min(globalTid) FROM NVTX_EVENTS WHERE end IS NOT NULL"
        ).fetchone()
        process = gtid & ~0xFFFFFF  # (the pid's bits of a globalTid)
        rng = random.Random(args.seed)
        rows = []
        for i in range(args.ranges):
            start = rng.randrange(first, last)
            tid = 100_000 + rng.randrange(args.threads)
            rows.append((start, start + rng.randrange(1_000, 50_000), f"request {i % 7}",
                         process | tid))  # fmt: skip
        con.executemany("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid)"
                        " VALUES (?, ?, 59, ?, ?)", rows)  # fmt: skip
        con.commit()
    part.rename(args.out)
    print(f"{args.out}: {args.ranges} ranges on {args.threads} threads added")


if __name__ == "__main__":
    main()
