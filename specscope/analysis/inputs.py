"""Command-line inputs: one reference in, one :class:`~specscope.analysis.run.Analysis` out.

:func:`resolve` turns a reference into a :class:`ResolvedInput`:

- a **folder** with ``manifest.json`` (a run folder of ``specscope profile``): its SQLite export
  (``report.sqlite``, else the one ``.sqlite`` output that is not a results database) is
  analysed, and the manifest is kept for provenance;
- a **results database** of ``specscope analyze --db`` (recognised by its ``runs`` table): its
  latest run; ``DB:RUN_ID``: run ``RUN_ID`` of it. Both are detached analyses (the stored
  per-step metrics only, no operations, so no timeline, composition or kernel diff);
- anything else is analysed as an nsys export. A ``manifest.json`` beside the export that lists
  it (or lists no outputs) gives the analysis its batch size and commit.

Without a spec (``spec=None``: no ``--preset``, ``--step`` or ``--anchors`` given) an export's
steps are chosen as ``specscope analyze`` chooses them (:func:`analyze_export`), so that
``compare`` and ``report`` read the exports of programs nobody instrumented too.

:func:`expand` turns the references of ``specscope analyze`` into export paths: a folder
without a manifest stands for its ``*.sqlite`` exports (one per rank), a run folder for its
export.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from specscope.analysis.loader import Trace, load
from specscope.analysis.run import DEFAULT_OPTIONS, Analysis, AnalyzeOptions, analyze_trace
from specscope.analysis.spec import DEFAULT_PRESET, StepSpec, load_preset, reads_graph_launches
from specscope.analysis.store import is_results_db, read_run
from specscope.checksum import sha256_file
from specscope.errors import Info, SpecError, SpecscopeError, TraceError
from specscope.profiler.manifest import MANIFEST, batch_and_commit, read_manifest


@dataclass
class ResolvedInput:
    """One resolved reference: its analysis and where it came from.

    ``export``: the analysed nsys export (None for a results-database run); ``run_dir`` and
    ``manifest``: the ``specscope profile`` run folder and its manifest, when the reference
    named one; ``export_sha256``: the export's hash when the caller already has it (else
    :attr:`sha256` computes it on first use).
    """

    ref: str
    analysis: Analysis
    export: Path | None = None
    run_dir: Path | None = None
    manifest: dict | None = None
    export_sha256: str | None = field(default=None, repr=False)

    @property
    def sha256(self) -> str | None:
        """SHA-256 of the export (None without one)."""
        if self.export_sha256 is None and self.export is not None:
            self.export_sha256 = sha256_file(self.export)
        return self.export_sha256


def run_folder_export(run_dir: Path) -> tuple[Path, dict]:
    """The SQLite export of a ``specscope profile`` run folder and its manifest."""
    manifest = read_manifest(run_dir)
    if manifest is None:
        raise SpecscopeError(
            f"{run_dir}: a folder without {MANIFEST}; give an nsys export, a run folder of "
            "`specscope profile` or a results database"
        )
    outputs = [Path(k) for k in (manifest.get("outputs") or {})]
    candidates = [run_dir / "report.sqlite"]
    candidates += [run_dir / p for p in outputs if p.suffix == ".sqlite"]
    candidates += sorted(run_dir.glob("*.sqlite"))
    for c in dict.fromkeys(candidates):
        if c.is_file() and not is_results_db(c):
            return c, manifest
    status = manifest.get("status", "unknown")
    raise SpecscopeError(
        f"{run_dir}: the run folder has no SQLite export (run status {status!r}); "
        "export it with `nsys export --type sqlite` or profile again"
    )


def _db_run(ref: str) -> Analysis | None:
    """The results-database run ``ref`` names (``DB`` or ``DB:RUN_ID``), None if it names none."""
    path = Path(ref)
    if not path.exists() and ":" in ref:
        head, _, tail = ref.rpartition(":")
        if tail.isdigit() and Path(head).is_file():
            if not is_results_db(head):
                raise SpecscopeError(
                    f"{head}: not a results database (no runs table); "
                    "`:RUN_ID` only applies to files written by `specscope analyze --db`"
                )
            return read_run(head, int(tail))
    if path.is_file() and is_results_db(path):
        return read_run(path)
    return None


def analyze_export(
    export: str | Path, spec: StepSpec | None, options: AnalyzeOptions = DEFAULT_OPTIONS
) -> Analysis:
    """:func:`~specscope.analysis.run.analyze` ``export`` with ``spec``; without one, with the
    default preset, and where that finds no steps, zero-config: the steps
    :func:`~specscope.analysis.auto.analyze_processes` chooses (a CUDA graph launch cycle, a
    repeating kernel pattern, NVTX ranges that recur, else the whole capture) in the process
    and device with most steps (the first in rank order on a tie). Its notes then say what was
    chosen and, for an export of several, which process was taken."""
    trace = _loaded(export, spec)
    if spec is not None:
        return analyze_trace(trace, spec, options)
    try:
        return analyze_trace(trace, load_preset(DEFAULT_PRESET), options)
    except SpecError:
        pass  # no step ranges of the preset (or none usable): choose as `analyze` does
    found = _zero_config(trace, options)
    best = max(found.processes, key=lambda p: p.analysis.n_steps)  # max: the first of ties
    a = best.analysis
    if len(found.processes) > 1:
        a.notes.append(
            f"{len(found.processes)} processes/devices with steps ({', '.join(found.labels)}); "
            f"using pid {a.pid}{'' if a.device_id is None else f' device {a.device_id}'} "
            "(most steps); pick another with --pid/--device"
        )
    return a


def _loaded(export: str | Path, spec: StepSpec | None) -> Trace:
    """``export`` loaded for ``spec``: once, for the default preset and, where that finds no
    steps, the zero-config choice after it (the GPU operations read once, not once per
    attempt), with the graph ops' exec ids where the steps read graph launches
    (:func:`.spec.reads_graph_launches`)."""
    trace = load(export)
    trace.graph_execs = reads_graph_launches(spec)
    return trace


def _zero_config(export: str | Path | Trace, options: AnalyzeOptions):
    """:func:`~specscope.analysis.auto.analyze_processes` without a spec, each analysis noting
    how its steps were chosen (:func:`is_choice_note`)."""
    from specscope.analysis.auto import analyze_processes

    found = analyze_processes(export, None, options)
    for p in found.processes:
        p.analysis.notes.append(Info(f"{p.rank}: steps: {p.choice}; refine with {p.hint}"))
    return found


def is_choice_note(text: str) -> bool:
    """Whether an analysis note says how zero-config chose its steps (:func:`analyze_export`)."""
    return isinstance(text, Info) and ": steps: " in text


def analyze_with_provenance(
    export: Path, spec: StepSpec | None, options: AnalyzeOptions, manifest: dict | None = None
) -> Analysis:
    """:func:`analyze_export`, with batch size and commit from ``manifest`` (default: the
    ``manifest.json`` beside the export, if any)."""
    return with_provenance(analyze_export(export, spec, options), export, manifest)


def with_provenance(a: Analysis, export: Path, manifest: dict | None = None) -> Analysis:
    """``a`` (an analysis of ``export``) with the batch size and commit ``manifest`` records
    for the export (default: the ``manifest.json`` beside it, if any)."""
    if manifest is None:
        manifest = read_manifest(export.parent)
    if not manifest:
        return a
    batch, commit = batch_and_commit(manifest, export)
    return dataclasses.replace(a, batch_size=batch, commit=commit)


def resolve(
    ref: str | Path, spec: StepSpec | None, options: AnalyzeOptions = DEFAULT_OPTIONS
) -> ResolvedInput:
    """Resolve one reference (module doc) into its analysis and provenance; ``spec=None``:
    zero-config (:func:`analyze_export`)."""
    ref = str(ref)
    path = Path(ref)
    if path.is_dir():
        export, manifest = run_folder_export(path)
        return ResolvedInput(
            ref, analyze_with_provenance(export, spec, options, manifest), export, path, manifest
        )
    stored = _db_run(ref)
    if stored is not None:
        return ResolvedInput(ref, stored)
    return ResolvedInput(ref, analyze_with_provenance(path, spec, options), path)


def expand(refs: Iterable[str | Path]) -> list[Path]:
    """The exports ``specscope analyze`` reads for ``refs`` (module doc); files as given.

    A folder without exports is a TraceError; missing files are left for the loader to report.
    """
    out: list[Path] = []
    for item in map(Path, refs):
        if item.is_dir() and (item / MANIFEST).is_file():
            out.append(run_folder_export(item)[0])
        elif item.is_dir():
            found = sorted(p for p in item.glob("*.sqlite") if p.is_file())
            if not found:
                raise TraceError(f"{item}: folder without *.sqlite exports")
            out += found
        else:
            out.append(item)
    return out


def resolve_ranks(
    ref: str | Path, spec: StepSpec | None, options: AnalyzeOptions = DEFAULT_OPTIONS
) -> dict[str, ResolvedInput]:
    """Every process (rank) with steps of one reference, by rank label (``pid<P>[.dev<D>]``, in
    pid order; :func:`specscope.analysis.auto.analyze_processes`, zero-config without a
    ``spec``), each with the reference's
    provenance; a results-database run, or a reference analysed with ``options.pid`` given, is
    one entry labelled ``rank0``."""
    from specscope.analysis.auto import analyze_processes

    if (stored := _db_run(str(ref))) is not None:
        return {"rank0": ResolvedInput(str(ref), stored)}
    if options.pid is not None:
        return {"rank0": resolve(ref, spec, options)}
    path, run_dir, manifest = Path(str(ref)), None, None
    if path.is_dir():
        run_dir = path
        path, manifest = run_folder_export(path)
    trace = _loaded(path, spec)
    try:
        found = analyze_processes(trace, spec or load_preset(DEFAULT_PRESET), options).analyses
    except SpecError:
        if spec is not None:
            raise
        found = _zero_config(trace, options).analyses
    recorded = (manifest if run_dir else read_manifest(path.parent)) or {}  # read once
    return {
        label: ResolvedInput(str(ref), with_provenance(a, path, recorded), path, run_dir, manifest)
        for label, a in found.items()
    }


def pair_ranks(sides: list[dict[str, ResolvedInput]]) -> list[list[tuple[str, ResolvedInput]]]:
    """Rank i of every side together (ranks in their label order): one list per rank, each
    holding ``(label, analysis)`` per side. SpecscopeError when the sides have different numbers
    of ranks (compare one rank with --pid instead)."""
    counts = {len(s) for s in sides}
    if len(counts) != 1:
        found = ", ".join(str(len(s)) for s in sides)
        raise SpecscopeError(
            f"--per-rank: the inputs hold different numbers of processes with steps ({found}); "
            "compare one process of each with --pid"
        )
    return [list(group) for group in zip(*(s.items() for s in sides), strict=True)]
