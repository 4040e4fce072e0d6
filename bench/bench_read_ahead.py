"""When the read ahead of an export is done: in a child process or on threads, with pandas'
import beside it or nothing.

    python bench/bench_read_ahead.py /tmp/bench/ops2m.sqlite [--repeat 5]

``analyze`` starts reading the GPU operations, CUDA API calls and NVTX events
(:func:`.opsread.prefetch`) and imports pandas meanwhile. Each run is a fresh Python process
that does the same: prefetch, then ``import pandas`` (or nothing), then takes the three reads;
it prints when (seconds from its start) the import ended and the reads were taken, and whether
the read ran in a child process (:mod:`specscope.analysis.forkread`); numpy runs one OpenBLAS
thread, as in ``analyze``. Three ways, one of each per round, after one untimed round (page
cache):

- ``process``: ``SPECSCOPE_READ_AHEAD=process`` with the import beside it;
- ``threads``: ``SPECSCOPE_READ_AHEAD=threads`` with the import beside it;
- ``alone``: threads, nothing beside them (what the read costs without the import).

The arrays taken are checked equal across the ways (a digest; a difference exits 1).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

from bench_read import alternating, run_code

ROOT = Path(__file__).resolve().parents[1]
CHILD = r"""
import time
T0 = time.perf_counter()
import hashlib, json, sys
from pathlib import Path
from specscope.analysis import opsread
path = Path(sys.argv[1])
opsread.PREFETCH_MIN_BYTES = 0
opsread.prefetch(path)
forked = isinstance(opsread._pending.get(path.resolve(), {}).get("ops"), opsread._Forked)
if sys.argv[2] != "alone":
    import pandas  # noqa: F401
imported = time.perf_counter() - T0
reads = {what: opsread.take(path, what) for what in ("ops", "runtime", "nvtx")}
taken = time.perf_counter() - T0
digest = hashlib.sha256()
for cols in (reads["ops"][0], reads["runtime"] or [], reads["nvtx"] or []):
    for a in cols:
        if a is not None:
            digest.update(str((a.dtype.str, a.shape)).encode() + a.tobytes())
print(json.dumps({"imported": imported, "taken": taken, "forked": forked,
                  "digest": digest.hexdigest()}))
"""
WAYS = {"process": "process", "threads": "threads", "alone": "threads"}


def run_child(export: Path, way: str) -> dict:
    env = {
        "SPECSCOPE_READ_AHEAD": WAYS[way],
        # (one OpenBLAS thread unless set, as the reading commands run: specscope.cli)
        "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1"),
    }
    return run_code(CHILD, [str(export), way], env, f"{way}: the run")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("export", type=Path)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args(argv)
    if not a.export.is_file():
        print(f"Error: {a.export}: no such file; give an nsys SQLite export", file=sys.stderr)
        return 2
    runs = alternating(run_child, a.export, list(WAYS), a.repeat)
    print(f"export {a.export}  load {os.getloadavg()[0]:.2f}  (seconds from the process' start)")
    for way, rs in runs.items():
        taken = [r["taken"] for r in rs]
        imported = [r["imported"] for r in rs]
        print(
            f"{way:8s} reads taken: best {min(taken):.3f} median {statistics.median(taken):.3f}"
            f"  import ended: median {statistics.median(imported):.3f}"
            f"  in a child process: {sum(r['forked'] for r in rs)}/{len(rs)}"
        )
    digests = {r["digest"] for rs in runs.values() for r in rs}
    print("arrays: " + ("the same every way" if len(digests) == 1 else "DIFFER"))
    return 0 if len(digests) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
