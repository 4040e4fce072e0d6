"""Summaries over steps, the median step, one step's kernel timeline, whole-capture totals and
the NVTX ranges of an export."""

from __future__ import annotations

import numpy as np
import pandas as pd

from specscope.analysis.catalog import unit
from specscope.analysis.loader import Trace
from specscope.analysis.metrics import StepMetrics
from specscope.analysis.steps import Steps, frame_anchors

STATS = ("n", "mean", "p10", "p50", "p90", "min", "max")


def summarize(metrics: StepMetrics) -> pd.DataFrame:
    """Per metric: n (steps with a value), mean, p10, p50, p90, min, max and unit.

    Percentiles interpolate linearly between steps (numpy's default). Unavailable metrics have
    n = 0 and NaN statistics.
    """
    rows = []
    for metric in metrics.frame.columns:
        v = metrics.frame[metric].to_numpy(dtype="float64")
        v = v[~np.isnan(v)]
        if len(v):
            p10, p50, p90 = np.percentile(v, [10, 50, 90])
            stats = (len(v), v.mean(), p10, p50, p90, v.min(), v.max())
        else:
            stats = (0, *([np.nan] * 6))
        rows.append((metric, *stats, unit(metric)))
    return pd.DataFrame(rows, columns=["metric", *STATS, "unit"]).set_index("metric")


def median_step(metrics: StepMetrics, metric: str) -> int:
    """The step whose value of ``metric`` is the median (the lower middle one for even n)."""
    v = metrics.frame[metric].dropna().sort_values(kind="stable")
    if v.empty:
        raise ValueError(f"metric {metric!r} has no value in any step")
    return int(v.index[(len(v) - 1) // 2])


def step_window(metrics: StepMetrics, step: int) -> tuple[float, float]:
    """(start, end) in ns of a step's GPU window (see ``window_us``)."""
    if metrics.window_start_ns is None:
        raise ValueError("no GPU window: the trace has no GPU work in its steps")
    start = float(metrics.window_start_ns[step])
    return start, start + float(metrics.frame.loc[step, "window_us"]) * 1e3


def kernel_timeline(steps: Steps, metrics: StepMetrics, step: int) -> pd.DataFrame:
    """Every GPU operation of the device that overlaps ``step``'s window, in start order.

    Columns: ``stream_id, offset_us`` (start relative to the window start), ``dur_us, name,
    kind, in_graph, copy_kind, step`` (the step it was launched from, -1: none), ``anchor``
    (the anchor range it was launched from, "" if none).
    """
    w0, w1 = step_window(metrics, step)
    ops = steps.ops
    sel = (ops["end_ns"] > w0) & (ops["start_ns"] < w1)
    o = ops[sel].sort_values(["start_ns", "stream_id"], kind="stable")
    names = steps.anchors["name"].to_numpy(dtype=object)
    idx = frame_anchors(steps, o)
    anchor = np.where(idx >= 0, names[np.clip(idx, 0, None)] if len(names) else "", "")
    return pd.DataFrame(
        {
            "stream_id": o["stream_id"].to_numpy(),
            "offset_us": (o["start_ns"].to_numpy() - w0) / 1e3,
            "dur_us": (o["end_ns"] - o["start_ns"]).to_numpy() / 1e3,
            "name": o["name"].astype(str).to_numpy(),
            "kind": o["kind"].astype(str).to_numpy(),
            "in_graph": o["in_graph"].to_numpy(),
            "copy_kind": o["copy_kind"].astype(object).to_numpy(),
            "step": o["step"].to_numpy(),
            "anchor": anchor,
        }
    )


def totals(trace: Trace) -> dict[str, pd.DataFrame]:
    """Counts and times over the whole capture, as ``nsys stats`` reports them.

    ``kernels``: per demangled name (the ``Name`` of ``cuda_gpu_kern_sum``): instances,
    total_ns. ``memory``: per operation (``[CUDA memcpy Host-to-Device]``, ``[CUDA memset]``…,
    the ``Operation`` of ``cuda_gpu_mem_time_sum``): count, total_ns, bytes. Graph replays of a
    graph-mode capture are not kernels and appear in neither.
    """
    ops = trace.ops.assign(dur_ns=trace.ops["end_ns"] - trace.ops["start_ns"])
    k = ops[ops["kind"] == "kernel"]
    kernels = (
        k.groupby("full_name", observed=True)["dur_ns"]
        .agg(instances="count", total_ns="sum")
        .sort_values("total_ns", ascending=False, kind="stable")
    )
    m = ops[ops["kind"].isin(["memcpy", "memset"])]
    m = m.assign(bytes=np.asarray(m["bytes"]))  # (sparse in the frame; these rows all dense)
    memory = (
        m.groupby("name", observed=True)
        .agg(count=("dur_ns", "count"), total_ns=("dur_ns", "sum"), bytes=("bytes", "sum"))
        .sort_values("total_ns", ascending=False, kind="stable")
    )
    return {"kernels": kernels, "memory": memory}


def unavailable_by_reason(metrics: StepMetrics) -> dict[str, list[str]]:
    """The unavailable metrics (``metrics.unavailable``) grouped by why, in first-seen order."""
    reasons: dict[str, list[str]] = {}
    for metric, why in metrics.unavailable.items():
        reasons.setdefault(why, []).append(metric)
    return reasons
