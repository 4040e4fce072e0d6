"""The results store: analysed runs appended to a SQLite database (readable with sqlite-utils).

Tables (readable with the ``sqlite-utils`` CLI, e.g. ``sqlite-utils rows results.sqlite runs``):

``runs``
    one row per analysis: ``id``, ``trace`` (path), ``sha256``, ``nsys_version``,
    ``schema_version``, ``capture_mode``, ``gpu``, ``spec`` (JSON), ``skip``, ``pid``, ``tid``,
    ``device_id``, ``steps``, ``created_at`` (UTC ISO time), ``specscope_version``, ``notes``.
``step_metrics``
    long format, one row per (run, step, metric): ``run_id, step, metric, value, unit``.
``summary``
    one row per (run, metric): ``run_id, metric, n, mean, p10, p50, p90, min, max, unit,
    available``.

Runs are only ever appended, each in one transaction (:mod:`.sqlwrite`); nothing earlier is
overwritten, and a run written only in part (by an older specscope) is refused by
:func:`read_run`, which reads one back as a detached
:class:`~specscope.analysis.run.Analysis`; :func:`is_results_db` tells a results database from an
nsys export.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import sqlite3
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pandas as pd

from specscope.analysis.compressed import is_xz
from specscope.analysis.loader import open_readonly
from specscope.analysis.metrics import StepMetrics
from specscope.analysis.run import Analysis
from specscope.analysis.sqlwrite import ensure_table, insert_rows, transaction
from specscope.checksum import sha256_file
from specscope.errors import SpecscopeError


def _specscope_version() -> str:
    try:
        return version("specscope")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _num(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


_RUN_COLUMNS = {
    "id": "INTEGER",
    "trace": "TEXT",
    "sha256": "TEXT",
    "nsys_version": "TEXT",
    "schema_version": "TEXT",
    "capture_mode": "TEXT",
    "gpu": "TEXT",
    "spec": "TEXT",
    "skip": "INTEGER",
    "pid": "INTEGER",
    "tid": "INTEGER",
    "device_id": "INTEGER",
    "steps": "INTEGER",
    "created_at": "TEXT",
    "specscope_version": "TEXT",
    "notes": "TEXT",
}
_STEP_COLUMNS = {
    "run_id": "INTEGER",
    "step": "INTEGER",
    "metric": "TEXT",
    "value": "FLOAT",
    "unit": "TEXT",
}
_SUMMARY_COLUMNS = {
    "run_id": "INTEGER",
    "metric": "TEXT",
    **dict.fromkeys(("mean", "p10", "p50", "p90", "min", "max"), "FLOAT"),
    "n": "INTEGER",
    "unit": "TEXT",
    "available": "INTEGER",
}
_RUN_REF = {"run_id": "runs(id)"}


def append_run(db_path: str | Path, a: Analysis, trace: str | None = None) -> int:
    """Append the analysis of an export (``a.source``: its path) to ``db_path`` (created if
    absent); return its run id. ``trace``: what the ``trace`` column records (default: the
    path).

    The ``runs`` row, its step rows and its summary are written in one transaction
    (:func:`~specscope.analysis.sqlwrite.transaction`): a reader sees the whole run or none of
    it, a killed writer leaves nothing, and concurrent writers wait for each other.
    """
    run = {
        "trace": a.source if trace is None else trace,
        "sha256": sha256_file(a.source),
        "nsys_version": a.nsys_version,
        "schema_version": a.schema_version,
        "capture_mode": a.capture_mode,
        "gpu": a.gpu,
        "spec": json.dumps(a.spec),
        "skip": a.skipped,
        "pid": a.pid,
        "tid": a.tid,
        "device_id": a.device_id,
        "steps": a.n_steps,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "specscope_version": _specscope_version(),
        "notes": json.dumps(a.notes),
    }
    units = a.summary["unit"].to_dict()
    long = a.frame.reset_index().melt(id_vars="step", var_name="metric")
    with transaction(db_path) as con:
        ensure_table(con, "runs", _RUN_COLUMNS, pk="id")
        ensure_table(con, "step_metrics", _STEP_COLUMNS, references=_RUN_REF)
        ensure_table(con, "summary", _SUMMARY_COLUMNS, references=_RUN_REF)
        run_id = insert_rows(con, "runs", list(run), [tuple(run.values())])
        insert_rows(
            con,
            "step_metrics",
            list(_STEP_COLUMNS),
            (
                (run_id, int(r.step), r.metric, _num(r.value), units[r.metric])
                for r in long.itertuples(index=False)
            ),
        )
        insert_rows(
            con,
            "summary",
            list(_SUMMARY_COLUMNS),
            (
                (
                    run_id,
                    metric,
                    *(_num(row[k]) for k in ("mean", "p10", "p50", "p90", "min", "max")),
                    int(row["n"]),
                    row["unit"],
                    metric not in a.unavailable,
                )
                for metric, row in a.summary.iterrows()
            ),
        )
    return int(run_id)


def is_results_db(path: str | Path) -> bool:
    """Whether ``path`` is a results database of ``specscope analyze --db`` (has ``runs``)."""
    if is_xz(Path(path)):  # a compressed export (results databases are never read compressed)
        return False
    con = open_readonly(path)
    try:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.DatabaseError:
        return False
    finally:
        con.close()
    return {"runs", "step_metrics"} <= names


def _run_row(con: sqlite3.Connection, path: str | Path, run_id: int | None) -> sqlite3.Row:
    if run_id is None:
        row = con.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()
        if row is None:
            raise SpecscopeError(f"{path}: the results database has no runs")
        return row
    row = con.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        ids = [r[0] for r in con.execute("SELECT id FROM runs ORDER BY id")]
        shown = ", ".join(map(str, ids[-10:])) or "none"
        raise SpecscopeError(f"{path}: no run {run_id}; runs: {shown}")
    return row


def _read_tables(con: sqlite3.Connection, run_id: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A run's ``step_metrics`` (long) and ``summary`` rows (empty without the table)."""
    long = pd.read_sql_query(
        "SELECT step, metric, value FROM step_metrics WHERE run_id = ? ORDER BY rowid",
        con,
        params=(run_id,),
    )
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    summary = pd.DataFrame(columns=["metric", "available"])
    if "summary" in tables:
        summary = pd.read_sql_query(
            "SELECT * FROM summary WHERE run_id = ? ORDER BY rowid", con, params=(run_id,)
        )
    return long, summary


def _check_whole(path, row: sqlite3.Row, long: pd.DataFrame, stored: pd.DataFrame) -> None:
    """Refuse a run written only in part (no summary, or fewer step rows than its steps):
    what an interrupted writer of an older specscope left behind."""
    steps = row["steps"] or 0
    if len(stored) and (steps == 0 or long["step"].nunique() == steps):
        return
    raise SpecscopeError(
        f"{path}: run {row['id']} was not completely written (no summary or missing step rows; "
        "an interrupted `analyze --db`?); analyse its export again and use the new run"
    )


def read_run(path: str | Path, run_id: int | None = None) -> Analysis:
    """Run ``run_id`` (default: the latest) of a results database, as a detached analysis.

    Metrics the stored summary marks unavailable are unavailable "in the stored run".
    """
    con = open_readonly(path)
    con.row_factory = sqlite3.Row
    try:
        row = _run_row(con, path, run_id)
        long, stored = _read_tables(con, row["id"])
    except sqlite3.DatabaseError as e:
        raise SpecscopeError(f"{path}: not a readable results database ({e})") from None
    finally:
        con.close()
    _check_whole(path, row, long, stored)
    order = list(dict.fromkeys(long["metric"]))
    frame = long.pivot(index="step", columns="metric", values="value").reindex(columns=order)
    frame.columns.name = None
    keys = row.keys()
    unavailable = {
        m: "unavailable in the stored run" for m in stored["metric"][stored["available"] == 0]
    }
    notes = json.loads(row["notes"]) if "notes" in keys and row["notes"] else []
    summary = stored.drop(columns=["run_id", "available"], errors="ignore").set_index("metric")
    return Analysis(
        source=f"{path}:{row['id']}",
        metrics=StepMetrics(frame.astype("float64"), unavailable, notes),
        capture_mode=row["capture_mode"],
        gpu=row["gpu"],
        nsys_version=row["nsys_version"] or "unknown",
        spec=json.loads(row["spec"]) if row["spec"] else {},
        summary=summary,
        schema_version=row["schema_version"] or "unknown",
        pid=row["pid"],
        tid=row["tid"],
        device_id=row["device_id"],
        skipped=int(row["skip"] or 0),
        batch_size=row["batch_size"] if "batch_size" in keys else None,
        commit=row["commit"] if "commit" in keys else None,
    )
