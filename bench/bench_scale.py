"""Scale benchmark (issue 9): ``specscope analyze`` on exports of 2 M, 8 M and 20 M GPU ops
against the bare ``sqlite3`` aggregate floor and ``nsys stats -r cuda_gpu_kern_sum``.

Per export, page cache warm (one untimed floor run first), each measurement ``--repeat`` times:

- **floor**: the aggregate scan of every column the analysis reads (``bench_analyze.py``'s
  queries, run by the ``sqlite3`` CLI);
- **analyze**: ``python -m specscope analyze EXPORT --preset eagle --format json`` as a child
  process (``--preset ''``: the zero-config analysis): wall time, CPU time and peak RSS
  (``ru_maxrss`` from ``os.wait4``); floor and analyze alternate, one of each per round, so that
  both see the same load (best and median of ``--repeat`` rounds, 3);
- **nsys**: ``NSYS stats -r cuda_gpu_kern_sum --format csv -o /tmp/... EXPORT`` once
  (``--nsys``, default ``specscope-nsys`` on PATH or the Debian 2023.4.4 install from
  ``scripts/install_nsys.sh``), wall time and peak RSS.

The 1-minute load average is recorded before and after each measurement (the machine is
shared). Prints one JSON line per export and a Markdown table; writes nothing in the repo.

    python bench/bench_scale.py /tmp/bench/ops2m.sqlite /tmp/bench/ops20m.sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analyze import floor_queries, run_child, run_floor  # noqa: E402

DEFAULT_NSYS = "/root/.local/specscope/nsys-2023.4.4/bin/specscope-nsys"
# the peer: per-kernel totals (`cuda_gpu_trace` needs enum tables the synthetic exports lack)
NSYS_REPORT = "cuda_gpu_kern_sum"


def load1() -> float:
    return os.getloadavg()[0]


def one(fn) -> dict:
    """One run of ``fn`` (a ``run_child``-like dict), the load average around it."""
    before = load1()
    r = fn()
    r = {k: v for k, v in r.items() if k not in ("stdout", "stderr")}
    return {**r, "load_before": before, "load_after": load1()}


def summary(runs: list[dict]) -> dict:
    """Best (by wall time) and median of ``runs``, every run, peak RSS over them."""
    best = min(runs, key=lambda r: r["wall_s"])
    median = statistics.median(r["wall_s"] for r in runs)
    rss = max(r.get("rss_bytes", 0) for r in runs)
    return {"best": best, "median_s": median, "runs": runs, "rss_max": rss}


def bench(export: Path, repeat: int, nsys: str | None, out_dir: Path, preset: str) -> dict:
    """Floor and analyze alternating (one of each per round, ``repeat`` rounds), then
    ``nsys stats`` once."""
    queries = floor_queries(export)
    run_floor(export, queries)  # warm the page cache
    cmd = [sys.executable, "-m", "specscope", "analyze", str(export)]
    cmd += ["--preset", preset] if preset else []  # '': the zero-config analysis
    floor_runs, analyze_runs = [], []
    for _ in range(repeat):
        floor_runs.append(one(lambda: run_floor(export, queries)[0]))
        analyze_runs.append(one(lambda: run_child([*cmd, "--format", "json"], 600)))
        if analyze_runs[-1]["rc"] != 0:
            raise SystemExit(f"analyze failed on {export}: exit {analyze_runs[-1]['rc']}")
    floor_t, analyze = summary(floor_runs), summary(analyze_runs)
    row = {
        "export": str(export),
        "size_bytes": export.stat().st_size,
        "cpus": os.cpu_count(),
        "analyze_cmd": " ".join(["python", *cmd[1:], "--format", "json"]),
        "floor": floor_t,
        "analyze": analyze,
        "ratio_wall": analyze["best"]["wall_s"] / floor_t["best"]["wall_s"],
        "ratio_median": analyze["median_s"] / floor_t["median_s"],
    }
    if nsys:
        stats = [nsys, "stats", "-r", NSYS_REPORT, "--format", "csv", "--force-export",
                 "false", "--force-overwrite", "true", "-o", str(out_dir / export.stem),
                 str(export)]  # fmt: skip
        r = summary([one(lambda: run_child(stats, 600))])
        row["nsys_stats"] = {**r, "command": " ".join(stats)}
        row["nsys_over_analyze"] = r["best"]["wall_s"] / analyze["best"]["wall_s"]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("exports", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--preset", default="eagle", help="'' for the zero-config analysis")
    ap.add_argument("--nsys", default=shutil.which("specscope-nsys") or DEFAULT_NSYS)
    ap.add_argument("--no-nsys", action="store_true")
    args = ap.parse_args(argv)
    nsys = None if args.no_nsys or not Path(args.nsys).exists() else args.nsys
    out_dir = Path(tempfile.mkdtemp(prefix="specscope-nsys-stats-"))
    print(
        "| export | size | load | floor best / median | analyze best / median (CPU) | "
        "peak RSS | ratio best / median | nsys stats |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for export in args.exports:
        row = bench(export, args.repeat, nsys, out_dir, args.preset)
        print(json.dumps(row), file=sys.stderr)
        a, f = row["analyze"]["best"], row["floor"]["best"]
        ns = row.get("nsys_stats", {}).get("best")
        ns_txt = (
            f"{ns['wall_s']:.1f} s (rc {ns['rc']}, {ns['rss_bytes'] / 2**30:.2f} GiB)"
            if ns
            else "-"
        )
        print(
            f"| {export.name} | {row['size_bytes'] / 1e6:.0f} MB | {a['load_before']:.1f}"
            f"→{a['load_after']:.1f} | {f['wall_s']:.2f} / {row['floor']['median_s']:.2f} s | "
            f"{a['wall_s']:.2f} / {row['analyze']['median_s']:.2f} s ({a['cpu_s']:.1f} s) | "
            f"{row['analyze']['rss_max'] / 2**30:.2f} GiB | "
            f"{row['ratio_wall']:.2f}x / {row['ratio_median']:.2f}x | {ns_txt} |",
            flush=True,
        )
    print(f"nsys stats CSVs under {out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
