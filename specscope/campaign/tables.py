"""The campaign's tables, as frames: per-(cell, variant, mode) statistics and what they show.

:func:`metric_rows` pools every repetition of a (cell, variant, mode) into one row per metric
(the same statistics as ``specscope compare``: n, p10/p50/p90 of the pooled steps, run-to-run
spread of the per-run medians, runs). Modes are ``graph`` and ``node`` (from the exports), and
``unprofiled-nvtx-on`` / ``unprofiled-nvtx-off`` (from ``specscope run --json``: ``step_ms_p50``,
``tok_per_s_per_request``, ``draft_metadata_bytes``, one value per run). Profiled runs also give
``run_step_ms_p50`` (the step time their own CUDA events measured under nsys).

Every later table is a view of those rows; each figure names the mode it comes from:

- :func:`overview`   cell x variant -> idle and gaps [graph], eager memcpys [graph], copy
  kernels [graph] (eager launches: graph mode counts them), tok/s per request and step time
  [unprofiled], draft metadata [allocator];
- :func:`inflation`  node-mode median / graph-mode median of each gap and of idle;
- :func:`overhead`   step time unprofiled (NVTX off, on) and under each trace mode;
- :func:`targets`    issue 8's targets for one variant against the baseline in one cell.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from specscope.analysis.catalog import unit
from specscope.analysis.compare import Comparison, compare_runs, side_stats
from specscope.analysis.spec import DEFAULT_PRESET, StepSpec, anchor_pairs, load_preset
from specscope.campaign.matrix import MODES
from specscope.campaign.results import CampaignResults
from specscope.reports.style import pretty_gap

UNPROFILED = ("unprofiled-nvtx-on", "unprofiled-nvtx-off")
RUN_METRICS = {  # specscope run --json field -> unit
    "step_ms_p50": "ms",
    "tok_per_s_per_request": "tok/s",
    "draft_metadata_bytes": "B",
}
STAT_COLUMNS = ["unit", "n", "runs", "p10", "p50", "p90", "spread"]

# The overview's columns beyond the spec's own (idle, gaps, copies, counted kernels): (label,
# mode, metric); the label names the mode.
RUN_COLUMNS = (
    ("tok/s/request [unprofiled]", "unprofiled-nvtx-on", "tok_per_s_per_request"),
    ("step ms p50 [unprofiled]", "unprofiled-nvtx-on", "step_ms_p50"),
    ("draft metadata MB [allocator]", "unprofiled-nvtx-on", "draft_metadata_bytes"),
)


def _gaps(spec: StepSpec) -> list[str]:
    return [f"gap_us:{p}" for p in anchor_pairs(spec.anchor_names)]


def overview_columns(spec: StepSpec) -> list[tuple[str, str, str]]:
    """The overview's columns, (label, mode, metric): idle, every gap of ``spec`` (named by its
    PR name), eager memcpys [graph], each counted kernel pattern [graph], :data:`RUN_COLUMNS`."""
    cols = [("idle µs/step [graph]", "graph", "idle_us")]
    cols += [(f"{pretty_gap(g).replace(' → ', '→')} µs [graph]", "graph", g) for g in _gaps(spec)]
    cols.append(("eager memcpys/step [graph]", "graph", "eager_memcpy"))
    cols += [("copy kernels/step [graph]", "graph", f"kernels:{k}") for k in spec.count_kernels]
    return [*cols, *RUN_COLUMNS]


def _values_row(values: list[float], unit_name: str) -> dict:
    v = np.array([x for x in values if x is not None and not math.isnan(x)], dtype="float64")
    if not len(v):
        return {"unit": unit_name, "n": 0, "runs": 0} | dict.fromkeys(STAT_COLUMNS[3:], math.nan)
    p10, p50, p90 = np.percentile(v, [10, 50, 90])
    spread = float(v.max() - v.min()) if len(v) >= 2 else math.nan
    return {
        "unit": unit_name,
        "n": len(v),
        "runs": len(v),
        "p10": p10,
        "p50": p50,
        "p90": p90,
        "spread": spread,
    }


def metric_rows(res: CampaignResults) -> pd.DataFrame:
    """One row per (cell, variant, mode, metric) with pooled statistics (module doc)."""
    rows = []
    for (cell, mode, variant), inputs in res.inputs.items():
        frames = [i.analysis.frame for i in inputs]
        for metric in dict.fromkeys(m for f in frames for m in f.columns):
            s = side_stats(frames, metric)
            rows.append(
                {
                    "cell": cell,
                    "variant": variant,
                    "mode": mode,
                    "metric": metric,
                    "unit": unit(metric),
                    **{k: s[k] for k in STAT_COLUMNS[1:]},
                }
            )
    groups: dict[tuple[str, str, str], list[dict]] = {}
    for r in res.rows.values():
        if r.get("status") == "ok" and r.get("step_ms_p50") is not None:
            groups.setdefault((r["cell"], r["variant"], r["mode"]), []).append(r)
    for (cell, variant, mode), runs in groups.items():
        fields = RUN_METRICS if mode in UNPROFILED else {"step_ms_p50": "ms"}
        for field, unit_name in fields.items():
            metric = field if mode in UNPROFILED else "run_step_ms_p50"
            stats = _values_row([r.get(field) for r in runs], unit_name)
            rows.append({"cell": cell, "variant": variant, "mode": mode, "metric": metric, **stats})
    cols = ["cell", "variant", "mode", "metric", *STAT_COLUMNS]
    out = pd.DataFrame(rows, columns=cols)
    return out.astype({"n": "int64", "runs": "int64"})


def _p50(rows: pd.DataFrame) -> dict[tuple[str, str, str, str], float]:
    return {
        (r.cell, r.variant, r.mode, r.metric): (r.p50 if r.n else math.nan)
        for r in rows.itertuples(index=False)
    }


def _order(res: CampaignResults) -> tuple[list[str], list[str]]:
    c = res.campaign
    return [cell.id for cell in c.cells], list(c.variants)


def overview(res: CampaignResults, rows: pd.DataFrame) -> pd.DataFrame:
    """Cell x variant -> the :func:`overview_columns` medians (NaN: not measured)."""
    p50 = _p50(rows)
    cells, variants = _order(res)
    index = pd.MultiIndex.from_product([cells, variants], names=["cell", "variant"])
    data = {
        label: [p50.get((cell, v, mode, metric), math.nan) for cell, v in index]
        for label, mode, metric in overview_columns(load_preset(res.campaign.preset))
    }
    frame = pd.DataFrame(data, index=index)
    frame["draft metadata MB [allocator]"] /= 1e6
    return frame


def inflation(res: CampaignResults, rows: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, variant, metric) for the gaps and idle: graph and node medians, node/graph."""
    p50 = _p50(rows)
    gaps = _gaps(load_preset(res.campaign.preset))
    cells, variants = _order(res)
    out = []
    for cell in cells:
        for v in variants:
            for metric in (*gaps, "idle_us"):
                g = p50.get((cell, v, "graph", metric), math.nan)
                n = p50.get((cell, v, "node", metric), math.nan)
                if math.isnan(g) and math.isnan(n):
                    continue  # neither mode recorded
                ratio = n / g if g and not math.isnan(g) else math.nan
                out.append(
                    {
                        "cell": cell,
                        "variant": v,
                        "metric": metric,
                        "graph_us": g,
                        "node_us": n,
                        "node_minus_graph_us": n - g,
                        "node_over_graph": ratio,
                    }
                )
    return pd.DataFrame(out)


def overhead(res: CampaignResults, rows: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, variant): step time (ms, p50 of the run's steps) unprofiled NVTX off / on,
    under nsys in graph and node mode; NVTX overhead in % and each mode's factor over NVTX on."""
    p50 = _p50(rows)
    cells, variants = _order(res)
    out = []
    for cell in cells:
        for v in variants:
            off = p50.get((cell, v, "unprofiled-nvtx-off", "step_ms_p50"), math.nan)
            on = p50.get((cell, v, "unprofiled-nvtx-on", "step_ms_p50"), math.nan)
            graph = p50.get((cell, v, "graph", "run_step_ms_p50"), math.nan)
            node = p50.get((cell, v, "node", "run_step_ms_p50"), math.nan)
            out.append(
                {
                    "cell": cell,
                    "variant": v,
                    "nvtx_off_ms": off,
                    "nvtx_on_ms": on,
                    "graph_ms": graph,
                    "node_ms": node,
                    "nvtx_overhead_pct": 100 * (on - off) / off if off else math.nan,
                    "graph_over_unprofiled": graph / on if on else math.nan,
                    "node_over_unprofiled": node / on if on else math.nan,
                }
            )
    return pd.DataFrame(out)


# Issue 8's targets for draft_alias against ordinary, beyond those on the PR table's copy
# kernels and gaps (:func:`target_rows`): (name, mode, metric, kind, goal).
# kind "value": the variant's median must be <= goal; "ratio": variant / baseline <= goal.
MEMCPY_TARGETS = (
    ("eager memcpys per step", "graph", "eager_memcpy", "ratio", 0.4),
    ("GPU idle per step", "graph", "idle_us", "ratio", 0.6),
)
MEMORY_TARGET = (
    "draft metadata memory",
    "unprofiled-nvtx-on",
    "draft_metadata_bytes",
    "ratio",
    0.3,
)


def target_rows(spec: StepSpec) -> list[tuple[str, str, str, str, float]]:
    """The targets: no counted kernel of the spec's PR rows left [graph], eager memcpys and idle
    (:data:`MEMCPY_TARGETS`), each gap of the PR rows at most half the baseline's [graph], and
    :data:`MEMORY_TARGET`."""
    rows = spec.report.rows
    kernels = [
        ("copy kernels per step", "graph", m, "value", 0.0)
        for m in rows
        if m.startswith("kernels:")
    ]
    gaps = [
        (f"gap {pretty_gap(m)}", "graph", m, "ratio", 0.5) for m in rows if m.startswith("gap_us:")
    ]
    return [*kernels, *MEMCPY_TARGETS, *gaps, MEMORY_TARGET]


def targets(
    rows: pd.DataFrame, cell: str, variant: str, baseline: str, spec: StepSpec | None = None
) -> pd.DataFrame:
    """Each :func:`target_rows` row of ``spec`` (default: the default preset) for ``variant``
    against ``baseline`` in ``cell``: the two medians, the measured value (the variant's median
    or the ratio), the goal and whether it is met."""
    p50 = _p50(rows)
    out = []
    for name, mode, metric, kind, goal in target_rows(spec or load_preset(DEFAULT_PRESET)):
        b = p50.get((cell, baseline, mode, metric), math.nan)
        a = p50.get((cell, variant, mode, metric), math.nan)
        value = a if kind == "value" else (a / b if b else math.nan)
        met = bool(value <= goal) if not math.isnan(value) else None
        out.append(
            {
                "target": name,
                "mode": mode,
                "metric": metric,
                "baseline": b,
                "variant": a,
                "kind": kind,
                "value": value,
                "goal": goal,
                "met": met,
            }
        )
    return pd.DataFrame(out)


def comparisons(res: CampaignResults, **stats_kw) -> dict[tuple[str, str], list[Comparison]]:
    """Per (cell, mode): every variant against the baseline, repetitions pooled."""
    c = res.campaign
    out: dict[tuple[str, str], list[Comparison]] = {}
    for cell in (x.id for x in c.cells):
        for mode in MODES:
            base = res.inputs.get((cell, mode, c.baseline))
            if not base:
                continue
            found = []
            for v in c.variants[1:]:
                other = res.inputs.get((cell, mode, v))
                if other:
                    found.append(
                        compare_runs(
                            [i.analysis for i in base],
                            [i.analysis for i in other],
                            labels=(c.baseline, v),
                            **stats_kw,
                        )
                    )
            if found:
                out[(cell, mode)] = found
    return out


def comparison_rows(found: dict[tuple[str, str], list[Comparison]]) -> pd.DataFrame:
    """The comparisons in long form, for the results database."""
    rows = []
    for (cell, mode), comps in found.items():
        for comp in comps:
            m = comp.metrics
            for metric, r in m.iterrows():
                rows.append(
                    {
                        "cell": cell,
                        "mode": mode,
                        "before": comp.labels[0],
                        "after": comp.labels[1],
                        "metric": metric,
                        "unit": r["unit"],
                        "before_p50": r["before_p50"],
                        "after_p50": r["after_p50"],
                        "abs_change": r["abs_change"],
                        "rel_change_pct": r["rel_change_pct"],
                        "ci_low": r["ci_low"],
                        "ci_high": r["ci_high"],
                        "verdict": r["verdict"].value,
                    }
                )
    return pd.DataFrame(rows)


def not_run(res: CampaignResults) -> pd.DataFrame:
    """The planned runs that have no usable result: id, status, error."""
    from specscope.campaign.matrix import plan

    rows = [
        {"id": k, "status": r.get("status"), "error": r.get("error")}
        for k, r in res.rows.items()
        if r.get("status") != "ok"
    ]
    rows += [
        {"id": r.id, "status": "not recorded", "error": None}
        for r in plan(res.campaign)
        if r.id not in res.rows
    ]
    return pd.DataFrame(rows, columns=["id", "status", "error"])
