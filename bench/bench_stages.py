"""Resident memory of one ``specscope`` command, stage by stage.

    python bench/bench_stages.py analyze /tmp/bench/ops20m.sqlite --preset eagle --format json

Runs the command in this process (its output to /dev/null) with the analysis' main stages
wrapped, while another process samples this one's resident set size every 5 ms; prints, per
stage, the highest size sampled while it ran and the size when it ended (MiB), then the
process' peak (``ru_maxrss``). A stage that runs inside another is listed on its own and
counted in both. The read ahead runs in its child as in the command
(:mod:`specscope.analysis.forkread`; a sampling thread here would have kept it on threads),
so its stages are not listed; ``SPECSCOPE_READ_AHEAD=threads`` reads on threads of this
process, the read among the stages. The stages' modules are imported before the command runs,
so pandas is in the child too. The figures of ``bench/README.md`` ("where the 20 M peak went")
come from it; the tree is the one on ``sys.path`` (``PYTHONPATH=TREE`` measures another
checkout). Linux only (``/proc``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import resource
import subprocess
import sys
import threading
import time

STAGES = [
    ("specscope.analysis.opsread", "read_ops", "GPU operations read"),
    ("specscope.analysis.loader", "op_names", "op names (categoricals)"),
    ("specscope.analysis.loader", "_unpack_op_flags", "op flags unpacked"),
    ("specscope.analysis.loader", "by_device", "rows regrouped by device (ranks)"),
    ("specscope.analysis.validate", "validated", "validation"),
    ("specscope.analysis.steps", "_launch_steps", "launch lookup, steps of the ops"),
    ("specscope.analysis.steps", "find_steps", "steps found"),
    ("specscope.analysis.metrics", "_host_metrics", "host metrics"),
    ("specscope.analysis.metrics", "_count_metrics", "per-step counts (coverage beside)"),
    ("specscope.analysis.metrics", "_window_metrics", "window metrics"),
    ("specscope.analysis.gaps", "gap_attribution", "gap attribution"),
    ("specscope.analysis.metrics", "_api_metrics", "API call counts"),
    ("specscope.analysis.summary", "summarize", "summary"),
    ("specscope.analysis.auto", "analyze_processes", "every process analysed"),
    ("specscope.analysis.run:Analysis", "shed", "shed (compare: op totals kept)"),
    ("specscope.analysis.composition", "median_step_view", "report: median step's view"),
    ("specscope.analysis.explain", "explain_gap", "report, explain: the gap's story"),
    ("specscope.analysis.compare", "compare_runs", "compare_runs"),
]
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mib() -> float:
    """This process' resident set size now (MiB)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


_SAMPLER = """
import os, select, sys
pid, period, page = int(sys.argv[1]), float(sys.argv[2]), os.sysconf("SC_PAGE_SIZE")
def rss():
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * page / 2**20
highest = rss()
while True:
    asked = select.select([0], [], [], period)[0]
    try:
        now = rss()
    except OSError:
        break
    highest = max(highest, now)
    if asked:
        if not os.read(0, 1):
            break
        print(highest, flush=True)
        highest = now
"""


class Sampler:
    """The resident size of this process every ``period_s``, sampled by another process (a
    thread here would keep the read ahead out of a child: :mod:`specscope.analysis.forkread`
    forks only a process of one thread); the highest since a mark."""

    def __init__(self, period_s: float = 0.005):
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SAMPLER, str(os.getpid()), str(period_s)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = os.getpid()
        self._lock = threading.Lock()  # (stages run on two threads: each mark answered whole)

    def stop(self) -> None:
        self._proc.stdin.close()
        self._proc.wait()

    def mark(self) -> float:
        """The highest size since the last mark (or the start), the current one included."""
        with self._lock:
            self._proc.stdin.write("m")
            self._proc.stdin.flush()
            return max(float(self._proc.stdout.readline()), rss_mib())


def _wrap(sampler: Sampler, rows: list, owner, name: str, label: str) -> list[tuple]:
    """Wrap the stage ``owner.name`` wherever it is bound; (where, name, original) of each."""
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def wrapped(*args, **kwargs):
        if os.getpid() != sampler.pid:  # (the read ahead's child: not measured)
            return inner(*args, **kwargs)
        sampler.mark()
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            rows.append((label, sampler.mark(), rss_mib(), time.perf_counter() - start))

    bound = [owner] + [
        module  # where it was imported by name, too
        for module in list(sys.modules.values())
        if getattr(module, "__name__", "").startswith("specscope")
        and module is not owner
        and getattr(module, name, None) is inner
    ]
    for where in bound:
        setattr(where, name, wrapped)
    return [(where, name, inner) for where in bound]


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    sampler, rows, originals = Sampler(), [], []
    from specscope.analysis.sqlread import prefer_light_reader

    # as the command would (its inputs all plain SQLite: no pyarrow), before the stages' modules
    # import pandas
    prefer_light_reader([a for a in argv[1:] if os.path.isfile(a)])
    importlib.import_module("specscope.cli")  # (every module that imports the stages by name)
    for where, name, label in STAGES:
        module, _, cls = where.partition(":")
        owner = importlib.import_module(module)
        owner = getattr(owner, cls) if cls else owner
        if hasattr(owner, name):
            originals += _wrap(sampler, rows, owner, name, label)
    from specscope.cli import cli

    start = time.perf_counter()
    code = 0
    try:
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            cli(args=argv, prog_name="specscope")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        sampler.stop()
        for where, name, inner in originals:
            setattr(where, name, inner)
    wall = time.perf_counter() - start
    print(f"{'stage':40s} {'highest MiB':>12s} {'at end MiB':>11s} {'seconds':>8s}")
    for label, highest, end, seconds in rows:
        print(f"{label:40s} {highest:12.0f} {end:11.0f} {seconds:8.2f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MiB ({peak / 1024:.2f} GiB), {wall:.2f} s, exit {code}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
