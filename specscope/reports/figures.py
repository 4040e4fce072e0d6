"""``distributions.png``, ``steps.png``, ``composition.png``; draws only.

Inputs are the per-step metric frames of the runs (:attr:`specscope.analysis.run.Analysis.frame`)
and the median steps' compositions (:func:`specscope.analysis.composition.step_composition`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import rc_context
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from specscope.analysis.catalog import CATALOG, find, unit
from specscope.analysis.composition import COMPOSITION
from specscope.reports.markdown import display_name
from specscope.reports.style import (
    ANCHOR_LINES,
    COMPOSITION_COLOURS,
    COMPOSITION_NAMES,
    FOOTER_IN,
    INPUT_COLOURS,
    WIDTH_IN,
    Stamp,
    anchor_colours,
    new_figure,
    rc,
    save_png,
    stamp,
)
from specscope.reports.text import unit_text

LINE_MAX_STEPS = 1000
"""The steps figure joins an input's per-step values by a line up to this many steps; beyond,
each step is a dot alone. A panel is about 750 px wide: past this, neighbouring steps are under
a pixel apart and the line only repaints the band the dots make, and it is what took the time
(0.8 of 0.85 s for two inputs of 113 k steps on one panel; the figure of two 20 M-op exports,
2.6 s, was the last thing a report waited for)."""


def plotted_metrics(frames: Sequence[pd.DataFrame]) -> list[str]:
    """The metrics the catalog marks ``plotted`` that have a value in some input: members of
    parametrised families (the gaps) first, in column order, then the others in catalog order.
    Where none has (NVTX ranges recorded without CUDA activity), their host counterparts: the
    host time per step, then the host gaps between anchor ranges, in column order."""
    cols = list(dict.fromkeys(c for f in frames for c in f.columns))
    family = [c for c in cols if (e := find(c)) and e.plotted and e.parametrised]
    single = [e.pattern for e in CATALOG if e.plotted and not e.parametrised]
    shown = [m for m in family + single if any(m in f and f[m].notna().any() for f in frames)]
    if shown:
        return shown
    host = ["cpu_step_us", *(c for c in cols if c.startswith("cpu_gap_us:"))]
    return [m for m in host if any(m in f and f[m].notna().any() for f in frames)]


def _unit(metric: str) -> str:
    return unit_text(unit(metric)).axis


def _colour(i: int) -> str:
    return INPUT_COLOURS[i % len(INPUT_COLOURS)]


def _grid(n: int, ncols: int = 3, row_h: float = 4.6):
    """``n`` axes in rows of ``ncols``; fixed margins in inches (tight_layout is slow)."""
    ncols = max(1, min(ncols, n))
    nrows = max(1, math.ceil(n / ncols))
    height = row_h * nrows + 1.6 + FOOTER_IN
    fig = new_figure(figsize=(WIDTH_IN, height))
    gap_in = 1.1  # title above + tick labels and x label below each row
    grid = fig.add_gridspec(
        nrows,
        ncols,
        left=0.06,
        right=0.99,
        top=1 - 0.95 / height,
        bottom=(1.25 + FOOTER_IN) / height,
        wspace=0.22,
        hspace=gap_in / (row_h - gap_in),
    )
    axes = [fig.add_subplot(grid[i // ncols, i % ncols]) for i in range(n)]  # no empty cells
    return fig, axes, height


def _legend(fig, handles: list, height: float, ncol: int) -> None:
    """The legend just above the figure's stamp (:data:`FOOTER_IN`)."""
    fig.legend(
        handles=handles,
        loc="lower center",
        bbox_to_anchor=(0.5, FOOTER_IN / height),
        ncol=ncol,
        frameon=False,
    )


def _empty(path: Path, title: str, message: str, stamp_: Stamp | None) -> Path:
    with rc_context(rc()):
        height = 3 + FOOTER_IN
        fig = new_figure(figsize=(WIDTH_IN, height))
        fig.suptitle(title, fontsize=16)
        fig.text(0.5, 0.5, message, ha="center", va="center")
        stamp(fig, stamp_, height, gaps=False)
        save_png(fig, path)
    return path


def _gap_colours(anchors: Sequence[str], metrics: Sequence[str]) -> dict[str, int]:
    """Colour index per anchor: the timeline's order first (same colours there), then the
    anchors of gaps it did not draw."""
    closing = [m.partition("->")[2] for m in metrics if m.startswith("gap_us:")]
    return anchor_colours([*anchors, *closing])


def _title(ax, metric: str, colours: dict[str, int]) -> None:
    """A panel's title; a gap's in the colour of the anchor that closes it (B of A->B), the
    colour that anchor has in the timeline."""
    ax.set_title(display_name(metric))
    if metric.startswith("gap_us:"):
        closing = metric.partition("->")[2]
        if closing in colours:
            ax.title.set_color(ANCHOR_LINES[colours[closing]])


def distributions_figure(
    frames: Sequence[pd.DataFrame],
    labels: Sequence[str],
    path: Path,
    *,
    stamp_: Stamp | None = None,
    anchors: Sequence[str] = (),
) -> Path:
    """Per metric, each input's per-step values: a box (p25-p75, whiskers 1.5 IQR) and points;
    stamped with ``stamp_`` (:func:`specscope.reports.style.stamp`); ``anchors``: the
    timeline's anchor order (:func:`specscope.reports.timeline.anchor_order`), which colours
    the gap panels' titles as the timeline colours the anchors."""
    metrics = plotted_metrics(frames)
    colours = _gap_colours(anchors, metrics)
    title = "Per-step distributions (box: quartiles, whiskers: 1.5 IQR; dots: steps)"
    if not metrics:
        return _empty(path, title, "no gap, idle or memcpy values in any input", stamp_)
    rng = np.random.default_rng(0)  # jitter only; fixed so the picture is reproducible
    with rc_context(rc()):
        fig, axes, height = _grid(len(metrics))
        for ax, metric in zip(axes, metrics, strict=True):
            data = [
                f[metric].dropna().to_numpy(dtype="float64") if metric in f else np.zeros(0)
                for f in frames
            ]
            pos = np.arange(len(frames))
            shown = [i for i, d in enumerate(data) if len(d)]
            if shown:
                bp = ax.boxplot(
                    [data[i] for i in shown],
                    positions=pos[shown],
                    widths=0.5,
                    showfliers=False,
                    patch_artist=True,
                    medianprops={"color": "black", "lw": 2},
                )
                for patch, i in zip(bp["boxes"], shown, strict=True):
                    patch.set_facecolor(_colour(i))
                    patch.set_alpha(0.35)
            for i, d in enumerate(data):
                if not len(d):
                    ax.text(i, 0.5, "n/a", ha="center", transform=ax.get_xaxis_transform())
                    continue
                x = i + rng.uniform(-0.15, 0.15, len(d))
                ax.scatter(x, d, s=18, color=_colour(i), alpha=0.8, zorder=3, lw=0)
            ax.set_xticks(pos, labels)
            ax.set_xlim(-0.6, len(frames) - 0.4)
            _title(ax, metric, colours)
            ax.set_ylabel(_unit(metric))
            ax.grid(axis="y", color="#e5e5e5")
        fig.suptitle(title, fontsize=16)
        handles = [Patch(color=_colour(i), label=lab) for i, lab in enumerate(labels)]
        _legend(fig, handles, height, min(len(labels), 6))
        stamp(fig, stamp_, height)
        save_png(fig, path)
    return path


def steps_figure(
    frames: Sequence[pd.DataFrame],
    labels: Sequence[str],
    path: Path,
    *,
    stamp_: Stamp | None = None,
    anchors: Sequence[str] = (),
) -> Path:
    """Idle µs and the gaps over the step number, one line of dots per input (stability,
    warm-up; dots alone past :data:`LINE_MAX_STEPS` steps); stamped with ``stamp_``; gap
    titles coloured by ``anchors`` as in :func:`distributions_figure`."""
    colours = _gap_colours(anchors, plotted_metrics(frames))
    metrics = [m for m in plotted_metrics(frames) if unit(m) != "count"]
    title = "Per-step values over the capture (step number as in the trace; warm-up skipped)"
    if not metrics:
        return _empty(path, title, "no gap or idle values in any input", stamp_)
    with rc_context(rc()):
        fig, axes, height = _grid(len(metrics), ncols=2, row_h=4.2)
        for ax, metric in zip(axes, metrics, strict=True):
            for i, f in enumerate(frames):
                if metric not in f:
                    continue
                s = f[metric].dropna()
                lw = 1.5 if len(s) <= LINE_MAX_STEPS else 0
                ax.plot(s.index, s.to_numpy(), marker="o", ms=4, lw=lw, color=_colour(i))
                if len(s):
                    ax.axhline(s.median(), color=_colour(i), lw=1, ls=":")
            _title(ax, metric, colours)
            ax.set_xlabel("step")
            ax.set_ylabel(_unit(metric))
            ax.grid(color="#e5e5e5")
        fig.suptitle(title, fontsize=16)
        handles = [  # (an input's dots joined, the style's line, where its panels join them)
            Line2D([], [], color=_colour(i), marker="o", label=lab,
                   **({} if len(f) <= LINE_MAX_STEPS else {"lw": 0}))
            for i, (f, lab) in enumerate(zip(frames, labels, strict=True))
        ]  # fmt: skip
        handles.append(Line2D([], [], color="gray", ls=":", label="median"))
        _legend(fig, handles, height, min(len(handles), 7))
        stamp(fig, stamp_, height)
        save_png(fig, path)
    return path


def composition_figure(
    compositions: Sequence[pd.Series | None],
    labels: Sequence[str],
    path: Path,
    *,
    steps: Sequence[int | None] = (),
    stamp_: Stamp | None = None,
    no_cuda: Sequence[bool] = (),
) -> Path:
    """Per input, one horizontal bar: the median step's window split by category (µs);
    stamped with ``stamp_``. An input without a composition: "n/a", with why (``no_cuda``
    true: an export without CUDA activity; else a results-database run, which stores no
    operations)."""
    n = len(compositions)
    height = 1.5 * n + 2.6 + FOOTER_IN
    title = (
        "Where the median step's GPU time goes (window split by category; overlaps counted once)"
    )
    with rc_context(rc()):
        fig = new_figure(figsize=(WIDTH_IN, height))
        ax = fig.subplots()
        ax.set_axisbelow(True)
        totals = [float(c.sum()) for c in compositions if c is not None]
        span = max(totals, default=1.0)
        for row, comp in enumerate(compositions):
            if comp is None:
                why = (
                    "no GPU work" if row < len(no_cuda) and no_cuda[row] else "no operations stored"
                )
                ax.text(span / 2, row, f"n/a ({why})", ha="center", va="center")
                continue
            left = 0.0
            for part in COMPOSITION:
                w = float(comp.get(part, 0.0))
                ax.barh(row, w, left=left, color=COMPOSITION_COLOURS[part], height=0.5)
                if w >= 0.04 * span:
                    ax.text(left + w / 2, row, f"{w:.0f}", ha="center", va="center", fontsize=12)
                left += w
            ax.text(left + 0.005 * span, row, f" {left:.0f} µs", va="center", fontsize=12)
            parts = " + ".join(
                f"{float(comp.get(p, 0.0)):.1f} {COMPOSITION_NAMES[p].replace(' busy', '')}"
                for p in COMPOSITION
            )
            ax.text(0, row + 0.36, f"{left:.1f} µs = {parts}", va="top", fontsize=11)
        ticks = []
        for i, lab in enumerate(labels):
            step = steps[i] if i < len(steps) else None
            ticks.append(lab if step is None else f"{lab}\n(step {step})")
        ax.set_yticks(range(n), ticks)
        ax.set_ylim(n - 0.2, -0.5)
        ax.set_xlim(0, span * 1.08)
        ax.set_xlabel("µs in the median step's GPU window")
        ax.grid(axis="x", color="#e5e5e5")
        fig.suptitle(title, fontsize=16)
        handles = [
            Patch(color=COMPOSITION_COLOURS[p], label=COMPOSITION_NAMES[p]) for p in COMPOSITION
        ]
        _legend(fig, handles, height, len(handles))
        stamp(fig, stamp_, height)
        fig.subplots_adjust(
            left=0.08, right=0.99, top=1 - 0.9 / height, bottom=(1.35 + FOOTER_IN) / height
        )
        save_png(fig, path)
    return path
