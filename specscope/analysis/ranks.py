"""The cross-rank view: the same decode step seen from every rank (one export per rank).

Ranks of a tensor/data-parallel server run the decode loop in lockstep (a collective per step),
so step k of one rank's export is step k of every other rank's. Steps are aligned by their
number (after each export's ``--skip``); only steps present in every rank are compared.

For each per-step metric ``M`` in :data:`COMPARED` (when the exports have it)::

    rank 0   |-- window_us: 510 --|   idle_us  40
    rank 1   |-- window_us: 630 ---------|   idle_us 160   <- slowest rank of the step
    rank 2   |-- window_us: 515 --|   idle_us  45
    M:min = 510, M:max = 630, M:spread = max - min = 120, M:argmax = rank 1

``slowest_rank`` is the rank with the longest GPU step (``window_us:argmax``; ``cpu_step_us``
for exports without CUDA data); ties go to the first rank. A large ``idle_us:spread`` or
``gap_us:A->B:spread`` says the ranks wait for each other (or for their own host) unevenly.

**Collectives.** When the ranks meet in a collective every step (an NCCL all-reduce), their
steps end together and the slowest step says little: the rank that arrives late makes the others
wait *inside* the collective kernel, which then runs long on every rank but the late one::

    rank 0   [compute][======= allreduce: waits for rank 1 =======][compute]
    rank 1   [compute]......host late......[allreduce][compute]
                                           ^ rank 1 arrives last: its collective is shortest

With ``collective`` (a ``count_kernels`` pattern, e.g. ``nccl``) and its ``kernel_us:PATTERN``
metric in every export, ``last_to_arrive`` is the rank with the shortest collective time in
the step (``kernel_us:PATTERN:argmin``; None in a step where no rank ran it), and
``kernel_us:PATTERN:spread`` is how long the earliest rank waited for it. A rank that arrives
last in most steps is the straggler. All values are µs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import pandas as pd

from specscope.analysis import jsonrows
from specscope.analysis.jsonpieces import Encoded

COMPARED = ("window_us", "busy_us", "idle_us", "cpu_step_us")
STATS = ("min", "max", "spread", "argmax", "argmin")
COLLECTIVE = "nccl"  # the default collective pattern: NCCL's kernels (ncclDevKernel_...)


def compared_metrics(frames: Mapping[str, pd.DataFrame]) -> list[str]:
    """The metrics compared across ranks: :data:`COMPARED`, every ``gap_us:`` pair and every
    ``kernel_us:`` pattern present in all exports, in that order."""
    common = set.intersection(*(set(f.columns) for f in frames.values()))
    columns = next(iter(frames.values())).columns
    extra = [c for c in columns if c.startswith("gap_us:")]
    extra += [c for c in columns if c.startswith("kernel_us:")]
    return [m for m in (*COMPARED, *extra) if m in common]


def cross_rank(
    frames: Mapping[str, pd.DataFrame], collective: str | None = COLLECTIVE
) -> pd.DataFrame:
    """Per step (index ``step``): ``slowest_rank``, ``last_to_arrive`` (None without the
    collective's ``kernel_us:`` metric), then ``M:min, M:max, M:spread, M:argmax, M:argmin``
    for each compared metric (module doc). ``frames``: rank label -> per-step metrics frame
    (``StepMetrics.frame``), in rank order. Never mutates its inputs.
    """
    if len(frames) < 2:
        raise ValueError("the cross-rank view needs at least two exports")
    labels = list(frames)
    steps = sorted(set.intersection(*(set(f.index) for f in frames.values())))
    index = pd.Index(steps, name="step")
    out: dict[str, object] = {}
    for metric in compared_metrics(frames):
        # [ranks, steps] float64; NaN where a rank has no value
        v = np.vstack([frames[r][metric].reindex(index).to_numpy(dtype="float64") for r in labels])
        has = ~np.isnan(v).all(axis=0)
        arg = np.argmax(np.where(np.isnan(v), -np.inf, v), axis=0)
        arg_min = np.argmin(np.where(np.isnan(v), np.inf, v), axis=0)
        with np.errstate(all="ignore"):
            lo = np.where(has, np.nanmin(np.where(has, v, 0.0), axis=0), np.nan)
            hi = np.where(has, np.nanmax(np.where(has, v, 0.0), axis=0), np.nan)
        out[f"{metric}:min"] = lo
        out[f"{metric}:max"] = hi
        out[f"{metric}:spread"] = hi - lo
        names = np.asarray(labels, dtype=object)
        out[f"{metric}:argmax"] = np.where(has, names[arg], None)
        out[f"{metric}:argmin"] = np.where(has, names[arg_min], None)
    frame = pd.DataFrame(out, index=index)
    by = "window_us:argmax"
    if by not in frame or frame[by].isna().all():
        by = "cpu_step_us:argmax"
    slowest = frame[by] if by in frame else pd.Series(None, index=index, dtype=object)
    frame.insert(0, "slowest_rank", slowest)
    late = f"kernel_us:{collective}:argmin"
    if late in frame:  # only in steps where some rank ran the collective (else argmin is noise)
        ran = frame[f"kernel_us:{collective}:max"].to_numpy() > 0
        frame.insert(1, "last_to_arrive", np.where(ran, frame[late].to_numpy(), None))
    else:
        frame.insert(1, "last_to_arrive", None)
    return frame


def mixed_modes(modes: Mapping[str, str]) -> str | None:
    """A warning when the ranks' capture modes differ (rank label -> capture mode): CPU-only,
    graph-mode and node-mode exports measure different things (node mode inflates gaps, graph
    mode hides graph kernels, CPU-only has no GPU metrics), so their spreads compare nothing;
    None when they agree."""
    by_mode: dict[str, list[str]] = {}
    for label, mode in modes.items():
        by_mode.setdefault(mode, []).append(label)
    if len(by_mode) < 2:
        return None
    parts = "; ".join(f"{mode}: {', '.join(labels)}" for mode, labels in by_mode.items())
    return f"the exports mix capture modes ({parts}): their cross-rank spreads are not comparable"


def straggler_table(view: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    """Per rank: ``slowest_steps`` (steps in which it was the slowest) and their share in %;
    with a collective, also ``last_to_arrive_steps`` and ``last_to_arrive_pct``."""
    n = max(len(view), 1)
    table = pd.DataFrame(index=pd.Index(labels, name="rank"))
    for col, name in (("slowest_rank", "slowest"), ("last_to_arrive", "last_to_arrive")):
        if col not in view or view[col].isna().all():
            continue
        counts = view[col].value_counts().reindex(labels, fill_value=0)
        table[f"{name}_steps"] = counts.astype("int64")
        table[f"{name}_pct"] = 100.0 * counts / n
    return table


def spread_summary(view: pd.DataFrame) -> pd.DataFrame:
    """Per compared metric: p50, p90 and max over steps of its spread across ranks (µs)."""
    rows = []
    for col in view.columns:
        if not col.endswith(":spread"):
            continue
        v = view[col].to_numpy(dtype="float64")
        v = v[~np.isnan(v)]
        stats = np.percentile(v, [50, 90, 100]) if len(v) else [np.nan] * 3
        rows.append((col.removesuffix(":spread"), len(v), *stats))
    return pd.DataFrame(
        rows, columns=["metric", "n", "spread_p50", "spread_p90", "spread_max"]
    ).set_index("metric")


def to_json(view: pd.DataFrame | None, labels: list[str]) -> dict | None:
    """The ``ranks`` object of ``specscope analyze --format json`` with several exports: the
    rank labels, the number of steps in common, :func:`straggler_table` and
    :func:`spread_summary` as records, and the per-step ``view`` (NaN -> null); None without a
    view (fewer than two analysed exports)."""
    data = json_value(view, labels)
    if data is not None:
        data["per_step"] = json.loads("".join(data["per_step"].parts))
    return data


def json_value(view: pd.DataFrame | None, labels: list[str]) -> dict | None:
    """:func:`to_json`, ``per_step`` as the text pandas' encoder makes of it, in pieces
    (:func:`.jsonrows.record_pieces`, :class:`.jsonpieces.Encoded`), for an output written in
    pieces."""
    if view is None:
        return None
    return {
        "labels": list(labels),
        "steps": len(view),
        "stragglers": straggler_table(view, list(labels)).reset_index().to_dict("records"),
        "spread": spread_summary(view).reset_index().to_dict("records"),
        "per_step": Encoded(jsonrows.record_pieces(view)),
    }
