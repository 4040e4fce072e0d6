"""The names of GPU operations and CUDA API calls: their codes as pandas categoricals.

The reads (:mod:`.opsread`) give each operation a name code: a ``StringIds`` id for a kernel
(its short and its demangled name), -2 for a memset, ``-10 - copyKind`` for a memcpy, ``-1000
- graphId`` for a graph replay, -3 for a kernel without a name; each CUDA API call its
``nameId``. :func:`categorical` labels each distinct code once (:func:`op_label`) and gives
pandas the codes of every row (:func:`unique_inverse`, in C where :mod:`.opsums` is built).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specscope.analysis import opsums
from specscope.analysis.memory import CHUNK_ROWS

# Memcpy names of exports without ``ENUM_CUDA_MEMCPY_OPER`` (nsys before 2021.2): those of that
# era's ``nsys stats`` (its ``MemcpyOperStrs``), so ``--totals`` names copies as it did.
LEGACY_MEMCPY_NAMES = {
    0: "[CUDA memcpy Unknown]",
    1: "[CUDA memcpy HtoD]",
    2: "[CUDA memcpy DtoH]",
    3: "[CUDA memcpy HtoA]",
    4: "[CUDA memcpy AtoH]",
    5: "[CUDA memcpy AtoA]",
    6: "[CUDA memcpy AtoD]",
    7: "[CUDA memcpy DtoA]",
    8: "[CUDA memcpy DtoD]",
    9: "[CUDA memcpy HtoH]",
    10: "[CUDA memcpy PtoP]",
    11: "[CUDA Unified Memory memcpy HtoD]",
    12: "[CUDA Unified Memory memcpy DtoH]",
    13: "[CUDA Unified Memory memcpy DtoD]",
}


def op_label(i: int, strings: dict[int, str], memcpy_names: dict[int, str]) -> str:
    """Name of an op from its name code (see :attr:`.loader.Trace.ops`); memcpys as ``nsys stats``
    names them (:attr:`.loader.Trace.memcpy_names`)."""
    if i >= 0:
        return strings.get(i, f"<string {i}>")
    if i == -2:
        return "[CUDA memset]"
    if i == -3:
        return "[unnamed kernel]"
    if i <= -1000:
        return f"[CUDA graph {-1000 - i}]"
    kind = -10 - i
    return memcpy_names.get(kind, f"[CUDA memcpy kind {kind}]")


def labelled(codes: np.ndarray, label) -> pd.Categorical:
    """A categorical of the strings ``label(code)`` (object categories: cheap to compare and
    convert); each distinct code is labelled once."""
    return pd.Categorical.from_codes(*labelled_codes(codes, label))


def labelled_codes(codes: np.ndarray, label) -> tuple[np.ndarray, pd.Index]:
    """:func:`labelled`'s codes (an array of this function's own, writeable: a categorical's
    are a read-only view) and categories."""
    uniq, inverse = unique_inverse(codes)
    labels = [label(int(c)) for c in uniq]
    if len(set(labels)) < len(labels):  # two codes with one label (one NVTX domain in each
        # of several processes): each code's label's place, no string of every row hashed
        categories = sorted(set(labels))
        place = {name: k for k, name in enumerate(categories)}
        codes_of = np.array([place[name] for name in labels], dtype=index_dtype(len(place)))
        return codes_of[inverse], pd.Index(categories, dtype=object)
    return inverse, pd.Index(labels, dtype=object)


def unique_inverse(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, return_inverse=True)``, the inverse in the smallest signed integer
    dtype that holds it (op names: int8 for up to 127 distinct names, so 20 M ops need 20 MB);
    without the sort when the codes span a range no wider than their count (op names:
    StringIds ids and small negative codes), in chunks of :data:`CHUNK_ROWS` (no temporary of
    the codes' size)."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8)
    lo, hi = int(codes.min()), int(codes.max())
    if hi - lo > max(len(codes), 1 << 16):
        uniq, inverse = np.unique(codes, return_inverse=True)
        return uniq, inverse.reshape(-1).astype(index_dtype(len(uniq)))
    if (fast := opsums.dense_inverse(codes, lo, hi, index_dtype)) is not None:
        return fast  # (two C passes: opsums.py; what follows is their reference)
    base = codes.dtype.type(lo)  # codes - base fits the codes' dtype: 0 <= it <= hi - lo
    present = np.zeros(hi - lo + 1, dtype=bool)
    for i in range(0, len(codes), CHUNK_ROWS):
        present[codes[i : i + CHUNK_ROWS] - base] = True
    uniq = np.flatnonzero(present) + lo
    dtype = index_dtype(len(uniq))
    position = (np.cumsum(present, dtype=np.int64) - 1).astype(dtype)  # among uniq
    inverse = np.empty(len(codes), dtype=dtype)
    for i in range(0, len(codes), CHUNK_ROWS):
        inverse[i : i + CHUNK_ROWS] = position[codes[i : i + CHUNK_ROWS] - base]
    return uniq, inverse


def index_dtype(n: int) -> np.dtype:
    """The smallest signed integer dtype holding 0..n-1 (what pandas keeps as the codes of a
    categorical of ``n`` categories)."""
    return next(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)
                if n <= np.iinfo(t).max)  # fmt: skip


def op_names(
    ids: list[np.ndarray], strings: dict[int, str], memcpy_names: dict[int, str]
) -> dict[str, tuple[np.ndarray, pd.Index]]:
    """The ``name`` and ``full_name`` columns of :attr:`.loader.Trace.ops` from their name
    codes, ``ids`` (short, full), as the codes and categories of their categoricals
    (:func:`labelled_codes`: codes of their own, which the regrouping by device moves and gives
    back as it reads them); taken out of the list one at a time, so that each is freed once
    its codes are made (20 M ops: 80 MB each) where the caller holds no other reference."""
    return {column: categorical_codes(ids.pop(0), strings, memcpy_names)
            for column in ("name", "full_name")}  # fmt: skip


def categorical(
    ids: np.ndarray, strings: dict[int, str], memcpy_names: dict[int, str] | None = None
) -> pd.Categorical:
    """Op names from their name codes (see :func:`op_label`)."""
    return pd.Categorical.from_codes(*categorical_codes(ids, strings, memcpy_names))


def categorical_codes(
    ids: np.ndarray, strings: dict[int, str], memcpy_names: dict[int, str] | None = None
) -> tuple[np.ndarray, pd.Index]:
    """:func:`categorical`'s codes and categories (:func:`labelled_codes`)."""
    names = LEGACY_MEMCPY_NAMES if memcpy_names is None else memcpy_names
    return labelled_codes(ids, lambda i: op_label(i, strings, names))
