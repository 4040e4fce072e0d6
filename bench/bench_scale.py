"""Scale benchmark (issue 9): ``specscope analyze`` on exports of 2 M, 8 M and 20 M GPU ops
against the bare ``sqlite3`` aggregate floor and ``nsys stats -r cuda_gpu_trace``.

Per export, page cache warm (one untimed floor run first), each measurement ``--repeat`` times:

- **floor**: the aggregate scan of every column the analysis reads (``bench_analyze.py``'s
  queries, run by the ``sqlite3`` CLI);
- **analyze**: ``python -m specscope analyze EXPORT --preset eagle --format json`` as a child
  process: wall time, CPU time and peak RSS (``ru_maxrss`` from ``os.wait4``);
- **nsys**: ``NSYS stats -r cuda_gpu_trace --format csv -o /tmp/... EXPORT`` (``--nsys``,
  default ``specscope-nsys`` on PATH or the Debian 2023.4.4 install), wall time and peak RSS.

The 1-minute load average is recorded before and after each measurement (the machine is
shared). Prints one JSON line per export and a Markdown table; writes nothing in the repo.

    python bench/bench_scale.py /tmp/bench/ops2m.sqlite /tmp/scale/ops8m.sqlite \\
        /tmp/scale/ops20m.sqlite --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_analyze import floor_queries, run_child, run_floor  # noqa: E402

DEFAULT_NSYS = "/root/.local/specscope/nsys-2023.4.4/bin/specscope-nsys"


def load1() -> float:
    return os.getloadavg()[0]


def measure(fn, repeat: int) -> dict:
    runs = []
    for _ in range(repeat):
        before = load1()
        r = fn()
        r = {k: v for k, v in r.items() if k not in ("stdout", "stderr")}
        runs.append({**r, "load_before": before, "load_after": load1()})
    best = min(runs, key=lambda r: r["wall_s"])
    return {"best": best, "runs": runs, "rss_max": max(r.get("rss_bytes", 0) for r in runs)}


def bench(export: Path, repeat: int, nsys: str | None, out_dir: Path) -> dict:
    queries = floor_queries(export)
    run_floor(export, queries)  # warm the page cache
    floor_t = measure(lambda: run_floor(export, queries)[0], repeat)
    cmd = [sys.executable, "-m", "specscope", "analyze", str(export), "--preset", "eagle"]
    analyze = measure(lambda: run_child([*cmd, "--format", "json"], 600), repeat)
    if analyze["best"]["rc"] != 0:
        raise SystemExit(f"analyze failed on {export}: exit {analyze['best']['rc']}")
    row = {
        "export": str(export),
        "size_bytes": export.stat().st_size,
        "cpus": os.cpu_count(),
        "floor": floor_t,
        "analyze": analyze,
        "ratio_wall": analyze["best"]["wall_s"] / floor_t["best"]["wall_s"],
    }
    if nsys:
        stats = [nsys, "stats", "-r", "cuda_gpu_trace", "--format", "csv", "--force-export",
                 "false", "--force-overwrite", "true", "-o", str(out_dir / export.stem),
                 str(export)]  # fmt: skip
        r = measure(lambda: run_child(stats, 600), 1)
        row["nsys_stats"] = {**r, "command": " ".join(stats)}
        row["nsys_over_analyze"] = r["best"]["wall_s"] / analyze["best"]["wall_s"]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("exports", nargs="+", type=Path)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--nsys", default=shutil.which("specscope-nsys") or DEFAULT_NSYS)
    ap.add_argument("--no-nsys", action="store_true")
    args = ap.parse_args(argv)
    nsys = None if args.no_nsys or not Path(args.nsys).exists() else args.nsys
    out_dir = Path(tempfile.mkdtemp(prefix="specscope-nsys-stats-"))
    print("| export | size | load | floor | analyze wall / CPU | peak RSS | ratio | nsys stats |")
    print("|---|---|---|---|---|---|---|---|")
    for export in args.exports:
        row = bench(export, args.repeat, nsys, out_dir)
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
            f"→{a['load_after']:.1f} | {f['wall_s']:.2f} s | {a['wall_s']:.1f} s / "
            f"{a['cpu_s']:.1f} s | {row['analyze']['rss_max'] / 2**30:.2f} GiB | "
            f"{row['ratio_wall']:.1f}x | {ns_txt} |",
            flush=True,
        )
    print(f"nsys stats CSVs under {out_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
