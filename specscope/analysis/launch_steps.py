"""Steps and anchors from GPU launches, for traces nobody instrumented with NVTX.

An anchor ``NAME=graph:ID[|ID...]`` (or ``graph-role:N``, ``kernel:REGEX``; see
:mod:`specscope.analysis.spec`) has one instance per matching launch: its CPU interval is the
launching CUDA API call (``cudaGraphLaunch``, ``cudaLaunchKernel``, ...), so the GPU work of
that launch projects onto it exactly as it projects onto an NVTX range around the call.

**One cycle of the anchors is a step** (spec step :data:`~specscope.analysis.spec.CYCLE`).
With anchors A, B, C (in spec order; C is the last), step k begins right after the launch call
of step k-1's C and ends right after the launch call of its own C::

    CPU  ..launch C]| prep: copies, kernels | launch A | .. | launch B | .. | launch C]| prep ..
                    |<------------------------- step k ------------------------->|
    GPU      [C k-1]   [copy][k]              [ A k ]       [ B k ]        [ C k ]

so the eager work before a cycle's first anchor (metadata preparation) belongs to that step,
and eager work after C's launch (none in an EAGLE loop) to the next one. There is no previous
C before the first cycle: step 0 begins at the launch call of the last A launched before the
first C (where the capture began mid-cycle and no A precedes the first C, that partial cycle
is no step and step 0 is the first whole cycle). Anchor launches after the last C (a cycle cut
by the end of the capture) belong to no step. On a trace with both NVTX and graphs, this gives
the same GPU operations per step as NVTX ``step`` ranges that open before the preparation and
close after the last replay's launch (``tests/test_graph_anchors.py`` proves it).

**Each marker launch starts a step** (``--step kernel:REGEX`` or ``graph:ID``; as nsys's pace
recipes do): step k runs from the start of the k-th matching launch call to the start of the
next; the last one runs to the end of the thread's last CUDA API call.

The thread of the steps is the launching thread with the most step-marker launches (the most
anchor launches for cycles), within ``pid`` when given.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specscope.analysis.loader import CaptureMode, Trace
from specscope.analysis.spec import CYCLE, Marker, StepSpec
from specscope.errors import SpecError

_COLUMNS = ["pid", "tid", "start_ns", "end_ns"]


def launches_of(trace: Trace, marker: Marker) -> pd.DataFrame:
    """``pid, tid, start_ns, end_ns``: the launch calls of ``marker``, one row per launch."""
    if marker.kind == "kernel":
        from specscope.analysis.metrics import name_matches  # (metrics imports steps)

        ops = trace.ops
        if trace.capture_mode is CaptureMode.NO_CUDA or ops.empty:
            return pd.DataFrame(columns=_COLUMNS, dtype="int64")
        sel = (ops["kind"] == "kernel").to_numpy() & name_matches(ops, marker.pattern)
        calls = ops.loc[sel, ["pid", "correlation_id"]].drop_duplicates()
        pid, corr = calls["pid"].to_numpy(), calls["correlation_id"].to_numpy()
        start, end, tid = trace.launch_calls(pid, corr)
        rows = pd.DataFrame({"pid": pid, "tid": tid, "start_ns": start, "end_ns": end})
    else:
        launches = trace.graph_launches
        rows = launches.drop(columns=["start_ns", "end_ns"]).rename(
            columns={"api_start_ns": "start_ns", "api_end_ns": "end_ns"}
        )
        if marker.kind == "graph":
            rows = rows[rows["graph_id"].isin(marker.graph_ids)]
        else:
            rows = _role_launches(trace, rows, marker.role)
        rows = rows[_COLUMNS]
    rows = rows[rows["tid"] >= 0].dropna()  # launches whose API call was not recorded: none
    return rows.astype("int64").sort_values("start_ns", kind="stable").reset_index(drop=True)


def _role_launches(trace: Trace, rows: pd.DataFrame, number: int) -> pd.DataFrame:
    """The launches of each thread's graphs of role ``number`` (graphs.py's capture order)."""
    from specscope.analysis.graphs import thread_graphs

    keep = np.zeros(len(rows), dtype=bool)
    for t in thread_graphs(trace):
        ids = next((r.graph_ids for r in t.roles if r.number == number), ())
        keep |= (rows["pid"] == t.pid) & (rows["tid"] == t.tid) & rows["graph_id"].isin(ids)
    return rows[keep]


def _no_launches(what: str) -> SpecError:
    return SpecError(
        f"no launches of {what} in the export; `specscope graphs TRACE` lists its CUDA graphs "
        "and their cycles"
    )


def _anchor_launches(trace: Trace, spec: StepSpec) -> pd.DataFrame:
    """Every anchor launch: ``pid, tid, start_ns, end_ns, name, role`` (role: spec index)."""
    markers = spec.anchor_markers
    if not markers or any(m is None for m in markers):
        if spec.step == CYCLE:
            raise SpecError(
                "a step that is one cycle of the anchors needs every anchor to be a launch "
                "(NAME=graph:ID, NAME=graph-role:N or NAME=kernel:REGEX); give --step for "
                "NVTX anchors"
            )
        return pd.DataFrame(columns=[*_COLUMNS, "name", "role"])
    parts = [
        launches_of(trace, m).assign(name=name, role=i)
        for i, (name, m) in enumerate(zip(spec.anchor_names, markers, strict=True))
    ]
    return pd.concat(parts, ignore_index=True).sort_values("start_ns", kind="stable")


def pick_thread(
    rows: pd.DataFrame, pid: int | None, notes: list[str], *, found: str, most: str, none: str
) -> tuple[int, int]:
    """The (pid, tid) with the most ``rows`` (within ``pid``; SpecError ``none`` if it has
    none); a note (``found`` on N threads ..., ``most``) when several threads have some."""
    if pid is not None:
        rows = rows[rows["pid"] == pid]
        if rows.empty:
            raise SpecError(none)
    counts = rows.groupby(["pid", "tid"]).size().sort_values(ascending=False, kind="stable")
    sel_pid, sel_tid = counts.index[0]
    if len(counts) > 1:
        others = ", ".join(f"pid {p} tid {t}: {n}" for (p, t), n in counts.items())
        notes.append(
            f"{found} on {len(counts)} threads ({others}); using pid {sel_pid} tid {sel_tid} "
            f"(most {most}); pick another with --pid"
        )
    return int(sel_pid), int(sel_tid)


def _pick_thread(rows: pd.DataFrame, pid: int | None, what: str, notes: list[str]):
    """:func:`pick_thread` of launches of ``what``."""
    none = f"no launches of {what} in process {pid}; drop --pid or pick another"
    return pick_thread(rows, pid, notes, found=f"{what} launched", most="launches", none=none)


def cycle_steps(anchors: pd.DataFrame, n_roles: int) -> tuple[np.ndarray, np.ndarray]:
    """Step (start, end) times of the anchor launches of one thread (sorted; see the doc)."""
    role = anchors["role"].to_numpy()
    starts, ends = anchors["start_ns"].to_numpy(), anchors["end_ns"].to_numpy()
    bounds = ends[role == n_roles - 1]
    if len(bounds) == 0:
        raise SpecError("the last anchor is never launched on the thread: no whole cycle")
    firsts = starts[(role == 0) & (starts < bounds[0])]
    if len(firsts):
        return np.r_[firsts[-1], bounds[:-1]], bounds
    return bounds[:-1], bounds[1:]


def launch_steps(
    trace: Trace, spec: StepSpec, pid: int | None, notes: list[str]
) -> tuple[int, int, pd.DataFrame, pd.DataFrame]:
    """(pid, tid, all_steps, anchors) of a spec whose steps come from launches (see the doc);
    ``anchors``: ``name, start_ns, end_ns`` in start order, without their step."""
    anchors = _anchor_launches(trace, spec)
    marker = spec.step_marker
    if marker is None:
        if anchors.empty:
            raise _no_launches(f"the anchors {', '.join(spec.anchors)}")
        sel_pid, sel_tid = _pick_thread(anchors, pid, "the anchors", notes)
        mine = anchors[(anchors["pid"] == sel_pid) & (anchors["tid"] == sel_tid)]
        starts, ends = cycle_steps(mine, len(spec.anchors))
    else:
        marks = launches_of(trace, marker)
        if marks.empty:
            raise _no_launches(spec.step)
        sel_pid, sel_tid = _pick_thread(marks, pid, spec.step, notes)
        marks = marks[(marks["pid"] == sel_pid) & (marks["tid"] == sel_tid)]
        starts = np.unique(marks["start_ns"].to_numpy())
        last = trace.thread_calls_end(sel_pid, sel_tid)  # (its marks' launch calls: some)
        ends = np.r_[starts[1:], max(last or 0, starts[-1] + 1)]
        mine = anchors[(anchors["pid"] == sel_pid) & (anchors["tid"] == sel_tid)]
    all_steps = pd.DataFrame(
        {"step": np.arange(len(starts)), "start_ns": starts, "end_ns": ends}
    ).astype("int64")
    mine = mine[["name", "start_ns", "end_ns"]].reset_index(drop=True)
    return sel_pid, sel_tid, all_steps, mine
