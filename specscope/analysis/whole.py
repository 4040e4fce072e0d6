"""The whole capture as one step: the last resort for a trace without any step structure.

When an export has GPU work but neither NVTX steps, a repeating graph-launch cycle nor a
repeating kernel pattern (:mod:`specscope.analysis.auto`), each (process, device) is measured as
**one window**: step 0 holds every GPU operation the process ran on the device, whichever thread
launched it (or none recorded), so the per-step metrics of :mod:`specscope.analysis.metrics`
describe the whole capture::

    GPU (pid P, device D)  [k][k]  [memcpy]   [graph]  ...   [k]
                           |<--------------- window_us -------->|
    busy_us  = union of all of them; idle_us = window_us - busy_us; occupancy_pct
    counts   = eager_memcpy*, eager_memset, eager_kernels, graph_kernels, graph_launches, ...

Its CPU interval (``cpu_step_us``) runs from the first launch call (or GPU start, if earlier)
to the last GPU end. Host metrics (``cpu_us:R``, ``api_calls:``) are those of the process's
main launching thread (the one that launched the most operations; tid -1 when no launch call
was recorded). ``--skip`` does not apply: there is one step. Gaps need anchors: none.
:func:`top_kernels` lists the kernels that took the most device time in the window.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specscope.analysis.loader import Trace
from specscope.analysis.spec import StepSpec
from specscope.analysis.steps import Steps, op_index_dtype

WHOLE_CAPTURE = "(whole capture)"  # the step name of the one-window spec (never an NVTX range)
WHOLE_SPEC = StepSpec(WHOLE_CAPTURE)


def whole_capture_steps(trace: Trace, pid: int, device: int) -> Steps:
    """The one-step :class:`Steps` of process ``pid`` on ``device`` (module doc)."""
    ops = trace.ops
    mine = (ops["pid"].to_numpy() == pid) & (ops["device_id"].to_numpy() == device)
    if not mine.all():  # one process on one device (the usual case): no copy of every column
        ops = ops[mine].reset_index(drop=True)
    if ops.empty:
        raise ValueError(f"process {pid} has no GPU work on device {device}")
    tid, first_call = _launching_thread(trace, ops)
    first = np.nanmin([first_call, ops["start_ns"].to_numpy().min()])
    last = int(ops["end_ns"].max())
    all_steps = pd.DataFrame({"step": [0], "start_ns": [int(first)], "end_ns": [last]})
    anchors = pd.DataFrame(
        {
            "name": np.array([], dtype=object),
            "start_ns": np.array([], dtype=np.int64),
            "end_ns": np.array([], dtype=np.int64),
            "step": np.array([], dtype=np.int64),
        }
    )
    zeros = np.zeros(len(ops), dtype=op_index_dtype(1))
    return Steps(
        spec=WHOLE_SPEC,
        pid=int(pid),
        tid=tid,
        device_id=int(device),
        all_steps=all_steps.astype("int64"),
        kept=np.array([0], dtype=np.int64),
        anchors=anchors,
        ops=ops.assign(step=zeros, anchor=zeros - 1),
        notes=["no step structure found: the whole capture is one window"],
    )


def _launching_thread(trace: Trace, ops: pd.DataFrame) -> tuple[int, float]:
    """The thread that launched most of ``ops`` (-1: none has a recorded call) and the first
    start of their launch calls (NaN: none), the calls looked up :data:`CHUNK_ROWS` operations
    at a time (operations carry no launch times)."""
    counts, first = np.zeros(0, dtype=np.int64), np.nan
    pid, corr = ops["pid"].to_numpy(), ops["correlation_id"].to_numpy()
    for _, start, tid in trace.launches_in_chunks(pid, corr):
        tid = tid[tid >= 0]
        here = np.bincount(tid, minlength=len(counts))
        here[: len(counts)] += counts
        counts = here
        if len(tid):
            first = np.nanmin([first, np.nanmin(start)])
    return (int(counts.argmax()) if counts.any() else -1), first


def top_kernels(steps: Steps, n: int = 10) -> pd.DataFrame:
    """The ``n`` kernels (by demangled name) with the most device time in ``steps.ops``:
    ``instances, total_us, mean_us, pct`` (share of all kernel time), most time first."""
    ops = steps.ops
    k = ops[ops["kind"] == "kernel"]
    dur = (k["end_ns"] - k["start_ns"]) / 1e3
    table = (
        k.assign(dur_us=dur)
        .groupby("full_name", observed=True)["dur_us"]
        .agg(instances="count", total_us="sum", mean_us="mean")
        .sort_values("total_us", ascending=False, kind="stable")
    )
    total = table["total_us"].sum()
    table["pct"] = 100.0 * table["total_us"] / total if total > 0 else np.nan
    table.index.name = "kernel"
    return table.head(n)
