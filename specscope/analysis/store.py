"""The results store: analysed runs appended to a SQLite database written with sqlite-utils.

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

Runs are only ever appended; nothing earlier is overwritten.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pandas as pd
import sqlite_utils

from specscope.analysis.loader import Trace
from specscope.analysis.metrics import StepMetrics
from specscope.analysis.steps import Steps
from specscope.checksum import sha256_file


def _specscope_version() -> str:
    try:
        return version("specscope")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _num(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def append_run(
    db_path: str | Path,
    trace: Trace,
    steps: Steps,
    metrics: StepMetrics,
    summary: pd.DataFrame,
) -> int:
    """Append one analysed run to ``db_path`` (created if absent); return its run id."""
    db = sqlite_utils.Database(db_path)
    gpu = trace.gpu_names.get(steps.device_id) if steps.device_id is not None else None
    run = {
        "trace": str(trace.path),
        "sha256": sha256_file(trace.path),
        "nsys_version": trace.nsys_version,
        "schema_version": trace.schema_version,
        "capture_mode": trace.capture_mode.value,
        "gpu": gpu or ", ".join(sorted(set(trace.gpu_names.values()))) or None,
        "spec": json.dumps(steps.spec.to_dict()),
        "skip": steps.skipped,
        "pid": steps.pid,
        "tid": steps.tid,
        "device_id": steps.device_id,
        "steps": len(steps.kept),
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "specscope_version": _specscope_version(),
        "notes": json.dumps(metrics.notes),
    }
    with db.conn:
        run_id = db["runs"].insert(run, pk="id").last_pk
        long = metrics.frame.reset_index().melt(id_vars="step", var_name="metric")
        db["step_metrics"].insert_all(
            (
                {
                    "run_id": run_id,
                    "step": int(r.step),
                    "metric": r.metric,
                    "value": _num(r.value),
                    "unit": summary.loc[r.metric, "unit"],
                }
                for r in long.itertuples(index=False)
            ),
            foreign_keys=[("run_id", "runs", "id")],
            batch_size=1000,
        )
        db["summary"].insert_all(
            (
                {
                    "run_id": run_id,
                    "metric": metric,
                    **{k: _num(row[k]) for k in ("mean", "p10", "p50", "p90", "min", "max")},
                    "n": int(row["n"]),
                    "unit": row["unit"],
                    "available": metric not in metrics.unavailable,
                }
                for metric, row in summary.iterrows()
            ),
            foreign_keys=[("run_id", "runs", "id")],
        )
    return int(run_id)
