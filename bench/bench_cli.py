"""Time ``specscope compare``, start-up and ``report`` against the goals of issue 19.

Three goals, each a few commands run as child processes (wall time, CPU time and peak RSS from
``os.wait4``, as :mod:`bench_analyze` measures them); every command runs once untimed (page
cache, ``.pyc`` files), then ``--repeat`` (3) timed runs, of which the best and the median are
reported:

- **compare**: ``analyze A --format json`` and ``compare A B`` on two large exports
  (``bench/make_export.py``: 2 M GPU ops, seeds 1 and 2); goal: compare <= 2.5x analyze.
- **start-up**: ``specscope --help`` (goal <= 0.1 s) and ``analyze`` of two small real exports
  from ``tests/data`` (goal <= 0.35 s), beside what bounds them: a bare ``python -c pass``, and
  ``import numpy`` / ``import pandas`` alone; the peer, ``nsys stats -r cuda_gpu_kern_sum`` on
  the same exports (``scripts/install_nsys.sh``), in the same run.
- **report**: ``report BEFORE AFTER`` of two small exports into a temporary folder (goal
  <= 1.5 s).

Children run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed from their
environment; the untimed run writes the ``.pyc`` files), as an installed package runs.
The 1-minute load average is printed before and after each goal (the machine is shared: a
run under load can be 2x slower; CPU time is less sensitive to it than wall time). One JSON line
per run is appended to ``bench/results_cli.jsonl``.

    python bench/bench_cli.py                      # all goals; compare needs the 2 M exports
    python bench/bench_cli.py --only startup,report
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_analyze import git, run_child

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results_cli.jsonl"
DATA = ROOT / "tests" / "data"
SMALL = (DATA / "cpu_eagle_2023.sqlite", DATA / "graphs" / "run_graph_kpool_nvtx.sqlite")
REPORT_PAIR = (DATA / "eagle_node_before.sqlite", DATA / "eagle_node_after.sqlite")
BIG = (Path("/tmp/bench/ops2m.sqlite"), Path("/tmp/bench/ops2m_b.sqlite"))
NSYS = Path.home() / ".local/specscope/nsys-2023.4.4/bin/specscope-nsys"
GOALS = {"help_s": 0.1, "small_analyze_s": 0.35, "report_s": 1.5, "compare_ratio": 2.5}
SPECSCOPE = [sys.executable, "-m", "specscope"]
PY = sys.executable


def specscope_of(tree: Path) -> list[str]:
    """The command line of the ``specscope`` in source tree ``tree`` (``--tree``: e.g. a
    ``git archive`` of an older commit, for a before/after in one run)."""
    code = f"import sys; sys.path.insert(0, {str(tree)!r}); from specscope.cli import main; main()"
    return [PY, "-c", code]


def measure(name: str, cmd: list[str], repeat: int, timeout_s: float = 600) -> dict:
    """One untimed run, then ``repeat`` timed ones: best/median wall and CPU, peak RSS."""
    warm = run_child(cmd, timeout_s)
    if warm["rc"] != 0:
        raise SystemExit(f"{name}: exit {warm['rc']}: {warm['stderr'].strip()[-2000:]}")
    runs = [run_child(cmd, timeout_s) for _ in range(repeat)]
    walls, cpus = [r["wall_s"] for r in runs], [r["cpu_s"] for r in runs]
    row = {
        "name": name,
        "cmd": " ".join("python" if c == PY else str(c) for c in cmd),
        "best_s": min(walls),
        "median_s": statistics.median(walls),
        "runs_s": walls,
        "cpu_best_s": min(cpus),
        "peak_rss_mib": max(r["rss_bytes"] for r in runs) / 2**20,
    }
    print(
        f"  {name:<40} best {row['best_s']:6.3f} s  median {row['median_s']:6.3f} s  "
        f"CPU best {row['cpu_best_s']:6.3f} s  RSS {row['peak_rss_mib']:5.0f} MiB   {row['cmd']}"
    )
    return row


def load() -> float:
    return os.getloadavg()[0]


def goal_compare(repeat: int, a: Path, b: Path) -> dict:
    """compare A B against one analyze A (both with the eagle preset)."""
    if not (a.is_file() and b.is_file()):
        why = f"missing {a} or {b} (bench/make_export.py OUT --ops 2000000 [--seed 2])"
        print(f"  skipped: {why}")
        return {"skipped": why}
    preset = ["--preset", "eagle"]
    analyze = measure("analyze A (json)", [*SPECSCOPE, "analyze", str(a), *preset, "--format",
                                           "json"], repeat)  # fmt: skip
    compare = measure("compare A B", [*SPECSCOPE, "compare", str(a), str(b), *preset], repeat)
    ratio = compare["best_s"] / analyze["best_s"]
    print(f"  compare / analyze = {ratio:.2f}x (goal <= {GOALS['compare_ratio']}x)")
    return {"rows": [analyze, compare], "ratio": ratio, "met": ratio <= GOALS["compare_ratio"]}


def goal_startup(repeat: int, tmp: Path) -> dict:
    """--help, analyze of the small exports, what bounds them, and nsys stats on them."""
    rows = [
        measure("python -c pass", [PY, "-c", "pass"], repeat),
        measure("import numpy", [PY, "-c", "import numpy"], repeat),
        measure("import pandas", [PY, "-c", "import pandas"], repeat),
        measure("specscope --help", [*SPECSCOPE, "--help"], repeat),
    ]
    for path in SMALL:
        name = f"analyze {path.name}"
        rows.append(measure(name, [*SPECSCOPE, "analyze", str(path), "--preset", "eagle"], repeat))
    if NSYS.is_file():
        for path in SMALL:  # a copy: nsys may write beside its input
            copy = tmp / path.name
            shutil.copy(path, copy)
            cmd = [str(NSYS), "stats", "-r", "cuda_gpu_kern_sum", str(copy)]
            rows.append(measure(f"nsys stats {path.name}", cmd, repeat))
    else:
        print(f"  peer skipped: no nsys at {NSYS} (scripts/install_nsys.sh)")
    by = {r["name"]: r["best_s"] for r in rows}
    small = max(by[f"analyze {p.name}"] for p in SMALL)
    met = by["specscope --help"] <= GOALS["help_s"] and small <= GOALS["small_analyze_s"]
    print(
        f"  --help {by['specscope --help']:.3f} s (goal <= {GOALS['help_s']} s), small analyze "
        f"{small:.3f} s (goal <= {GOALS['small_analyze_s']} s); import pandas alone "
        f"{by['import pandas']:.3f} s"
    )
    return {"rows": rows, "met": met}


def goal_report(repeat: int, tmp: Path) -> dict:
    """report of the two small node-mode exports into a temporary folder."""
    cmd = [*SPECSCOPE, "report", *map(str, REPORT_PAIR), "--preset", "eagle", "--out", str(tmp)]
    row = measure("report before after", cmd, repeat)
    print(f"  report {row['best_s']:.3f} s (goal <= {GOALS['report_s']} s)")
    return {"rows": [row], "met": row["best_s"] <= GOALS["report_s"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Time specscope compare, start-up and report (issue 19).",
        epilog="example: python bench/bench_cli.py --only startup,report",
    )
    p.add_argument("--only", default="startup,report,compare", help="goals, comma-separated")
    p.add_argument("--repeat", type=int, default=3, help="timed runs per command")
    p.add_argument("--a", type=Path, default=BIG[0], help="compare: the first large export")
    p.add_argument("--b", type=Path, default=BIG[1], help="compare: the second large export")
    p.add_argument("--results", type=Path, default=RESULTS, help="JSON lines file to append to")
    p.add_argument("--no-record", action="store_true", help="do not append to --results")
    p.add_argument(
        "--tree", type=Path, default=None, help="time the specscope of this source tree instead"
    )
    args = p.parse_args(argv)
    only = [g.strip() for g in args.only.split(",") if g.strip()]
    # as installed: modules compiled once (.pyc), not on every start (20-80 ms here)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if args.tree:
        SPECSCOPE[:] = specscope_of(args.tree.resolve())
    if unknown := set(only) - {"compare", "startup", "report"}:
        p.error(f"--only: unknown goal(s) {', '.join(sorted(unknown))}")
    result: dict = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_sha": git("rev-parse", "HEAD"),
        "tree": str(args.tree) if args.tree else None,
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "cpu_count": os.cpu_count(),
        "goals": GOALS,
    }
    with tempfile.TemporaryDirectory(prefix="bench_cli_") as tmp:
        for goal in only:
            before = load()
            print(f"{goal} (1-min load average {before:.2f})")
            if goal == "compare":
                out = goal_compare(args.repeat, args.a, args.b)
            elif goal == "startup":
                out = goal_startup(args.repeat, Path(tmp))
            else:
                out = goal_report(args.repeat, Path(tmp))
            out["loadavg_1m"] = [before, load()]
            print(f"  load average {before:.2f} before, {load():.2f} after")
            result[goal] = out
    if not args.no_record:
        with args.results.open("a") as f:
            f.write(json.dumps(result) + "\n")
        print(f"appended to {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
