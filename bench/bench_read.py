"""Time the reads of an export's large tables by page scan against SQL (ADBC, ``sqlite3``).

    python bench/bench_read.py /tmp/bench/ops2m.sqlite [--readers pages,adbc] [--repeat 3]

For each reader, a child process reads the GPU operations (:func:`.opsread.read_ops`, on the
threads ``analyze`` uses), the CUDA API calls and the NVTX events of EXPORT the way the analysis
does (ADBC imported and connected before the clock starts), and prints its wall and CPU time
per read and its peak RSS; ``SPECSCOPE_SQLITE_READER`` picks the reader (``pages``:
:mod:`specscope.analysis.pagescan`, where the tables' pages are decoded, by its C fast path
where a compiler built it; ``numpy``: the same with ``SPECSCOPE_NATIVE=0``, numpy only). Runs
alternate between the readers, one of each per round, after one untimed round (page cache);
best and median per reader and read. The arrays of every reader are checked equal to the
first's (dtypes, shapes, values); a difference is an error (exit 1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = r"""
import hashlib, json, resource, sqlite3, sys, time
from pathlib import Path
from specscope.analysis import opsread, sqlread
path = Path(sys.argv[1])
con = sqlite3.connect(sqlread.readonly_uri(path), uri=True)
tables = frozenset(r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
out, digest = {}, hashlib.sha256()
# (untimed: ADBC's import and connection; the other readers need none)
columnar = sqlread.columnar_connection(path) if sys.argv[2] == "adbc" else None

def timed(name, read):
    t, c = time.perf_counter(), time.process_time()
    cols = read()
    out[name] = [time.perf_counter() - t, time.process_time() - c, len(cols[0])]
    for a in cols:
        digest.update(str((a.dtype.str, a.shape)).encode())
        digest.update(a.tobytes())

timed("ops", lambda: opsread.read_ops(con, path, tables, sqlread.read_threads(), False))
if opsread.RUNTIME in tables:
    sql = opsread.runtime_sql(opsread.table_columns(con, opsread.RUNTIME))
    timed("api", lambda: opsread.read_runtime(con, columnar, sql, path))
if opsread.NVTX in tables:
    sql = opsread.nvtx_sql(opsread.table_columns(con, opsread.NVTX))
    timed("nvtx", lambda: opsread.read_nvtx(con, columnar, sql, path))
out["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
out["digest"] = digest.hexdigest()
print(json.dumps(out))
"""


def run_code(code: str, args: list[str], env: dict[str, str], what: str) -> dict:
    """``python -c code *args`` as a child (bytecode caching on, as users run; this tree on
    ``PYTHONPATH``; ``env`` set), and the JSON it prints; exits naming ``what`` if it fails.
    (Also the child runner of ``bench_read_ahead.py``.)"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | env
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env
    )
    if done.returncode:
        raise SystemExit(f"{what} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def alternating(run, export: Path, kinds: list[str], repeat: int) -> dict[str, list[dict]]:
    """``run(export, kind)`` once per kind untimed (page cache, bytecode), then ``repeat``
    rounds of one run per kind, so that every kind sees the same load; the timed runs by kind.
    (Also used by ``bench_read_ahead.py``.)"""
    for kind in kinds:
        run(export, kind)
    runs = {kind: [] for kind in kinds}
    for _ in range(repeat):
        for kind in kinds:
            runs[kind].append(run(export, kind))
    return runs


def run_child(export: Path, reader: str) -> dict:
    """One child's reads of ``export`` with ``reader``: {read: [wall, cpu, rows]}, peak, digest."""
    env = {
        "SPECSCOPE_SQLITE_READER": "pages" if reader == "numpy" else reader,
        "SPECSCOPE_NATIVE": "0" if reader == "numpy" else "1",
    }
    return run_code(CHILD, [str(export), reader], env, f"{reader}: the read")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("export", type=Path)
    p.add_argument(
        "--readers", default="pages,adbc", help="comma-separated (pages,numpy,adbc,sqlite3)"
    )
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)
    if not a.export.is_file():
        print(f"Error: {a.export}: no such file; give an nsys SQLite export", file=sys.stderr)
        return 2
    readers = [r for r in a.readers.split(",") if r]
    runs = alternating(run_child, a.export, readers, a.repeat)
    print(f"export {a.export}  load {os.getloadavg()[0]:.2f}")
    digests = {r: {x["digest"] for x in v} for r, v in runs.items()}
    for r in readers:
        print(f"{r:8s} peak RSS {max(x['peak_mib'] for x in runs[r]):6.0f} MiB")
        for read in ("ops", "api", "nvtx"):
            if read not in runs[r][0]:
                continue
            wall = [x[read][0] for x in runs[r]]
            cpu = [x[read][1] for x in runs[r]]
            print(
                f"  {read:5s} {runs[r][0][read][2]:>11,} rows  wall best {min(wall):.3f} s "
                f"median {statistics.median(wall):.3f} s  CPU best {min(cpu):.3f} s "
                f"median {statistics.median(cpu):.3f} s"
            )
    first = digests[readers[0]]
    same = all(d == first and len(d) == 1 for d in digests.values())
    print("arrays: " + ("the same for every reader" if same else f"DIFFER: {digests}"))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
