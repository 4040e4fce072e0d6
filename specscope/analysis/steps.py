"""Steps, anchors, and the projection of GPU operations onto NVTX ranges.

**Steps.** The instances of the spec's step range on one thread, sorted by start, are the steps
(numbered from 0 in trace order; ``--skip N`` drops the first N from the report but they stay on
the timeline, so the first reported step still has a predecessor). When several processes or
threads have step ranges, the one with the most steps is used (or ``pid``) and a note says so.

**Projection.** A GPU operation belongs to an NVTX range when the CUDA API call that launched it
(same correlation id, same process) started inside the range's CPU interval on the range's
thread. All kernels of one graph replay share the ``cudaGraphLaunch`` correlation id, so they all
belong to the range around that launch::

    CPU  |-- step k ----------------------------------------------|
         |-- draft.replay --|      |-- verify.replay --|
              ^ cudaGraphLaunch         ^ cudaGraphLaunch
    GPU          [k1][k2][k3]                  [k4][k5]
                 '- step k, anchor draft.replay '- step k, anchor verify.replay

The device is the one with the most operations projected onto the steps (or ``device``).
Trailing steps with no GPU work (e.g. a step cut by the end of the capture range) are dropped.

**Without NVTX** the steps and anchors are GPU launches instead of ranges (graph or kernel
anchors, ``--step kernel:REGEX``): :mod:`specscope.analysis.launch_steps` defines them; the
projection above is the same, the launch call standing for the range.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from specscope.analysis import opsums
from specscope.analysis.devices import device_rows, device_stretches, process_devices
from specscope.analysis.launch_steps import launch_steps, pick_thread
from specscope.analysis.loader import CHUNK_ROWS, CaptureMode, Trace
from specscope.analysis.memory import give_back, one_valued
from specscope.analysis.spec import StepSpec
from specscope.analysis.validate import no_launch_note
from specscope.errors import Info, SpecError


@dataclass
class Steps:
    """The steps of one thread and the GPU operations projected onto them.

    ``all_steps``: every step instance on the thread (``step``, ``start_ns``, ``end_ns``).
    ``kept``: the ``step`` numbers reported (after ``skip`` and trailing drops).
    ``anchors``: anchor instances on the thread (``name``, ``start_ns``, ``end_ns``, ``step``).
    ``ops``: the device's GPU operations with ``step`` and ``anchor`` (row of ``anchors``),
    -1 where not projected. Where every operation's anchor is one of the first 127 of its
    step's (anchors inside steps, as usual), ``ops`` holds ``anchor_rel`` instead: the anchor
    less ``anchor_base[step]`` (the first anchor starting in the step), int8, 1 byte per
    operation instead of 4 (80 MB at 20 M); :func:`op_anchors` and :func:`frame_anchors` give
    the anchors either way.
    """

    spec: StepSpec
    pid: int
    tid: int
    device_id: int | None
    all_steps: pd.DataFrame
    kept: np.ndarray
    anchors: pd.DataFrame
    ops: pd.DataFrame
    skipped: int = 0
    dropped_trailing: int = 0
    notes: list[str] = field(default_factory=list)
    anchor_base: np.ndarray | None = field(default=None, repr=False)


REL_MAX = np.iinfo(np.int8).max
"""Anchors of an operation further than this from the first of its step: ``anchor`` as is."""


def op_anchors(steps: Steps, lo: int = 0, hi: int | None = None) -> np.ndarray:
    """The anchor (row of ``steps.anchors``; -1: none) of the operations ``lo..hi`` of
    ``steps.ops``: a chunk at a time where they are held relative to their step's (class
    doc), the full column being 4 bytes per operation."""
    return _anchors(steps, steps.ops, slice(lo, hi))


def frame_anchors(steps: Steps, frame: pd.DataFrame) -> np.ndarray:
    """:func:`op_anchors` of ``frame``, some rows of ``steps.ops`` (with their columns)."""
    return _anchors(steps, frame, slice(None))


def _anchors(steps: Steps, frame: pd.DataFrame, rows: slice) -> np.ndarray:
    if steps.anchor_base is None:
        return frame["anchor"].to_numpy()[rows]
    return _absolute(frame["anchor_rel"].to_numpy()[rows], frame["step"].to_numpy()[rows], steps)


def with_anchors(steps: Steps, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (some rows of ``steps.ops``) with its ``anchor`` column as :class:`Steps`
    documents it, in place of ``anchor_rel`` where the anchors are held relative."""
    if steps.anchor_base is None:
        return frame
    anchor = frame_anchors(steps, frame)
    return frame.drop(columns="anchor_rel").assign(anchor=anchor)


def _absolute(rel: np.ndarray, step: np.ndarray, steps: Steps) -> np.ndarray:
    dtype = op_index_dtype(len(steps.anchors))
    out = np.full(len(rel), -1, dtype=dtype)
    some = rel >= 0
    out[some] = steps.anchor_base[step[some]] + rel[some]
    return out


def _relative(anchor: np.ndarray, step: np.ndarray, base: np.ndarray) -> np.ndarray | None:
    """``anchor`` less its step's ``base`` as int8 (-1: no anchor), or None where one is not
    within 0..:data:`REL_MAX` of it (or has no step)."""
    some = anchor >= 0
    if (step[some] < 0).any():
        return None
    rel = anchor[some].astype(np.int64) - base[step[some]]
    if len(rel) and (rel.min() < 0 or rel.max() > REL_MAX):
        return None
    out = np.full(len(anchor), -1, dtype=np.int8)
    out[some] = rel
    return out


def kept_position(steps: Steps) -> np.ndarray:
    """Each step number's position among ``steps.kept``, -1 for a step not reported, with one
    entry more at the end, which step -1 (no step) indexes: ``kept_position(steps)[op_step]``;
    worked out once per :class:`Steps` (the counts, the pair columns and the reported
    operations all look steps up in it)."""
    cache = steps.__dict__
    if "_kept_position" not in cache:
        where = np.full(len(steps.all_steps) + 1, -1, dtype=np.int64)
        where[steps.kept] = np.arange(len(steps.kept))
        cache["_kept_position"] = where
    return cache["_kept_position"]


def _closest_names(nvtx: pd.DataFrame, name: str) -> str:
    counts = nvtx["name"].value_counts()
    names = [str(n) for n in counts[counts > 0].index]
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.3) or names[:5]
    return ", ".join(repr(n) for n in close) if close else "none (the trace has no NVTX ranges)"


def _select(nvtx: pd.DataFrame, name: str, domain: str | None) -> pd.DataFrame:
    sel = nvtx["name"] == name
    if domain is not None:
        sel &= nvtx["domain"] == domain
    return nvtx[sel]


def interval_index(
    starts: np.ndarray, ends: np.ndarray, t: np.ndarray, dtype: np.dtype = np.int64
) -> np.ndarray:
    """For each time in ``t``: the index of the interval (sorted, disjoint) holding it, else -1.

    An interval holds ``t`` when ``start <= t < end``. ``dtype``: of the result (int32 where
    the intervals are fewer than 2**31 and the result is per GPU operation: half the memory).
    """
    if len(starts) == 0:
        return np.full(len(t), -1, dtype=dtype)
    # index + 1 of the last interval starting at or before t; entry 0 of `after` is a sentinel
    # end that no time is before, so times before every interval come out -1 like the others
    lowest = -np.inf if ends.dtype.kind == "f" else np.iinfo(ends.dtype).min
    after = np.concatenate([np.array([lowest], dtype=ends.dtype), ends])
    out = np.empty(len(t), dtype=dtype)
    for lo in range(0, len(t), CHUNK_ROWS):  # small temporaries, reused chunk to chunk
        chunk = t[lo : lo + CHUNK_ROWS]
        i = np.searchsorted(starts, chunk, side="right").astype(np.int64, copy=False)
        i *= chunk < after[i]  # 0 where t is in no interval
        i -= 1
        out[lo : lo + CHUNK_ROWS] = i
    return out


def _lookup_runs(t: np.ndarray, *intervals: tuple[np.ndarray, np.ndarray]) -> list[np.ndarray]:
    """:func:`interval_index` of the launch times ``t`` (float ns, no NaN) in each (starts,
    ends), looked up once per run of equal times: the kernels of one graph launch are
    consecutive ops sharing their launch's time, so runs are several times fewer than ops.
    Results have the dtype of :func:`op_index_dtype`. A chunk of ``CHUNK_ROWS`` times at a
    time (a run cut by a chunk's end is looked up once per piece, to the same index): an eager
    export's runs are its ops, and runs of every op took 0.6 GB of temporaries at 20 M."""
    out = [np.empty(len(t), dtype=op_index_dtype(len(s))) for s, _ in intervals]
    if all(opsums.interval_lookup(t, s, e, r) for r, (s, e) in zip(out, intervals, strict=True)):
        return out  # (one C loop each, a search from the last time's place: opsums.py; an
        # eager export's runs are its ops, a search each. What follows is the reference.)
    for lo in range(0, len(t), CHUNK_ROWS):
        chunk = t[lo : lo + CHUNK_ROWS]
        first = np.flatnonzero(chunk[1:] != chunk[:-1])  # the last op of each run but the last
        first += 1
        first = np.concatenate([np.zeros(1, dtype=np.int64), first])  # each run's first op
        length = np.diff(first, append=len(chunk))
        times = chunk[first].astype(np.int64)  # (the runs' times only)
        for result, (s, e) in zip(out, intervals, strict=True):
            index = interval_index(s, e, times, result.dtype)
            result[lo : lo + len(chunk)] = np.repeat(index, length)
    return out


def op_index_dtype(n: int) -> np.dtype:
    """The dtype of a per-operation index into ``n`` rows (steps, anchors): int32 when it fits
    (4 bytes per operation instead of 8: 80 MB less at 20 M operations), else int64."""
    return np.dtype(np.int32 if n < np.iinfo(np.int32).max else np.int64)


def find_steps(
    trace: Trace,
    spec: StepSpec,
    *,
    skip: int = 0,
    pid: int | None = None,
    device: int | None = None,
    require_anchors: bool = False,
) -> Steps:
    """Find the steps of ``spec`` in ``trace`` and project the GPU operations onto them.

    NVTX steps and anchors are ranges (the module doc); a spec whose steps come from GPU
    launches (graph or kernel anchors without ``--step``, or ``--step kernel:REGEX``) gets
    them from :func:`specscope.analysis.launch_steps.launch_steps`, which documents them.
    An anchor absent from the steps' thread is a note (its gaps are unavailable), or with
    ``require_anchors`` a :class:`MissingAnchorError` naming it.
    """
    notes: list[str] = []
    if spec.from_launches:
        sel_pid, sel_tid, all_steps, anchors = launch_steps(trace, spec, pid, notes)
        what = "steps"
    else:
        sel_pid, sel_tid, all_steps, anchors = _nvtx_steps(trace, spec, pid, notes)
        what = f"{spec.step!r} steps"
    present = set(anchors["name"].unique())  # (once: iterating a string column is slow)
    if missing := [a for a in spec.anchor_names if a not in present]:
        error = MissingAnchorError(trace, spec, missing, sel_pid, sel_tid)
        if require_anchors:
            raise error
        notes.append(f"{error}; their gaps are unavailable")
    if skip >= len(all_steps):
        raise SpecError(
            f"zero steps left after --skip {skip}: the trace has {len(all_steps)} {what} "
            "on the selected thread; lower --skip"
        )
    s_start, s_end = all_steps["start_ns"].to_numpy(), all_steps["end_ns"].to_numpy()
    anchors = anchors.assign(step=interval_index(s_start, s_end, anchors["start_ns"].to_numpy()))
    ops, device_id, base = _project(
        trace, sel_pid, sel_tid, all_steps, anchors, skip, device, notes
    )
    give_back(len(ops))
    kept, dropped = _kept_steps(ops, all_steps, skip, device_id, notes)
    return Steps(
        spec=spec,
        pid=int(sel_pid),
        tid=int(sel_tid),
        device_id=device_id,
        all_steps=all_steps,
        kept=kept,
        anchors=anchors,
        ops=ops,
        skipped=skip,
        dropped_trailing=dropped,
        notes=notes,
        anchor_base=base,
    )


def _nvtx_steps(
    trace: Trace, spec: StepSpec, pid: int | None, notes: list[str]
) -> tuple[int, int, pd.DataFrame, pd.DataFrame]:
    """(pid, tid, all_steps, anchors) from the NVTX ranges of ``spec`` (the module doc);
    ``anchors``: ``name, start_ns, end_ns`` in start order, without their step."""
    nvtx = trace.nvtx
    if trace.unclosed_ranges:
        notes.append(f"{trace.unclosed_ranges} NVTX range(s) never closed were ignored")
    step_rows = _select(nvtx, spec.step, spec.domain)
    if step_rows.empty:
        raise _no_step_ranges(nvtx, spec)
    none = f"no {spec.step!r} ranges in process {pid}; drop --pid or pick another"
    sel_pid, sel_tid = pick_thread(
        step_rows, pid, notes, found="steps found", most="steps", none=none
    )
    thread = nvtx[(nvtx["pid"] == sel_pid) & (nvtx["tid"] == sel_tid)]
    steps = _select(thread, spec.step, spec.domain).sort_values("start_ns", kind="stable")
    # Keep top-level instances only: a step range nested in another step is not a new step.
    top = steps["start_ns"] >= steps["end_ns"].cummax().shift(1, fill_value=-(2**62))
    if not top.all():
        notes.append(
            f"{int((~top).sum())} {spec.step!r} range(s) nested inside another {spec.step!r} "
            "range are not steps of their own (top-level ranges only)"
        )
    steps = steps[top]
    all_steps = pd.DataFrame(
        {
            "step": np.arange(len(steps)),
            "start_ns": steps["start_ns"].to_numpy(),
            "end_ns": steps["end_ns"].to_numpy(),
        }
    )
    anchor_rows = thread[thread["name"].isin(spec.anchors)]
    if spec.domain is not None:
        anchor_rows = anchor_rows[anchor_rows["domain"] == spec.domain]
    anchors = anchor_rows.sort_values("start_ns", kind="stable")
    anchors = pd.DataFrame(
        {  # (names kept as objects: where pyarrow is loaded, pandas' default string dtype
            # copies each into Arrow, 17 ms for the 34 000 anchors of 2 M GPU ops)
            "name": pd.Series(anchors["name"].to_numpy(dtype=object), dtype=object),
            "start_ns": anchors["start_ns"].to_numpy(),
            "end_ns": anchors["end_ns"].to_numpy(),
        }
    )
    return int(sel_pid), int(sel_tid), all_steps, anchors


class MissingAnchorError(SpecError):
    """Anchors of the spec absent from the steps' thread (most often a misspelling): NVTX
    anchors with the closest range names of that thread, launch anchors with where to look."""

    def __init__(self, trace: Trace, spec: StepSpec, missing: list[str], pid: int, tid: int):
        self.missing = missing
        names = ", ".join(map(repr, missing))
        if spec.anchor_markers[spec.anchor_names.index(missing[0])] is None:
            nvtx = trace.nvtx
            thread = nvtx[(nvtx["pid"] == pid) & (nvtx["tid"] == tid)]
            hint = f"closest: {_closest_names(thread, missing[0])}"
            super().__init__(f"anchor range(s) {names} not found on the step thread ({hint})")
        else:
            super().__init__(
                f"anchor(s) {names} never launched on the step thread "
                "(`specscope graphs TRACE` lists the graphs and their launches)"
            )


def _no_step_ranges(nvtx: pd.DataFrame, spec: StepSpec) -> SpecError:
    """The error for a spec whose step range is absent: other domains, or the closest names."""
    where = f" in domain {spec.domain!r}" if spec.domain else ""
    other = _select(nvtx, spec.step, None)
    if not other.empty:
        domains = ", ".join(sorted({repr(d) for d in other["domain"]}))
        return SpecError(
            f"no NVTX range named {spec.step!r}{where}; it exists in domain(s) {domains}: "
            "pass --domain accordingly"
        )
    return SpecError(
        f"no NVTX range named {spec.step!r}{where}; closest names present: "
        f"{_closest_names(nvtx, spec.step)} (`specscope ranges TRACE` lists them all)"
    )


def _project(
    trace: Trace,
    pid: int,
    tid: int,
    all_steps: pd.DataFrame,
    anchors: pd.DataFrame,
    skip: int,
    device: int | None,
    notes: list[str],
) -> tuple[pd.DataFrame, int | None]:
    """The operations of the steps' device (:func:`_pick_device`; None when no operation was
    projected onto a kept step: then every operation) with ``step`` and ``anchor`` (row of
    ``anchors``), -1 where not projected: by the start of the launching API call on the
    steps' thread. Each device's operations are a stretch of ``trace.ops``
    (:func:`.devices.by_device`): the device's are taken without a copy of them. With the
    steps' first anchors, ``anchor_base`` (None where the anchors are held as they are:
    :class:`Steps`)."""
    ops = trace.ops
    if trace.capture_mode is CaptureMode.NO_CUDA:
        return ops.assign(step=np.zeros(0, np.int64), anchor=np.zeros(0, np.int64)), None, None
    s_start, s_end = all_steps["start_ns"].to_numpy(), all_steps["end_ns"].to_numpy()
    a_start, a_end = anchors["start_ns"].to_numpy(), anchors["end_ns"].to_numpy()
    # a launch on the thread always has its API call's start; looked for in the stretch of
    # the process' device where it ran on one (a rank of several: its own)
    where = _process_stretch(trace, pid)
    base = np.searchsorted(a_start, s_start).astype(np.int64)  # each step's first anchor
    step_of, anchor_of, base = _launch_steps(
        trace, where, pid, tid, (s_start, s_end), (a_start, a_end), base
    )
    devices = ops["device_id"].to_numpy()
    device_id = _pick_device(trace, devices[where], step_of >= skip, device, notes)
    kept = slice(0, len(ops))  # (one device, or none picked: every operation)
    if device_id is not None and not one_valued(devices):
        kept = device_rows(trace, device_id)
    whole = isinstance(kept, slice) and kept == slice(0, len(ops))  # (the usual case)
    columns = {c: ops[c].array if whole else ops[c].array[kept] for c in ops.columns}
    step_of, anchor_of = (_of_kept(v, where, kept) for v in (step_of, anchor_of))
    anchor = "anchor" if base is None else "anchor_rel"
    frame = pd.DataFrame({**columns, "step": step_of, anchor: anchor_of}, copy=False)
    return frame, device_id, base


def _process_stretch(trace: Trace, pid: int) -> slice:
    """Where the operations of process ``pid`` lie in ``trace.ops``: its device's stretch
    where it ran on one device and each device's operations are one stretch, else all."""
    devices = process_devices(trace).get(pid, [])
    stretches = device_stretches(trace)
    if len(devices) == 1 and stretches is not None:
        return stretches[devices[0]]
    return slice(0, len(trace.ops))


def _launch_steps(
    trace: Trace,
    where: slice,
    pid: int,
    tid: int,
    steps: tuple[np.ndarray, np.ndarray],
    anchors: tuple[np.ndarray, np.ndarray],
    base: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Step and anchor (:func:`_lookup_runs` in the (starts, ends) of ``steps`` and
    ``anchors``) of each operation of the stretch ``where`` of ``trace.ops`` launched on
    thread ``tid`` of ``pid``, by its launch call's start; -1 for the others. The anchors
    relative to ``base`` (each step's first), int8, with ``base``; where one is not within
    reach of it, as they are, with None (:class:`Steps`). The calls are looked up
    :data:`CHUNK_ROWS` operations at a time (:meth:`.Trace.launches`): no array of every
    operation's launch (12 bytes each)."""
    ops = trace.ops
    pids = ops["pid"].to_numpy()[where]
    corrs = ops["correlation_id"].to_numpy()[where]
    n = len(pids)
    step_of = np.full(n, -1, dtype=op_index_dtype(len(steps[0])))
    anchor_of = np.full(n, -1, dtype=np.int8)  # (relative to base, until one is not)
    for lo, launched, thread in trace.launches_in_chunks(pids, corrs):
        chunk = slice(lo, lo + len(launched))
        mine = thread == tid
        mine &= pids[chunk] == pid
        if mine.all():  # (the usual case: every operation launched on the thread)
            step, anchor = _lookup_runs(launched, steps, anchors)
        else:
            step = np.full(len(mine), -1, dtype=step_of.dtype)
            anchor = np.full(len(mine), -1, dtype=op_index_dtype(len(anchors[0])))
            step[mine], anchor[mine] = _lookup_runs(launched[mine], steps, anchors)
        step_of[chunk] = step
        if base is not None and (rel := _relative(anchor, step, base)) is not None:
            anchor_of[chunk] = rel
            continue
        if base is not None:  # (the anchors so far as they are, from here on all of them)
            absolute = np.full(n, -1, dtype=op_index_dtype(len(anchors[0])))
            some = anchor_of[:lo] >= 0
            absolute[:lo][some] = base[step_of[:lo][some]] + anchor_of[:lo][some]
            anchor_of, base = absolute, None
        anchor_of[chunk] = anchor
    return step_of, anchor_of, base


def _of_kept(values: np.ndarray, where: slice, kept) -> np.ndarray:
    """Per operation of ``kept`` (a slice or positions of ``trace.ops``), its value among
    ``values`` (one per operation of the stretch ``where``), -1 outside ``where``."""
    if isinstance(kept, slice):
        if where.start <= kept.start and kept.stop <= where.stop:  # (the usual case: a view)
            return values[kept.start - where.start : kept.stop - where.start]
        kept = np.arange(kept.start, kept.stop)
    out = np.full(len(kept), -1, dtype=values.dtype)
    inside = (kept >= where.start) & (kept < where.stop)
    out[inside] = values[kept[inside] - where.start]
    return out


def _pick_device(
    trace: Trace,
    devices: np.ndarray,
    projected: np.ndarray,
    device: int | None,
    notes: list[str],
) -> int | None:
    """The device of the steps: ``device``, else the one with the most operations projected
    onto a kept step (``projected``: per operation of ``devices``); None when there is
    none."""
    if not projected.any():
        notes.append(f"{no_launch_note(trace)}; GPU metrics are empty")
        return None
    if one_valued(devices):  # the usual case: no copy of the device ids to count
        per_device = pd.Series([int(projected.sum())], index=[int(devices[0])])
    else:
        per_device = pd.Series(devices[projected]).value_counts()
    if device is not None:
        if device not in per_device.index:
            raise SpecError(
                f"no GPU work of the steps on device {device}; devices with work: "
                f"{', '.join(map(str, per_device.index))}"
            )
        return device
    device_id = int(per_device.index[0])
    if len(per_device) > 1:
        notes.append(
            f"steps launch work on {len(per_device)} devices; using device {device_id} "
            "(most operations); pick another with --device"
        )
    return device_id


def _kept_steps(
    ops: pd.DataFrame, all_steps: pd.DataFrame, skip: int, device_id: int | None, notes: list[str]
) -> tuple[np.ndarray, int]:
    """The reported step numbers (after ``skip``, trailing steps without GPU work dropped) and
    how many were dropped."""
    kept = all_steps["step"].to_numpy()[skip:]
    dropped = 0
    if device_id is not None:
        step_of = ops["step"].to_numpy()
        with_work = np.zeros(len(all_steps) + 1, dtype=bool)  # the last entry: step -1
        with_work[step_of] = True
        while len(kept) > 1 and not with_work[kept[-1]]:
            kept, dropped = kept[:-1], dropped + 1
        if dropped:
            notes.append(Info(f"dropped {dropped} trailing step(s) with no GPU work"))
    if skip:
        notes.append(Info(f"skipped {skip} warm-up step(s)"))
    return kept, dropped
