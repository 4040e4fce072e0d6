"""Every process and device of one export, each with steps chosen even without a spec.

:func:`analyze_processes` is ``specscope analyze TRACE`` for exports nobody instrumented and for
exports that hold several processes (``nsys profile --trace-fork-before-exec=true`` of a TP
server, torchrun, MPI): one :class:`Analysis` per (process, device) that has steps, each with a
``rank`` label, plus the cross-rank view (:mod:`specscope.analysis.ranks`) when there are two or
more, the same shape as several exports (:mod:`specscope.analysis.many`).

**Which processes.** Without ``options.pid`` every process with GPU work (or, for NVTX specs, with
step ranges) is analysed; with ``options.pid`` only that one. Each process is analysed on every
device its steps launched work on (``options.device``: only that one). A process with work on one
device is analysed exactly as ``AnalyzeOptions(pid=P)`` would (its frame is that analysis'
frame); with several devices, once per device as ``AnalyzeOptions(pid=P, device=D)``. Processes
(or devices) without steps are left out, with the reason in :attr:`ExportAnalysis.skipped`.

**Rank labels** (:func:`process_labels`): ``pid<P>``, or ``pid<P>.dev<D>`` when some process is
analysed on several devices; entries are ordered by (pid, device), so labels are stable.

**Zero-config** (``spec=None``), per process, the first of:

====  ===========================================================================================
(a)   the default preset's (``eagle``) NVTX step ranges, when the process has them (also when it
      has no GPU work: host-only metrics, as ``--preset eagle`` gives today);
(b)   a repeating CUDA-graph launch cycle (:mod:`specscope.analysis.graphs`) on one of its
      threads, repeated at least ``min_cycles`` times: one anchor per graph role, named
      ``roleN`` by capture order, listed in launch order of the cycle (graph ids of every
      batch-size bucket per role), so a step is one cycle (:mod:`.launch_steps`);
(c)   a repeating eager kernel pattern (:mod:`specscope.analysis.patterns`): each launch of the
      kernel launched once per period starts a step (``--step kernel:^NAME$``);
(d)   the NVTX ranges that look most like steps (:func:`.projection.step_range_candidates`: a
      name with at least 3 ranges at depth 0 of their thread, each launching GPU work; most GPU
      operations per range first), each range a step (``--step NAME``);
(e)   the whole capture as one window per device (:mod:`specscope.analysis.whole`).
====  ===========================================================================================

(d) comes after (b) and (c) because any annotation qualifies, a per-layer range as well as a
per-step one: where a graph cycle or a kernel pattern repeats, the ranges are only suggested in
the hint. Where neither repeats (an eager loop of one kernel type, say), a range that recurs is
the only structure there is, and better than no steps at all.

A process whose (b), (c) or (d) spec finds no steps falls through to the next; when (a)'s ranges
are there but give no steps (e.g. ``--skip`` larger than their count), that error is raised. Each
entry says which was chosen (``choice``, one line) and how to refine it (``hint``: the options
to pass). An export without GPU work and without (a)'s ranges raises :class:`SpecError`.

**For a gap** (``options.self_anchors``: ``explain`` and ``report``): (c) and (d) have no anchors,
so there would be no gap to tell; each step is then its own anchor (:func:`.spec.self_anchored`:
the marker kernel as ``step``, or the range), the gap from one step's GPU work to the next
one's, and the hint says so. ``analyze`` keeps (c) and (d) as they are.
"""

from __future__ import annotations

import functools
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from specscope.analysis import ranks
from specscope.analysis.devices import process_devices
from specscope.analysis.eachprocess import each_process
from specscope.analysis.graphs import ThreadGraphs, main_cycle, thread_graphs
from specscope.analysis.jsonpieces import pieces
from specscope.analysis.loader import Trace, load
from specscope.analysis.patterns import find_step_kernel
from specscope.analysis.projection import step_range_candidates
from specscope.analysis.run import (
    DEFAULT_OPTIONS,
    Analysis,
    AnalyzeOptions,
    analysis_of,
    analyze_trace,
)
from specscope.analysis.spec import CYCLE, DEFAULT_PRESET, StepSpec, load_preset, self_anchored
from specscope.analysis.validate import validated
from specscope.analysis.whole import top_kernels, whole_capture_steps
from specscope.errors import SpecError


@dataclass
class ProcessAnalysis:
    """One (process, device) of an export: its analysis, ``rank`` label, how its steps were
    chosen (``choice``) and how to refine them (``hint``: options for ``specscope analyze``;
    empty when a spec was given). ``top_kernels``: the kernels with the most device time
    (:func:`~specscope.analysis.whole.top_kernels`), for the whole-capture window only."""

    rank: str
    analysis: Analysis
    choice: str
    hint: str = ""
    top_kernels: pd.DataFrame | None = None

    @property
    def pid(self) -> int:
        return self.analysis.pid

    @property
    def device(self) -> int | None:
        return self.analysis.device_id

    def to_json(self, per_step: bool = True) -> dict:
        """:meth:`Analysis.to_json` plus ``rank``, ``choice``, ``hint`` (and ``top_kernels``)."""
        return self.analysis.to_json(per_step) | self._labels()

    def json_value(self) -> dict:
        """:meth:`to_json`, ``per_step`` last and in pieces (:meth:`.Analysis.json_value`)."""
        return self.analysis.json_value(**self._labels())

    def _labels(self) -> dict:
        data = {"rank": self.rank, "choice": self.choice, "hint": self.hint}
        if self.top_kernels is not None:
            data["top_kernels"] = self.top_kernels.reset_index().to_dict("records")
        return data


@dataclass
class ExportAnalysis:
    """Every analysed (process, device) of one export, in rank order, and the cross-rank view
    (:func:`~specscope.analysis.ranks.cross_rank`; None with fewer than two entries).
    ``skipped``: ``pid P`` or ``pid P device D`` -> why it was left out."""

    path: Path
    processes: list[ProcessAnalysis]
    cross_rank: pd.DataFrame | None = None
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> list[str]:
        return [p.rank for p in self.processes]

    @property
    def analyses(self) -> dict[str, Analysis]:
        """Rank label -> analysis, in rank order."""
        return {p.rank: p.analysis for p in self.processes}

    def to_json(self, per_step: bool = True) -> dict:
        """The shape of ``analyze`` over several exports: ``exports`` (one entry per process and
        device, with ``pid``, ``device``, ``rank``), ``skipped`` and ``ranks`` (None or
        :func:`~specscope.analysis.ranks.to_json`)."""
        return self._shape(
            [p.to_json(per_step) for p in self.processes],
            ranks.to_json(self.cross_rank, self.labels),
        )

    def json_pieces(self, **extra) -> Iterator[str]:
        """:meth:`to_json` (plus ``extra`` keys) as JSON text in pieces, each entry's
        ``per_step`` last: the per-step rows encoded a chunk at a time, never all at once nor
        as Python objects (:mod:`.jsonpieces`)."""
        exports = [p.json_value() for p in self.processes]
        return pieces(self._shape(exports, ranks.json_value(self.cross_rank, self.labels)) | extra)

    def _shape(self, exports: list[dict], view: dict | None) -> dict:
        skipped = [{"process": k, "reason": v} for k, v in self.skipped.items()]
        return {"exports": exports, "skipped": skipped, "ranks": view}


# --------------------------------------------------------------------------- choosing steps
@dataclass(frozen=True)
class Choice:
    """Steps chosen for one process: the spec (None: the whole capture), ``choice``, ``hint``."""

    spec: StepSpec | None
    choice: str
    hint: str
    final: bool = False  # (a): its spec's error is the user's (an option), not a fall-through


def _preset_steps(trace: Trace, pid: int) -> Choice | None:
    """(a): the default preset, when ``pid`` has its NVTX step ranges."""
    spec = load_preset(DEFAULT_PRESET)
    nvtx = trace.nvtx
    sel = (nvtx["pid"] == pid) & (nvtx["name"] == spec.step)
    if spec.domain is not None:
        sel &= nvtx["domain"] == spec.domain
    if not sel.any():
        return None
    return Choice(
        spec,
        f"NVTX ranges of preset {DEFAULT_PRESET!r} (step {spec.step!r}, {int(sel.sum())} ranges)",
        f"--preset {DEFAULT_PRESET} (or --step/--anchors/--domain for other ranges; "
        "`specscope ranges TRACE` lists them)",
        final=True,
    )


MAX_LISTED = 1000
"""A graph cycle's runs and ``--anchors`` are named in a note up to this many characters; beyond
(a server's CUDA graph per batch-size bucket and piece: 67 buckets of 33 pieces made a note of
100 000), the note counts them and ``specscope graphs TRACE`` lists them."""


def _graph_cycle(graphs: list[ThreadGraphs], pid: int, min_cycles: int) -> Choice | None:
    """(b): the thread of ``pid`` whose repeating graph-launch cycle covers most launches."""
    best, best_covered = None, 0
    for t in graphs:
        main = main_cycle(t.cycles)
        if t.pid != pid or main is None or t.anchors is None:
            continue
        reps = sum(c.repetitions for c in t.cycles if len(c.ids) == len(main.ids))
        if reps >= min_cycles and reps * len(main.ids) > best_covered:
            best, best_covered = t, reps * len(main.ids)
    if best is None:
        return None
    roles = best.anchors.split(",")
    cycles = ", ".join(map(str, best.cycles))
    hint = (f"--anchors {best.anchors} (rename the anchors; reorder them to move where a step "
            "begins; `specscope graphs TRACE` lists the cycles)")  # fmt: skip
    if len(cycles) > MAX_LISTED or len(best.anchors) > MAX_LISTED:  # (a server's buckets)
        graphs = sum(len(r.partition(":")[2].split("|")) for r in roles)
        cycles = (
            f"of {len(roles)} roles over {graphs} graphs (`specscope graphs TRACE` lists its runs)"
        )
        hint = (f"--anchors role1=graph:ID|ID|...,... ({len(roles)} roles, {graphs} graphs: "
                "`specscope graphs TRACE` prints the option whole; rename the anchors; reorder "
                "them to move where a step begins)")  # fmt: skip
    return Choice(
        StepSpec(CYCLE, tuple(roles)),
        f"CUDA graph launch cycle {cycles} on tid {best.tid} (a step is one cycle)",
        hint,
    )


def _kernel_pattern(trace: Trace, pid: int, thresholds: dict) -> Choice | None:
    """(c): the kernel launched once per period of a repeating eager launch sequence."""
    found = find_step_kernel(trace, pid, **thresholds)
    if found is None:
        return None
    return Choice(
        StepSpec(found.step),
        f"repeating eager kernel pattern on tid {found.tid}: {found} (each launch starts a step)",
        f"--step {shlex.quote(found.step)} (or another kernel:REGEX launched once per step)",
    )


def _ranges_like_steps(trace: Trace, pid: int) -> list[tuple[str, int, float]]:
    """:func:`.projection.step_range_candidates` of ``pid``; none where they cannot be worked
    out (a last resort and a suggestion: never the reason an analysis fails)."""
    try:
        return step_range_candidates(trace, pid)
    except Exception:
        return []


def _range_steps(found: list[tuple[str, int, float]]) -> Choice | None:
    """(d): the NVTX ranges that look most like steps, the first of ``found``
    (:func:`_ranges_like_steps`)."""
    if not found:
        return None
    name, count, ops = found[0]
    return Choice(
        StepSpec(name),
        f"NVTX ranges {name!r} ({count} ranges at depth 0 launching {ops:.0f} GPU ops each on "
        "average; no graph cycle or kernel pattern repeats)",
        f"--step {shlex.quote(name)} (or another range: `specscope ranges TRACE` lists them)",
    )


WHOLE_CHOICE = "the whole capture as one window (no NVTX steps, graph cycle or kernel pattern)"
WHOLE_HINT = (
    "--step kernel:REGEX (a kernel launched once per step), --anchors NAME=graph:ID,... "
    "(`specscope graphs TRACE`) or --step NAME for NVTX ranges (`specscope ranges TRACE`)"
)


def choose_steps(
    trace: Trace,
    pid: int,
    graphs: Callable[[], list[ThreadGraphs]],
    min_cycles: int,
    pattern_thresholds: dict,
    ranges: Callable[[], list[tuple[str, int, float]]],
) -> Iterator[Choice]:
    """The candidate step choices (a)-(d) of process ``pid``, best first (module doc), each
    worked out only when the one before it was not usable (the graph inventory and the
    kernel-pattern search cost seconds on large exports).

    ``graphs``: gives :func:`~specscope.analysis.graphs.thread_graphs` of ``trace`` (computed
    once, when first needed); ``min_cycles``: repetitions of the main graph cycle needed for
    (b); ``pattern_thresholds``: keyword arguments of :func:`.patterns.thread_step_kernel` for
    (c); ``ranges``: gives :func:`_ranges_like_steps` of ``pid`` (computed once: (d) and the
    hint share them)."""
    if (c := _preset_steps(trace, pid)) is not None:
        yield c
    if (trace.ops["pid"] == pid).any():
        if (c := _graph_cycle(graphs(), pid, min_cycles)) is not None:
            yield c
        if (c := _kernel_pattern(trace, pid, pattern_thresholds)) is not None:
            yield c
        if (c := _range_steps(ranges())) is not None:
            yield c


# --------------------------------------------------------------------------- every process
def _devices(trace: Trace, pid: int, device: int | None) -> list[int]:
    """The devices process ``pid`` ran GPU work on (``[device]`` when one is asked for)."""
    if device is not None:
        return [device]
    return process_devices(trace).get(pid, [])


def _with_spec(
    trace: Trace, pid: int, spec: StepSpec, options: AnalyzeOptions, skipped: dict[str, str]
) -> list[Analysis]:
    """The analyses of ``spec`` in process ``pid``, one per device its steps ran work on
    (module doc); SpecError when the process has no steps."""
    devices = _devices(trace, pid, options.device)
    if len(devices) <= 1:
        return [analyze_trace(trace, spec, replace(options, pid=pid))]
    out = []
    for d in devices:
        try:
            out.append(analyze_trace(trace, spec, replace(options, pid=pid, device=d)))
        except SpecError as e:
            skipped[f"pid {pid} device {d}"] = str(e)
    # no device has work in the steps (host-only steps): the analysis without a device
    return out or [analyze_trace(trace, spec, replace(options, pid=pid))]


@dataclass
class _Entry:
    analysis: Analysis
    choice: str
    hint: str = ""
    top_kernels: pd.DataFrame | None = None


def _whole_capture(trace: Trace, pid: int, options: AnalyzeOptions) -> list[_Entry]:
    """(e): one window per device of process ``pid``."""
    out = []
    for d in _devices(trace, pid, options.device):
        if d not in process_devices(trace).get(pid, []):  # (a --device it has no work on)
            continue
        steps = whole_capture_steps(trace, pid, d)
        if options.skip:
            steps.notes.append(f"--skip {options.skip} ignored: the whole capture is one step")
        a = analysis_of(trace, steps, options.count_kernels)
        out.append(_Entry(a, WHOLE_CHOICE, WHOLE_HINT, top_kernels(steps)))
    return out


def _zero_config(
    trace: Trace,
    pid: int,
    options: AnalyzeOptions,
    graphs: Callable[[], list[ThreadGraphs]],
    skipped: dict[str, str],
    thresholds: dict,
) -> list[_Entry]:
    """The first usable choice of :func:`choose_steps` for ``pid``, else (e)."""
    failed = []
    thresholds = dict(thresholds)
    min_cycles = thresholds.pop("min_cycles")
    ranges = functools.cache(functools.partial(_ranges_like_steps, trace, pid))
    for c in choose_steps(trace, pid, graphs, min_cycles, thresholds, ranges):
        spec, hint = c.spec, c.hint
        if options.self_anchors and (anchored := self_anchored(spec)) is not None:
            spec = anchored  # (explain, report: a gap to tell, between steps)
            hint += f"; each step its own anchor: --anchors {shlex.quote(spec.anchors[0])}"
        try:
            # the default preset is a guess here: its anchors may be absent (a note, not an error)
            lenient = replace(options, require_anchors=False)
            analyses = _with_spec(trace, pid, spec, lenient, skipped)
        except SpecError as e:
            if c.final:
                raise  # the preset's ranges are there: an option (e.g. --skip) is wrong
            failed.append(f"{c.choice}: not usable ({e})")
            continue
        for a in analyses:
            a.metrics.notes.extend(failed)
        hint = hint + _range_hint(ranges()) if c.spec.from_launches else hint
        return [_Entry(a, c.choice, hint) for a in analyses]
    entries = _whole_capture(trace, pid, options)
    hint = _range_hint(ranges()) if entries else ""
    for e in entries:
        e.hint += hint
        e.analysis.metrics.notes.extend(failed)
    if not entries:
        skipped[f"pid {pid}"] = "; ".join(failed) or "no GPU work and no NVTX step ranges"
    return entries


def _range_hint(found: list[tuple[str, int, float]]) -> str:
    """``; NVTX ranges that look like steps: --step 'NAME' (...)`` for a zero-config choice
    other than the preset's ranges (``found``: :func:`_ranges_like_steps`), else ''."""
    if not found:
        return ""
    text = ", ".join(f"--step '{n}' ({k} ranges, {ops:.0f} GPU ops each)" for n, k, ops in found)
    return f"; NVTX ranges that look like steps: {text}"


def _candidate_pids(trace: Trace, spec: StepSpec | None, options: AnalyzeOptions) -> list[int]:
    """Processes to analyse: ``options.pid``, else every one with GPU work or (NVTX specs and
    zero-config) NVTX ranges of the step."""
    if options.pid is not None:
        return [options.pid]
    pids = set(process_devices(trace))
    nvtx_spec = load_preset(DEFAULT_PRESET) if spec is None else spec
    if not nvtx_spec.from_launches:
        nvtx = trace.nvtx
        pids |= {int(p) for p in nvtx.loc[nvtx["name"] == nvtx_spec.step, "pid"].unique()}
    return sorted(pids)


def _device_key(device: int | None) -> int:
    return -1 if device is None else device


def process_labels(keys: list[tuple[int, int | None]]) -> list[str]:
    """Rank labels of (pid, device) entries (module doc)."""
    pids = [p for p, _ in keys]
    if len(set(pids)) == len(pids):
        return [f"pid{p}" for p in pids]
    return [f"pid{p}.dev{'-' if d is None else d}" for p, d in keys]


def _nothing_to_analyse(trace: Trace, options: AnalyzeOptions) -> SpecError:
    step = load_preset(DEFAULT_PRESET).step
    where = f"process {options.pid}" if options.pid is not None else str(trace.path)
    if options.device is not None:
        where += f" on device {options.device}"
    return SpecError(
        f"{where}: no GPU work and no NVTX {step!r} ranges, nothing to analyse (record with "
        "-t cuda, or give --step NAME for its NVTX ranges: `specscope ranges TRACE` lists them)"
    )


def _without_ops(work: Callable[[int], tuple[list[_Entry], dict]]):
    """``work`` (a process' entries and what it skipped), each entry's analysis given back
    without its operations (:meth:`.run.Analysis.steps` None) as soon as it is made."""

    def lean(pid: int) -> tuple[list[_Entry], dict]:
        found, mine = work(pid)
        return [replace(e, analysis=replace(e.analysis, steps=None)) for e in found], mine

    return lean


def analyze_processes(
    source: str | Path | Trace,
    spec: StepSpec | None = None,
    options: AnalyzeOptions = DEFAULT_OPTIONS,
    *,
    collective: str | None = ranks.COLLECTIVE,
    min_cycles: int = 3,
    ops_kept: bool = True,
    **pattern_thresholds,
) -> ExportAnalysis:
    """Analyse every (process, device) of one export (module doc); ``spec=None``: zero-config.

    ``collective``: the cross-rank view's collective pattern (its ``kernel_us:`` metric exists
    only when ``options.count_kernels`` counts it, e.g. ``options.counting("nccl")``);
    ``min_cycles`` and ``pattern_thresholds``: see :func:`choose_steps`. Raises SpecError when
    nothing can be analysed: with a spec, the error of ``analyze(path, spec, options)``.
    ``ops_kept=False``: each analysis is kept without its operations (:attr:`.run.Analysis.steps`:
    the step and anchor of each one) once made, for a caller that reads its metrics, summary
    and notes only; the analyses of 8 ranks of 2.5 M GPU operations held 0.12-0.14 GB of
    them while the later ones ran.
    """
    trace = source if isinstance(source, Trace) else load(source)
    validated(trace)  # rows with impossible times dropped before anything reads the frames
    skipped: dict[str, str] = {}
    entries: list[_Entry] = []
    # each process' entries and what it skipped, the processes two at a time where the export
    # is large (.eachprocess: the same results as one after the other)
    if spec is not None:

        def given(pid: int) -> tuple[list[_Entry], dict[str, str]]:
            mine: dict[str, str] = {}
            try:
                analyses = _with_spec(trace, pid, spec, options, mine)
            except SpecError as e:
                mine[f"pid {pid}"] = str(e)
                return [], mine
            return [_Entry(a, "the given spec") for a in analyses], mine

        work = given
    else:
        graphs = functools.cache(lambda: thread_graphs(trace))  # once, and only if needed
        thresholds = dict(pattern_thresholds, min_cycles=min_cycles)

        def chosen(pid: int) -> tuple[list[_Entry], dict[str, str]]:
            mine: dict[str, str] = {}
            return _zero_config(trace, pid, options, graphs, mine, thresholds), mine

        work = chosen
    if not ops_kept:
        work = _without_ops(work)
    for found, mine in each_process(trace, _candidate_pids(trace, spec, options), work):
        entries += found
        skipped |= mine
    if spec is not None and not entries:
        analyze_trace(trace, spec, options)  # raises the single-process error
    if not entries:
        raise _nothing_to_analyse(trace, options)
    entries.sort(key=lambda e: (e.analysis.pid, _device_key(e.analysis.device_id)))
    labels = process_labels([(e.analysis.pid, e.analysis.device_id) for e in entries])
    processes = [
        ProcessAnalysis(label, e.analysis, e.choice, e.hint, e.top_kernels)
        for label, e in zip(labels, entries, strict=True)
    ]
    view = None
    if len(processes) >= 2:
        frames = {p.rank: p.analysis.frame for p in processes}
        view = ranks.cross_rank(frames, collective=collective)
    return ExportAnalysis(trace.path, processes, view, skipped)
