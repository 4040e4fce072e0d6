"""Work on a second thread where numpy lets go of the GIL, for large exports only.

Most of the analysis after the read is numpy over millions of operations: sorts, ``reduceat``,
fancy indexing and element-wise passes, which release the GIL while they run. Two independent
such stages therefore overlap on the two cores of our machines (20 M ops: the union coverage's
sort beside the per-step counts, the op names' categoricals beside the flag unpacking).

:func:`beside` starts ``fn(*args)`` on a second thread from :data:`BESIDE_MIN_ROWS` operations
and runs it inline below (where a thread costs more than it saves, and so that small exports
are analysed exactly as they always were); either way its result (or error) comes from
``.result()``. The work gets numpy arrays and plain values only (it may build new pandas
objects from them, never reads a frame the caller holds, nor a cached property of one), so
nothing is computed twice or read while it changes.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor

BESIDE_MIN_ROWS = 1 << 18
"""From this many operations, :func:`beside` runs its work on a second thread."""


def beside(rows: int, fn, *args) -> Future:
    """``fn(*args)`` on a second thread when ``rows`` >= :data:`BESIDE_MIN_ROWS`, else now; its
    result through the returned future's ``result()`` (which waits for it)."""
    if rows < BESIDE_MIN_ROWS:
        done: Future = Future()
        try:
            done.set_result(fn(*args))
        except BaseException as e:  # raised again by result(), as from the thread
            done.set_exception(e)
        return done
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(fn, *args)
    finally:
        pool.shutdown(wait=False)  # the thread ends with its one task


def usable_cpus() -> int:
    """How many CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
