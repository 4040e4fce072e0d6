"""Every goal of issue 19 in one table, from a goal sitting (``bench/goal_sitting.sh``).

    python bench/sitting_summary.py LOG [--results bench/results.jsonl]
                                        [--results-cli bench/results_cli.jsonl]

LOG is the sitting's output (``goal_sitting.sh`` keeps it and runs this at its end). Its first
and last lines (``=== start HH:MM:SS SHA load L`` and ``=== end HH:MM:SS load L``) bound the
sitting: the rows that ``bench_analyze.py`` and ``bench_cli.py`` appended to the results files
for that commit between those times, and the JSON lines ``bench_scale.py`` printed into LOG,
are its figures. Nothing is measured here.

Printed: a Markdown table, a row per goal and export: best / median wall time, the ratio to the
bare ``sqlite3`` scan (best / best and median / median), the peak RSS, the peer where it was
measured (``nsys stats``), and whether the goal was met. **Met** is judged on the best run, as
the benchmarks report it; a median over the goal is marked beside it. The goals (the issue's):

- an export of fewer than :data:`LARGE_OPS` GPU operations (2 M; the 4 or 8 ranks of 1-2 M
  each): analyze <= 1.5x the scan;
- one of :data:`LARGE_OPS` or more (20 M, one process or 8 ranks): <= 2x the scan and
  <= 1 GiB peak RSS;
- ``compare`` of two 2 M exports <= 2.5x one analyze; ``analyze`` of a small export <= 0.35 s
  (the slower of the two); ``specscope --help`` <= 0.1 s; ``report`` of two small exports
  <= 1.5 s.

An export's GPU operations are read from its ``bench_analyze.py`` row, else counted in the file
(the last rowid of each operation table: no scan), else unknown (``?``, judged as a small one).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LARGE_OPS = 10_000_000
"""From this many GPU operations, an export is held to the 20 M goal (<= 2x, <= 1 GiB)."""
RATIO_SMALL, RATIO_LARGE, RSS_LARGE_BYTES = 1.5, 2.0, 1 << 30
OP_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)
_START = re.compile(r"^=== start (\d\d:\d\d:\d\d) ([0-9a-f]+)")
_END = re.compile(r"^=== end (\d\d:\d\d:\d\d)")


class SittingError(Exception):
    """The log is not a sitting's (no start line) or holds no figure."""


def bounds(lines: list[str]) -> tuple[str, str, str | None]:
    """(commit, start time, end time or None) of the sitting in ``lines``."""
    start = next((m for m in map(_START.match, lines) if m), None)
    if start is None:
        raise SittingError("no '=== start HH:MM:SS SHA' line: not the output of goal_sitting.sh")
    end = next((m for m in map(_END.match, lines) if m), None)
    return start.group(2), start.group(1), end.group(1) if end else None


def in_sitting(row: dict, sha: str, start: str, end: str | None) -> bool:
    """Whether results row ``row`` was written by the sitting: its commit, between its times
    (a sitting past midnight: either side of it)."""
    if not str(row.get("git_sha", "")).startswith(sha):
        return False
    clock = dt.datetime.fromisoformat(row["date"]).astimezone(dt.UTC).strftime("%H:%M:%S")
    if end is None:
        return clock >= start
    return start <= clock <= end if start <= end else clock >= start or clock <= end


def read_rows(path: Path) -> list[dict]:
    """The JSON lines of ``path`` (none where it does not exist)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ops_in(path: str) -> int | None:
    """The GPU operations of the export at ``path``: the last rowid of each operation table (nsys
    numbers its rows from 1 without holes); None where it cannot be read."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        return sum(
            con.execute(f"SELECT coalesce(max(rowid), 0) FROM {t}").fetchone()[0]
            for t in OP_TABLES
            if t in names
        )
    except sqlite3.Error:
        return None
    finally:
        con.close()


def _preset(cmd: str) -> str:
    match = re.search(r"--preset (\S+)", cmd)
    return match.group(1) if match and match.group(1) not in ("''", '""') else "zero-config"


def export_rows(lines: list[str], analyzed: list[dict]) -> list[dict]:
    """One entry per export measured against the scan: from ``bench_analyze.py`` rows
    (``analyzed``) and the JSON lines of ``bench_scale.py`` in the log."""
    out = []
    for row in analyzed:
        a, floor = row["analyze"], row["floor"]
        if "best_s" not in a:  # (a failed or skipped analysis: a row that says so)
            why = f"exit {a['rc']}" if "rc" in a else a.get("skipped", "not run")
            out.append({"export": row["export"]["path"], "failed": why})
            continue
        out.append(
            {
                "export": row["export"]["path"],
                "ops": row["export"].get("ops"),
                "preset": _preset(a.get("cmd", "")),
                "best_s": a["best_s"],
                "median_s": a["median_s"],
                "ratio": a["best_s"] / floor["best_s"],
                "ratio_median": a["median_s"] / floor["median_s"],
                "rss": a.get("peak_rss_bytes"),
                "peer": None,
            }
        )
    for line in lines:
        if not line.startswith('{"export"'):
            continue
        row = json.loads(line)
        a, peer = row["analyze"], row.get("nsys_stats")
        out.append(
            {
                "export": row["export"],
                "ops": None,
                "preset": _preset(row.get("analyze_cmd", "")),
                "best_s": a["best"]["wall_s"],
                "median_s": a["median_s"],
                "ratio": row["ratio_wall"],
                "ratio_median": row["ratio_median"],
                "rss": a.get("rss_max"),
                "peer": peer["best"]["wall_s"] if peer else None,
            }
        )
    known = {r["export"]: r["ops"] for r in out if r.get("ops")}
    for r in out:
        if "failed" not in r:
            r["ops"] = r["ops"] or known.get(r["export"]) or ops_in(r["export"])
    return out


def _mib(n: float | None) -> str:
    return "-" if n is None else f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def goal_table(exports: list[dict], cli: list[dict]) -> list[str]:
    """The Markdown lines of the table (module doc)."""
    head = ("goal", "what", "best / median", "ratio to the scan (best / median)", "peak RSS")
    lines = [f"| {' | '.join(head)} | peer | met |", "|---|---|---|---|---|---|---|"]
    lines += [_export_line(r) for r in exports]
    for row in cli:
        lines += _cli_lines(row)
    return lines


def _mark(met: bool) -> str:
    return "yes" if met else "**no**"


def _export_line(r: dict) -> str:
    """The row of one export analysed against the scan (:func:`export_rows`)."""
    name = Path(r["export"]).name
    if "failed" in r:
        return f"| - | {name} | analyze failed ({r['failed']}) | - | - | - | **no** |"
    large = r["ops"] is not None and r["ops"] >= LARGE_OPS
    limit = RATIO_LARGE if large else RATIO_SMALL
    goal = f"<= {limit}x" + (", <= 1 GiB" if large else "")
    met = r["ratio"] <= limit and (not large or (r["rss"] or 0) <= RSS_LARGE_BYTES)
    mark = _mark(met) + (" (median over)" if met and r["ratio_median"] > limit else "")
    ops = "?" if r["ops"] is None else f"{r['ops'] / 1e6:.1f} M ops"
    peer = "-" if r["peer"] is None else f"nsys stats {r['peer']:.1f} s"
    return (
        f"| {goal} | {name} ({ops}), {r['preset']} | {r['best_s']:.2f} / {r['median_s']:.2f} s"
        f" | {r['ratio']:.2f}x / {r['ratio_median']:.2f}x | {_mib(r['rss'])} | {peer} | {mark} |"
    )


def _cli_lines(row: dict) -> list[str]:
    """The rows of one ``bench_cli.py`` result: ``--help``, the slower small analyze, the
    report and compare, each where it was measured."""
    goals, out = row["goals"], []
    startup = {r["name"]: r for r in (row.get("startup") or {}).get("rows", [])}
    if help_row := startup.get("specscope --help"):
        out.append(_cli_line(goals["help_s"], "specscope --help", help_row))
    small = [r for name, r in startup.items() if name.startswith("analyze ")]
    if small:
        slow = max(small, key=lambda r: r["best_s"])
        what = f"small analyze, the slower: {slow['name'].removeprefix('analyze ')}"
        if pandas := startup.get("import pandas"):
            what += f" (import pandas alone {pandas['best_s']:.3f} s)"
        out.append(_cli_line(goals["small_analyze_s"], what, slow))
    if report := (row.get("report") or {}).get("rows"):
        out.append(_cli_line(goals["report_s"], "report of two small exports", report[0]))
    compare = (row.get("compare") or {}).get("rows", [])
    if len(compare) >= 2:
        one, both = compare[0], compare[1]
        ratio = both["best_s"] / one["best_s"]
        out.append(
            f"| <= {goals['compare_ratio']}x analyze | compare of two 2 M exports | "
            f"{both['best_s']:.2f} / {both['median_s']:.2f} s | {ratio:.2f}x analyze | "
            f"{both['peak_rss_mib']:.0f} MiB | - | {_mark(ratio <= goals['compare_ratio'])} |"
        )
    return out


def _cli_line(limit_s: float, what: str, row: dict) -> str:
    """A row of a goal in seconds: met where the best run is within ``limit_s``."""
    return (
        f"| <= {limit_s} s | {what} | {row['best_s']:.3f} / {row['median_s']:.3f} s | - | "
        f"{row['peak_rss_mib']:.0f} MiB | - | {_mark(row['best_s'] <= limit_s)} |"
    )


def summary(log: Path, results: Path, results_cli: Path) -> list[str]:
    """The lines printed for the sitting of ``log`` (module doc); SittingError without one."""
    lines = log.read_text(errors="replace").splitlines()
    sha, start, end = bounds(lines)
    analyzed = [r for r in read_rows(results) if in_sitting(r, sha, start, end)]
    cli = [r for r in read_rows(results_cli) if in_sitting(r, sha, start, end)]
    exports = export_rows(lines, analyzed)
    if not exports and not cli:
        raise SittingError(f"no figure of commit {sha} between {start} and {end or 'the end'}")
    head = f"Sitting of {sha}, {start}-{end or '?'} UTC (`bash bench/goal_sitting.sh`):"
    return [head, "", *goal_table(exports, cli)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="One table of issue 19's goals from a sitting.")
    p.add_argument("log", type=Path, help="the output of bench/goal_sitting.sh")
    p.add_argument("--results", type=Path, default=ROOT / "bench" / "results.jsonl")
    p.add_argument("--results-cli", type=Path, default=ROOT / "bench" / "results_cli.jsonl")
    args = p.parse_args(argv)
    try:
        print("\n".join(summary(args.log, args.results, args.results_cli)))
    except (OSError, SittingError, ValueError, KeyError) as e:
        print(f"sitting_summary: {args.log}: {e}; give the output of bench/goal_sitting.sh",
              file=sys.stderr)  # fmt: skip
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
