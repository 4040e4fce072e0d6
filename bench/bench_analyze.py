"""Time ``specscope analyze`` on a (large) export against a bare SQLite scan of the same columns.

Two measurements on one export, page cache warm (each command runs once before it is timed):

- **floor**: one aggregate query per table over exactly the columns the analysis reads
  (``count(*), total(start), total(end), ...``), run by the ``sqlite3`` CLI (Python's ``sqlite3``
  when the CLI is missing). No analysis can read the rows faster than SQLite decodes them, so
  this is the floor; the analysis' time divided by it says how much is spent above reading.
- **analyze**: ``python -m specscope analyze EXPORT --preset eagle --format json`` as a child
  process: wall time and peak RSS (``ru_maxrss`` of that child, from ``os.wait4``).

Floor and analyze alternate, one of each per round (``--repeat`` rounds, 3), so that both see
the same load; best and median of each, with every run kept (``--preset ''``: the zero-config
analysis). Prints a table and appends one JSON line with provenance (git SHA, date, CPU count,
load average, export size and op count) to ``bench/results.jsonl``.

    python bench/bench_analyze.py /tmp/bench/ops2m.sqlite
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results.jsonl"
GOAL_WALL_S = 5.0
GOAL_RSS_BYTES = int(1.5 * 2**30)  # 1.5 GiB

# The columns the analysis reads, per table (absent tables and columns are skipped).
FLOOR_COLUMNS = {
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start end deviceId streamId correlationId globalPid shortName demangledName graphNodeId"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start end deviceId streamId correlationId globalPid copyKind bytes graphNodeId"
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "start end deviceId streamId correlationId globalPid bytes graphNodeId"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": "start end globalTid correlationId nameId",
    "NVTX_EVENTS": "start end eventType rangeId globalTid textId domainId",
}
GPU_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)


def floor_queries(export: Path) -> dict[str, str]:
    """One aggregate query per table present: count(*) and total() of each column read.

    ``total()`` rather than ``sum()``: the sum of 2 M ``globalPid`` overflows 64-bit integers.
    """
    con = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        queries = {}
        for table, columns in FLOOR_COLUMNS.items():
            if table not in tables:
                continue
            have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
            if table == "NVTX_EVENTS" and "text" in have:
                parts = ["total(length(text))"]
            else:
                parts = []
            parts = [f"total({c})" for c in columns.split() if c in have] + parts
            queries[table] = f"SELECT count(*), {', '.join(parts)} FROM {table};"
        if "StringIds" in tables:
            queries["StringIds"] = "SELECT count(*), total(length(value)) FROM StringIds;"
        return queries
    finally:
        con.close()


def run_floor(export: Path, queries: dict[str, str]) -> tuple[dict, dict[str, int], str]:
    """One timed run of all floor queries: ({wall_s, cpu_s}, rows per table, tool)."""
    cli = shutil.which("sqlite3")
    if cli:
        script = "\n".join(queries.values()) + "\n"
        cmd = [cli, "-readonly", "-batch", "-noheader", "-list", str(export)]
        r = run_child(cmd, 600, stdin=script.encode())
        if r["rc"] != 0:
            raise RuntimeError(f"sqlite3 failed (exit {r['rc']}): {r['stderr'].strip()}")
        lines = r["stdout"].splitlines()
        version = subprocess.run([cli, "-version"], capture_output=True, text=True).stdout
        rows = {t: int(line.split("|")[0]) for t, line in zip(queries, lines, strict=True)}
        return (
            {"wall_s": r["wall_s"], "cpu_s": r["cpu_s"]},
            rows,
            f"sqlite3 CLI {version.split()[0]}",
        )
    con = sqlite3.connect(f"file:{export}?mode=ro", uri=True)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        results = {t: con.execute(sql).fetchone() for t, sql in queries.items()}
        timing = {"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0}
    finally:
        con.close()
    return timing, {t: int(r[0]) for t, r in results.items()}, f"python sqlite3 {sqlite3.version}"


def analyze_available() -> tuple[bool, str]:
    """Whether ``python -m specscope analyze --help`` works, and why not."""
    cmd = [sys.executable, "-m", "specscope", "analyze", "--help"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    except subprocess.TimeoutExpired:
        return False, "`python -m specscope analyze --help` timed out"
    if p.returncode == 0:
        return True, ""
    last = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or [""])[-1]
    return False, f"`python -m specscope analyze --help` exited {p.returncode}: {last}"


def run_child(
    cmd: list[str],
    timeout_s: float,
    stdin: bytes = b"",
    cwd: Path = ROOT,
    env_extra: dict[str, str] | None = None,
) -> dict:
    """Run ``cmd`` in ``cwd``: its wall and CPU (user + sys) time, peak RSS (bytes), exit code
    and output; ``env_extra``: variables set in its environment (``PYTHONPATH``: a tree).

    CPU time is less sensitive than wall time to other work on a shared machine. The child
    caches bytecode as an installed package does (``PYTHONDONTWRITEBYTECODE`` dropped from its
    environment: otherwise every start compiles every module, 0.1-0.3 s here).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= env_extra or {}
    with (
        tempfile.TemporaryFile() as inp,
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        inp.write(stdin)
        inp.seek(0)
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=inp, stdout=out, stderr=err, cwd=cwd, env=env)
        deadline = t0 + timeout_s
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()  # the child this function started
                pid, status, usage = os.wait4(p.pid, 0)
                break
            time.sleep(0.002)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return {
            "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "rss_bytes": usage.ru_maxrss * 1024,  # Linux reports KiB
            "rc": p.returncode,
            "timed_out": wall > timeout_s,
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
        }


def describe_output(text: str) -> str:
    """A short description of the JSON the analysis printed."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        return f"not JSON ({e}); first 200 chars: {text[:200]!r}"
    if isinstance(doc, dict):
        parts = []
        for k, v in list(doc.items())[:20]:
            if isinstance(v, list | dict):
                parts.append(f"{k}[{len(v)}]")
            elif isinstance(v, int | float) and not isinstance(v, bool):
                parts.append(f"{k}={v}")
            else:
                parts.append(k)
        return "JSON object: " + ", ".join(parts)
    if isinstance(doc, list):
        return f"JSON list of {len(doc)}"
    return f"JSON {type(doc).__name__}"


def git(*args: str) -> str | None:
    try:
        p = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Time `specscope analyze` on an export against a bare sqlite3 scan (floor).",
        epilog="example: python bench/bench_analyze.py /tmp/bench/ops2m.sqlite",
    )
    p.add_argument("export", type=Path, help="an nsys SQLite export (bench/make_export.py)")
    p.add_argument("--repeat", type=int, default=3, help="timed runs of each (best is reported)")
    p.add_argument("--preset", default="eagle", help="'' for the zero-config analysis")
    p.add_argument("--timeout", type=float, default=600, help="seconds per analysis run")
    p.add_argument("--results", type=Path, default=RESULTS, help="JSON lines file to append to")
    p.add_argument("--no-record", action="store_true", help="do not append to --results")
    p.add_argument("--skip-analyze", action="store_true", help="measure the floor only")
    args = p.parse_args(argv)
    export = args.export.resolve()
    if not export.is_file():
        print(f"error: no export at {export}", file=sys.stderr)
        return 1

    load_before = os.getloadavg()[0]
    queries = floor_queries(export)
    run_floor(export, queries)  # warm the page cache
    ok, why = (False, "--skip-analyze") if args.skip_analyze else analyze_available()
    cmd = [sys.executable, "-m", "specscope", "analyze", str(export)]
    cmd += ["--preset", args.preset] if args.preset else []  # '': zero-config
    cmd += ["--format", "json"]
    # floor and analyze alternate (one of each per round), so that both see the same load
    floor_runs, floor_cpu, rows, tool, runs, failed, warm = [], [], {}, "", [], None, None
    if ok:
        warm = run_child(cmd, args.timeout)  # warm-up, not counted
        failed = warm if warm["rc"] != 0 else None
    for _ in range(args.repeat):
        timing, rows, tool = run_floor(export, queries)
        floor_runs.append(timing["wall_s"])
        floor_cpu.append(timing["cpu_s"])
        if ok and failed is None:
            r = run_child(cmd, args.timeout)
            failed = r if r["rc"] != 0 else None
            runs.append(r)
    ops = sum(rows.get(t, 0) for t in GPU_TABLES)
    size = export.stat().st_size

    result: dict = {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_sha": git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        # the analysis measured is the working tree: list what differs from the SHA in it
        "git_changes": (
            git("status", "--porcelain", "--", "specscope", "pyproject.toml") or ""
        ).splitlines(),
        "host": {
            "cpu_count": os.cpu_count(),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version,
        },
        "export": {"path": str(export), "bytes": size, "ops": ops, "rows": rows},
        "floor": {
            "tool": tool,
            "best_s": min(floor_runs),
            "median_s": statistics.median(floor_runs),
            "runs_s": floor_runs,
            "cpu_best_s": min(floor_cpu),
            "cpu_runs_s": floor_cpu,
            "queries": list(queries.values()),
        },
        "analyze": None,
        "ratio_to_floor": None,
        "cpu_ratio_to_floor": None,
        "goal": {"wall_s": GOAL_WALL_S, "rss_bytes": GOAL_RSS_BYTES},
        "meets_goal": None,
    }
    print(f"export   {export}  {size / 1e6:.1f} MB  {ops:,} GPU ops")
    print(
        f"floor    {tool}: best {min(floor_runs):.3f} s  median "
        f"{statistics.median(floor_runs):.3f} s  runs {_fmt(floor_runs)}  "
        f"CPU best {min(floor_cpu):.3f} s"
    )

    status = 0
    if not ok:
        print(f"analyze  skipped: {why}")
        result["analyze"] = {"skipped": why}
    elif failed is not None:
        r = failed
        print(f"analyze  FAILED (exit {r['rc']}{', timed out' if r['timed_out'] else ''})")
        print("--- stderr ---\n" + r["stderr"].rstrip()[-4000:])
        result["analyze"] = {
            "cmd": _cmd_str(cmd),
            "rc": r["rc"],
            "timed_out": r["timed_out"],
            "wall_s": r["wall_s"],
            "rss_bytes": r["rss_bytes"],
            "stderr_tail": r["stderr"][-4000:],
        }
        status = 1
    else:
        result["analyze"] = _analyze_result(cmd, runs, warm)
        a = result["analyze"]
        result["ratio_to_floor"] = a["best_s"] / min(floor_runs)
        result["median_ratio_to_floor"] = a["median_s"] / statistics.median(floor_runs)
        result["cpu_ratio_to_floor"] = a["cpu_best_s"] / min(floor_cpu)
        result["meets_goal"] = a["best_s"] <= GOAL_WALL_S and a["peak_rss_bytes"] <= GOAL_RSS_BYTES
        print(
            f"analyze  best {a['best_s']:.3f} s  median {a['median_s']:.3f} s  "
            f"runs {_fmt(a['runs_s'])}  CPU best {a['cpu_best_s']:.3f} s  "
            f"peak RSS {a['peak_rss_bytes'] / 2**20:.0f} MiB"
        )
        print(f"         output {a['output_bytes']:,} bytes: {a['output']}")
        print(
            f"ratio    analyze / floor = {result['ratio_to_floor']:.2f}x wall (best/best), "
            f"{result['median_ratio_to_floor']:.2f}x (median/median), "
            f"{result['cpu_ratio_to_floor']:.1f}x CPU   goal "
            f"<= {GOAL_WALL_S:g} s and <= {GOAL_RSS_BYTES / 2**30:g} GiB: "
            f"{'met' if result['meets_goal'] else 'NOT met'}"
        )
    result["loadavg_1m"] = [load_before, os.getloadavg()[0]]
    print(f"load     1-min load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    if not args.no_record:
        args.results.parent.mkdir(parents=True, exist_ok=True)
        with args.results.open("a") as f:
            f.write(json.dumps(result) + "\n")
        print(f"appended to {args.results}")
    return status


def _analyze_result(cmd: list[str], runs: list[dict], warm: dict) -> dict:
    """The analyze half of the JSON line: best, median and every run, CPU, peak RSS (of all
    runs, the warm-up included) and what the output was."""
    walls = [r["wall_s"] for r in runs]
    cpus = [r["cpu_s"] for r in runs]
    return {
        "cmd": _cmd_str(cmd),
        "best_s": min(walls),
        "median_s": statistics.median(walls),
        "runs_s": walls,
        "cpu_best_s": min(cpus),
        "cpu_runs_s": cpus,
        "warmup_s": warm["wall_s"],
        "peak_rss_bytes": max(r["rss_bytes"] for r in [*runs, warm]),
        "output_bytes": len(warm["stdout"].encode()),
        "output": describe_output(warm["stdout"]),
    }


def _fmt(xs: list[float]) -> str:
    return "[" + ", ".join(f"{x:.3f}" for x in xs) + "]"


def _cmd_str(cmd: list[str]) -> str:
    return " ".join(["python" if c == sys.executable else c for c in cmd])


if __name__ == "__main__":
    sys.exit(main())
