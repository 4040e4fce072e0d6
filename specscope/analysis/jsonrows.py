"""The per-step rows of an analysis as JSON text, in pieces, written by two threads at once.

The text is exactly pandas' ``frame.reset_index().to_json(orient="records")``: that call is
the reference, and it writes every piece the C loop (``jsonrows.c``, whose head defines each
value's text) cannot. pandas' encoder holds the GIL and makes a Python object per value: the
11 316 steps × 46 metrics of ``ops2m`` (18 MB of text) took 0.07-0.11 s of one core, after
every other part of the analysis is done, and the 95 MB of four ranks 0.3 s. The C loop lets
go of the GIL, so two pieces are written at once, and it reads the columns as they are.

It writes integers, floats and bools, and text (pandas' string dtype, or objects that are all
strings or missing: a rank's label in the cross-rank view) as a code per row into the
column's distinct strings, each written as JSON first (plain ones as they are, any other by
pandas itself, so that its escapes are kept).

The loop is used only where its text of a probe (:func:`_probe`: a value at each branch of
its rules) is this pandas' text, checked once per process: a pandas version that wrote a value
otherwise would keep it off, not change the output.

Where pandas writes a piece: :mod:`.native` did not build the loop (no compiler,
``SPECSCOPE_NATIVE=0``), or the probe differs; a column is of another dtype (categories,
nullable integers, dates, objects other than strings); the index is not one named level; the
column names are not unique strings (pandas raises for those, as before); a value of the
piece needs the exponent form (magnitudes from 1e16 or below 1e-15, not 0). The pieces are
the same text either way (``tests/analysis/test_jsonrows.py``).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from specscope.analysis import native

SOURCE = Path(__file__).with_name("jsonrows.c")
PIECE_ROWS = 2048
"""Rows per piece: small enough that two pieces of 46 metrics (3 MB of text each) are written
at once and the last one is short, large enough that a call costs nothing beside its rows."""
_INT64, _FLOAT64, _BOOL, _TEXT = 0, 1, 2, 3  # (jsonrows.c's kinds)
_PLAIN = frozenset(map(chr, range(0x20, 0x7F))) - set('"\\/')
"""The characters pandas writes in a string as they are (it escapes ``"``, ``\\`` and ``/``, and
writes the rest of ASCII's controls and every non-ASCII character as ``\\uXXXX``)."""


def _function():
    """``json_records`` of the compiled ``jsonrows.c``, typed, or None: not built, or its text
    of :func:`_probe` is not this pandas' (a pandas that writes a value otherwise: never
    used then)."""
    lib, built = native.built(SOURCE)
    if lib is None:
        return None
    try:
        fn = lib.json_records
    except AttributeError:
        return None
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 6 + [ctypes.c_int64]
    fn.argtypes += [ctypes.c_void_p, ctypes.c_int64]
    if built not in _AGREES:  # (once per process and build)
        _AGREES[built] = _writes_as_pandas(fn)
    return fn if _AGREES[built] else None


_AGREES: dict[str, bool] = {}


def available() -> bool:
    """Whether the C loop writes the JSON here (built, and its probe this pandas' text)."""
    return _function() is not None


def _writes_as_pandas(fn) -> bool:
    """Whether the loop ``fn``'s text of :func:`_probe` is this pandas' own."""
    probe = _probe()
    table = _table(fn, probe)
    return table is not None and _piece(probe, table, 0, len(probe)) == reference(probe)


def _probe() -> pd.DataFrame:
    """A frame of the values at each branch of ``jsonrows.c``'s rules (but the exponent form,
    which pandas writes): rounding at half of the tenth decimal, carries into the whole part,
    the bounds of the fixed form, signs, NaN and infinities; the ends of int64; bools; text
    with escapes and missing values."""
    floats = [0.0, -0.0, 0.5, 2.5, 1e-10, 5e-11, 1.5e-10, 2.5e-10, 0.12345678905, 0.99999999995,
              9.99999999996, -123.456, 1e-15, 1e16, -1e16, 9999999999999998.0, 70.8583739428,
              1 / 3, np.nan, np.inf, -np.inf]  # fmt: skip
    n = len(floats)
    ints = np.resize(np.array([0, -1, 1, np.iinfo(np.int64).min, np.iinfo(np.int64).max]), n)
    text = np.resize(np.array(["pid1", 'q"/\\', "é", None, ""], dtype=object), n)
    return pd.DataFrame(
        {"x": floats, "n": ints, "b": np.arange(n) % 3 == 0, "s": text},
        index=pd.RangeIndex(n, name="step"),
    )


def reference(frame: pd.DataFrame, lo: int = 0, hi: int | None = None) -> str:
    """Rows ``lo:hi`` of ``frame`` as pandas writes them, without the array's brackets."""
    return frame.iloc[lo:hi].reset_index().to_json(orient="records")[1:-1]


def record_pieces(frame: pd.DataFrame, piece_rows: int = PIECE_ROWS) -> Iterator[str]:
    """``frame.reset_index().to_json(orient="records")`` in pieces: ``"["``, then the rows
    ``piece_rows`` at a time with a ``","`` between two, then ``"]"``. Two pieces are written
    at once where the C loop can write them (module doc); a caller that stops early (a closed
    pipe) waits for the pieces in flight at most."""
    yield "["
    n = len(frame)
    table = _columns(frame) if n else None
    spans = [(lo, min(lo + piece_rows, n)) for lo in range(0, n, piece_rows)]
    if table is None or len(spans) < 2:
        for i, (lo, hi) in enumerate(spans):
            if i:
                yield ","
            yield _piece(frame, table, lo, hi)
    else:
        with ThreadPoolExecutor(2, thread_name_prefix="specscope-json") as pool:
            ahead = [pool.submit(_piece, frame, table, lo, hi) for lo, hi in spans[:2]]
            for i in range(len(spans)):
                text = ahead[i].result()
                ahead[i] = None  # (the text is the caller's now)
                if i + 2 < len(spans):
                    ahead.append(pool.submit(_piece, frame, table, *spans[i + 2]))
                if i:
                    yield ","
                yield text
    yield "]"


class _Table:
    """What the C loop reads: each column's values (their addresses), kinds, keys and texts."""

    def __init__(self, fn, columns: list[_Column], keys: list[str]):
        self.fn = fn  # (json_records)
        self.columns = columns  # (kept alive while the loop reads them)
        self.addresses = np.array([c.values.ctypes.data for c in columns], dtype=np.int64)
        self.kinds = np.array([c.kind for c in columns], dtype=np.uint8)
        self.texts = np.array([c.texts.ctypes.data for c in columns], dtype=np.int64)
        self.text_ends = np.array([c.text_ends.ctypes.data for c in columns], dtype=np.int64)
        blob = "".join(keys).encode("ascii")
        self.keys = np.frombuffer(blob, dtype=np.uint8) if blob else np.zeros(1, np.uint8)
        self.key_ends = np.cumsum([len(k) for k in keys], dtype=np.int64)
        self.row_bytes = 2 + int(self.key_ends[-1]) + sum(c.most + 1 for c in columns)
        self.buffers = _Buffers()  # (the table is the call's: so are they)


class _Column:
    """One column for the C loop: its values (int64, float64, a byte per bool, or an int64
    code per text), kind, and for text its texts (as JSON) one after another."""

    _NONE = np.zeros(1, dtype=np.int64)  # (the texts of a column without)

    def __init__(self, values: np.ndarray, kind: int, texts: list[str] | None = None):
        self.values = np.ascontiguousarray(values)
        self.kind = kind
        self.most = 32  # (an int64: 20 bytes; a float: 29)
        self.texts = self.text_ends = self._NONE
        if texts:
            blob = "".join(texts).encode("ascii")
            self.texts = np.frombuffer(blob, dtype=np.uint8)
            self.text_ends = np.cumsum([len(t) for t in texts], dtype=np.int64)
            self.most = max(4, max(len(t) for t in texts))


def _columns(frame: pd.DataFrame) -> _Table | None:
    """The table of ``frame.reset_index()`` for the C loop, or None where pandas writes it all
    (module doc)."""
    fn = _function()
    return None if fn is None else _table(fn, frame)


def _table(fn, frame: pd.DataFrame) -> _Table | None:
    """:func:`_columns` with the loop ``fn``."""
    if isinstance(frame.index, pd.MultiIndex):
        return None
    name = frame.index.name
    names = [name, *frame.columns]
    if not all(isinstance(c, str) for c in names) or len(set(names)) != len(names):
        return None
    columns = []
    for values in [frame.index, *(frame.iloc[:, i] for i in range(frame.shape[1]))]:
        column = _column(values)
        if column is None:
            return None
        columns.append(column)
    return _Table(fn, columns, [_json_text(c) + ":" for c in names])


def _column(values: pd.Series | pd.Index) -> _Column | None:
    """``values`` as the C loop reads them, or None where it does not write their dtype."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        array = values.to_numpy()
        if dtype.kind == "u" and array.size and array.max() > np.iinfo(np.int64).max:
            return None
        return _Column(array.astype(np.int64, copy=False), _INT64)
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        return _Column(values.to_numpy().astype(np.float64, copy=False), _FLOAT64)
    if isinstance(dtype, np.dtype) and dtype.kind == "b":
        return _Column(values.to_numpy().view(np.uint8), _BOOL)
    if isinstance(dtype, pd.StringDtype) or (isinstance(dtype, np.dtype) and dtype.kind == "O"):
        codes, uniques = pd.factorize(values, use_na_sentinel=True)  # (NA, None, NaN: -1)
        if not all(isinstance(u, str) for u in uniques):
            return None  # (objects of other types: pandas' own rules)
        return _Column(codes.astype(np.int64, copy=False), _TEXT, [_json_text(u) for u in uniques])
    return None  # (an extension dtype, nullable integers say: pandas' own rules)


def _json_text(text: str) -> str:
    """``text`` as pandas writes a string (asked of pandas where it escapes a character)."""
    if all(ch in _PLAIN for ch in text):
        return f'"{text}"'
    return pd.Series([text]).to_json(orient="values")[1:-1]


class _Buffers(threading.local):
    """Each thread's output buffer for the pieces of one :func:`record_pieces`, kept for its
    next piece (a new one's pages are zeroed by the kernel as they are first written: 10-30 ms
    per 18 MB here) and given up with the call."""

    buf: np.ndarray | None = None

    def get(self, size: int) -> np.ndarray:
        if self.buf is None or len(self.buf) < size:
            self.buf = np.empty(size, dtype=np.uint8)
        return self.buf


def _piece(frame: pd.DataFrame, table: _Table | None, lo: int, hi: int) -> str:
    """Rows ``lo:hi`` as JSON records without brackets: by the C loop where it can (module
    doc), else by pandas."""
    if table is None:
        return reference(frame, lo, hi)
    out = table.buffers.get(table.row_bytes * (hi - lo))
    n = table.fn(
        lo,
        hi,
        len(table.columns),
        table.addresses.ctypes.data,
        table.kinds.ctypes.data,
        table.keys.ctypes.data,
        table.key_ends.ctypes.data,
        table.texts.ctypes.data,
        table.text_ends.ctypes.data,
        table.row_bytes,
        out.ctypes.data,
        len(out),
    )
    if n < 0:  # a value in the exponent form (-1); -2 cannot happen (row_bytes)
        return reference(frame, lo, hi)
    return str(out[:n].data, "ascii")
