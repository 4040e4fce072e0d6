"""``timeline.png``: the median step of each input, stacked on one µs scale; draws only.

Every number comes from :class:`specscope.analysis.composition.MedianStep` (``gap_timeline``):
x = 0 is the end of the GPU work of the anchor that opens the chosen gap, one lane per stream,
operations coloured by :class:`~specscope.analysis.composition.OpCategory`, anchors shaded (one
colour per anchor name in every panel), every gap drawn as an arrow labelled with its name and
µs, operations matching the highlight pattern marked. Under the streams, the host lane: the
launching thread's NVTX phases and CUDA API calls, with a line from each anchor's launch call to
the GPU work it started. Labels are placed with the renderer's own text boxes, so none overlap
(:class:`_Labels`); a label that finds no free place is left out, except a gap's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib import rc_context
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from specscope.analysis.catalog import API_FAMILIES
from specscope.analysis.composition import GapTimeline, MedianStep, OpCategory
from specscope.reports.style import (
    ANCHOR_COLOURS,
    ANCHOR_LINES,
    CATEGORY_COLOURS,
    FOOTER_IN,
    HIGHLIGHT,
    WIDTH_IN,
    Stamp,
    anchor_colours,
    new_figure,
    pretty_gap,
    rc,
    save_png,
    stamp,
)

BAR_HEIGHT = 0.6
LEFT, RIGHT = 0.1, 0.985  # axes margins (fractions of the width)
Y_GAP = -0.8  # the gap arrows; their labels in up to three rows below
LABEL_ROWS = (-1.0, -1.42, -1.84)
OVERFLOW_ROW = -2.26  # one line naming the gaps whose labels found no room above
HOST_TOP = -3.0  # the first NVTX depth; deeper ones and the API calls below
HOST_ROW = 0.55
MAX_DEPTH = 3
# the launch calls (drawn dark): every kernel and graph launch call, runtime and driver API
# alike (cuLaunchKernelEx: cuBLASLt, Triton; cudaLaunchKernelExC; cuGraphLaunch: JAX)
LAUNCH_CALLS = frozenset(API_FAMILIES["cudaLaunchKernel"] + API_FAMILIES["cudaGraphLaunch"])
NO_OPERATIONS = "{}: no operations stored (a results-database run keeps per-step metrics only)"
NO_GPU_WORK = "{}: no GPU work (the export has no CUDA activity: recorded without -t cuda?)"


class _Labels:
    """Places texts where the renderer says they overlap no text placed before."""

    def __init__(self, fig) -> None:
        self.renderer = fig.canvas.get_renderer()
        self.boxes: list = []

    def add(self, artist) -> None:
        self.boxes.append(artist.get_window_extent(self.renderer).expanded(1.02, 1.1))

    def place(self, ax, x: float, ys: Sequence[float], text: str, **kw):
        """The first of ``ys`` where ``text`` at ``x`` is free and within ``ax``'s width; None
        (nothing drawn) if none."""
        frame = ax.get_window_extent(self.renderer)
        for y in ys:
            t = ax.text(x, y, text, **kw)
            raw = t.get_window_extent(self.renderer)
            box = raw.expanded(1.02, 1.1)
            inside = frame.x0 - 1 <= raw.x0 and raw.x1 <= frame.x1 + 1
            if inside and not any(box.overlaps(b) for b in self.boxes):
                self.boxes.append(box)
                return t
            t.remove()
        return None


def _centred(x0: float, x1: float, xlim: tuple[float, float]) -> float:
    return (max(x0, xlim[0]) + min(x1, xlim[1])) / 2


def _draw_anchors(ax, t: GapTimeline, top: float, xlim, colours, labels: _Labels) -> None:
    """Shade each anchor's GPU extent and write its name above the lanes (y = `top`); a name
    that would cross the plot's edge hugs that edge instead."""
    for a in t.anchors.itertuples():
        c = colours[a.name]
        ax.axvspan(a.start_us, a.end_us, color=ANCHOR_COLOURS[c], alpha=0.6, lw=0, zorder=0)
        x = _centred(a.start_us, a.end_us, xlim)
        edges = (
            ("center", x),
            ("left", max(a.start_us, xlim[0])),
            ("right", min(a.end_us, xlim[1])),
        )
        for ha, xx in edges:
            kw = {"ha": ha, "va": "bottom", "fontsize": 11, "color": ANCHOR_LINES[c]}
            if labels.place(ax, xx, (top,), a.name, **kw):
                break


def _bars(ax, rows, y: float, height: float, colour: str, z: int = 2, **kw) -> None:
    ax.broken_barh(
        list(zip(rows["start_us"], rows["dur_us"].clip(lower=0.3), strict=True)),
        (y - height / 2, height),
        facecolors=colour,
        zorder=z,
        **kw,
    )


def _draw_ops(ax, t: GapTimeline, lane: dict) -> None:
    """One bar per operation in its stream's lane, coloured by category (at least 0.3 µs
    wide); highlighted kernels drawn over them and marked by a triangle above."""
    for cat in OpCategory:
        o = t.ops[t.ops["category"] == cat.value]
        for s, rows in o.groupby("stream_id"):
            _bars(ax, rows, lane[s], BAR_HEIGHT, CATEGORY_COLOURS[cat], edgecolors="none")
    hl = t.ops[t.ops["highlight"]]
    if len(hl):
        ys = [lane[s] + BAR_HEIGHT / 2 + 0.14 for s in hl["stream_id"]]
        x = hl["start_us"] + hl["dur_us"] / 2
        ax.scatter(x, ys, marker="v", s=80, color=HIGHLIGHT, zorder=4)
        for s, rows in hl.groupby("stream_id"):
            _bars(ax, rows, lane[s], BAR_HEIGHT, HIGHLIGHT, 3, edgecolors=HIGHLIGHT, lw=1.5)


def _draw_gaps(ax, t: GapTimeline, xlim, labels: _Labels) -> None:
    """A double arrow at :data:`Y_GAP` for every gap in view (one head where the window cuts
    it), labelled with its name and µs in the first free row, the chosen gap bold; gaps too
    crowded for that are named, left to right, in one line at :data:`OVERFLOW_ROW`."""
    crowded = []
    for g in t.gaps.itertuples():
        x0, x1 = max(g.start_us, xlim[0]), min(g.end_us, xlim[1])
        if x1 <= x0:
            continue
        chosen = g.metric == t.gap and g.step == t.step
        heads = ("<" if g.start_us >= xlim[0] else "") + "-" + (">" if g.end_us <= xlim[1] else "")
        ax.annotate(
            "",
            xy=(x1, Y_GAP),
            xytext=(x0, Y_GAP),
            arrowprops={
                "arrowstyle": heads,
                "color": "black",
                "lw": 2.2 if chosen else 1.2,
                "shrinkA": 0,
                "shrinkB": 0,
            },
            zorder=5,
        )
        kw = {"va": "top", "fontsize": 12, "fontweight": "bold" if chosen else "normal"}
        value = f"{g.gap_us:.1f} µs"
        if not any(
            labels.place(ax, x, LABEL_ROWS, text, ha=ha, **kw)
            for text in (f"{pretty_gap(g.metric)}: {value}", value)
            for ha, x in (("center", (x0 + x1) / 2), ("left", x0), ("right", x1))
        ):
            crowded.append(f"{pretty_gap(g.metric)} {value}")
    if crowded:
        text = "also in view, left to right: " + "; ".join(crowded)
        labels.place(ax, xlim[0], (OVERFLOW_ROW,), text, ha="left", va="top", fontsize=11)


def anchor_order(views) -> list[str]:
    """The anchors of the drawn median steps in order of appearance: what decides each anchor's
    colour (:func:`~specscope.reports.style.anchor_colours`), here and in every other figure."""
    shown = [v for v in views if v is not None]
    return [n for v in shown for n in v.timeline.anchors["name"]] + [
        n for v in shown if v.timeline.host for n in v.timeline.host.links["anchor"]
    ]


def _call_colour(name: str) -> str:
    if name in LAUNCH_CALLS:
        return "#333333"
    if "Memcpy" in name or "Memset" in name:
        return CATEGORY_COLOURS[OpCategory.MEMCPY_HTOD]
    if "Synchronize" in name:
        return "#d62728"
    return "#aaaaaa"


def _draw_host(ax, t: GapTimeline, lane: dict, xlim, colours, labels: _Labels) -> float:
    """The host lane: NVTX phases by depth, the API calls one row lower, launch links up to
    the GPU work; returns the y of the API-call row."""
    h = t.host
    phases = h.phases[h.phases["depth"] < MAX_DEPTH].assign(
        dur_us=lambda f: f["end_us"] - f["start_us"]
    )
    boxes: dict[tuple[float, str, str], list] = {}  # one collection per row and colours
    for p in phases.sort_values("depth").itertuples():
        y = HOST_TOP - HOST_ROW * p.depth
        c = colours.get(p.name)
        face = "#e8e8e8" if c is None else ANCHOR_COLOURS[c]
        edge = "#999999" if c is None else ANCHOR_LINES[c]
        boxes.setdefault((y, face, edge), []).append((p.start_us, p.dur_us))
        width = min(p.end_us, xlim[1]) - max(p.start_us, xlim[0])
        if width > 0:
            x = _centred(p.start_us, p.end_us, xlim)
            t_ = labels.place(ax, x, (y,), p.name, ha="center", va="center", fontsize=10)
            if t_ is not None and _wider_than(t_, labels, ax, width):
                t_.remove()
                labels.boxes.pop()
    for (y, face, edge), spans in boxes.items():
        ax.broken_barh(spans, (y - 0.22, 0.44), facecolors=face, edgecolors=edge, zorder=2)
    depth = int(phases["depth"].max()) + 1 if len(phases) else 1  # no NVTX: one row for calls
    y_api = HOST_TOP - HOST_ROW * max(min(depth, MAX_DEPTH), 1)
    calls = h.calls.assign(
        dur_us=lambda f: f["end_us"] - f["start_us"],
        colour=lambda f: [_call_colour(str(n)) for n in f["name"]],
    )
    for colour, rows in calls.groupby("colour", sort=False):  # one collection per colour
        _bars(ax, rows, y_api, 0.44, colour, edgecolors="none")
    launched = t.ops[(t.ops["launch_tid"] == h.tid) & t.ops["launch_us"].notna()]
    for op in launched.drop_duplicates("correlation_id").itertuples():
        _link(ax, (op.launch_us, y_api + 0.22), (op.start_us, lane[op.stream_id]), "#888888", 0.8)
    for link in h.links.itertuples():
        c = ANCHOR_LINES[colours.get(link.anchor, 0)]
        y_gpu = lane.get(link.stream_id, min(lane.values(), default=0))
        _link(ax, (link.call_start_us, y_api + 0.22), (link.gpu_start_us, y_gpu), c, 1.6)
        kw = {"ha": "left", "va": "top", "fontsize": 10, "color": c}
        labels.place(ax, link.call_start_us, (y_api - 0.26,), f"{link.call} → {link.anchor}", **kw)
    return y_api


def _link(ax, call: tuple[float, float], gpu: tuple[float, float], colour: str, lw: float):
    """A dashed arrow from a launch call up to the bottom of the GPU work it started (clipped
    to the axes, also when one end is out of view)."""
    a = ax.annotate(
        "",
        xy=(gpu[0], gpu[1] - BAR_HEIGHT / 2),
        xytext=call,
        arrowprops={"arrowstyle": "->", "color": colour, "lw": lw, "ls": "--", "shrinkA": 0,
                    "shrinkB": 0},
        annotation_clip=False,
        zorder=6,
    )  # fmt: skip
    a.arrow_patch.set_clip_box(ax.bbox)
    a.arrow_patch.set_clip_on(True)


def _wider_than(text, labels: _Labels, ax, width_us: float) -> bool:
    """Whether ``text`` is wider on screen than ``width_us`` of ``ax``'s x axis."""
    box = text.get_window_extent(labels.renderer)
    x0, x1 = ax.transData.transform([(0, 0), (width_us, 0)])[:, 0]
    return box.width > (x1 - x0)


MAX_LANES = 16
"""Streams drawn in a lane of their own, at most; past that, the busiest ``MAX_LANES - 1`` (GPU
time in view) are, and the others share the bottom lane (400 streams made a figure 9290 px
tall)."""


def _lanes(view: MedianStep) -> tuple[list[str], dict, float]:
    """The lanes' labels top to bottom, each stream's y (lane ``k`` from the top at
    ``n - 1 - k``), and the lowest y the panel needs (:data:`MAX_LANES`)."""
    ops = view.timeline.ops
    streams = sorted(ops["stream_id"].unique())
    own = streams
    if len(streams) > MAX_LANES:
        busy = ops.groupby("stream_id")["dur_us"].sum().sort_values(ascending=False, kind="stable")
        own = sorted(busy.index[: MAX_LANES - 1])
    names = [f"stream {s}" for s in own]
    if len(own) < len(streams):
        names.append(f"{len(streams) - len(own)} others")
    n = max(len(names), 1)
    lane = dict.fromkeys(streams, 0) | {s: n - 1 - i for i, s in enumerate(own)}
    h = view.timeline.host
    depth = 0 if h is None or h.phases.empty else min(int(h.phases["depth"].max()) + 1, MAX_DEPTH)
    bottom = HOST_TOP - HOST_ROW * max(depth, 1) - 0.9 if h is not None else LABEL_ROWS[-1] - 0.5
    return names, lane, bottom


def _draw_one(ax, view: MedianStep, label: str, xlim, colours, labels: _Labels) -> None:
    """One input: lanes top to bottom at y = n-1 ... 0, gap arrows below them, the host lane
    below those, anchor names above."""
    t = view.timeline
    names, lane, _ = _lanes(view)
    n = max(len(names), 1)
    labels.add(ax.title)
    _draw_anchors(ax, t, n - 0.5 + 0.12, xlim, colours, labels)
    _draw_ops(ax, t, lane)
    _draw_gaps(ax, t, xlim, labels)
    ticks = [(n - 1 - k, name) for k, name in enumerate(names)]
    if t.host is not None:
        y_api = _draw_host(ax, t, lane, xlim, colours, labels)
        tid = "" if t.host.tid is None else f" tid {t.host.tid}"
        ticks += [(HOST_TOP, "host NVTX"), (y_api, f"API{tid}")]
    ax.axvline(0, color="black", lw=1, ls="--", zorder=1)
    ax.set_yticks([y for y, _ in ticks], [s for _, s in ticks])
    ax.grid(axis="x", color="#dddddd", lw=0.8, zorder=0)


def _title(view: MedianStep, label: str) -> str:
    t = view.timeline
    return f"{label}: step {view.step} (median by {pretty_gap(view.gap)}, {t.gap_us:.1f} µs)"


def _legend_handles(views: Sequence[MedianStep | None], highlight: str | None) -> list:
    present = set()
    for v in views:
        if v is not None:
            present |= set(v.timeline.ops["category"])
    handles = [Patch(color=CATEGORY_COLOURS[c], label=c.value) for c in OpCategory if c in present]
    handles.append(
        Patch(color=ANCHOR_COLOURS[0], alpha=0.6, label="anchor GPU extent (one colour per anchor)")
    )
    handles.append(Line2D([], [], color="black", lw=1.5, label="gap between anchors"))
    handles.append(Patch(color="#333333", label="launch call"))
    handles.append(
        Line2D([], [], color=ANCHOR_LINES[0], ls="--", lw=1.4, label="launch → GPU work")
    )
    if highlight:
        handles.append(
            Line2D([], [], color=HIGHLIGHT, marker="v", ls="", ms=9, label=f"/{highlight}/")
        )
    return handles


def _x_range(shown: Sequence[MedianStep]) -> tuple[float, float]:
    """The common x range: the fixed window when every view has one, else the union."""
    spans = {(v.timeline.start_us, v.timeline.end_us) for v in shown if v.timeline.span_us}
    if len(spans) == 1 and all(v.timeline.span_us for v in shown):
        return next(iter(spans))
    lo = min((v.timeline.start_us for v in shown), default=0.0)
    hi = max((v.timeline.end_us for v in shown), default=1.0)
    return lo, hi + 0.01 * (hi - lo)


def timeline_axes(
    views: Sequence[MedianStep | None],
    labels: Sequence[str],
    *,
    highlight: str | None = None,
    stamp_: Stamp | None = None,
    no_cuda: Sequence[bool] = (),
):
    """The timeline figure of the inputs' median steps (None: no operations stored, or none
    recorded where ``no_cuda`` is true: an export without CUDA activity) and its axes, one per
    input; the caller saves and closes it (see :func:`timeline_figure`)."""
    shown = [v for v in views if v is not None]
    bottoms = [_lanes(v)[2] if v else -1.0 for v in views]
    tops = [len(_lanes(v)[0]) + 0.15 if v else 1.0 for v in views]
    heights = [0.6 * (top - bottom) + 0.6 for top, bottom in zip(tops, bottoms, strict=True)]
    bottom_in = 1.85 + FOOTER_IN
    total = sum(heights) + 0.9 * (len(views) - 1) + 1.15 + bottom_in
    fig = new_figure(figsize=(WIDTH_IN, total))
    axes = fig.subplots(
        len(views),
        1,
        sharex=True,
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    axes = axes[:, 0]
    fig.subplots_adjust(
        left=LEFT,
        right=RIGHT,
        top=1 - 0.95 / total,
        bottom=bottom_in / total,
        hspace=0.9 / (sum(heights) / len(views)),
    )
    xlim = _x_range(shown)
    axes[0].set_xlim(*xlim)
    colours = anchor_colours(anchor_order(shown))
    placer = _Labels(fig)
    for k, (ax, view, label) in enumerate(zip(axes, views, labels, strict=True)):
        top, bottom = tops[k], bottoms[k]
        if view is None:
            why = NO_GPU_WORK if k < len(no_cuda) and no_cuda[k] else NO_OPERATIONS
            ax.set_axis_off()
            ax.text(0.5, 0.5, why.format(label), ha="center", va="center",
                    transform=ax.transAxes)  # fmt: skip
            continue
        ax.set_ylim(bottom, top)
        ax.set_title(_title(view, label), loc="left", fontsize=14)
        _draw_one(ax, view, label, xlim, colours, placer)
        ax.tick_params(labelbottom=True)
    drawn = [ax for ax, v in zip(axes, views, strict=True) if v is not None]
    if drawn:
        drawn[-1].set_xlabel("time from the end of the opening anchor's GPU work (µs)")
    gap = next((v.gap for v in shown), "")
    opener = gap.partition(":")[2].partition("->")[0]
    fig.suptitle(_suptitle(shown, opener), fontsize=16)
    fig.legend(
        handles=_legend_handles(views, highlight),
        loc="lower center",
        bbox_to_anchor=(0.5, FOOTER_IN / total),
        ncol=5,
        frameon=False,
    )
    stamp(fig, stamp_, total)
    return fig, list(axes)


def _suptitle(shown: Sequence[MedianStep], opener: str) -> str:
    span = next((v.timeline.span_us for v in shown if v.timeline.span_us), None)
    lead = next((v.timeline.lead_us for v in shown), 0.0)
    where = f"aligned at the end of {opener or 'the anchor'}'s GPU work"
    if span:
        return f"Median step per input: {span:g} µs from {lead:g} µs before the end of " \
            f"{opener or 'the anchor'}'s GPU work"  # fmt: skip
    return f"Median step per input, {where}"


def timeline_figure(
    views: Sequence[MedianStep | None],
    labels: Sequence[str],
    path: Path,
    *,
    highlight: str | None = None,
    stamp_: Stamp | None = None,
    no_cuda: Sequence[bool] = (),
) -> Path:
    """Draw the inputs' median steps (None: no operations stored, or no CUDA activity where
    ``no_cuda`` says so: :func:`timeline_axes`) into ``path`` (1600 px wide)."""
    with rc_context(rc()):
        fig, _ = timeline_axes(views, labels, highlight=highlight, stamp_=stamp_, no_cuda=no_cuda)
        save_png(fig, path)
    return path
