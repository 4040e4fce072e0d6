"""A helper process started early: it warms up (imports) while this process analyses, then runs
the one job it is handed (:func:`prestarted`).

``specscope report`` spends about a third of its CPU importing: pandas for the analysis,
matplotlib for the figures (0.35-0.45 s of it, issue 19). Only the figures need matplotlib, and
they can only be drawn once the analysis is done; so a child forked before the analysis imports
matplotlib on the second CPU meanwhile, and is handed the figures to draw when the analysis is
done (it splits them with a child of its own when the load allows,
:func:`specscope.reports.parallel.run_split`)::

    parent | analyse (pandas) ....... | submit | write summary.md, report.html | wait   |
    helper | warm up (matplotlib) ....... | draw the figures ........................ | exit 0
           fork

The rules, each for a reason:

- **Fork when it is safe and there is a second CPU** (:func:`~specscope.reports.parallel.can_fork`,
  :func:`~specscope.reports.parallel.usable_cpus`), **whatever the load**: unlike the child of
  :func:`~specscope.reports.parallel.run_split`, the helper does nothing twice (it imports what
  this process would import to draw, and this process then does not), so it costs only the fork
  and the pickling (about 0.1 s of CPU in all) and overlaps the imports with the analysis even
  on a busy machine (a report of two small exports at a load average of 3.2-3.7 on 2 CPUs: best
  2.41 s against 2.72 s for the code before it, ``bench/README.md``). Otherwise
  :func:`prestarted` yields None and the caller does the work itself, as before. The helper's
  own drawing splits in two when the load leaves half a CPU (``run_split(warm=True)``).
- **The job travels pickled**, through a temporary file opened before the fork (the parent is
  never blocked by a full pipe); the pipe carries only its length, or nothing: end of file
  (the parent gave no job) and the child leaves at once.
- **The child is silent and leaves with** ``os._exit``: 0 when the job returned (or there was
  none), 1 otherwise; it prints nothing and runs no ``atexit``.
- **The parent has the last word**: :meth:`Helper.wait` says whether the job ran; when it did
  not (the child failed, or is killed after ``timeout_s``), the caller runs the job itself, so
  an error is raised in this process, exactly as without the helper. Leaving the block kills a
  child still running (a job never handed over, or an error in the parent) and reaps it.
"""

from __future__ import annotations

import os
import pickle
import signal
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NoReturn

from specscope.reports import parallel

_LENGTH = 8  # bytes of the job's length on the pipe, big-endian


class Helper:
    """The parent's side of a prestarted child: hand it one job (:meth:`submit`), then
    :meth:`wait` for it."""

    def __init__(self, pid: int, go: int, payload) -> None:
        self.pid = pid
        self._go = go  # the pipe's write end
        self._payload = payload  # the temporary file the job is pickled into
        self._reaped: bool | None = None  # exited 0, once reaped

    def submit(self, job: Callable[[], object]) -> bool:
        """Hand ``job`` (picklable: a module-level function, or a ``functools.partial`` of one
        over picklable arguments) to the child; whether it was handed over (False: it does not
        pickle, the child is gone, or a job was handed over already)."""
        if self._go < 0:
            return False
        try:
            data = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - not picklable: the caller runs it itself
            return False
        try:
            self._payload.write(data)
            self._payload.flush()
            os.write(self._go, len(data).to_bytes(_LENGTH, "big"))
        except OSError:  # the child has left (its warm-up failed): the caller runs the job
            return False
        finally:
            self._close_pipe()
        return True

    def wait(self, timeout_s: float = 300.0) -> bool:
        """Reap the child; whether it exited 0 within ``timeout_s`` (else it is killed)."""
        self._close_pipe()
        if self._reaped is None:
            self._reaped = parallel.wait_child(self.pid, timeout_s)
        return self._reaped

    def close(self) -> None:
        """Kill the child if it is still running and reap it; close the pipe and the file."""
        self._close_pipe()
        if self._reaped is None:
            os.kill(self.pid, signal.SIGKILL)  # the child this module forked
            os.waitpid(self.pid, 0)
            self._reaped = False
        self._payload.close()

    def _close_pipe(self) -> None:
        if self._go >= 0:
            os.close(self._go)
            self._go = -1


@contextmanager
def prestarted(warm_up: Callable[[], object]) -> Iterator[Helper | None]:
    """Within: a forked child that runs ``warm_up`` now and then the job handed to it
    (:meth:`Helper.submit`); None where forking is unsafe or no CPU is idle (module doc). The
    child is killed, if still running, and reaped on leaving."""
    if not (parallel.can_fork() and parallel.usable_cpus() >= 2):
        yield None
        return
    payload = tempfile.TemporaryFile()
    read_end, go = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(go)
        _child(warm_up, read_end, payload.fileno())
    os.close(read_end)
    helper = Helper(pid, go, payload)
    try:
        yield helper
    finally:
        helper.close()


def _child(warm_up: Callable[[], object], read_end: int, payload: int) -> NoReturn:
    """Warm up, read the job's length (end of file: no job), unpickle the job, run it; leave
    with 0 if all went well, else 1, silently."""
    code = 1
    try:
        warm_up()
        head = _read(read_end, _LENGTH)
        if len(head) < _LENGTH:
            code = 0  # no job
        else:
            n = int.from_bytes(head, "big")
            job = pickle.loads(os.pread(payload, n, 0))
            job()
            code = 0
    finally:
        os._exit(code)


def _read(fd: int, n: int) -> bytes:
    """Up to ``n`` bytes from ``fd``, fewer only at its end."""
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            break
        data += chunk
    return data
