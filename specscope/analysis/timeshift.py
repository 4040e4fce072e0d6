"""Times of an export that ``nsys export`` shifted, taken back to the session's own clock.

By default every time in an nsys SQLite export is nanoseconds since the profiling session
started (``ANALYSIS_DETAILS.duration`` long). ``nsys export --ts-normalize=true`` adds the
session's start as a UTC epoch time (about 1.8e18 ns) to every time, and ``--ts-shift=N`` adds
``N``; the export records what it added, whichever option did it, in ``META_DATA_EXPORT`` as
``EXPORT_CONFIG_TIME_SHIFT`` (nsys 2023.4 and 2025.3 both; ``0`` for a plain export).

The loader subtracts that shift from every time it reads (GPU operations, CUDA API calls, NVTX
ranges, graph launches and creations), so one report exported either way gives the same
analysis, byte for byte. Left in, a shift pushes every row "beyond the capture" (the
validation drops them all: :mod:`.validate`), and epoch times lose their last 8 bits wherever
they become float64 (2^60 ns: steps of 256 ns).
"""

from __future__ import annotations

import numpy as np

from specscope.analysis.sqlread import NULL_INT

SHIFT_KEY = "EXPORT_CONFIG_TIME_SHIFT"
FAR_NS = 1 << 62
"""A time (ns) beyond ±FAR_NS (146 years) is none nsys writes: a damaged value (a shift, a
capture's duration, a row's time)."""


def export_time_shift(meta: dict[str, str]) -> int:
    """What the export added to every time (ns), from its metadata; 0 where it says nothing
    readable."""
    try:
        shift = int(meta.get(SHIFT_KEY, "0"))
    except ValueError:
        return 0
    return shift if -FAR_NS < shift < FAR_NS else 0


def unshift(values: np.ndarray, shift: int) -> np.ndarray:
    """``values`` (int64 ns) less ``shift``, a missing time (``NULL_INT``) left missing: in
    place where the array can be written, else as a new array."""
    if not shift or not len(values):
        return values
    out = values if values.flags.writeable else values.copy()
    np.subtract(out, np.int64(shift), out=out, where=values != NULL_INT)
    return out
