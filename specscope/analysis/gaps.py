"""Gap attribution: what filled a gap between two anchors, and who waited for whom.

For each pair of consecutive anchor instances A -> B (the pairs of ``gap_us:A->B``, defined in
:mod:`specscope.analysis.metrics`: the cross-step pair belongs to B's step, the first
occurrence in a step is reported), with

- ``a``: the last end of A's GPU work;
- ``b``: the first start of B's GPU work;
- ``L``: the start of *B's launch call*: the CUDA API call (``cudaGraphLaunch``,
  ``cudaLaunchKernel``, ...) that launched B's first GPU operation (the one starting at ``b``)::

    CPU  launching thread ..| prepare B: copies, kernels    |[launch B]...
                                                             ^ L
    GPU  ...[ A's work ]   [c1] [c2]  [c3]                           [ B's work ...
                       ^ a                                           ^ b
                       |<------------------ gap_us ------------------>|
                       |<----------- host_lag_us ----------->|<------>| launch_latency_us:B

    gap_busy_us:A->B      = length of the union of every GPU operation of the device (any
                            stream, any process) inside [a, b] (here c1 + c2 + c3; overlapping
                            work counts once); 0 when b <= a
    gap_idle_us:A->B      = max(b - a, 0) - gap_busy_us
    host_lag_us:A->B      = L - a: > 0, the GPU had finished A and waited for the host to
                            issue B; < 0, B was already issued when A ended (the host was ahead)
    launch_latency_us:B   = b - L: launch call to first GPU start (launch overhead, plus
                            queueing behind earlier work when the host was ahead)

so ``gap_us = host_lag_us + launch_latency_us``. When B's work starts before A's ends
(overlap; ``gap_us`` < 0) busy and idle are 0::

    GPU  [ A's work ......]        gap_us = b - a < 0, gap_busy_us = gap_idle_us = 0
                  [ B's work ...]
                  ^ b     ^ a

``launch_latency_us:B`` is reported for the first instance of anchor B in each step (NVTX
or graph anchors alike: with graph anchors the anchor *is* its launch call). A value is NaN
when a side has no GPU work on the device or B's first operation has no recorded API call.

What these numbers cannot tell: in a node-mode capture (``--cuda-graph-trace=node``) CUPTI
traces every graph node, which slows each graph launch call, so host lag and launch latency
around graph replays are inflated; in graph mode a replay is one operation, so work inside a
graph (and its own idle) is invisible here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from specscope.analysis import opsums
from specscope.analysis.coverage import ops_coverage
from specscope.analysis.memory import CHUNK_ROWS
from specscope.analysis.pairs import anchor_name_codes, first_per_step, pair_columns
from specscope.analysis.spec import anchor_pairs
from specscope.analysis.steps import Steps, op_anchors

PAIR_METRICS = ("gap_busy_us", "gap_idle_us", "host_lag_us")  # per anchor pair A->B
LATENCY = "launch_latency_us"  # per anchor B


def attribution_columns(anchor_names: tuple[str, ...]) -> list[str]:
    """The gap-attribution metric names of a spec's anchors, in report order."""
    pairs = anchor_pairs(anchor_names)
    return [f"{m}:{p}" for m in PAIR_METRICS for p in pairs] + [
        f"{LATENCY}:{n}" for n in dict.fromkeys(anchor_names)
    ]


Launches = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""(pid, correlation id) -> start and thread of each launch call: :meth:`.Trace.launches`."""


def anchor_extents(steps: Steps, launches: Launches) -> pd.DataFrame:
    """Per anchor instance (row of ``steps.anchors``): ``first_ns`` (first start of its GPU
    work), ``last_ns`` (last end), ``launch_ns`` (start of the API call that launched the
    operation starting at ``first_ns``) and ``launch_tid`` (that call's thread, -1 if none);
    NaN where the instance has no GPU work on the device. ``launches``: the trace's
    :meth:`.Trace.launches`.

    The operation starting at ``first_ns``: of those starting then, the one with the earliest
    call (one without a call, NaN, last), then the first in trace order. Calls are looked up
    only for the operations that start an instance at the same time as another (and for each
    instance's head): the operations carry no launch times. The operations are taken
    :data:`CHUNK_ROWS` rows at a time in trace order, each chunk's instances merged into the
    extents so far (an instance may span chunks): bounded temporaries, where the rows of
    every instance at once took 13 bytes per operation (0.26 GB at 20 M)."""
    n = len(steps.anchors)
    ops = steps.ops
    if (fast := _anchor_extents_c(steps, n, launches)) is not None:
        return fast  # (one C loop: opsums.py; what follows is its reference)
    first, last, launch = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    tid = np.full(n, -1, dtype=np.int64)
    for lo in range(0, len(ops) if n else 0, CHUNK_ROWS):
        anchor = op_anchors(steps, lo, lo + CHUNK_ROWS)
        rows = np.flatnonzero(anchor >= 0)
        if not len(rows):
            continue
        group = anchor[rows]
        rows += lo
        # rows grouped by instance, in trace order within one (ops mostly come in instance
        # order: no sort at all, or a stable one of a chunk)
        if not np.all(group[1:] >= group[:-1]):
            by_group = np.argsort(group, kind="stable")
            rows, group = rows[by_group], group[by_group]
        heads = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        idx = group[heads]
        f, last_end, call, thread = _instance_extents(ops, rows, heads, launches)
        # this chunk's head replaces the one so far where it starts earlier, or at the same
        # time with an earlier call (an equal one: the earlier chunk's, first in trace order)
        known = first[idx]
        known_call = launch[idx]
        earlier = np.isnan(known) | (f < known)
        earlier |= (f == known) & (_nan_last(call) < _nan_last(known_call))
        take = idx[earlier]
        first[take], launch[take], tid[take] = f[earlier], call[earlier], thread[earlier]
        last[idx] = np.fmax(last[idx], last_end)
    columns = {"first_ns": first, "last_ns": last, "launch_ns": launch, "launch_tid": tid}
    return pd.DataFrame(columns)


def _rows_launches(ops: pd.DataFrame, rows: np.ndarray, launches: Launches):
    """:meth:`.Trace.launches` of the operations ``rows`` of ``ops``."""
    return launches(ops["pid"].to_numpy()[rows], ops["correlation_id"].to_numpy()[rows])


def _anchor_extents_c(steps: Steps, n: int, launches: Launches) -> pd.DataFrame | None:
    """:func:`anchor_extents` by the C loop of :mod:`.opsums` (a chunk of operations' anchors
    at a time: :func:`.steps.op_anchors`), or None (also without anchors: the reference then
    reads no operation)."""
    ops = steps.ops
    if not n:
        return None
    start, end = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
    state = opsums.anchor_state(n)
    for lo in range(0, len(ops), CHUNK_ROWS):
        hi = lo + CHUNK_ROWS
        anchor = op_anchors(steps, lo, hi)
        if opsums.anchor_heads(anchor, n, start[lo:hi], end[lo:hi], state, lo) is None:
            return None
    first_ns, last_ns, head, tied = state
    tied = tied.view(bool)
    if tied.any():
        _untie(steps, first_ns, head, tied, launches)
    some = head >= 0
    first, last, launch = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    tid = np.full(n, -1, dtype=np.int64)
    first[some], last[some] = first_ns[some], last_ns[some]
    launch[some], tid[some] = _rows_launches(ops, head[some], launches)
    columns = {"first_ns": first, "last_ns": last, "launch_ns": launch, "launch_tid": tid}
    return pd.DataFrame(columns)


def _untie(
    steps: Steps, first: np.ndarray, head: np.ndarray, tied: np.ndarray, launches: Launches
) -> None:
    """The head of each ``tied`` instance (several operations start it at ``first``): the one
    whose call started first (no call, NaN, last), then the first in trace order, among the
    operations starting it; ``head`` updated in place. A chunked pass over the operations
    finds them; calls are looked up for those only."""
    ops = steps.ops
    start = ops["start_ns"].to_numpy()
    found, instances = [], []
    for lo in range(0, len(ops), CHUNK_ROWS):
        g = op_anchors(steps, lo, lo + CHUNK_ROWS)
        inside = g >= 0
        inside[inside] = tied[g[inside]]
        inside[inside] = start[lo : lo + CHUNK_ROWS][inside] == first[g[inside]]
        found.append(np.flatnonzero(inside) + lo)
        instances.append(g[inside])
    rows = np.concatenate(found)
    call = _nan_last(_rows_launches(ops, rows, launches)[0])
    instance = np.concatenate(instances)
    order = np.lexsort((rows, call, instance))  # by instance, then call, then trace order
    best = order[np.r_[True, instance[order][1:] != instance[order][:-1]]]
    head[instance[best]] = rows[best]


def _nan_last(t: np.ndarray) -> np.ndarray:
    """Call starts with NaN (no call) as +inf: after every call."""
    return np.where(np.isnan(t), np.inf, t)


def _instance_extents(
    ops: pd.DataFrame, rows: np.ndarray, heads: np.ndarray, launches: Launches
) -> tuple:
    """:func:`anchor_extents` of the instances whose rows of ``ops`` are ``rows``, grouped by
    instance (in trace order within one), each instance starting at its entry of ``heads``:
    (first start, last end, launch start, launch thread) per instance."""
    start = ops["start_ns"].to_numpy()[rows]
    api, thread = _rows_launches(ops, rows, launches)
    sizes = np.diff(heads, append=len(rows))
    first = np.minimum.reduceat(start, heads)
    # the head row: earliest start, then earliest call (a row without a call, NaN, last), then
    # trace order
    tied = start == np.repeat(first, sizes)
    del start
    call = np.repeat(np.fmin.reduceat(np.where(tied, api, np.inf), heads), sizes)
    pick = np.flatnonzero(tied & ((api == call) | ~np.isfinite(call)))
    del tied, call
    instance = np.repeat(np.arange(len(heads)), sizes)[pick]
    head = pick[np.r_[True, instance[1:] != instance[:-1]]]
    last = np.maximum.reduceat(ops["end_ns"].to_numpy()[rows], heads)
    return first, last, api[head], thread[head]


def pair_values(steps: Steps, ext: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per consecutive anchor instances (i - 1, i), i = 1..n-1: ``gap_us``, ``gap_busy_us``,
    ``gap_idle_us``, ``host_lag_us`` and ``launch_latency_us`` (of instance i), in µs, from
    the instances' :func:`anchor_extents` ``ext``."""
    a = ext["last_ns"].to_numpy()[:-1]
    b = ext["first_ns"].to_numpy()[1:]
    launch = ext["launch_ns"].to_numpy()[1:]
    gap = b - a
    busy = np.full(len(gap), np.nan)
    ok = ~np.isnan(gap)
    ends_starts = ops_coverage(steps)(np.r_[np.maximum(b[ok], a[ok]), a[ok]])
    busy[ok] = ends_starts[: ok.sum()] - ends_starts[ok.sum() :]
    return {
        "gap_us": gap / 1e3,
        "gap_busy_us": busy / 1e3,
        "gap_idle_us": (np.maximum(gap, 0) - busy) / 1e3,
        "host_lag_us": (launch - a) / 1e3,
        "launch_latency_us": (b - launch) / 1e3,
    }


def gap_attribution(steps: Steps, ext: pd.DataFrame) -> pd.DataFrame:
    """The :func:`attribution_columns` per kept step (index: step; module doc), from the
    anchor instances' :func:`anchor_extents` ``ext``."""
    kept = steps.kept
    index = pd.Index(kept, name="step")
    nan = np.full(len(kept), np.nan)
    cols = dict.fromkeys(attribution_columns(steps.spec.anchor_names), nan)
    if len(steps.anchors) == 0:
        return pd.DataFrame(cols, index=index)
    if len(steps.anchors) >= 2:
        values = pair_values(steps, ext)
        for metric in PAIR_METRICS:
            cols.update(pair_columns(steps, values[metric], f"{metric}:"))
    a = steps.anchors
    codes, names = anchor_name_codes(steps)
    value = (ext["first_ns"] - ext["launch_ns"]).to_numpy() / 1e3
    found, table = first_per_step(steps, a["step"].to_numpy(), codes, value)
    cols.update((f"{LATENCY}:{names[c]}", row) for c, row in zip(found, table, strict=True))
    return pd.DataFrame(cols, index=index)  # in one piece (many anchors: many columns)
