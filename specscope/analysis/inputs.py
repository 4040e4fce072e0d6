"""Inputs of ``specscope report``: exports, run folders of ``specscope profile``, results-DB runs.

:func:`resolve_input` turns one command-line reference into a :class:`ReportInput`:

- a **folder** with ``manifest.json`` (a run folder of ``specscope profile``): its SQLite export
  (``report.sqlite``, else the one ``.sqlite`` output that is not a results database) is
  analysed, and the manifest is kept for provenance;
- a **results database** of ``specscope analyze --db`` (its latest run) or ``DB:RUN_ID``: the
  stored per-step metrics only (no operations, so no timeline or composition);
- anything else is analysed as an nsys export.

An export is analysed once; the :class:`~specscope.analysis.runs.Run` that comparisons use
and the :class:`~specscope.analysis.run.Analysis` that the median-step views use come from the
same analysis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from specscope.analysis.run import Analysis, analyze
from specscope.analysis.runs import Run, is_results_db, load_run, run_from_analysis
from specscope.analysis.spec import StepSpec
from specscope.checksum import sha256_file
from specscope.errors import SpecscopeError

MANIFEST = "manifest.json"


@dataclass
class ReportInput:
    """One input of a report: its run, its analysis (None for results-DB runs) and provenance."""

    ref: str
    run: Run
    analysis: Analysis | None
    export: Path | None = None
    run_dir: Path | None = None
    manifest: dict | None = None
    sha256: str | None = None  # of the export


def run_folder_export(run_dir: Path) -> tuple[Path, dict]:
    """The SQLite export of a ``specscope profile`` run folder and its manifest."""
    path = run_dir / MANIFEST
    if not path.is_file():
        raise SpecscopeError(
            f"{run_dir}: a folder without {MANIFEST}; give an nsys export, a run folder of "
            "`specscope profile` or a results database"
        )
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SpecscopeError(f"{path}: unreadable manifest ({e}); fix or remove it") from None
    if not isinstance(manifest, dict):
        raise SpecscopeError(f"{path}: not a manifest (expected a JSON object)")
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


def resolve_input(ref: str, spec: StepSpec, **analyze_kw) -> ReportInput:
    """Resolve a reference (module doc); ``analyze_kw``: ``skip, pid, device, count_kernels``."""
    path = Path(ref)
    run_dir = manifest = None
    if path.is_dir():
        run_dir = path
        path, manifest = run_folder_export(path)
    elif not path.is_file() or is_results_db(path):
        return ReportInput(ref, load_run(ref, spec, **analyze_kw), None)
    a = analyze(path, spec, **analyze_kw)
    run = run_from_analysis(path, a)
    return ReportInput(ref, run, a, path, run_dir, manifest, sha256_file(path))
