"""Peak memory of ``specscope analyze`` per process: the analysis and its read ahead's child.

    python bench/bench_memory.py EXPORT [EXPORT...] [--preset eagle] [--repeat 3] [--tree DIR]

Each run is ``python -m specscope analyze EXPORT --format json [--preset P]`` (output to
``/dev/null``, bytecode cached) while this script reads ``/proc/PID/status`` of the command and
of each of its descendants every 10 ms: ``VmRSS`` (and of it ``RssShmem``, the read ahead's
memfd mapped) at each one's peak. The command's own peak (``os.wait4``) is the larger of the
two, which is what ``bench_analyze.py`` and ``bench_trees.py`` report; this one says which
process holds it. Nothing is imported into the command (a wrapper importing the analysis'
modules before it starts would move pandas' import ahead of the read ahead's fork, and so
into the child). ``--tree``: the ``specscope`` of another source tree (first on
``PYTHONPATH``). Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_S = 0.01


def status(pid: int) -> dict[str, int] | None:
    """VmRSS and RssShmem (MiB) of process ``pid``; None once it is gone."""
    found = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "RssShmem"):
                    found[key] = int(value.split()[0]) // 1024
    except OSError:
        return None
    return found


def descendants(pid: int) -> list[int]:
    """The children of ``pid``, and theirs (``/proc/PID/task/PID/children``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = [int(k) for k in f.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def run_once(export: Path, preset: str | None, tree: Path | None) -> dict:
    """One analysis: its wall time and the peak of each process (MiB)."""
    cmd = [sys.executable, "-m", "specscope", "analyze", str(export), "--format", "json"]
    cmd += ["--preset", preset] if preset is not None else []
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    peaks: dict[int, dict[str, int]] = {}
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(cmd, stdout=null, stderr=null, env=env, cwd="/tmp")
        while p.poll() is None:
            for pid in [p.pid, *descendants(p.pid)]:
                s = status(pid)
                if s and s.get("VmRSS", 0) > peaks.get(pid, {}).get("VmRSS", -1):
                    peaks[pid] = s
            time.sleep(SAMPLE_S)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{export}: analyze exited {p.returncode} ({' '.join(cmd)})")
    main = peaks.get(p.pid, {"VmRSS": 0, "RssShmem": 0})
    kids = [s for pid, s in peaks.items() if pid != p.pid]
    child = max(kids, key=lambda s: s["VmRSS"]) if kids else None
    return {"wall_s": wall, "analysis": main, "child": child}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("exports", nargs="+", type=Path)
    ap.add_argument("--preset", default=None, help="a preset ('' for zero-config; default: none)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tree", type=Path, default=None)
    args = ap.parse_args(argv)
    if not Path("/proc/self/status").exists():
        print("bench_memory.py reads /proc: Linux only", file=sys.stderr)
        return 2
    for export in args.exports:
        if not export.is_file():
            print(f"{export}: no such export (bench/README.md, Running)", file=sys.stderr)
            return 2
        runs = [run_once(export, args.preset, args.tree) for _ in range(args.repeat)]
        walls = [r["wall_s"] for r in runs]
        main_peaks = [r["analysis"]["VmRSS"] for r in runs]
        child_peaks = [r["child"]["VmRSS"] for r in runs if r["child"]]
        load = os.getloadavg()[0]
        print(
            f"{export.name}: wall best {min(walls):.2f} s, median {statistics.median(walls):.2f} s;"
            f" analysis peak {min(main_peaks)}-{max(main_peaks)} MiB"
            f" (of it mapped from the read ahead {runs[0]['analysis'].get('RssShmem', 0)} MiB"
            " at the first run's peak);"
            + (
                f" read ahead's child peak {min(child_peaks)}-{max(child_peaks)} MiB"
                if child_peaks
                else " no child (read on threads or not ahead)"
            )
            + f"; {args.repeat} runs, load {load:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
