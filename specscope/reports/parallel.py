"""Drawing on two cores: :func:`run_split` runs two lists of jobs at once, one in a forked child.

Matplotlib draws in Python under the GIL, so threads do not draw two figures at once; a forked
child does, and it inherits the analysed inputs and the imported matplotlib, so nothing is
pickled or imported again. ``specscope report`` draws its four PNGs this way (issue 19: the
figures were about 1.2 s of CPU of a 2.5 s report of two small exports)::

    parent  | timeline.png, composition.png |  wait  | (the child's jobs again if it failed)
    child   | distributions.png, steps.png  |  exit 0
            fork                            join

The rules, each for a reason:

- **Fork only when it is safe** (:func:`can_fork`): POSIX ``fork`` and no other Python thread
  (a thread holding a lock at the fork would leave it locked in the child), **and useful**
  (:func:`idle_cpu`): this process may use two CPUs or more and the 1-minute load average
  leaves one of them idle (as ``make -l``; on a busy machine the child only adds its own
  start-up, measured +0.2-0.3 s of CPU for no gain in wall time). Otherwise both lists run
  here, in order.
- **A warm child needs half a CPU** (``warm``): when everything the jobs need is imported
  already (a prestarted helper, :mod:`specscope.reports.prestart`), the child has no start-up
  to pay for, and a load average of up to CPUs − :data:`WARM_SPARE` is enough. The load counts
  this process too (about 1 while reports run back to back): measured at a load of 1.0 on
  2 CPUs, a report of two small exports took 1.65-1.95 s (median 1.86 s) split, against
  2.04-2.27 s (median 2.2 s) not, for 0.25 s more CPU (the child's copy-on-write faults and
  its own first draw). **Long warm jobs need none** (``long``: every rank's figures of a
  per-rank report, 11 s of drawing for 8 ranks): on any load with two CPUs or more, as the
  prestarted helper; two 8-rank 20 M exports' report took 25.0 / 27.6 s against 30.7 / 30.9 s
  with a child per rank, forked only where a CPU was idle (load 1.3-1.4).
- **The child writes files only** and leaves with ``os._exit``: 0 when every job returned, 1
  otherwise, silently; no buffered output of the parent is flushed twice, no ``atexit`` runs.
- **The parent redoes what the child did not**: when the child exits non-zero or is still
  running after ``timeout_s`` (then it is killed), the parent runs the child's jobs itself, so
  an error is raised here, exactly as without the child, and no file is left half-written.
- **The collector is frozen while the jobs run** (:func:`frozen_gc`): the objects that exist
  before them (inputs, pandas, matplotlib: ~100 k) are left out of the full collections that
  drawing triggers, which took 0.2 s of the 1.2 s of the four figures (measured with
  ``gc.callbacks``: 0.21 s, 0.02 s frozen); and the child's collections do not write to every
  page holding one, which copied most of the parent's memory (0.8 s of CPU measured).
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from specscope.analysis.parallel import usable_cpus  # (the reports call it here)

Job = Callable[[], object]
WARM_SPARE = 0.5  # CPUs the load average must leave free for a warm child (module doc)


def can_fork() -> bool:
    """Whether forking is safe here: POSIX ``fork`` and no other Python thread (module doc)."""
    return hasattr(os, "fork") and threading.active_count() == 1


def spare_cpus(n: float) -> bool:
    """Whether this process may use two CPUs or more and the 1-minute load average leaves ``n``
    of them free: load <= CPUs - ``n``."""
    cpus = usable_cpus()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return cpus >= 2 and load <= cpus - n


def idle_cpu() -> bool:
    """Whether a second CPU is free for the child: this process may use two or more, and the
    1-minute load average is at most their number minus one (module doc)."""
    return spare_cpus(1.0)


@contextmanager
def frozen_gc() -> Iterator[None]:
    """Within: the objects that exist on entry are out of the collector's reach (``gc.freeze``;
    garbage among them is collected after the exit, not before)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def run_split(
    here: Sequence[Job],
    there: Sequence[Job],
    *,
    timeout_s: float = 300.0,
    warm: bool = False,
    long: bool = False,
) -> None:
    """Run ``here`` in this process while a forked child runs ``there`` (module doc); returns
    when both are done. Exceptions of ``here``, and of ``there`` when rerun here, propagate.
    ``warm``: the jobs need nothing more imported (the child forks with half a CPU to spare);
    ``long``: besides, they take seconds (the figures of every rank of a per-rank report):
    the child forks whatever the load, as the prestarted helper does (two processes get more
    of a shared machine than one; the fork is a small part of the work)."""
    useful = idle_cpu() or (warm and (spare_cpus(WARM_SPARE) or long and usable_cpus() >= 2))
    with frozen_gc():
        if not (can_fork() and useful):
            _run(here)
            _run(there)
            return
        pid = os.fork()
        if pid == 0:  # the child
            code = 1
            try:
                _run(there)
                code = 0
            finally:
                os._exit(code)
        try:
            _run(here)
        finally:
            child_ok = wait_child(pid, timeout_s)
        if not child_ok:
            _run(there)


def _run(jobs: Sequence[Job]) -> None:
    for job in jobs:
        job()


def wait_child(pid: int, timeout_s: float) -> bool:
    """Reap the forked child ``pid``; whether it exited 0 within ``timeout_s`` (else it is
    killed)."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)  # the child this module forked
            os.waitpid(pid, 0)
            return False
        time.sleep(0.002)
