"""An analysed run, :class:`Analysis`, and :func:`analyze`, which makes one from an export.

An :class:`Analysis` is one capture's per-step metrics (``metrics.frame``, index: step), their
summary, and where they came from: the source (export path, ``DB:RUN_ID`` or a label), nsys
version, export schema, capture mode, GPU, the thread and device the steps were read from,
the step spec, the warm-up steps skipped, the analysis notes and unavailable metrics, and,
when a ``specscope profile`` manifest records them, the batch size and commit.

It comes in two forms:

- **live** (from :func:`analyze`): ``trace`` (the open export) and ``steps`` (step instances,
  anchors and the GPU operations projected onto them) are set, so the median-step views and
  the per-operation comparison can read operations;
- **detached** (:meth:`Analysis.detach`, a run read back from a results database, or built
  by hand): ``trace`` and ``steps`` are None; everything else stays. It holds no SQLite
  connection and no operation frame, so it pickles cheaply between processes (and Dask).
- **shed** (:meth:`Analysis.shed`, what ``compare`` keeps of each export while it analyses
  the next): detached, but for the count and time of its reported steps' operations per
  name and kind (:attr:`Analysis.op_totals`), which the per-operation comparison reads: a
  few hundred rows where the trace and its operations held about 1 GiB at 20 M operations.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from specscope.analysis import jsonrows, opsums
from specscope.analysis.coverage import coverage_ahead, dropped_ahead
from specscope.analysis.jsonpieces import Encoded, pieces
from specscope.analysis.loader import Trace, load
from specscope.analysis.memory import CHUNK_ROWS
from specscope.analysis.metrics import StepMetrics, per_step_metrics
from specscope.analysis.spec import StepSpec
from specscope.analysis.steps import Steps, find_steps, kept_position
from specscope.analysis.summary import summarize
from specscope.analysis.validate import validated


@dataclass(frozen=True)
class AnalyzeOptions:
    """The knobs of one analysis besides the step spec.

    ``skip``: warm-up steps dropped from the start. ``pid``/``device``: the process and GPU to
    read (None: picked as :func:`~specscope.analysis.steps.find_steps` documents).
    ``count_kernels``: regexes of kernel names counted per step (``kernels:``/``kernel_us:``
    metrics) on top of the spec's own. ``require_anchors``: an anchor absent from the step thread
    is an error naming it (the CLI's setting: a misspelled ``--anchors``); False (the library's
    default, and zero-config's guess of the default preset): a note, its gaps unavailable.
    ``self_anchors``: zero-config gives steps it found without anchors (NVTX ranges, a kernel
    launched once per step) each step as its one anchor (:func:`.spec.self_anchored`), so that
    there is a gap to explain and to line reports up at: ``explain`` and ``report`` ask for it.
    """

    skip: int = 0
    pid: int | None = None
    device: int | None = None
    count_kernels: tuple[str, ...] = ()
    require_anchors: bool = False
    self_anchors: bool = False

    def counting(self, *patterns: str) -> AnalyzeOptions:
        """These options with ``patterns`` also counted (each once; empty ones ignored)."""
        extra = tuple(p for p in patterns if p and p not in self.count_kernels)
        return dataclasses.replace(self, count_kernels=(*self.count_kernels, *extra))


DEFAULT_OPTIONS = AnalyzeOptions()
JSON_CHUNK_STEPS = jsonrows.PIECE_ROWS
"""Steps per piece of the per-step JSON text (:meth:`Analysis.per_step_pieces`)."""


@dataclass
class Analysis:
    """One analysed capture (module doc): per-step metrics, summary and provenance.

    ``skipped``: warm-up steps dropped; ``dropped_trailing``: trailing steps without GPU work
    dropped; ``spec``: the step spec as :meth:`StepSpec.to_dict` writes it; ``capture_mode``:
    a :class:`~specscope.analysis.loader.CaptureMode` value (``node``, ``graph``, ...).
    """

    source: str
    metrics: StepMetrics
    capture_mode: str
    gpu: str | None
    nsys_version: str
    spec: dict
    summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    schema_version: str = "unknown"
    pid: int | None = None
    tid: int | None = None
    device_id: int | None = None
    skipped: int = 0
    dropped_trailing: int = 0
    batch_size: int | None = None
    commit: str | None = None
    trace: Trace | None = field(default=None, repr=False)
    steps: Steps | None = field(default=None, repr=False)
    step_totals: pd.DataFrame | None = field(default=None, repr=False)  # kept by shed()

    @property
    def frame(self) -> pd.DataFrame:
        """Per-step metrics, index: step."""
        return self.metrics.frame

    @property
    def unavailable(self) -> dict[str, str]:
        return self.metrics.unavailable

    @property
    def notes(self) -> list[str]:
        return self.metrics.notes

    @property
    def n_steps(self) -> int:
        """Steps reported (after the warm-up skip and the trailing drops)."""
        return len(self.metrics.frame)

    @property
    def detached(self) -> bool:
        """Whether trace and operations are gone (module doc)."""
        return self.steps is None

    @property
    def without_cuda(self) -> bool:
        """Whether the export had no CUDA activity at all (capture mode ``no-cuda``: recorded
        without ``-t cuda`` or on a machine without a GPU): host metrics only, no gap between
        GPU work to show or explain."""
        return self.capture_mode == "no-cuda"

    @property
    def is_shed(self) -> bool:
        """Whether this is an export's analysis that kept only what comparing it needs
        (module doc)."""
        return self.steps is None and self.step_totals is not None

    @property
    def from_database(self) -> bool:
        """Whether this run was read back from a results database (or built by hand): detached
        and not shed, so no operations of it were ever seen here (no timeline, no story)."""
        return self.detached and not self.is_shed

    @cached_property
    def ops(self) -> pd.DataFrame | None:
        """GPU operations of the reported steps (``step, name, kind, dur_us``; name and kind as
        the trace keeps them, categorical); None detached."""
        if self.steps is None:
            return None
        keep, name, kind, dur = _reported_ops(self.steps)
        step = self.steps.ops["step"].to_numpy()[keep]
        # name and kind stay categorical: millions of Python strings cost ~1 s per 2 M ops
        return pd.DataFrame({"step": step, "name": name, "kind": kind, "dur_us": dur / 1e3})

    @cached_property
    def op_totals(self) -> pd.DataFrame | None:
        """:func:`op_totals` of :attr:`ops`; None detached (shed: the totals it kept)."""
        if self.steps is None:
            return self.step_totals
        if (totals := _kept_pair_totals(self.steps)) is not None:
            return totals
        _, name, kind, dur = _reported_ops(self.steps)  # (no frame of them, no steps)
        return _pair_totals(name, kind, dur, 1e3)

    def detach(self) -> Analysis:
        """The same analysis without the trace (and its SQLite connection) and operations."""
        return dataclasses.replace(self, trace=None, steps=None, step_totals=None)

    def shed(self) -> Analysis:
        """The same analysis without the trace and its operations, but for their totals per
        name and kind (:attr:`op_totals`): what comparing it reads. The trace is freed once
        nothing else holds it (20 M GPU operations: about 1 GiB)."""
        return dataclasses.replace(self, trace=None, steps=None, step_totals=self.op_totals)

    def to_json(self, per_step: bool = True) -> dict:
        """The documented JSON shape of ``specscope analyze --format json``."""

        def num(x):
            x = float(x)
            return None if math.isnan(x) else (int(x) if x.is_integer() else x)

        summary = {}
        for metric, row in self.summary.iterrows():
            entry = {k: num(row[k]) for k in ("n", "mean", "p10", "p50", "p90", "min", "max")}
            entry["unit"] = row["unit"]
            if metric in self.unavailable:
                entry["unavailable"] = self.unavailable[metric]
            summary[metric] = entry
        data = {
            "trace": self.source,
            "nsys_version": self.nsys_version,
            "schema_version": self.schema_version,
            "capture_mode": self.capture_mode,
            "gpu": self.gpu,
            "pid": self.pid,
            "tid": self.tid,
            "device": self.device_id,
            "spec": self.spec,
            "steps": self.n_steps,
            "skipped": self.skipped,
            "dropped_trailing": self.dropped_trailing,
            "notes": self.notes,
            "summary": summary,
        }
        if per_step:
            data["per_step"] = json.loads(self.per_step_json())
        return data

    def per_step_json(self) -> str:
        """``per_step`` as JSON text: pandas' C encoder (NaN -> null), fast for many steps."""
        return "".join(self.per_step_pieces())

    def per_step_pieces(self) -> Iterator[str]:
        """:meth:`per_step_json` in pieces of at most :data:`JSON_CHUNK_STEPS` steps each, that
        make it when written one after the other: the text of all steps is never held at once
        (0.2 GB for 100 000 steps, and as much again while pandas encodes it), and two pieces
        are written at once (:func:`.jsonrows.record_pieces`)."""
        return jsonrows.record_pieces(self.metrics.frame, JSON_CHUNK_STEPS)

    def json_text(self, **extra) -> str:
        """:meth:`to_json` (plus ``extra`` keys) as text, ``per_step`` last, without a
        round trip of the per-step rows through Python objects."""
        return "".join(self.json_pieces(**extra))

    def json_pieces(self, **extra) -> Iterator[str]:
        """:meth:`json_text` in pieces (head, per-step rows in pieces, closing brace) that make
        it when written one after the other: no text of all steps at once."""
        return pieces(self.json_value(**extra))

    def json_value(self, **extra) -> dict:
        """:meth:`to_json` (plus ``extra`` keys), ``per_step`` last and :class:`.Encoded`
        (:meth:`per_step_pieces`): a value for :func:`.jsonpieces.pieces`, also inside the
        outputs of several analyses."""
        return self.to_json(per_step=False) | extra | {"per_step": Encoded(self.per_step_pieces())}


def _reported_ops(steps: Steps) -> tuple[np.ndarray, pd.Categorical, pd.Categorical, np.ndarray]:
    """Which of ``steps.ops`` are the operations of the reported steps (a mask), and their
    name, kind and duration (ns, whole: sums of them are exact in any order), in trace order.
    Picked by a lookup per operation (:func:`.steps.kept_position`; ``np.isin`` sorted the 20 M
    steps of a large export with the kept ones: 2 s, 1 GiB), the durations a chunk at a time
    (no temporaries of every operation)."""
    ops = steps.ops
    keep = kept_position(steps)[ops["step"].to_numpy()] >= 0
    start, end = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
    dur = np.empty(int(keep.sum()), dtype=np.result_type(start, end))
    done = 0
    for lo in range(0, len(keep), CHUNK_ROWS):
        rows = slice(lo, lo + CHUNK_ROWS)
        part = end[rows][keep[rows]] - start[rows][keep[rows]]
        dur[done : done + len(part)] = part
        done += len(part)
    return keep, ops["name"].array[keep], ops["kind"].array[keep], dur


def op_totals(ops: pd.DataFrame) -> pd.DataFrame:
    """Count and µs per (name, kind) of operations (columns ``name, kind, dur_us``), indexed by
    plain strings; columns ``count, us``, in the order each pair first occurs.

    Names and kinds are categorical in an analysis: then the pair is one small integer per
    operation, counted by ``bincount`` and summed by pandas grouping by its codes (its
    compensated sum, in operation order, as a group-by of the two columns sums: the same
    values), without the group-by of two columns over millions of rows (20 M: 3.5 s and
    1.1 GiB of temporaries)."""
    name, kind = ops["name"].array, ops["kind"].array
    if isinstance(name, pd.Categorical) and isinstance(kind, pd.Categorical):
        return _pair_totals(name, kind, ops["dur_us"].to_numpy())
    g = ops.groupby(["name", "kind"], sort=False)["dur_us"].agg(["size", "sum"])
    g.index = pd.MultiIndex.from_arrays(
        [g.index.get_level_values(i).astype(str) for i in (0, 1)], names=["name", "kind"]
    )
    return g.set_axis(["count", "us"], axis=1)


def _pair_totals(
    name: pd.Categorical, kind: pd.Categorical, dur: np.ndarray, per_us: float = 1.0
) -> pd.DataFrame:
    """:func:`op_totals` of categorical names and kinds and their durations ``dur``, ``per_us``
    of them a µs (1e3: whole ns, summed exactly, so that the totals are the same whatever order
    the export's rows are in; nsys 2025.6 no longer promises one)."""
    n_kinds = max(len(kind.categories), 1)
    n_pairs = len(name.categories) * n_kinds
    pair = name.codes.astype(np.int32 if n_pairs < np.iinfo(np.int32).max else np.int64)
    pair *= n_kinds  # (in place: no temporary of the operations' size)
    pair += kind.codes
    pair[(name.codes < 0) | (kind.codes < 0)] = -1  # (a missing name or kind: no group)
    # grouped by the pair's codes (no hashing of every operation's key), in order of first
    # occurrence; pandas sums each group in operation order, as it does grouping by the two
    grouper = pd.Categorical.from_codes(pair, categories=pd.RangeIndex(n_pairs))
    del pair
    g = pd.Series(dur, copy=False).groupby(grouper, observed=True, sort=False)
    g = g.agg(["size", "sum"])
    pairs = g.index.codes if isinstance(g.index, pd.CategoricalIndex) else g.index
    pairs = np.asarray(pairs, dtype=np.int64)
    return _totals_frame(name, kind, pairs, g["size"].to_numpy(), g["sum"].to_numpy() / per_us)


def _totals_frame(
    name: pd.Categorical, kind: pd.Categorical, pairs: np.ndarray, count: np.ndarray, us
) -> pd.DataFrame:
    """:func:`op_totals`' frame of the (name code * kinds + kind code) ``pairs``, in order."""
    n_kinds = max(len(kind.categories), 1)
    index = pd.MultiIndex.from_arrays(
        [
            np.asarray(name.categories, dtype=object)[pairs // n_kinds].astype(str),
            np.asarray(kind.categories, dtype=object)[pairs % n_kinds].astype(str),
        ],
        names=["name", "kind"],
    )
    return pd.DataFrame({"count": count, "us": us}, index=index)


def _kept_pair_totals(steps: Steps) -> pd.DataFrame | None:
    """:func:`_pair_totals` of :func:`_reported_ops` in one C loop over the operations, none
    of their temporaries (:func:`.opsums.pair_totals`: a shed 20 M operations' took 414 MiB
    more at once); None where it cannot run (the caller runs the reference)."""
    ops = steps.ops
    name, kind = ops["name"].array, ops["kind"].array
    if not (isinstance(name, pd.Categorical) and isinstance(kind, pd.Categorical)):
        return None
    got = opsums.pair_totals(
        ops["step"].to_numpy(), kept_position(steps), name.codes, len(name.categories),
        kind.codes, max(len(kind.categories), 1), ops["start_ns"].to_numpy(),
        ops["end_ns"].to_numpy(),
    )  # fmt: skip
    if got is None:
        return None
    count, us, first = got
    pairs = np.flatnonzero(count)
    pairs = pairs[np.argsort(first[pairs], kind="stable")]  # (in order of first occurrence)
    return _totals_frame(name, kind, pairs, count[pairs], us[pairs])


def _gpu(trace: Trace, device_id: int | None) -> str | None:
    """The GPU of ``device_id``, else every GPU name of the export (None without one)."""
    names = trace.gpu_names
    if device_id is not None and device_id in names:
        return names[device_id]
    return ", ".join(sorted(set(names.values()))) or None


def analyze(
    path: str | Path, spec: StepSpec, options: AnalyzeOptions = DEFAULT_OPTIONS
) -> Analysis:
    """Load ``path`` read-only and compute its per-step metrics and summary (a live analysis)."""
    return analyze_trace(load(path), spec, options)


def analyze_trace(
    trace: Trace, spec: StepSpec, options: AnalyzeOptions = DEFAULT_OPTIONS
) -> Analysis:
    """:func:`analyze` of an export already loaded (several analyses of one export share it)."""
    o = options
    validated(trace)  # rows with impossible times dropped once, before any step is found
    coverage_ahead(trace)  # (built while the steps are found: one device's operations)
    try:
        steps = find_steps(
            trace, spec, skip=o.skip, pid=o.pid, device=o.device, require_anchors=o.require_anchors
        )
        return analysis_of(trace, steps, o.count_kernels)
    finally:
        dropped_ahead(trace)


def analysis_of(trace: Trace, steps: Steps, count_kernels: tuple[str, ...] = ()) -> Analysis:
    """The live analysis of ``steps`` found in ``trace`` (however they were found)."""
    metrics = per_step_metrics(trace, steps, count_kernels)
    metrics.notes[:0] = validated(trace)
    return Analysis(
        source=str(trace.path),
        metrics=metrics,
        capture_mode=trace.capture_mode.value,
        gpu=_gpu(trace, steps.device_id),
        nsys_version=trace.nsys_version,
        spec=steps.spec.to_dict(),
        summary=summarize(metrics),
        schema_version=trace.schema_version,
        pid=steps.pid,
        tid=steps.tid,
        device_id=steps.device_id,
        skipped=steps.skipped,
        dropped_trailing=steps.dropped_trailing,
        trace=trace,
        steps=steps,
    )
