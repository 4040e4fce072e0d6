"""Time a ``specscope`` command of two or more source trees on one export, alternating.

    python bench/bench_trees.py EXPORT OLD_TREE NEW_TREE [MORE...] [--rounds 8]
        [--command analyze|explain|report|compare|graphs|ranges|check] [--with EXPORT2 ...]
        [-- ARGS...]

Each round runs ``python -m specscope COMMAND EXPORT [EXPORT2...] ARGS`` once per tree (output
to /dev/null, the tree first on ``PYTHONPATH``, bytecode cached as an installed package has
it), so both see the same load; prints best and median wall and CPU time and the peak RSS
(``os.wait4``: each run's own) per tree, and the 1-minute load average. ``analyze`` (the
default) gets ``--format json`` unless ARGS give a ``--format``; ``report`` gets a new
``--out`` folder each run (removed after it); ``--with`` adds inputs after EXPORT (the report's
second export, compare's after). A tree is a checkout, e.g. ``git worktree add --detach
/tmp/old e3006a3``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_analyze import run_child


def time_once(
    tree: Path, export: Path, args: list[str], command: str = "analyze", more: tuple = ()
) -> tuple[float, float, int]:
    """Wall and CPU (user + sys) seconds and peak RSS (bytes) of one ``command`` of ``export``
    (and ``more`` inputs) by the specscope of ``tree``. CPU time is the steadier figure on a
    loaded machine: waiting for a core does not count, while wall time can double."""
    extra = ["--format", "json"] if command == "analyze" and "--format" not in args else []
    out = tempfile.mkdtemp(prefix="bench_trees_") if command == "report" else None
    if out is not None:
        extra = ["--out", out]
    cmd = [sys.executable, "-m", "specscope", command, str(export), *map(str, more), *args, *extra]
    try:
        run = run_child(cmd, 1800, cwd=Path("/"), env_extra={"PYTHONPATH": str(tree)})
    finally:
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)
    if run["rc"]:
        raise SystemExit(f"{tree}: {command} exited {run['rc']}: {run['stderr'][-300:]}")
    return run["wall_s"], run["cpu_s"], run["rss_bytes"]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("export", type=Path)
    p.add_argument("trees", type=Path, nargs="+", metavar="TREE")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument(
        "--command",
        choices=("analyze", "explain", "report", "compare", "graphs", "ranges", "check"),
        default="analyze",
    )
    p.add_argument(
        "--with",
        dest="more",
        type=Path,
        action="append",
        default=[],
        metavar="EXPORT2",
        help="another input after EXPORT (report's second)",
    )
    a = p.parse_args(argv)
    if len(a.trees) < 2:
        p.error("give at least two trees")
    times: dict[Path, list[tuple[float, float, int]]] = {t: [] for t in a.trees}
    load = os.getloadavg()[0]
    more = tuple(m.resolve() for m in a.more)
    for tree in a.trees:  # one untimed run each: caches warm, bytecode written
        time_once(tree.resolve(), a.export.resolve(), extra, a.command, more)
    for _ in range(a.rounds):
        for tree in a.trees:
            times[tree].append(
                time_once(tree.resolve(), a.export.resolve(), extra, a.command, more)
            )
    what = " ".join([a.command, *(m.name for m in more), *extra])
    print(f"load (1 min) {load:.2f} -> {os.getloadavg()[0]:.2f}; {what}")
    for tree, t in times.items():
        wall, cpu, rss = ([run[i] for run in t] for i in range(3))
        runs = ", ".join(f"{x:.2f}" for x in wall)
        print(
            f"{tree}: wall best {min(wall):.2f} s, median {statistics.median(wall):.2f} s; "
            f"CPU best {min(cpu):.2f} s, median {statistics.median(cpu):.2f} s; "
            f"peak RSS {max(rss) / 2**20:.0f} MiB  [wall {runs}]"
        )


if __name__ == "__main__":
    main()
