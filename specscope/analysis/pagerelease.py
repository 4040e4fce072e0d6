"""A column's pages given back to the system while a pass reads through it, the last time.

:func:`.devices.by_device` moves each column of the operations to a new array, its rows in
another order, and drops the old one. Moved whole, each column is held twice while it moves:
at 20 M GPU operations of 8 ranks, an 8-byte and a 4-byte column at once on two threads took
the analysis from 964 to 1189 MiB. The move reads the old column from its first row to its
last; once a stretch of it is read, nothing reads it again, so its pages can go back to the
system then (:class:`Pages`) while the new column's are written in: a column moved in
stretches of :data:`STRETCH_BYTES` holds about one column and a stretch, not two columns::

    old column   [given back......|read now|.................still held]
    new column   [dev 0 ...|  |dev 1 ...|  |dev 2 ...|   ...   (pages written so far)]

Only memory that nothing else holds may go (:func:`only_here`), and only whole pages inside
the array: ``madvise(MADV_DONTNEED)`` for numpy's own memory (the pages read as zeros after,
as fresh ones), ``MADV_REMOVE`` for a shared mapping (:mod:`.forkread`'s memfd: that frees
the memfd's pages themselves, which ``MADV_DONTNEED`` would leave in the file, uncounted in
any process' resident memory). Elsewhere than Linux nothing is given back.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import sys
from collections.abc import Iterator

import numpy as np

from specscope.analysis.memory import libc_function

STRETCH_BYTES = 8 << 20
"""A moved column is read (and given back) in stretches of this many bytes: a few hundred
microseconds of the move each, and as much held twice at most."""
_PAGE = mmap.PAGESIZE


def only_here(values: np.ndarray) -> bool:
    """Whether nothing but the caller holds ``values`` and its memory (a column of the read,
    moved and dropped; the caller's name and this argument its only references), so that its
    pages may be given back or written over: numpy's own memory, or a mapping
    (:mod:`.forkread`'s) through views that only this array holds."""
    if not (values.flags.writeable and values.flags.c_contiguous):
        return False
    if sys.getrefcount(values) > 3:  # (the caller's name, this argument, getrefcount's)
        return False
    base = values.base
    while isinstance(base, np.ndarray):  # (each view held by the one above it alone)
        if sys.getrefcount(base) > 3:  # (the view's base, this name, getrefcount's)
            return False
        base = base.base
    if isinstance(base, memoryview):
        if sys.getrefcount(base) > 3:
            return False
        base = base.obj
    return base is None or (isinstance(base, mmap.mmap) and sys.getrefcount(base) <= 3)


def read_once(values: np.ndarray, rows: int, give_back: bool) -> Iterator[slice]:
    """The stretches of ``rows`` rows of ``values`` (slices, in order) for a pass that reads
    each of them once; where ``give_back`` (the caller's :func:`only_here` of ``values``,
    asked before the call), each stretch's whole pages go back to the system (:class:`Pages`)
    as the pass takes the next one."""
    pages = Pages(values) if give_back else None
    for a in range(0, len(values), rows):
        yield slice(a, a + rows)
        if pages is not None:
            pages.read_to(min(len(values), a + rows) * values.itemsize)


class Pages:
    """The pages of ``values`` (an array :func:`only_here` says is the caller's alone, that the
    caller reads from its start to its end once and then drops) given back as the reading
    goes: :meth:`read_to` after each stretch read. Where they cannot be (not Linux, memory of
    another kind), nothing is given back and the array stays as it is."""

    def __init__(self, values: np.ndarray):
        base = values.base
        while isinstance(base, np.ndarray):
            base = base.base
        if isinstance(base, memoryview):
            base = base.obj
        self.advice = None
        if sys.platform.startswith("linux") and _madvise() is not None:
            if base is None:
                self.advice = mmap.MADV_DONTNEED  # (numpy's own memory: anonymous, private)
            elif isinstance(base, mmap.mmap):
                self.advice = mmap.MADV_REMOVE  # (a shared mapping: its file's pages freed)
        self.start = values.ctypes.data
        self.end = self.start + values.nbytes
        self.done = -(-self.start // _PAGE) * _PAGE  # (whole pages only: the first one in)

    def read_to(self, nbytes: int) -> None:
        """The first ``nbytes`` bytes of the array are read for the last time: their whole
        pages go back to the system."""
        stop = min(self.start + nbytes, self.end) // _PAGE * _PAGE
        if self.advice is None or stop <= self.done:
            return
        _madvise()(self.done, stop - self.done, self.advice)  # (failing: the pages stay)
        self.done = stop


@functools.cache
def _madvise():
    """libc's ``madvise``, or None."""
    return libc_function("madvise", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int])
