"""Giving freed memory back to the system between the stages of a large analysis.

An analysis of a large export works through millions of operations in chunks
(:data:`CHUNK_ROWS` rows): each chunk's temporaries (2 MB each)
are freed before the next. glibc's ``malloc`` serves blocks of that size from its heap, not
from their own mappings (its threshold for those rises to 32 MB once a large array has been
freed), and keeps freed heap memory for reuse: the process' resident memory climbed by
0.2-0.3 GB over the per-step metrics of 20 M GPU ops without holding any more data.
:func:`give_back` returns the free heap pages (``malloc_trim(0)``, a few ms) so the next
stage starts from what is held::

    RSS    held data ──────────────────────────────────────────────
           + freed chunks  ╱╲╱╲╱╲ (kept by malloc)  | give_back() | ╱╲╱╲ ...
           stage 1 (projection)                     |             | stage 2 (metrics)

Elsewhere than glibc (macOS, musl) it does nothing.

:func:`one_value_view` keeps a large column of one value (the device, process or thread of
every GPU operation or CUDA API call of a one-GPU, one-process capture) as one element, and
:func:`narrow_ints` one whose values all fit 32 bits in 4 bytes a value.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

import numpy as np

CHUNK_ROWS = 1 << 18  # row-wise work over millions of ops goes in chunks of this many rows
# (2 MB per int64 temporary: 20 M ops' class counts peaked 80 MB lower than with 1 M rows)
GIVE_BACK_MIN_ROWS = 1 << 22
"""Stages over fewer operations (4 M) do not call ``malloc_trim``: at 2 M ops it saved 10 MiB
for 0.1-0.2 s more CPU (the next stage faults the pages in again); at 20 M, 0.1-0.15 GiB of the
peak (1.71 against 1.81-1.87 GiB, ``bench/README.md``)."""
ONE_VALUE_MIN_ROWS = 1 << 20
"""Shorter columns stay as they are (:func:`one_value_view`)."""


def libc_function(name: str, argtypes: list, restype=ctypes.c_int):
    """The C library's function ``name`` with its argument and result types (``malloc_trim``
    here, ``madvise`` in :mod:`.pagerelease`), or None where there is none."""
    try:
        fn = getattr(_libc(), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = argtypes, restype
    return fn


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where there is none."""
    return libc_function("malloc_trim", [ctypes.c_size_t])


def give_back(rows: int) -> None:
    """Return the free heap memory to the system after a stage over ``rows`` operations (module
    doc); nothing below :data:`GIVE_BACK_MIN_ROWS` or without glibc."""
    if rows < GIVE_BACK_MIN_ROWS:
        return
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def dense(span: int, n: int) -> bool:
    """Whether a table indexed by value (``bincount``, a lookup array) over a range of
    ``span`` values is the way to handle ``n`` of them, rather than sorting or hashing them: a
    range at most 4 entries per value, plus 64 k. Correlation ids and per-step keys are
    usually that dense; a chunk of copies spread over every step of a capture is not (a
    ``bincount`` of its range took 43 MB at 113 k steps)."""
    return span <= 4 * n + (1 << 16)


def one_value_view(values: np.ndarray) -> np.ndarray:
    """``values``; where all of a large column are one value, a read-only view of that value
    repeated (stride 0: one element of memory, the same values and dtype to every reader).

    A capture of one process on one GPU, launched from one thread, has one device, pid and
    launching thread for every operation: 12 bytes per op (240 MB at 20 M ops) that need not
    exist. Frames never write into their columns (pandas' copy-on-write), the loader's arrays
    are only read, and a filter or a copy gives an ordinary array again."""
    if not len(values) or len(values) < ONE_VALUE_MIN_ROWS or values.strides == (0,):
        return values
    if values[0] != values.min() or values[0] != values.max():
        return values
    return np.broadcast_to(values[:1].copy(), values.shape)


def one_valued(values: np.ndarray) -> bool:
    """Whether ``values`` (not empty) are all one value: at once for a view of one
    (:func:`one_value_view`), else by their least and greatest."""
    return values.strides == (0,) or values.min() == values.max()


def increasing(values: np.ndarray, strict: bool = True, rows: np.ndarray | None = None) -> bool:
    """Whether ``values`` strictly increase (each once, in order; ``strict`` False: never
    decrease), or ``values[rows]`` where ``rows`` are given: a chunk at a time, to the first
    that does not (no temporary of every value's: the correlation ids of 40 M calls, the launch
    times of 20 M eager launches)."""
    order = np.greater if strict else np.greater_equal
    n = len(values) if rows is None else len(rows)
    for lo in range(0, n - 1, CHUNK_ROWS):
        at = slice(lo, lo + CHUNK_ROWS + 1)
        chunk = values[at] if rows is None else values[rows[at]]
        if not order(chunk[1:], chunk[:-1]).all():
            return False
    return True


def few_distinct(values: np.ndarray, most: int = 64) -> list[int] | None:
    """The distinct ``values`` in order of first appearance, found one at a time (a pass each:
    no sort of them all, for the few processes of an export); None with more than ``most``."""
    found, left = [], values
    while len(left):
        if len(found) == most:
            return None
        found.append(int(left[0]))
        left = left[left != left[0]]
    return found


def narrow_ids(values: np.ndarray) -> np.ndarray:
    """:func:`narrow_ints`, and int16 where every value fits that: the StringIds ids naming the
    CUDA API calls (a few thousand strings in most exports; 40 M calls of an eager export: 80
    MB less) and the GPU operations' stream ids. Only compared and looked up, never summed."""
    if len(values) < ONE_VALUE_MIN_ROWS or values.dtype == np.int16 or values.strides == (0,):
        return values  # (a column of one value, a view of it: one element already)
    info = np.iinfo(np.int16)
    if len(values) and info.min <= values.min() and values.max() <= info.max:
        return values.astype(np.int16)
    return narrow_ints(values)


def narrow_ints(values: np.ndarray) -> np.ndarray:
    """``values`` (int64) as int32 where every value fits and the column is large, else as they
    are: correlation ids of GPU operations (32-bit in CUPTI) and their bytes (0 for kernels,
    copies under 2 GiB), 4 bytes per op less each. Sums stay exact: numpy and pandas sum int32
    into int64."""
    if not len(values) or len(values) < ONE_VALUE_MIN_ROWS or values.dtype == np.int32:
        return values
    info = np.iinfo(np.int32)
    if values.min() < info.min or values.max() > info.max:
        return values
    return values.astype(np.int32)


def dense_rows(column, lo: int, hi: int) -> np.ndarray:
    """Rows ``lo..hi`` of ``column`` as a numpy array: a slice of an array; of a sparse
    column (pandas' ``SparseArray`` of fill value 0, as the operations' byte counts are:
    :attr:`.loader.Trace.ops`), its values there with zeros between. A chunk at a time: no
    array of every row's."""
    if isinstance(column, np.ndarray):
        return column[lo:hi]
    hi = min(hi, len(column))
    rows, values = column.sp_index.indices, column.sp_values
    a, b = np.searchsorted(rows, [lo, hi])
    out = np.zeros(max(hi - lo, 0), dtype=values.dtype)
    out[rows[a:b] - lo] = values[a:b]
    return out
