"""The metric catalog: one entry per metric family, the one home of a metric's properties.

A metric's *definition* lives beside the code that computes it (the opening docstring of
:mod:`specscope.analysis.metrics`); everything else about it lives here, in :data:`CATALOG`:

- ``pattern``: the name, or a family of names. ``{a,b}`` lists alternatives and the upper-case
  part after ``:`` is a parameter (``gap_us:A->B``, ``kernels:REGEX``): any text matches it;
- ``unit``: ``us``, ``%``, ``B`` or ``count`` (per step);
- ``direction``: which way it improves (:class:`Direction`; ``specscope compare`` judges by it);
- ``label``: the name people write in PRs (``None``: the metric name itself is shown; a
  preset's ``[report.names]`` may name single members of a family, e.g. one gap);
- ``group``: what it measures (``window``, ``gaps``, ``copies``, ``kernels``, ``api``, ``host``);
- ``needs_cuda``: NaN (unavailable) when the export has no CUDA activity;
- ``plotted``: drawn in ``distributions.png`` (and, unless a count, ``steps.png``);
- ``meaning``: one line for the README's metric table (``scripts/metric_table.py``).

Adding a metric is its function in ``metrics.py`` (with its definition) plus one entry here.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from functools import cache

# CUDA API calls counted per step (``api_calls:NAME``).
API_CALLS = ("cudaMemcpyAsync", "cudaLaunchKernel", "cudaGraphLaunch")

# ``api_calls:NAME`` counts every call of NAME's family: the runtime function, its driver-API
# twins (Triton, CUTLASS and JAX launch through the driver) and variants; per-thread-stream
# (``_ptsz``/``_ptds``) forms are folded into their function by the loader.
API_FAMILIES: dict[str, tuple[str, ...]] = {
    "cudaMemcpyAsync": (
        "cudaMemcpyAsync",
        "cudaMemcpy2DAsync",
        "cudaMemcpy3DAsync",
        "cudaMemcpyPeerAsync",
        "cudaMemcpyToSymbolAsync",
        "cudaMemcpyFromSymbolAsync",
        "cuMemcpyAsync",
        "cuMemcpyHtoDAsync",
        "cuMemcpyDtoHAsync",
        "cuMemcpyDtoDAsync",
        "cuMemcpy2DAsync",
        "cuMemcpy3DAsync",
        "cuMemcpyPeerAsync",
    ),
    "cudaLaunchKernel": (
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cuLaunchGrid",
        "cuLaunchGridAsync",
    ),
    "cudaGraphLaunch": ("cudaGraphLaunch", "cuGraphLaunch"),
}
assert tuple(API_FAMILIES) == API_CALLS
COPY_DIRECTIONS = ("htod", "dtoh", "dtod", "other")  # loader.EAGER_COPY_KINDS, in its order


class Direction(str, enum.Enum):
    """Which way a metric improves."""

    LOWER = "lower"  # lower is better
    HIGHER = "higher"  # higher is better
    NEUTRAL = "neutral"  # a change is reported, never judged


L, H, N = Direction.LOWER, Direction.HIGHER, Direction.NEUTRAL


@dataclass(frozen=True)
class MetricInfo:
    """The properties of one metric family (module doc)."""

    pattern: str
    unit: str
    direction: Direction
    label: str | None
    group: str
    needs_cuda: bool
    plotted: bool = False
    meaning: str = ""

    @property
    def parametrised(self) -> bool:
        """Whether the pattern names a family with a parameter (``gap_us:A->B``)."""
        return ":" in self.pattern

    def matches(self, metric: str) -> bool:
        return _regex(self.pattern).fullmatch(metric) is not None


def _m(pattern, unit, direction, label, group, needs_cuda=True, plotted=False, meaning=""):
    return MetricInfo(pattern, unit, direction, label, group, needs_cuda, plotted, meaning)


_DIRS = ",".join(COPY_DIRECTIONS)
_HOST_APIS = ",".join(a for a in API_CALLS if a != "cudaGraphLaunch")
# In the order of the README's table.
CATALOG: tuple[MetricInfo, ...] = (
    _m("window_us", "us", L, "GPU time per step", "window",
      meaning="first start of the step's GPU work → first start of the next step's"),
    _m("busy_us", "us", N, "GPU busy per step", "window",  # judge idle and window instead
      meaning="union of all GPU work of the device in the window (streams merged)"),
    _m("idle_us", "us", L, "GPU idle per step", "window", plotted=True,
      meaning="`window_us` − `busy_us`"),
    _m("occupancy_pct", "%", H, "GPU occupancy", "window",
      meaning="100 · `busy_us` / `window_us`"),
    _m("gap_us:A->B", "us", L, None, "gaps", plotted=True,
      meaning="first start of anchor B's GPU work − last end of the anchor before it "
      "(cross-step pair included; negative = overlap)"),
    _m("gap_busy_us:A->B", "us", N, None, "gaps",  # judge idle, lag and latency instead
      meaning="union of the device's GPU work (any stream) inside the gap A → B "
      "(definitions: `specscope/analysis/gaps.py`)"),
    _m("gap_idle_us:A->B", "us", L, None, "gaps",
      meaning="max(`gap_us`, 0) − `gap_busy_us`: the GPU did nothing in the gap"),
    _m("host_lag_us:A->B", "us", L, None, "gaps",
      meaning="start of B's launch call (the API call of B's first GPU operation) − last end "
      "of A's GPU work; > 0: the GPU waited for the host to issue B"),
    _m("launch_latency_us:B", "us", L, None, "gaps",
      meaning="first start of B's GPU work − start of its launch call (node-mode captures "
      "inflate it)"),
    _m("eager_memcpy", "count", L, "Eager memcpys per step", "copies", plotted=True,
      meaning="memcpys launched in the step outside CUDA graphs"),
    _m(f"eager_memcpy_{{{_DIRS}}}", "count", L, None, "copies",
      meaning="the same, by copy direction"),
    _m("eager_memcpy_bytes", "B", L, "Eager memcpy bytes per step", "copies",
      meaning="bytes of those memcpys"),
    _m("eager_memset", "count", L, "Eager memsets per step", "copies",
      meaning="memsets launched in the step outside CUDA graphs"),
    _m("eager_kernels", "count", N, "Eager kernels per step", "kernels",
      meaning="kernels launched in the step outside CUDA graphs"),
    _m("graph_kernels", "count", N, "Graph kernels per step", "kernels",
      meaning="kernels run by the step's graph replays (node mode only)"),
    _m("graph_launches", "count", N, "Graph launches per step", "kernels",
      meaning="distinct graph launches of the step"),
    _m("kernels:REGEX", "count", L, None, "kernels",  # the spec counts kernels it wants gone
      meaning="kernels of the step whose name matches REGEX (graph mode: the eager ones only)"),
    _m("kernel_us:REGEX", "us", N, None, "kernels",
      meaning="summed device time of the kernels matching REGEX (e.g. NCCL, waiting included)"),
    _m(f"api_calls:{{{_HOST_APIS}}}", "count", L, None, "api",  # host work on the step's path
      meaning="CUDA API calls of that family (runtime, driver `cu*`, `_ptsz`) started in the "
      "step on its thread"),
    _m("api_calls:{cudaGraphLaunch}", "count", N, None, "api",  # more graphs can be the goal
      meaning="the same, for graph launches (not judged, like `graph_launches`)"),
    _m("cpu_step_us", "us", L, "Host time per step", "host", needs_cuda=False,
      meaning="duration of the step range on the host"),
    _m("cpu_us:R", "us", L, None, "host", needs_cuda=False,
      meaning="total duration of the ranges named R nested in the step on its thread"),
    _m("cpu_gap_us:A->B", "us", L, None, "host", needs_cuda=False,
      meaning="start of range B − end of range A on the host"),
)  # fmt: skip


@cache
def _regex(pattern: str) -> re.Pattern:
    """``{a,b}`` -> alternatives; the part after ``:`` (upper case: a parameter) -> any text,
    unless it is a list of alternatives."""
    head, sep, param = pattern.partition(":")
    parts = re.split(r"\{([^}]*)\}", head + sep + (param if param.startswith("{") else ""))
    rx = "".join(
        "(?:" + "|".join(map(re.escape, p.split(","))) + ")" if i % 2 else re.escape(p)
        for i, p in enumerate(parts)
    )
    if sep and not param.startswith("{"):
        rx += ".+"
    return re.compile(rx, re.DOTALL)


def find(metric: str) -> MetricInfo | None:
    """The catalog entry of ``metric``, or None for a name no family matches."""
    for entry in CATALOG:
        if entry.matches(metric):
            return entry
    return None


def info(metric: str) -> MetricInfo:
    """The catalog entry of ``metric``; KeyError for a name no family matches."""
    entry = find(metric)
    if entry is None:
        raise KeyError(f"no catalog entry matches metric {metric!r}")
    return entry


def unit(metric: str) -> str:
    """The unit of ``metric``; for names outside the catalog ``us`` if its name (before any
    ``:``) ends in ``_us``, else ``count``."""
    entry = find(metric)
    if entry is not None:
        return entry.unit
    return "us" if metric.split(":")[0].endswith("_us") else "count"


def direction(metric: str) -> Direction:
    """Which way ``metric`` improves (:data:`CATALOG`); neutral for names outside it."""
    entry = find(metric)
    return entry.direction if entry is not None else Direction.NEUTRAL


def label(metric: str) -> str | None:
    """The catalog's PR name of ``metric`` (None: none; families have none)."""
    entry = find(metric)
    return entry.label if entry is not None else None


# the kernel counts that differ between the capture modes (graph mode sees no graph insides)
_MODE_COUNTS = ("graph_kernels", "kernels:REGEX", "kernel_us:REGEX")


def capture_mode_matters(metric: str) -> bool:
    """Whether ``metric``'s value depends on nsys's ``--cuda-graph-trace`` mode: the window and
    gap metrics (node mode traces every kernel of a replay, which inflates launch overhead and
    gaps, up to 22×) and the kernel counts of :data:`_MODE_COUNTS` (graph mode records no kernel
    inside a replay). A PR table tags these rows ``[graph]``/``[node]``."""
    entry = find(metric)
    return entry is not None and (
        entry.group in ("window", "gaps") or entry.pattern in _MODE_COUNTS
    )


def gpu_metrics() -> list[str]:
    """The fixed-name metrics (no parameter) that need CUDA data, in catalog order, with the
    alternatives of a ``{a,b}`` pattern expanded."""
    out = []
    for entry in CATALOG:
        if entry.needs_cuda and not entry.parametrised:
            out += expand(entry.pattern)
    return out


def expand(pattern: str) -> list[str]:
    """The names a pattern without a free parameter stands for (``{a,b}`` expanded)."""
    m = re.search(r"\{([^}]*)\}", pattern)
    if m is None:
        return [pattern]
    return [
        name
        for alt in m.group(1).split(",")
        for name in expand(pattern[: m.start()] + alt + pattern[m.end() :])
    ]
