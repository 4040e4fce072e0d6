"""How a read stores each integer column: the dtype markers of :func:`.sqlread.int_columns_many`
and the columns it writes batch by batch.

A large read (:data:`.memory.ONE_VALUE_MIN_ROWS` rows or more) keeps each column as narrow as
its values allow from the first batch on, not narrowed after the read (no int64 array of every
row first): a marker given as a column's dtype says how (:data:`NARROW32`, :data:`SPLIT16`,
:data:`DURATION32` ...). A value that does not fit the narrow form turns the column wider as
it is written (:class:`Uniform`, :class:`Durations`) or has the read made again with that
column wider (:class:`TooWide`). The result arrays are allocated by :func:`allocate_with`'s
function: numpy's, or in :mod:`.forkread`'s child the memory it hands back.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence

import numpy as np

from specscope.analysis import memory
from specscope.analysis.pagerelease import only_here, read_once

SPLIT32 = "split32"
"""A dtype for :func:`.sqlread.int_columns_many`: the int64 column comes back as two int32 arrays,
its high and its low 32 bits (what ``>> 32`` and a cast to int32 give), written batch by batch (no
int64 array of the whole column)."""
SPLIT32_UNIFORM = "split32-uniform"
"""Like :data:`SPLIT32`, for a column whose high half is usually one value in every row (the
device of every GPU operation of a one-GPU capture, its process): in a large read
(:data:`.memory.ONE_VALUE_MIN_ROWS` rows or more), that half is kept as one value for as
long as every row has it (:class:`Uniform`) and comes back as a read-only view of it
repeated (stride 0, as :func:`.memory.one_value_view` gives), not as 4 bytes a row."""
NARROW32 = "narrow32"
"""A dtype for :func:`.sqlread.int_columns_many`: int32 in a large read (as :data:`SPLIT32_UNIFORM`)
where every value fits (correlation ids, bytes of a copy under 2 GiB), else int64:
:func:`.memory.narrow_ints`' rule, without an int64 array of the whole column. A smaller
read gives both as :mod:`.memory`'s rules leave them (int64, arrays)."""
UNIFORM64 = "uniform64"
"""A dtype for :func:`.sqlread.int_columns_many`: an int64 column usually of one value in every row
(the launching thread of every CUDA API call of a one-thread capture): in a large read, kept as that
value for as long as every row has it (:class:`Uniform`) and given back as a read-only view of it
repeated, :func:`.memory.one_value_view`'s result, without an array of every row first (40 M calls
of an eager export: 320 MB); else int64 as read."""
SPLIT16 = "split16"
"""Like :data:`SPLIT32`, each half int16 in a large read where every value fits (an operation's
short and full name ids: StringIds ids of a few thousand strings in most exports; 20 M ops:
80 MB less while they are read); a value that does not: the read again as :data:`SPLIT32`."""
SPLIT32_UNIFORM16 = "split32-uniform16"
"""Like :data:`SPLIT32_UNIFORM`, its low half int16 in a large read where every value fits
(stream ids; an operation's flags without exec ids); else the read again as
:data:`SPLIT32_UNIFORM`."""
SPLIT32_UNIFORM8_16 = "split32-uniform8-16"
"""Like :data:`SPLIT32_UNIFORM16`, its high half (the device of every GPU operation) int8 where
it is not one value and every value fits, else int32: a TP server's GPU ordinals, 57 MiB less
at 20 M GPU operations of 8 ranks while the read is handed back (the analysis' peak then,
``bench/README.md``, twenty-second session). A later value that does not fit turns the half
into int32 as it is written (:class:`Uniform`)."""
NARROW16 = "narrow16"
"""Like :data:`NARROW32`, int16 in a large read where every value fits, else int64 (a value
that does not: the read again): :func:`.memory.narrow_ids`' rule for the StringIds ids naming
the CUDA API calls, without an int32 array of every call first. That array stayed in the read
ahead's memfd until the read was handed back: the child reading the 40 M calls of an eager
export of 20 M GPU ops peaked at 1820 MiB with it, 1669 MiB without (2026-12-02)."""
DURATION32 = "duration32"
"""A dtype for :func:`.sqlread.int_columns_many`: an end time, given back as each row's duration
(this column less the first, which must be an int64 start) as uint32 in a large read where every
duration lies in 0..2**32-1 ns (4.29 s), else as the end times (int64: :class:`Durations` turns into
them at the first that does not, without a second read). The CUDA API calls' ends: 4 bytes a call
less (40 M calls of an eager export: 151 MiB in the reading process and in the analysis). ``start +
duration`` (int64) is the end, bit for bit (a NULL end of a NULL start included); :func:`call_ends`
gives it."""
MARKERS = (
    SPLIT32, SPLIT32_UNIFORM, NARROW32, UNIFORM64, SPLIT16, SPLIT32_UNIFORM16,
    SPLIT32_UNIFORM8_16, NARROW16, DURATION32,
)  # fmt: skip
SPLITS = (SPLIT32, SPLIT32_UNIFORM, SPLIT16, SPLIT32_UNIFORM16, SPLIT32_UNIFORM8_16)  # (two
# arrays each; read again wider where a value does not fit:)
NARROWED = (NARROW32, SPLIT16, SPLIT32_UNIFORM16, SPLIT32_UNIFORM8_16, NARROW16)


def dtypes_of(ncols: int, dtypes: Sequence | None) -> list:
    """The dtype (a numpy dtype, or a marker) of each of ``ncols`` columns (int64 by default)."""
    if dtypes is None:
        return [np.dtype(np.int64)] * ncols
    return [d if isinstance(d, str) and d in MARKERS else np.dtype(d) for d in dtypes]


class TooWide(Exception):
    """A value of a :data:`NARROW32` (:data:`NARROW16`) column that int32 (int16) cannot
    hold (``column``: its index)."""

    def __init__(self, column: int):
        super().__init__(column)
        self.column = column


def check_fits(target, column, i: int) -> None:
    """Raise :class:`TooWide` when ``column`` (a batch of column ``i``) does not fit the int32
    array ``target`` of a :data:`NARROW32` column, the int16 one of a :data:`NARROW16` column,
    or the int16 half of a :data:`SPLIT16`, :data:`SPLIT32_UNIFORM16` or
    :data:`SPLIT32_UNIFORM8_16` pair."""
    if not (np.ndim(column) and len(column)):
        return
    if isinstance(target, tuple):
        narrow = [isinstance(half, np.ndarray) and half.dtype == np.int16 for half in target]
        if any(narrow):
            for values, check in zip(_halves(column), narrow, strict=True):
                if check:
                    _fits(values, np.int16, i)
    elif isinstance(target, np.ndarray) and target.dtype in (np.int32, np.int16):
        _fits(column, target.dtype, i)


def _fits(values: np.ndarray, dtype, i: int) -> None:
    if not _fit(dtype, values):
        raise TooWide(i)


def _halves(column) -> tuple[np.ndarray, np.ndarray]:
    """The high and low 32 bits of a batch of a split column (views of it where it is a
    contiguous int64 array on a little-endian machine)."""
    column = np.asarray(column)
    if sys.byteorder == "little" and column.dtype == np.int64 and column.flags.c_contiguous:
        halves = column.view(np.int32).reshape(-1, 2)
        return halves[:, 1], halves[:, 0]
    column = column.astype(np.int64, copy=False)
    return column >> 32, column.astype(np.int32)


class Uniform:
    """A column of ``n`` rows of ``dtype`` written batch by batch from several threads, held as
    one value until a batch brings another (then as an array, the value filled in where it had
    been written): :data:`SPLIT32_UNIFORM`'s high half (int32), a :data:`UNIFORM64` column.
    ``small`` (:data:`SPLIT32_UNIFORM8_16`'s int8): the array is of that type while every
    value written fits it, then of ``dtype`` (the rows written so far copied over; each write
    to the small array under the lock, so that none is lost to the copy). Slicing gives
    :class:`Rows`, which the batch readers write into like an array slice."""

    def __init__(self, n: int, dtype=np.int32, small=None):
        self.n, self.value, self.array = n, None, None
        self.dtype = np.dtype(dtype)
        self.small = None if small is None else np.dtype(small)
        self._lock = threading.Lock()

    def __getitem__(self, rows: slice) -> Rows:
        lo, hi, _ = rows.indices(self.n)
        return Rows(self, lo, hi)

    def put(self, lo: int, hi: int, values) -> None:
        """Write ``values`` (an array or a scalar) to rows lo..hi."""
        if self.array is None:
            values = np.asarray(values)
            if not values.size or values.min() == values.max():
                one = int(values.flat[0]) if values.size else None
                with self._lock:
                    if self.array is None:
                        if self.value is None:
                            self.value = one
                        if one is None or one == self.value:
                            return  # still one value
            with self._lock:
                if self.array is None:  # every row written so far holds self.value
                    small = self.small is not None and _fit(self.small, values, self.value)
                    array = allocate(self.n, self.small if small else self.dtype)
                    array[:] = self.value or 0  # (filled before it is seen)
                    self.array = array
        if self.array.dtype == self.dtype:  # (its final array: written beside other threads)
            self.array[lo:hi] = values
            return
        with self._lock:
            if self.array.dtype != self.dtype and not _fit(self.array.dtype, values):
                wide = allocate(self.n, self.dtype)
                wide[:] = self.array
                self.array = wide
            self.array[lo:hi] = values

    def result(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The column (``rows``: only these rows): the array, or the value repeated as a
        read-only stride-0 view."""
        if self.array is not None:
            return self.array if rows is None else self.array[rows]
        n = self.n if rows is None else len(rows)
        return np.broadcast_to(np.array([self.value or 0], dtype=self.dtype), (n,))


def _fit(dtype: np.dtype, values, one: int | None = None) -> bool:
    """Whether ``values`` (an array or a scalar) and ``one`` (None: none) fit ``dtype``."""
    values = np.asarray(values)
    info = np.iinfo(dtype)
    lo, hi = (int(values.min()), int(values.max())) if values.size else (0, 0)
    if one is not None:
        lo, hi = min(lo, one), max(hi, one)
    return info.min <= lo and hi <= info.max


class Rows:
    """Rows ``offset..stop`` of a column written batch by batch (a :class:`Uniform` or a
    :class:`Durations`), written through ``rows[a:b] = values``: its ``put``."""

    def __init__(self, column: Uniform | Durations, offset: int, stop: int):
        self.column, self.offset, self.stop = column, offset, stop

    def __len__(self) -> int:
        return self.stop - self.offset

    def __setitem__(self, rows: slice, values) -> None:
        self.column.put(self.offset + rows.start, self.offset + rows.stop, values)


class Durations:
    """A :data:`DURATION32` column of ``n`` rows written batch by batch from several threads:
    each row's end less its start (uint32), the start read into ``start`` (the read's first
    column, which every batch writes before this one). The first batch with a duration that
    uint32 does not hold (an end before its start, a call longer than 4.29 s) turns the column
    into the ends (int64): the rows written so far as durations are written again as ends, and
    every later batch writes its ends (as :class:`Uniform` turns into an array: no second
    read). Slicing gives :class:`Rows`, which the batch readers write the end times into
    like an array slice."""

    def __init__(self, n: int, start: np.ndarray):
        self.values = allocate(n, np.uint32)
        self.start, self.ends = start, None
        self._lock = threading.Lock()

    def __getitem__(self, rows: slice) -> Rows:
        lo, hi, _ = rows.indices(len(self.values))
        return Rows(self, lo, hi)

    def put(self, lo: int, hi: int, ends) -> None:
        """Write the end times ``ends`` (an array or a scalar) of rows lo..hi."""
        took = _durations(ends, self.start[lo:hi])
        with self._lock:  # (a batch's check and write against the switch to ends)
            if self.ends is None and took is None:
                self.ends = allocate(len(self.values), np.int64)
                for a in range(0, len(self.values), memory.CHUNK_ROWS):  # (rows not yet
                    part = slice(a, a + memory.CHUNK_ROWS)  # written: written again later)
                    np.add(self.start[part], self.values[part], out=self.ends[part])
            if self.ends is None:
                self.values[lo:hi] = took
            else:
                self.ends[lo:hi] = ends

    def result(self, rows: np.ndarray | None = None) -> np.ndarray:
        """The durations, or the ends where the column turned into them (``rows``: only
        these rows)."""
        column = self.values if self.ends is None else self.ends
        return column if rows is None else column[rows]


def _durations(ends, start: np.ndarray) -> np.ndarray | None:
    """``ends - start`` (int64, wrapping as :func:`call_ends`' sum does) where every one is a
    duration uint32 holds, else None."""
    took = np.subtract(ends, start, dtype=np.int64)
    if took.size and (took.min() < 0 or took.max() > np.iinfo(np.uint32).max):
        return None
    return took


def call_ends(start: np.ndarray, ends: np.ndarray, rows=slice(None)) -> np.ndarray:
    """The end times (int64) of rows ``rows`` of a read's ``start`` and :data:`DURATION32`
    column ``ends``: the durations added to the starts where they are durations (uint32),
    else the ends as they are."""
    if ends.dtype != np.uint32:
        return ends[rows]
    return start[rows] + ends[rows]  # (int64 + uint32: int64)


def ends_given_back(start: np.ndarray, columns: list | dict, key) -> None:
    """``columns[key]``, a :data:`DURATION32` column of the read whose first column is
    ``start``, made the end times (int64) where it is durations, as :func:`call_ends` gives
    them, a chunk at a time: each chunk's pages of the durations given back once added where
    nothing else holds them (:func:`.pagerelease.read_once`), so that the ends are not held beside
    every duration. The GPU operations' ends are read so (4 bytes an op less until the
    analyses: 76 MiB at 20 M, ``bench/README.md``, twenty-second session)."""
    took = columns[key]
    if took.dtype != np.uint32:
        return
    columns[key] = None
    ends = np.empty(len(took), dtype=np.int64)
    alone = only_here(took)  # (before the call: its arguments hold the column too)
    for part in read_once(took, memory.CHUNK_ROWS, alone):
        np.add(start[part], took[part], out=ends[part])
    columns[key] = ends


def as_durations(start: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``ends`` (int64) as a :data:`DURATION32` read gives them: each row's duration (uint32)
    in a large read where every one fits, else as they are. For a read by SQL, whole columns
    (a chunk at a time: no int64 temporary of every row's)."""
    if len(ends) < memory.ONE_VALUE_MIN_ROWS or ends.dtype != np.int64:
        return ends
    out = np.empty(len(ends), dtype=np.uint32)
    for lo in range(0, len(ends), memory.CHUNK_ROWS):
        part = slice(lo, lo + memory.CHUNK_ROWS)
        if (took := _durations(ends[part], start[part])) is None:
            return ends
        out[part] = took
    return out


def put(target, n: int, m: int, column) -> None:
    """Write ``column`` (m values, or a scalar) to rows n..n+m of ``target``: an array, or the
    (high, low) pair of a SPLIT32 column."""
    if not isinstance(target, tuple):
        target[n : n + m] = column
        return
    high, low = target
    column = np.asarray(column)
    if column.ndim == 0:
        high[n : n + m] = low[n : n + m] = column
    else:
        high[n : n + m], low[n : n + m] = _halves(column)


_ALLOCATE = np.empty
"""How :func:`.sqlread.int_columns_many` allocates its result arrays, ``(n, dtype) -> array``:
numpy's own, or in :mod:`.forkread`'s child the memory it hands back (:func:`allocate_with`)."""


def allocate(n: int, dtype) -> np.ndarray:
    """An uninitialised array of ``n`` values of ``dtype``, from :func:`allocate_with`'s
    function."""
    return _ALLOCATE(n, dtype)


def allocate_with(empty) -> None:
    """Have :func:`.sqlread.int_columns_many` allocate its results with ``empty(n, dtype)``
    from now on in this process (:class:`.forkread.Child`: in the memfd the parent maps, no
    copy)."""
    global _ALLOCATE
    _ALLOCATE = empty


def flat_dtypes(dts: list) -> list:
    """The dtype (marker) of each array :func:`.sqlread.int_columns_many` returns (two per
    split column)."""
    return [x for d in dts for x in ((d, d) if d in SPLITS else (d,))]


def rows_of(target) -> int:
    """The rows of a result column: an array, or the (high, low) pair of a split one."""
    return len(target[0] if isinstance(target, tuple) else target)
