"""Runs: analysed captures as the comparison sees them, from exports or a results database.

A :class:`Run` is one capture's per-step metric frame plus where it came from (GPU, nsys
version, capture mode, spec, commit and batch size from a ``specscope profile`` manifest when
there is one). :func:`load_run` resolves the command-line reference syntax: ``PATH`` (an nsys
export, analysed read-only), ``DB`` (the latest run of a results database written by
``specscope analyze --db``) or ``DB:RUN_ID``.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from specscope.analysis.loader import open_readonly
from specscope.analysis.run import Analysis, analyze
from specscope.analysis.spec import StepSpec
from specscope.errors import SpecscopeError


@dataclass
class Run:
    """One analysed capture: per-step metrics (index: step) and where they came from.

    ``ops``: the GPU operations of the reported steps (``step, name, kind, dur_us``), None for a
    run read from a results database (which keeps no operations).
    """

    source: str
    frame: pd.DataFrame
    capture_mode: str
    gpu: str | None
    nsys_version: str
    spec: dict
    skip: int = 0
    unavailable: dict[str, str] = field(default_factory=dict)
    ops: pd.DataFrame | None = None
    batch_size: int | None = None
    commit: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.frame)


def read_manifest(export: Path) -> dict:
    """Batch size and commit of an export, from the ``manifest.json`` of its run directory.

    ``specscope run`` (:mod:`specscope.profiler.manifest`) writes ``manifest.json`` beside the
    export. It applies when its ``outputs`` list the export (or it lists no outputs). Returns
    ``{"batch_size": int | None, "commit": str | None}``: ``batch_size`` from a top-level
    ``batch_size`` key or the ``SPECSCOPE_BATCH_SIZE`` variable of its ``env``; ``commit`` from
    ``git.commit`` (``-dirty`` appended when the work tree was dirty).
    """
    path = export.parent / "manifest.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SpecscopeError(f"{path}: unreadable manifest ({e}); fix or remove it") from None
    if not isinstance(data, dict):
        return {}
    outputs = data.get("outputs") or {}
    if outputs and export.name not in {Path(k).name for k in outputs}:
        return {}
    batch = data.get("batch_size", (data.get("env") or {}).get("SPECSCOPE_BATCH_SIZE"))
    git = data.get("git") or {}
    commit = git.get("commit")
    if commit and git.get("dirty"):
        commit += "-dirty"
    try:
        batch = int(batch) if batch is not None else None
    except (TypeError, ValueError):
        batch = None
    return {"batch_size": batch, "commit": commit}


def run_from_analysis(path: str | Path, a: Analysis) -> Run:
    """The :class:`Run` of an analysed export (per-step frame, provenance, step operations)."""
    ops = a.steps.ops
    ops = ops[np.isin(ops["step"].to_numpy(), a.steps.kept)]
    ops = pd.DataFrame(
        {
            "step": ops["step"].to_numpy(),
            "name": ops["name"].astype(str).to_numpy(),
            "kind": ops["kind"].astype(str).to_numpy(),
            "dur_us": (ops["end_ns"] - ops["start_ns"]).to_numpy() / 1e3,
        }
    )
    manifest = read_manifest(Path(path))
    return Run(
        source=str(path),
        frame=a.metrics.frame,
        capture_mode=a.trace.capture_mode.value,
        gpu=a.gpu,
        nsys_version=a.trace.nsys_version,
        spec=a.steps.spec.to_dict(),
        skip=a.steps.skipped,
        unavailable=dict(a.metrics.unavailable),
        ops=ops,
        batch_size=manifest.get("batch_size"),
        commit=manifest.get("commit"),
        notes=list(a.metrics.notes),
    )


def run_from_export(
    path: str | Path,
    spec: StepSpec,
    *,
    skip: int = 0,
    pid: int | None = None,
    device: int | None = None,
    count_kernels: tuple[str, ...] = (),
) -> Run:
    """Analyse an nsys export (read-only) into a :class:`Run`."""
    a = analyze(path, spec, skip=skip, pid=pid, device=device, count_kernels=count_kernels)
    return run_from_analysis(path, a)


def is_results_db(path: str | Path) -> bool:
    """Whether ``path`` is a results database of ``specscope analyze --db`` (has ``runs``)."""
    con = open_readonly(path)
    try:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError:
        return False
    finally:
        con.close()
    return {"runs", "step_metrics"} <= names


def read_db_run(path: str | Path, run_id: int | None = None) -> Run:
    """Run ``run_id`` (default: the latest) of a results database, as a :class:`Run`."""
    con = open_readonly(path)
    con.row_factory = sqlite3.Row
    try:
        if run_id is None:
            row = con.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()
            if row is None:
                raise SpecscopeError(f"{path}: the results database has no runs")
        else:
            row = con.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                ids = [r[0] for r in con.execute("SELECT id FROM runs ORDER BY id")]
                shown = ", ".join(map(str, ids[-10:])) or "none"
                raise SpecscopeError(f"{path}: no run {run_id}; runs: {shown}")
        long = pd.read_sql_query(
            "SELECT step, metric, value FROM step_metrics WHERE run_id = ? ORDER BY rowid",
            con,
            params=(row["id"],),
        )
        unavailable = {}
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "summary" in tables:
            q = "SELECT metric FROM summary WHERE run_id = ? AND available = 0"
            unavailable = {
                m: "unavailable in the stored run" for (m,) in con.execute(q, (row["id"],))
            }
    except sqlite3.DatabaseError as e:
        raise SpecscopeError(f"{path}: not a readable results database ({e})") from None
    finally:
        con.close()
    order = list(dict.fromkeys(long["metric"]))
    frame = long.pivot(index="step", columns="metric", values="value").reindex(columns=order)
    frame.columns.name = None
    keys = row.keys()
    notes = json.loads(row["notes"]) if "notes" in keys and row["notes"] else []
    return Run(
        source=f"{path}:{row['id']}",
        frame=frame.astype("float64"),
        capture_mode=row["capture_mode"],
        gpu=row["gpu"],
        nsys_version=row["nsys_version"] or "unknown",
        spec=json.loads(row["spec"]) if row["spec"] else {},
        skip=int(row["skip"] or 0),
        unavailable=unavailable,
        batch_size=row["batch_size"] if "batch_size" in keys else None,
        commit=row["commit"] if "commit" in keys else None,
        notes=notes,
    )


def load_run(ref: str, spec: StepSpec, **analyze_kw) -> Run:
    """Resolve an input reference: ``DB:RUN_ID``, ``DB`` (its latest run) or an export path.

    A results database is recognised by its ``runs`` table; anything else is analysed as an
    nsys export with ``spec`` and ``analyze_kw`` (``skip``, ``pid``, ``device``,
    ``count_kernels``).
    """
    path = Path(ref)
    if not path.exists() and ":" in ref:
        head, _, tail = ref.rpartition(":")
        if tail.isdigit() and Path(head).is_file():
            if not is_results_db(head):
                raise SpecscopeError(
                    f"{head}: not a results database (no runs table); "
                    "`:RUN_ID` only applies to files written by `specscope analyze --db`"
                )
            return read_db_run(head, int(tail))
    if path.is_file() and is_results_db(path):
        return read_db_run(path)
    return run_from_export(path, spec, **analyze_kw)
