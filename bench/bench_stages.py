"""Resident memory of one ``specscope`` command, stage by stage.

    python bench/bench_stages.py analyze /tmp/bench/ops20m.sqlite --preset eagle --format json

Runs the command in this process (its output to /dev/null) with the analysis' main stages
wrapped, and samples the resident set size every 5 ms on a thread; prints, per stage, the
highest size sampled while it ran and the size when it ended (MiB), then the process' peak
(``ru_maxrss``). A stage that runs inside another is listed on its own and counted in both.
Its sampling thread keeps the read ahead on threads of this process (a fork would not copy
it: :mod:`specscope.analysis.forkread`), so that the read is among the stages measured. The
figures of ``bench/README.md`` ("where the 20 M peak went") come from it; the tree is the
one on ``sys.path`` (``PYTHONPATH=TREE`` measures another checkout).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import resource
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
    ("specscope.analysis.compare", "compare_runs", "compare_runs"),
]
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mib() -> float:
    """This process' resident set size now (MiB)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


class Sampler:
    """The resident size every ``period_s`` on a thread, until :meth:`stop`; the highest since
    a mark."""

    def __init__(self, period_s: float = 0.005):
        self.highest = rss_mib()
        self._lock, self._done = threading.Lock(), threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period_s,), daemon=True)
        self._thread.start()

    def _run(self, period_s: float) -> None:
        while not self._done.wait(period_s):
            now = rss_mib()
            with self._lock:
                self.highest = max(self.highest, now)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def mark(self) -> float:
        """The highest size since the last mark (or the start), the current one included."""
        now = rss_mib()
        with self._lock:
            highest, self.highest = max(self.highest, now), now
        return highest


def _wrap(sampler: Sampler, rows: list, owner, name: str, label: str) -> list[tuple]:
    """Wrap the stage ``owner.name`` wherever it is bound; (where, name, original) of each."""
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def wrapped(*args, **kwargs):
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
