"""Steps of another kind among the steps: a note, never a change of the steps.

A server's loop mixes kinds of step: SGLang and vLLM run a prefill between decodes, eagerly and
at another shape, with many more kernels than a decode's. Where the steps are found by their
CUDA graph cycle or by a marker kernel, such a step's eager work lands in one of the usual
steps (``tests/data/real/mixed_graph.sqlite``: 5 of 42 steps hold a prefill's 17 kernels and
its argmax besides the decode's own work). The per-step medians still stand for the usual step;
the means, the p90 and the max do not. :func:`odd_steps_note` says so::

    eager operations of a step = eager_kernels + eager_memcpy + eager_memset
    odd step: more eager operations than  median + max(MIN_MORE, median)
              (more than twice the median step's, and more than MIN_MORE more)

noted where the steps are at least :data:`MIN_STEPS` and at least one of them, at most
:data:`MAX_SHARE` of them, are odd. Steps whose eager work merely varies (a batch-size change,
copies that come and go) stay well inside that bound and are not noted.

Steps that took far longer than the usual step, whatever their work, are another such kind: a
pause or a one-time cost lies in them. Most real captures have one among their first steps
(a kernel's module loaded on its first launch, ``cuLibraryLoadData``: 19 ms in
``tests/data/real/stream_overlap_graph.sqlite``'s step 1, against 1.9 ms for the median step); a
server's capture has them where it waited for requests. :func:`long_steps_note` says so::

    long step: cpu_step_us > max(LONG_FACTOR * median, median + LONG_MORE_US)

with the same bounds on the number of steps and on their share; where every long step is
among the first :data:`FIRST_STEPS` kept, it names the ``--skip`` that drops them, and the
one-time CUDA API calls the steps' thread made in them (:data:`ONE_TIME_CALLS`: module loads,
graph instantiations, allocations from the driver), the longest of each step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MIN_MORE = 4  # eager operations over the median step's: more than these
MIN_STEPS = 8  # fewer steps: no median to stand for "the usual step"
MAX_SHARE = 0.25  # more odd steps than this share: no usual step to tell them from
SHOWN = 6  # step numbers named in the note, at most
_COUNTS = ("eager_kernels", "eager_memcpy", "eager_memset")
LONG_FACTOR = 10  # a long step: more than this many times the median step's host time
LONG_MORE_US = 1000.0  # and more than this much longer (µs): no note on steps of a few µs
FIRST_STEPS = 3  # long steps all among the first these many kept: --skip named
ONE_TIME_CALLS = frozenset({
    # a kernel's module loaded on its first launch (CUDA's lazy loading), or by hand
    "cuLibraryLoadData", "cuLibraryLoadFromFile", "cuModuleLoad", "cuModuleLoadData",
    "cuModuleLoadDataEx", "cuModuleLoadFatBinary",
    # a CUDA graph recorded and made ready (a batch size seen first, PyTorch's graph trees)
    "cudaGraphInstantiate", "cudaGraphInstantiateWithFlags", "cuGraphInstantiate",
    "cuGraphInstantiateWithFlags", "cudaGraphUpload", "cuGraphUpload",
    # memory taken from the driver (a caching allocator growing)
    "cudaMalloc", "cuMemAlloc", "cudaMallocHost", "cudaHostAlloc", "cuMemHostAlloc",
    "cudaHostRegister", "cuMemHostRegister",
})  # fmt: skip
"""CUDA API calls that cost once, which a long step's note names where it holds one."""


def odd_steps_note(frame: pd.DataFrame) -> list[str]:
    """The note on the odd steps of per-step metrics ``frame`` (module doc), or none."""
    cols = [c for c in _COUNTS if c in frame.columns]
    if len(frame) < MIN_STEPS or not cols:
        return []
    ops = frame[cols].fillna(0).to_numpy(dtype=np.float64).sum(axis=1)
    median = float(np.median(ops))
    odd = np.flatnonzero(ops > median + max(MIN_MORE, median))
    if not len(odd) or len(odd) > MAX_SHARE * len(ops):
        return []
    lo, hi = int(ops[odd].min()), int(ops[odd].max())
    many = f"{lo}" if lo == hi else f"{lo}-{hi}"
    return [
        f"{len(odd)} of {len(ops)} steps launched more eager GPU work than the median step "
        f"({many} eager operations against {median:g}: {_named(frame.index[odd])}): another "
        "kind of step among them (a prefill between decodes, say); the medians stand for the "
        "usual step, the means, p90 and max include these"
    ]


def long_steps(frame: pd.DataFrame) -> np.ndarray:
    """The positions (rows of ``frame``) of the long steps :func:`long_steps_note` tells of;
    none where it tells of none."""
    none = np.zeros(0, dtype=np.intp)
    if "cpu_step_us" not in frame.columns or len(frame) < MIN_STEPS:
        return none
    us = frame["cpu_step_us"].to_numpy(dtype=np.float64)
    if np.isnan(us).any():
        return none
    median = float(np.median(us))
    long = np.flatnonzero(us > max(LONG_FACTOR * median, median + LONG_MORE_US))
    return long if len(long) <= MAX_SHARE * len(us) else none


def long_steps_note(frame: pd.DataFrame, costs: list[tuple[int, str, float]] = ()) -> list[str]:
    """The note on the long steps of per-step metrics ``frame`` (module doc), or none;
    ``costs``: (step, CUDA API call, µs) of the one-time calls found in them
    (:data:`ONE_TIME_CALLS`, the longest of each step), said after the steps."""
    long = long_steps(frame)
    if not len(long):
        return []
    us = frame["cpu_step_us"].to_numpy(dtype=np.float64)
    median = float(np.median(us))
    skip = ""
    if long[-1] < FIRST_STEPS:
        skip = f"; --skip {int(frame.index[long[-1]]) + 1} drops them"
    told = ""
    if costs:
        shown = [f"{name} {_time(c)} (step {step})" for step, name, c in costs[:SHOWN]]
        told = "; in them: " + ", ".join(shown)
    return [
        f"{len(long)} of {len(us)} steps took over {LONG_FACTOR}x the median step on the host "
        f"({_span(us[long])} against {_time(median)}: {_named(frame.index[long])}): a pause or "
        "a one-time cost lies in them (a kernel's module loaded on its first launch, a server "
        f"waiting for requests){told}; the medians stand for the usual step, the means, p90 "
        f"and max include these{skip}"
    ]


def _named(steps: pd.Index) -> str:
    """``step 6`` or ``steps 6, 13, ...`` (up to :data:`SHOWN` numbers)."""
    shown = ", ".join(str(s) for s in steps[:SHOWN]) + (", ..." if len(steps) > SHOWN else "")
    return f"step {shown}" if len(steps) == 1 else f"steps {shown}"


def _time(us: float) -> str:
    return f"{us / 1e3:.1f} ms" if us >= 1000 else f"{us:.1f} µs"


def _span(us: np.ndarray) -> str:
    """``43.2 ms``, ``28.6-85.3 ms`` (µs values)."""
    lo, hi = _time(us.min()), _time(us.max())
    if lo == hi:
        return lo
    if lo.split()[1] == hi.split()[1]:  # (one unit: said once)
        return f"{lo.split()[0]}-{hi}"
    return f"{lo}-{hi}"
