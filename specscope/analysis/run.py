"""One call from an export to everything the CLI and reports need: :func:`analyze`."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from specscope.analysis.loader import Trace, load
from specscope.analysis.metrics import StepMetrics, per_step_metrics
from specscope.analysis.spec import StepSpec
from specscope.analysis.steps import Steps, find_steps
from specscope.analysis.summary import summarize


@dataclass
class Analysis:
    """An analysed export: the trace, its steps, per-step metrics and their summary."""

    trace: Trace
    steps: Steps
    metrics: StepMetrics
    summary: pd.DataFrame

    @property
    def gpu(self) -> str | None:
        names = self.trace.gpu_names
        if self.steps.device_id is not None and self.steps.device_id in names:
            return names[self.steps.device_id]
        return ", ".join(sorted(set(names.values()))) or None

    def to_json(self, per_step: bool = True) -> dict:
        """The documented JSON shape of ``specscope analyze --format json``."""

        def num(x):
            x = float(x)
            return None if math.isnan(x) else (int(x) if x.is_integer() else x)

        summary = {}
        for metric, row in self.summary.iterrows():
            entry = {k: num(row[k]) for k in ("n", "mean", "p10", "p50", "p90", "min", "max")}
            entry["unit"] = row["unit"]
            if metric in self.metrics.unavailable:
                entry["unavailable"] = self.metrics.unavailable[metric]
            summary[metric] = entry
        data = {
            "trace": str(self.trace.path),
            "nsys_version": self.trace.nsys_version,
            "schema_version": self.trace.schema_version,
            "capture_mode": self.trace.capture_mode.value,
            "gpu": self.gpu,
            "pid": self.steps.pid,
            "tid": self.steps.tid,
            "device": self.steps.device_id,
            "spec": self.steps.spec.to_dict(),
            "steps": len(self.steps.kept),
            "skipped": self.steps.skipped,
            "dropped_trailing": self.steps.dropped_trailing,
            "notes": self.metrics.notes,
            "summary": summary,
        }
        if per_step:
            data["per_step"] = json.loads(self.per_step_json())
        return data

    def per_step_json(self) -> str:
        """``per_step`` as JSON text: pandas' C encoder (NaN -> null), fast for many steps."""
        return self.metrics.frame.reset_index().to_json(orient="records")

    def json_text(self, **extra) -> str:
        """:meth:`to_json` (plus ``extra`` keys) as text, ``per_step`` last, without a
        round trip of the per-step rows through Python objects."""
        head = json.dumps(self.to_json(per_step=False) | extra)
        return head[:-1] + ', "per_step": ' + self.per_step_json() + "}"


def analyze(
    path: str | Path,
    spec: StepSpec,
    *,
    skip: int = 0,
    pid: int | None = None,
    device: int | None = None,
    count_kernels: tuple[str, ...] = (),
) -> Analysis:
    """Load ``path`` read-only and compute its per-step metrics and summary."""
    trace = load(path)
    steps = find_steps(trace, spec, skip=skip, pid=pid, device=device)
    metrics = per_step_metrics(trace, steps, count_kernels)
    return Analysis(trace, steps, metrics, summarize(metrics))
