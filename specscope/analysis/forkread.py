"""Reading ahead in a child process, its arrays handed back through memory.

:func:`.opsread.prefetch` starts the reads of the GPU operations, the CUDA API calls and the
NVTX events while the CLI goes on importing pandas. On threads of the CLI's own process those
reads are held up while the imports run: a page scan is thousands of numpy calls, and after
each one its thread waits for the GIL, which the importing thread holds. In a child process
the GIL is the read's own. The read ahead of the 2 M GPU ops of ``ops2m``, best / median of 8,
seconds from the start (``python bench/bench_read_ahead.py /tmp/bench/ops2m.sqlite --repeat
8``, twice, load 1.2-1.35): on threads with ``import pandas`` beside them 0.92-1.00 / 1.01-1.09;
in a child process with the import beside it 0.77-0.82 / 0.88-0.95; on threads alone, nothing
beside them, 0.63-0.65 / 0.68-0.72::

    parent | fork | import pandas, specscope.analysis ... | load(): take() waits | maps |
    child         | ops scans (2 threads), API calls + NVTX (1), into the memfd | exits

The child runs ``work()`` (the same threaded reads as in-process), whose result arrays are
allocated in a memfd (a file in memory, :func:`os.memfd_create`) from the start
(:class:`_Arena`, through ``allocate_with``), so the reads write them there; any other array of
its result is written to the memfd after them (writing all of ``ops2m``'s 103 MB out took 0.04
s), and it sends its progress reports and then a manifest (each array's dtype, shape and
offset; a column of one value as that value; arrays under :data:`MAP_MIN_BYTES` themselves)
through a pipe. The parent forwards the reports to :mod:`.progress` while it waits, then maps
each array's pages (no copy: 15-17 ms for ``ops2m``), which go back to the system once the array
and its views are dropped, as an array of its own would (the loader drops each read column once
used). The mappings are populated (``MAP_POPULATE``): every page counts in this process'
resident memory at once, as its own arrays' would. Unpopulated, the pages an analysis never
touches (the byte counts of 20 M kernels, say) were held in memory and counted in no process'
RSS: 0.2 GiB less "peak RSS" at 20 M GPU ops, 11 MiB at 2 M, that were not less memory.

**Decided:** only where a fork is safe, and where it pays:

- Linux (``os.memfd_create``; the child dies with its parent: ``PR_SET_PDEATHSIG``);
- no Python thread but the main one (a fork copies only the calling thread; numpy's BLAS pool
  holds no lock the child takes);
- exports up to :data:`MAX_BYTES`. What the child saves in time is bounded by the imports it
  overlaps (0.3-0.6 s), and its arrays sit on 4 KiB pages where numpy's own get huge ones
  (random access over hundreds of MB is slower); but the read's temporaries die with it, and
  the peak RSS is lower. While the child wrote its arrays out (0.4-0.6 s per GB), 1 GiB was the
  limit: ``analyze --preset eagle`` (``/usr/bin/time``, alternating) of 20 M GPU ops (1.9 GB)
  took 10.2-12.3 s in a child against 8.5-10.0 s on threads. Since its reads allocate in the
  memfd (nothing written out), the same takes 8.29-8.72 s and 1.26-1.27 GiB in a child (one
  run of 11.40 s) against 7.79-9.22 s and 1.32-1.34 GiB on threads, 5 runs each; zero-config
  (``ops20m_nonvtx``) 6.81 and 7.09 s, 1.29 GiB against 7.07 and 9.88 s, 1.32-1.33 GiB
  (03:21-03:24 UTC, load 1.1-1.4). Above 4 GiB nothing was measured: threads, as before;
- ``SPECSCOPE_READ_AHEAD=threads`` reads ahead on threads instead.

A child that fails, is killed, sends no manifest or nothing at all for :data:`STALL_S` gives
None: the loader then reads the tables itself and reports any error, as when nothing was read
ahead.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import pickle
import select
import signal
import threading
import warnings
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from specscope.analysis import progress

MAX_BYTES = 1 << 32
"""Larger exports are read ahead on threads (module doc: measured up to 1.9 GB, where the child
is as fast and its peak RSS lower; its 4 KiB pages cost more the larger the arrays)."""
STALL_S = 60.0
"""A child that sends nothing for this long is ended (it reports each part of the read it
finishes: a few seconds at most each, even at :data:`MAX_BYTES`), and the loader reads itself."""
MAP_MIN_BYTES = 1 << 16
"""Smaller arrays travel in the manifest (a mapping each would cost a page and a file handle)."""
_ALIGN = 4096  # each array's offset in the memfd: a page (mmap's offsets are whole pages)
_MANIFEST, _REPORT = b"M", b"P"


class _Array(NamedTuple):
    offset: int
    dtype: str
    shape: tuple[int, ...]


class _Repeated(NamedTuple):
    """A column of one value (:func:`.memory.one_value_view`: a stride-0 view), sent as it."""

    value: Any
    dtype: str
    n: int


def wanted(path: Path) -> bool:
    """Whether :func:`.opsread.prefetch` reads ``path`` ahead in a child process (module doc)."""
    if os.environ.get("SPECSCOPE_READ_AHEAD", "process") == "threads":
        return False
    if not (hasattr(os, "memfd_create") and hasattr(os, "fork")):
        return False
    return threading.active_count() == 1 and path.stat().st_size <= MAX_BYTES


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether ``fd`` has bytes or its end to read within ``timeout_s``; by ``poll``, which
    takes any descriptor (``select`` refuses those past 1023, which a process holding many
    open files has: a test session's, a long-lived program using this as a library)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))


class Child:
    """A forked process running ``work()`` (which returns nested lists, tuples and dicts of
    arrays, numbers, bools and None); :meth:`result` waits for it and gives the same result in
    the parent. ``allocate_with(empty)``, called in the child before ``work()``, hands the work
    an allocator ``empty(n, dtype)`` of arrays in the memfd itself (:class:`_Arena`: returned
    whole, they are mapped by the parent without being written out). Raises OSError where the
    fork fails."""

    def __init__(self, work: Callable[[], Any], allocate_with: Callable | None = None):
        self._memfd = os.memfd_create("specscope-read-ahead", os.MFD_CLOEXEC)
        try:
            read, write = os.pipe()
        except OSError:
            os.close(self._memfd)
            raise
        parent = os.getpid()
        try:
            with warnings.catch_warnings():
                # Python 3.12 warns of any other OS thread: numpy's idle BLAS pool (module doc)
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError:
            for fd in (self._memfd, read, write):
                os.close(fd)
            raise
        if pid == 0:  # the child: never returns
            os.close(read)
            _run_child(work, self._memfd, write, parent, allocate_with)
        os.close(write)
        self.pid, self._pipe = pid, read
        self._taken, self._result, self._status = False, None, None

    def result(self) -> Any | None:
        """What ``work()`` returned in the child (waiting for it), or None where it failed;
        the child's progress reports are passed on to :func:`.progress.report` meanwhile."""
        if not self._taken:
            self._taken = True
            try:
                self._result = self._collect()
            except Exception:
                self._result = None
            finally:
                os.close(self._pipe)
                os.close(self._memfd)
                self._reap()
        return self._result

    def _collect(self) -> Any | None:
        buffer, manifest = bytearray(), None
        while True:
            if not _readable(self._pipe, STALL_S):
                os.kill(self.pid, signal.SIGKILL)  # stuck: the loader reads the tables itself
                return None
            if not (chunk := os.read(self._pipe, 1 << 16)):
                break
            buffer += chunk
            while buffer[:1] == _REPORT and b"\n" in buffer:
                end = buffer.index(b"\n")
                done, total, stage = bytes(buffer[1:end]).decode().split(" ", 2)
                del buffer[: end + 1]
                progress.report(stage, int(done), int(total))
        buffer = bytes(buffer)
        if buffer[:1] == _MANIFEST and b"\n" in buffer:
            length, data = buffer[1:].split(b"\n", 1)
            if len(data) == int(length):
                manifest = pickle.loads(data)  # (written by this program's child just now)
        if self._reap() != 0 or manifest is None:
            return None
        return _decode(manifest, self._memfd)

    def _reap(self) -> int:
        """Wait for the child (once); its exit status (-1: not this process' to wait for, as
        where the program ignores ``SIGCHLD``)."""
        if self._status is None:
            try:
                _, status = os.waitpid(self.pid, 0)
                self._status = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                self._status = -1
        return self._status


def _run_child(work: Callable[[], Any], memfd: int, pipe: int, parent: int, allocate_with) -> None:
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends the child at once
        _die_with(parent)

        def report(stage: str, done: int, total: int) -> None:
            _send(pipe, b"%s%d %d %s\n" % (_REPORT, done, total, stage.encode()))

        arena = _Arena(memfd)
        if allocate_with is not None:
            allocate_with(arena.empty)
        with progress.hooked(report):
            result = work()
        data = pickle.dumps(_encode(result, memfd, arena))
        _send(pipe, b"%s%d\n" % (_MANIFEST, len(data)) + data)
        status = 0
    except BaseException:  # nothing is raised in a child: the parent reads the tables itself
        pass
    finally:
        os._exit(status)  # (no atexit handlers, no buffers of the parent's flushed twice)


def _die_with(parent: int) -> None:
    """Have the kernel end this child when its parent ends (Linux ``prctl``)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # the parent ended before the prctl
        os._exit(1)


def _send(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class _Arena:
    """Arrays allocated in the memfd itself, each on pages of its own (the child's reads write
    their results there): one returned whole is mapped by the parent as it is, nothing written
    out (the 103 MB of ``ops2m``: 0.04 s less in the child)."""

    def __init__(self, memfd: int):
        self.memfd, self.end = memfd, 0  # (the memfd's size: the arrays' pages end there)
        self._lock = threading.Lock()  # (the reads allocate from several threads)
        self._where: dict[tuple[int, int], int] = {}  # (address, bytes) -> offset
        self._pages: dict[int, mmap.mmap] = {}  # offset -> the child's mapping of it

    def empty(self, n: int, dtype) -> np.ndarray:
        """``np.empty(n, dtype)``, in the memfd where it is :data:`MAP_MIN_BYTES` or more."""
        dtype = np.dtype(dtype)
        nbytes = n * dtype.itemsize
        if nbytes < MAP_MIN_BYTES:
            return np.empty(n, dtype)
        with self._lock:
            offset = self.end
            self.end += -(-nbytes // _ALIGN) * _ALIGN
            os.ftruncate(self.memfd, self.end)
        pages = mmap.mmap(self.memfd, nbytes, flags=mmap.MAP_SHARED, offset=offset)
        array = np.frombuffer(pages, dtype=dtype, count=n)
        self._where[(array.ctypes.data, nbytes)] = offset
        self._pages[offset] = pages
        return array

    def release_except(self, kept: set[int]) -> None:
        """Give back the pages of the arrays not handed back (at ``kept`` offsets): a column
        replaced by a narrower copy, a read redone by SQL. The parent's mappings keep the whole
        memfd alive, so pages no one maps would be held as long as any array is."""
        for offset, pages in self._pages.items():
            if offset not in kept:
                pages.madvise(mmap.MADV_REMOVE)

    def offset_of(self, array: np.ndarray) -> int | None:
        """Where in the memfd ``array`` is, if it is one of these arrays whole."""
        if not array.flags.c_contiguous:
            return None
        return self._where.get((array.ctypes.data, array.nbytes))


def _encode(obj: Any, memfd: int, arena: _Arena | None = None) -> Any:
    """``obj`` with each array replaced by its :class:`_Array` (or :class:`_Repeated`): those
    of ``arena`` where they are, the others written to ``memfd`` after them, each dropped once
    written (a list's items are taken out of it), so that the child holds them once (two
    threads writing took as long as one)."""
    placed: list[tuple[np.ndarray, int] | None] = []
    kept: set[int] = set()
    manifest = _placed(obj, placed, [arena.end if arena else 0], arena, kept)
    if arena is not None:
        arena.release_except(kept)
    for i, (array, offset) in enumerate(placed):
        placed[i] = None  # (the array dropped once written)
        view = memoryview(array.reshape(-1).view(np.uint8))
        done = 0
        while done < len(view):
            done += os.pwrite(memfd, view[done:], offset + done)
        del array, view
    return manifest


def _placed(
    obj: Any, placed: list, at: list[int], arena: _Arena | None = None, kept: set | None = None
) -> Any:
    """``obj`` with its arrays replaced by where they are (in ``arena``: their offsets added
    to ``kept``) or go (``at[0]``, which moves on; each such array and its offset appended to
    ``placed``)."""
    if isinstance(obj, np.ndarray):
        if obj.ndim == 1 and len(obj) > 1 and obj.strides == (0,):
            return _Repeated(obj[0].item(), obj.dtype.str, len(obj))
        if obj.nbytes < MAP_MIN_BYTES:
            return obj  # (pickled in the manifest)
        if arena is not None and (offset := arena.offset_of(obj)) is not None:
            kept.add(offset)
            return _Array(offset, obj.dtype.str, obj.shape)
        array = np.ascontiguousarray(obj)
        placed.append((array, at[0]))
        at[0] += -(-array.nbytes // _ALIGN) * _ALIGN
        return _Array(placed[-1][1], array.dtype.str, array.shape)
    if isinstance(obj, list):
        out = [_placed(item, placed, at, arena, kept) for item in obj]
        obj.clear()  # (the arrays are held by ``placed`` alone now)
        return out
    if isinstance(obj, tuple):
        return tuple(_placed(item, placed, at, arena, kept) for item in obj)
    if isinstance(obj, dict):
        return {key: _placed(value, placed, at, arena, kept) for key, value in obj.items()}
    return obj


def _decode(manifest: Any, memfd: int) -> Any:
    """The result the manifest describes, each array mapped from its own pages of ``memfd``
    (no copy; populated: module doc), which are given back to the system (``MADV_REMOVE``)
    once the array and every view of it are gone, as the pages of an array of this process
    would be."""
    size = os.fstat(memfd).st_size
    whole = mmap.mmap(memfd, size) if size else None  # (the pages given back through it)

    def mapped(spec: _Array) -> np.ndarray:
        dtype = np.dtype(spec.dtype)
        nbytes = dtype.itemsize * math.prod(spec.shape)  # (over MAP_MIN_BYTES: never 0)
        pages = mmap.mmap(
            memfd, nbytes, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, offset=spec.offset
        )
        weakref.finalize(pages, whole.madvise, mmap.MADV_REMOVE, spec.offset, nbytes)
        return np.frombuffer(pages, dtype=dtype).reshape(spec.shape)

    return _rebuilt(manifest, mapped)


def _rebuilt(obj: Any, mapped: Callable[[_Array], np.ndarray]) -> Any:
    """``obj`` (a manifest) with each :class:`_Array` replaced by ``mapped(it)`` and each
    :class:`_Repeated` by its stride-0 view."""
    if isinstance(obj, _Array):
        return mapped(obj)
    if isinstance(obj, _Repeated):
        one = np.array([obj.value], dtype=np.dtype(obj.dtype))
        return np.broadcast_to(one, (obj.n,))
    if isinstance(obj, list):
        return [_rebuilt(item, mapped) for item in obj]
    if isinstance(obj, tuple):
        return tuple(_rebuilt(item, mapped) for item in obj)
    if isinstance(obj, dict):
        return {key: _rebuilt(value, mapped) for key, value in obj.items()}
    return obj
