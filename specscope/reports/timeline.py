"""``timeline.png``: the median step of each input, stacked on one µs scale; draws only.

Every number comes from :class:`specscope.analysis.composition.MedianStep` (``gap_timeline``):
x = 0 is the end of the GPU work of the anchor that opens the chosen gap, one lane per stream,
operations coloured by :class:`~specscope.analysis.composition.OpCategory`, anchors shaded,
each gap drawn as an arrow labelled in µs, and operations matching the highlight pattern marked.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from specscope.analysis.composition import GapTimeline, MedianStep, OpCategory  # noqa: E402
from specscope.reports.style import (  # noqa: E402
    ANCHOR_COLOURS,
    CATEGORY_COLOURS,
    DPI,
    HIGHLIGHT,
    WIDTH_IN,
    pretty_gap,
    rc,
)

BAR_HEIGHT = 0.6
LEFT, RIGHT = 0.08, 0.985  # axes margins (fractions of the width)
AXES_PX = (RIGHT - LEFT) * WIDTH_IN * DPI
CHAR_PX = 7.0  # about the width of one 11-pt character


def _draw_anchors(
    ax, t: GapTimeline, top: float, xlim: tuple[float, float], colours: dict[str, str]
) -> None:
    """Shade each anchor's GPU extent and write its name above the lanes (y = `top`); a name
    that would cross the plot's edge hugs that edge instead."""
    lo, hi = t.start_us, t.end_us
    for a in t.anchors.itertuples():
        ax.axvspan(a.start_us, a.end_us, color=colours[a.name], alpha=0.6, lw=0, zorder=0)
        half = 0.5 * len(a.name) * CHAR_PX * (xlim[1] - xlim[0]) / AXES_PX
        x, ha = (max(a.start_us, lo) + min(a.end_us, hi)) / 2, "center"
        if x - half < xlim[0]:
            x, ha = xlim[0] + 0.003 * (xlim[1] - xlim[0]), "left"
        elif x + half > xlim[1]:
            x, ha = xlim[1] - 0.003 * (xlim[1] - xlim[0]), "right"
        ax.text(x, top, a.name, ha=ha, va="bottom", fontsize=11, color="#333333")


def _draw_ops(ax, t: GapTimeline, lane: dict) -> None:
    """One bar per operation in its stream's lane, coloured by category (at least 0.3 µs
    wide); highlighted kernels drawn over them and marked by a triangle above."""
    for cat in OpCategory:
        o = t.ops[t.ops["category"] == cat.value]
        for s, rows in o.groupby("stream_id"):
            ax.broken_barh(
                list(zip(rows["start_us"], rows["dur_us"].clip(lower=0.3), strict=True)),
                (lane[s] - BAR_HEIGHT / 2, BAR_HEIGHT),
                facecolors=CATEGORY_COLOURS[cat],
                edgecolors="none",
                zorder=2,
            )
    hl = t.ops[t.ops["highlight"]]
    if len(hl):
        ys = [lane[s] + BAR_HEIGHT / 2 + 0.14 for s in hl["stream_id"]]
        x = hl["start_us"] + hl["dur_us"] / 2
        ax.scatter(x, ys, marker="v", s=80, color=HIGHLIGHT, zorder=4)
        for s, rows in hl.groupby("stream_id"):
            ax.broken_barh(
                list(zip(rows["start_us"], rows["dur_us"].clip(lower=0.3), strict=True)),
                (lane[s] - BAR_HEIGHT / 2, BAR_HEIGHT),
                facecolors=HIGHLIGHT,
                edgecolors=HIGHLIGHT,
                linewidth=1.5,
                zorder=3,
            )


def _draw_gaps(ax, t: GapTimeline, y_gap: float) -> None:
    """A double arrow at y = `y_gap` for every gap fully in view, labelled in µs; the chosen
    gap (the median step's) bold and named. A label wider than its arrow goes one row lower."""
    lo, hi = t.start_us, t.end_us
    narrow = 0.07 * (hi - lo)
    row = 0
    for g in t.gaps.itertuples():
        if g.start_us < lo or g.end_us > hi:
            continue  # only gaps fully in view
        chosen = g.metric == t.gap and g.step == t.step
        ax.annotate(
            "",
            xy=(g.end_us, y_gap),
            xytext=(g.start_us, y_gap),
            arrowprops={
                "arrowstyle": "<->",
                "color": "black",
                "lw": 2.2 if chosen else 1.2,
                "shrinkA": 0,
                "shrinkB": 0,
            },
            zorder=5,
        )
        text = f"{g.gap_us:.1f} µs"
        if chosen:
            text = f"{pretty_gap(g.metric)}: {text}"
        row = row + 1 if g.gap_us < narrow else 0
        ax.text(
            (g.start_us + g.end_us) / 2,
            y_gap - 0.18 - 0.42 * (row % 2),
            text,
            ha="center",
            va="top",
            fontsize=12,
            fontweight="bold" if chosen else "normal",
        )


def _draw_one(
    ax, view: MedianStep, label: str, xlim: tuple[float, float], colours: dict[str, str]
) -> None:
    """One input: lanes top to bottom at y = n-1 ... 0, gap arrows below them, names above."""
    t = view.timeline
    streams = sorted(t.ops["stream_id"].unique())
    n = max(len(streams), 1)
    lane = {s: n - 1 - i for i, s in enumerate(streams)}
    _draw_anchors(ax, t, n - 0.5 + 0.12, xlim, colours)
    _draw_ops(ax, t, lane)
    y_gap = -0.8
    _draw_gaps(ax, t, y_gap)
    ax.axvline(0, color="black", lw=1, ls="--", zorder=1)
    ax.set_yticks([lane[s] for s in streams], [f"stream {s}" for s in streams])
    ax.set_ylim(y_gap - 1.15, n + 0.15)
    ax.set_title(
        f"{label}: step {view.step} (median by {pretty_gap(view.gap)}, {t.gap_us:.1f} µs)",
        loc="left",
        fontsize=14,
    )
    ax.grid(axis="x", color="#dddddd", lw=0.8, zorder=0)


def _legend_handles(views: Sequence[MedianStep | None], highlight: str | None) -> list:
    present = set()
    for v in views:
        if v is not None:
            present |= set(v.timeline.ops["category"])
    handles = [Patch(color=CATEGORY_COLOURS[c], label=c.value) for c in OpCategory if c in present]
    handles.append(
        Patch(color=ANCHOR_COLOURS[0], alpha=0.6, label="anchor GPU extent (one shade per anchor)")
    )
    handles.append(Line2D([], [], color="black", lw=1.5, label="gap between anchors"))
    if highlight:
        handles.append(
            Line2D([], [], color=HIGHLIGHT, marker="v", ls="", ms=9, label=f"/{highlight}/")
        )
    return handles


def timeline_figure(
    views: Sequence[MedianStep | None],
    labels: Sequence[str],
    path: Path,
    *,
    highlight: str | None = None,
) -> Path:
    """Draw the inputs' median steps (None: no operations stored) into ``path`` (1600 px wide)."""
    lanes = [len(v.timeline.ops["stream_id"].unique()) if v else 1 for v in views]
    heights = [2.0 + 0.6 * max(n, 1) for n in lanes]
    total = sum(heights) + 0.9 * (len(views) - 1) + 3.0  # + titles, x label, legend
    with plt.rc_context(rc()):
        fig, axes = plt.subplots(
            len(views),
            1,
            figsize=(WIDTH_IN, total),
            sharex=True,
            gridspec_kw={"height_ratios": heights},
            squeeze=False,
        )
        axes = axes[:, 0]
        shown = [v for v in views if v is not None]
        lo = min((v.timeline.start_us for v in shown), default=0.0)
        hi = max((v.timeline.end_us for v in shown), default=1.0)
        xlim = (lo, hi + 0.01 * (hi - lo))
        names = dict.fromkeys(n for v in shown for n in v.timeline.anchors["name"])
        colours = {n: ANCHOR_COLOURS[i % len(ANCHOR_COLOURS)] for i, n in enumerate(names)}
        for ax, view, label in zip(axes, views, labels, strict=True):
            if view is None:
                ax.text(
                    0.5,
                    0.5,
                    f"{label}: no timeline (a results-database run keeps no operations)",
                    ha="center",
                    va="center",
                    transform=ax.transAxes,
                )
                ax.set_yticks([])
                continue
            _draw_one(ax, view, label, xlim, colours)
            ax.tick_params(labelbottom=True)
        axes[0].set_xlim(*xlim)
        axes[-1].set_xlabel("time from the end of the opening anchor's GPU work (µs)")
        gap = next((v.gap for v in shown), "")
        opener = gap.partition(":")[2].partition("->")[0]
        fig.suptitle(
            f"Median step per input, aligned at the end of {opener or 'the anchor'}'s GPU work",
            fontsize=16,
        )
        fig.legend(
            handles=_legend_handles(views, highlight),
            loc="lower center",
            ncol=5,
            frameon=False,
        )
        fig.subplots_adjust(
            left=LEFT,
            right=RIGHT,
            top=1 - 0.95 / total,
            bottom=1.85 / total,
            hspace=0.9 / (sum(heights) / len(views)),
        )
        fig.savefig(path, dpi=DPI)
        plt.close(fig)
    return path
