"""The processes of one export analysed two at a time (tensor-parallel ranks of a large export).

An export of a tensor-parallel server holds one process per GPU; each is analysed on its own
(:func:`.auto.analyze_processes`), after the one read they share. Their analyses are most of
the command after the read (4 ranks of 2 M GPU operations: 1.2 s of 3.5-4 s), and most of each
is numpy and the C loops of :mod:`.opsums`, which let go of the GIL: two at once on two
cores take 0.6-0.8 of the time.

:func:`each_process` gives ``[work(pid) for pid in pids]``, exactly: the same results in the
same order, and the error the first failing process raises. Where it runs two threads (two
processes or more, :data:`MIN_ROWS` GPU operations or more, two CPUs), what every analysis
reads of the export is worked out first (:func:`_shared`), so that the threads only read it;
a process whose analysis fails on a thread for any reason is analysed again here, on the
thread that opened the export (its SQLite connection, which other threads may not use), and
its result or error is the one given: a thread never changes an outcome, only the time.
``SPECSCOPE_PROCESS_THREADS=1`` analyses the processes one after the other.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from specscope.analysis.devices import process_devices
from specscope.analysis.loader import RUNTIME, Trace
from specscope.analysis.memory import give_back
from specscope.analysis.parallel import usable_cpus

T = TypeVar("T")

MIN_ROWS = 1 << 20
"""From this many GPU operations in the export, its processes are analysed two at a time."""


def threads() -> int:
    """``SPECSCOPE_PROCESS_THREADS`` (1 or 2), else 2 where there are two CPUs or more."""
    env = os.environ.get("SPECSCOPE_PROCESS_THREADS", "")
    if env.strip().isdigit():
        return max(1, min(2, int(env)))
    return 2 if usable_cpus() >= 2 else 1


def each_process(trace: Trace, pids: list[int], work: Callable[[int], T]) -> list[T]:
    """``[work(pid) for pid in pids]`` (module doc)."""
    work = _given_back(work, len(trace.ops))
    if len(pids) < 2 or threads() < 2 or len(trace.ops) < MIN_ROWS:
        return [work(pid) for pid in pids]
    try:
        _shared(trace)
    except Exception:  # (what fails here fails, or not, in each process' analysis as before)
        return [work(pid) for pid in pids]
    give_back(len(trace.ops))  # (what the reads and _shared freed: before the first two)
    with ThreadPoolExecutor(2, thread_name_prefix="process") as pool:
        futures = [pool.submit(work, pid) for pid in pids]
        out = []
        for pid, future in zip(pids, futures, strict=True):
            try:
                out.append(future.result())
            except Exception:  # (again here: the outcome of the usual order, error or not)
                out.append(work(pid))
        return out


def _given_back(work: Callable[[int], T], rows: int) -> Callable[[int], T]:
    """``work``, the heap memory it freed given back to the system after each process
    (:func:`.memory.give_back`, from :data:`.memory.GIVE_BACK_MIN_ROWS` operations in the
    export). glibc kept each analysis' freed temporaries, 85-90 MiB at each of 8 ranks of 2.5 M
    GPU operations, and the next analysis did not take all of them again: the analyses rose
    from 911 to 1128 MiB, from 891 to at most 931 given back after each (``bench/README.md``,
    twenty-second session)."""

    def given_back(pid: int) -> T:
        try:
            return work(pid)
        finally:
            give_back(rows)

    return given_back


def _shared(trace: Trace) -> None:
    """What every process' analysis reads of ``trace``, worked out before the threads start
    (each a cached property, or kept per operations frame)."""
    trace.capture_mode  # noqa: B018 (cached properties, computed here)
    trace.strings  # noqa: B018
    trace.memcpy_names  # noqa: B018
    trace.gpu_names  # noqa: B018
    trace.nvtx  # noqa: B018
    trace.unclosed_ranges  # noqa: B018
    if trace.has(RUNTIME):
        trace._runtime  # noqa: B018
        trace._calls_in_id_order  # noqa: B018
        trace.launch_rows()  # (kept where it is a table)
    process_devices(trace)  # (and device_stretches, which it reads)
