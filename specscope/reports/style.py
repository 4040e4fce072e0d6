"""Colours, sizes and names shared by the report figures (1600 px wide at 100 dpi), and how a
figure is made and written (:func:`new_figure`, :func:`save_png`)."""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass

from specscope.analysis.composition import OpCategory
from specscope.reports.markdown import display_name

# a name with characters the figures' font lacks (an NVTX range named in CJK or with an emoji)
# is drawn with boxes for them; matplotlib warned once per glyph, figure and layout pass (39
# lines for a report of one such export against itself), which said nothing the boxes do not
warnings.filterwarnings("ignore", message=r"Glyph \d+ .* missing from font", category=UserWarning)

DPI = 100
WIDTH_IN = 16.0  # 1600 px

CATEGORY_COLOURS = {
    OpCategory.GRAPH_KERNEL: "#1f77b4",
    OpCategory.GRAPH_REPLAY: "#17becf",
    OpCategory.EAGER_KERNEL: "#ff7f0e",
    OpCategory.MEMCPY_HTOD: "#2ca02c",
    OpCategory.MEMCPY_DTOH: "#9467bd",
    OpCategory.MEMCPY_DTOD: "#8c564b",
    OpCategory.MEMCPY_OTHER: "#7f7f7f",
    OpCategory.MEMSET: "#bcbd22",
}
HIGHLIGHT = "#e6007e"
ANCHOR_COLOURS = ("#fde9a9", "#cfe8f7", "#d9f2d0", "#f5d5e6")
# The same anchors, dark enough for lines and host-lane phases (pairs with ANCHOR_COLOURS).
ANCHOR_LINES = ("#b8860b", "#1f6fa8", "#2e8b3a", "#b03a7a")

# One colour per input (before, after, ...).
INPUT_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")

COMPOSITION_COLOURS = {
    "graph_us": CATEGORY_COLOURS[OpCategory.GRAPH_KERNEL],
    "eager_kernel_us": CATEGORY_COLOURS[OpCategory.EAGER_KERNEL],
    "memcpy_us": CATEGORY_COLOURS[OpCategory.MEMCPY_HTOD],
    "memset_us": CATEGORY_COLOURS[OpCategory.MEMSET],
    "idle_us": "#d9d9d9",
}
COMPOSITION_NAMES = {
    "graph_us": "graph kernels busy",
    "eager_kernel_us": "eager kernels busy",
    "memcpy_us": "memcpys busy",
    "memset_us": "memsets busy",
    "idle_us": "idle",
}


def anchor_colours(names: Iterable[str]) -> dict[str, int]:
    """Index into :data:`ANCHOR_COLOURS`/:data:`ANCHOR_LINES` of each anchor name, in order of
    first appearance: the same anchor gets the same colour in every input's panel."""
    order = dict.fromkeys(names)
    return {n: i % len(ANCHOR_COLOURS) for i, n in enumerate(order)}


FOOTER_IN = 0.62  # inches under every figure for its stamp
NODE_WARNING = (
    "\u26a0 node-mode capture ({}): launch calls are inflated (gaps up to 22\u00d7); "
    "gaps and idle overstate what a graph-mode run shows"
)


@dataclass(frozen=True)
class Stamp:
    """What every figure is stamped with: ``inputs``, one ``label: capture mode, GPU, nsys``
    line per input, and ``node``, the labels of node-mode inputs (a figure with their gaps or
    idle carries :data:`NODE_WARNING`)."""

    inputs: tuple[str, ...] = ()
    node: tuple[str, ...] = ()


def stamp(fig, s: Stamp | None, height_in: float, *, gaps: bool = True) -> None:
    """Write ``s`` in the figure's bottom :data:`FOOTER_IN` inches; the node-mode warning (in
    red) when ``gaps`` (the figure shows gaps or idle) and some input is node-mode."""
    if s is None:
        return
    fig.text(0.01, 0.36 / height_in, "   |   ".join(s.inputs), fontsize=10, color="#444444")
    if gaps and s.node:
        fig.text(
            0.01,
            0.08 / height_in,
            NODE_WARNING.format(", ".join(s.node)),
            fontsize=11,
            color="#b00020",
            fontweight="bold",
        )


def pretty_gap(metric: str) -> str:
    """``gap_us:A->B`` -> the PR name when there is one, else ``A → B``."""
    name = display_name(metric)
    if name != metric:
        return name.removeprefix("Gap: ")
    return metric.partition(":")[2].replace("->", " → ")


def rc() -> dict:
    """Matplotlib settings that keep text readable when the PNG is shown 1600 px wide."""
    return {
        "font.size": 13,
        "axes.titlesize": 14,
        "axes.labelsize": 13,
        "xtick.labelsize": 12,
        "ytick.labelsize": 12,
        "legend.fontsize": 12,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }


def new_figure(**kw):
    """A matplotlib ``Figure`` (``kw``: its arguments, e.g. ``figsize``) drawn by Agg, outside
    pyplot: nothing to close, no figure manager, and ``matplotlib.pyplot`` is not imported."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(dpi=DPI, **kw)
    FigureCanvasAgg(fig)
    return fig


def save_png(fig, path) -> None:
    """Draw ``fig`` (of :func:`new_figure`) at :data:`DPI` and write it to ``path`` as a PNG
    (:func:`specscope.reports.png.write_png`: the same pixels as ``savefig``, written faster)."""
    from specscope.reports.png import write_png

    fig.set_dpi(DPI)
    write_png(fig, path)
