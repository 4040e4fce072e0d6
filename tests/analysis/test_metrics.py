"""Each per-step metric pinned on tiny hand-built exports, with hand-computed expected values.

Times below are ns in the export and µs in the metrics (1000 ns = 1.0 µs). The EAGLE-shaped
export (``build_eagle``) is drawn in ``tests/conftest.py``; per step it gives, by hand:
window 10.0 µs (last step: 700 -> 6500 = 5.8), busy 0.1 + 1.1 + 1.0 + 1.0 = 3.2, gaps
draft->verify 3500 - 2600 = 0.9, verify->extend 5500 - 4500 = 1.0, extend->draft (cross-step)
11500 - 6500 = 5.0 (NaN in step 0), cpu gaps 1.0, 1.0 and 11000 - 6000 = 5.0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from eagle_exports import EAGLE_SPEC, build_eagle

from specscope.analysis.loader import CaptureMode
from specscope.analysis.metrics import unit
from specscope.analysis.spec import StepSpec, load_preset
from specscope.analysis.summary import kernel_timeline, median_step, summarize, totals
from specscope.analysis.synthetic import SyntheticExport
from specscope.errors import SpecError

nan = math.nan
PLAIN = StepSpec("step")
GPU_ONLY = ("window_us", "busy_us", "idle_us", "occupancy_pct", "eager_memcpy", "graph_launches")
EAGLE_PAIRS = (
    "draft_extend.replay->draft.replay",
    "draft.replay->verify.replay",
    "verify.replay->draft_extend.replay",
)


def col(a, metric: str) -> list[float]:
    return a.metrics.frame[metric].tolist()


def assert_values(a, expected: dict[str, list[float]]) -> None:
    for metric, values in expected.items():
        assert col(a, metric) == pytest.approx(values, nan_ok=True, abs=1e-9), metric


# ---------------------------------------------------------------- window / busy / idle


def gpu_steps(ops: list[tuple], n_steps: int = 2, period: int = 1000) -> SyntheticExport:
    """Steps ``[k*period, k*period + period - 100]``; ops ``(who, start, end[, stream])``.

    ``who``: a step number (launched on the step thread inside that step), ``"pid"`` (another
    process, same device), ``"tid"`` (another thread of the same process), ``"dev1"`` (another
    process on device 1).
    """
    x = SyntheticExport()
    for k in range(n_steps):
        x.range("step", k * period, k * period + period - 100)
    other = {"pid": (200, 200, 0), "tid": (100, 101, 0), "dev1": (200, 200, 1)}
    for who, start, end, *stream in ops:
        s = stream[0] if stream else 7
        if isinstance(who, int):
            corr = x.api("cudaLaunchKernel", who * period + 10, who * period + 20)
            x.kernel("k", start, end, corr, stream=s)
        else:
            pid, tid, dev = other[who]
            corr = x.api("cudaLaunchKernel", start - 50, start - 40, pid=pid, tid=tid)
            x.kernel("k", start, end, corr, stream=s, pid=pid, device=dev)
    return x


WINDOW_CASES = {
    # window 0 = 100 -> 1100; last window = 1100 -> its own last end 1300
    "one stream": (
        [(0, 100, 200), (0, 300, 400), (1, 1100, 1300)],
        {"window_us": [1.0, 0.2], "busy_us": [0.2, 0.2], "idle_us": [0.8, 0.0],
         "occupancy_pct": [20.0, 100.0]},
    ),
    "overlapping streams: union, not sum": (
        [(0, 100, 300, 7), (0, 200, 400, 8), (1, 1100, 1200)],
        {"window_us": [1.0, 0.1], "busy_us": [0.3, 0.1], "idle_us": [0.7, 0.0],
         "occupancy_pct": [30.0, 100.0]},
    ),
    "another process on the device is busy": (
        [(0, 100, 200), ("pid", 500, 700), (1, 1100, 1200)],
        {"window_us": [1.0, 0.1], "busy_us": [0.3, 0.1], "idle_us": [0.7, 0.0]},
    ),
    "another thread of the process is busy": (
        [(0, 100, 200), ("tid", 500, 700, 9), (1, 1100, 1200)],
        {"window_us": [1.0, 0.1], "busy_us": [0.3, 0.1], "idle_us": [0.7, 0.0]},
    ),
    "another device is not": (
        [(0, 100, 200), ("dev1", 500, 700), (1, 1100, 1200)],
        {"window_us": [1.0, 0.1], "busy_us": [0.1, 0.1], "idle_us": [0.9, 0.0]},
    ),
    # step 0's op runs into step 1's window: clipped at 1150 in window 0, counted in window 1
    "work spilling over the window edge": (
        [(0, 100, 1200), (1, 1150, 1300)],
        {"window_us": [1.05, 0.15], "busy_us": [1.05, 0.15], "idle_us": [0.0, 0.0],
         "occupancy_pct": [100.0, 100.0]},
    ),
    # last window ends at 1400 (its own last end) although another process runs to 2000
    "last window: last end of its own work": (
        [(0, 100, 200), (1, 1100, 1200), (1, 1150, 1400), ("pid", 1300, 2000)],
        {"window_us": [1.0, 0.3], "busy_us": [0.1, 0.3], "idle_us": [0.9, 0.0]},
    ),
    "three steps": (
        [(0, 100, 200), (1, 1100, 1150), (2, 2500, 2600)],
        {"window_us": [1.0, 1.4, 0.1], "busy_us": [0.1, 0.05, 0.1],
         "occupancy_pct": [10.0, 100 * 0.05 / 1.4, 100.0]},
    ),
    # step 2's work (stream 8, 2100) overtakes step 1's (stream 7, queued until 2200):
    # step 1's window is empty; windows 100 -> 2200, 2200 -> 2200, 2100 -> 2400
    "next step's work starts first: empty window": (
        [(0, 100, 200), (1, 2200, 2300, 7), (2, 2100, 2150, 8), (2, 2300, 2400, 8)],
        {"window_us": [2.1, 0.0, 0.3], "busy_us": [0.15, 0.0, 0.25], "idle_us": [1.95, 0.0, 0.05],
         "occupancy_pct": [100 * 0.15 / 2.1, nan, 100 * 0.25 / 0.3]},
    ),
    "zero-length window: occupancy undefined": (
        [(0, 100, 200), (1, 1100, 1100)],
        {"window_us": [1.0, 0.0], "busy_us": [0.1, 0.0], "occupancy_pct": [10.0, nan]},
    ),
}  # fmt: skip


@pytest.mark.parametrize("ops, expected", WINDOW_CASES.values(), ids=WINDOW_CASES.keys())
def test_window_busy_idle_occupancy(analyze_x, ops, expected):
    n_steps = 1 + max(w for w, *_ in ops if isinstance(w, int))
    a = analyze_x(gpu_steps(ops, n_steps), PLAIN)
    assert list(a.metrics.frame.index) == list(range(n_steps))
    assert_values(a, expected)


def test_eagle_node_mode_by_hand(analyze_x):
    a = analyze_x(build_eagle(3))
    assert a.trace.capture_mode is CaptureMode.NODE
    assert a.metrics.unavailable == {}
    assert_values(
        a,
        {
            "window_us": [10.0, 10.0, 5.8],
            "busy_us": [3.2, 3.2, 3.2],
            "idle_us": [6.8, 6.8, 2.6],
            "occupancy_pct": [32.0, 32.0, 100 * 3.2 / 5.8],
            "gap_us:draft_extend.replay->draft.replay": [nan, 5.0, 5.0],
            "gap_us:draft.replay->verify.replay": [0.9, 0.9, 0.9],
            "gap_us:verify.replay->draft_extend.replay": [1.0, 1.0, 1.0],
            "cpu_gap_us:draft_extend.replay->draft.replay": [nan, 5.0, 5.0],
            "cpu_gap_us:draft.replay->verify.replay": [1.0, 1.0, 1.0],
            "cpu_gap_us:verify.replay->draft_extend.replay": [1.0, 1.0, 1.0],
            "cpu_step_us": [9.0, 9.0, 9.0],
            "cpu_us:draft.replay": [1.0, 1.0, 1.0],
            "graph_kernels": [4, 4, 4],
            "graph_launches": [3, 3, 3],
            "eager_kernels": [0, 0, 0],
            "kernels:fused_metadata_copy": [1, 1, 1],
            "api_calls:cudaGraphLaunch": [3, 3, 3],
            "api_calls:cudaMemcpyAsync": [1, 1, 1],
            "api_calls:cudaLaunchKernel": [0, 0, 0],
        },
    )


# ---------------------------------------------------------------- gaps between anchors


def anchored(steps: list[list[tuple]], anchors=("a", "b"), period: int = 1000):
    """Step k at ``[k*period, k*period + 900]`` holding anchor ranges ``(name, cpu_start,
    cpu_end, [(gpu_start, gpu_end, stream), ...])`` (times relative to the step start)."""
    x = SyntheticExport()
    for k, ranges in enumerate(steps):
        t = k * period
        x.range("step", t, t + 900)
        for name, c0, c1, ops in ranges:
            x.range(name, t + c0, t + c1)
            corr = x.api("cudaGraphLaunch", t + c0 + 1, t + c0 + 2)
            for i, (g0, g1, stream) in enumerate(ops):
                x.kernel(f"{name}_k", t + g0, t + g1, corr, stream=stream, graph_node=i + 1)
    return x, StepSpec("step", anchors)


GAP_CASES = {
    # b's work starts 100 ns after a's ends; cross-step b(0) -> a(1): 1100 - 400 = 0.7 µs
    "positive, and the cross-step pair goes to step k": (
        [[("a", 0, 100, [(100, 200, 7)]), ("b", 200, 300, [(300, 400, 7)])]] * 2,
        {"gap_us:a->b": [0.1, 0.1], "gap_us:b->a": [nan, 0.7],
         "cpu_gap_us:a->b": [0.1, 0.1], "cpu_gap_us:b->a": [nan, 0.7]},
    ),
    # b (stream 8) starts at 300 while a (stream 7) runs to 500: overlap = negative gap
    "negative gap = overlap": (
        [[("a", 0, 100, [(100, 500, 7)]), ("b", 200, 300, [(300, 600, 8)])]] * 2,
        {"gap_us:a->b": [-0.2, -0.2], "gap_us:b->a": [nan, 0.5]},
    ),
    # last end of all of a's work (450 on stream 8) to first start of b's (520 on stream 8)
    "last end of A to first start of B": (
        [[("a", 0, 100, [(100, 200, 7), (150, 450, 8)]),
          ("b", 200, 300, [(600, 700, 7), (520, 540, 8)])]] * 2,
        {"gap_us:a->b": [0.07, 0.07], "gap_us:b->a": [nan, 0.4]},
    ),
    # a b a b in one step: the first occurrence of each pair is reported
    "a pair twice in a step: first occurrence": (
        [[("a", 0, 100, [(100, 200, 7)]), ("b", 200, 300, [(300, 400, 7)]),
          ("a", 400, 500, [(600, 650, 7)]), ("b", 500, 600, [(800, 850, 7)])]] * 2,
        {"gap_us:a->b": [0.1, 0.1], "gap_us:b->a": [0.2, 1100 / 1e3 - 0.85]},
    ),
    # step 1 has no b: a(1) follows b(0) and the pair a->a appears in step 2
    "missing anchor": (
        [[("a", 0, 100, [(100, 200, 7)]), ("b", 200, 300, [(300, 400, 7)])],
         [("a", 0, 100, [(100, 200, 7)])],
         [("a", 0, 100, [(100, 200, 7)]), ("b", 200, 300, [(300, 400, 7)])]],
        {"gap_us:a->b": [0.1, nan, 0.1], "gap_us:b->a": [nan, 0.7, nan],
         "gap_us:a->a": [nan, nan, 0.9]},
    ),
}  # fmt: skip


@pytest.mark.parametrize("steps, expected", GAP_CASES.values(), ids=GAP_CASES.keys())
def test_gaps(analyze_x, steps, expected):
    x, spec = anchored(steps)
    a = analyze_x(x, spec)
    assert_values(a, expected)


def test_gap_columns_exist_even_without_values(analyze_x):
    # One step with only anchor a: every expected pair is a column, all NaN.
    x, spec = anchored([[("a", 0, 100, [(100, 200, 7)])]])
    a = analyze_x(x, spec)
    for prefix in ("gap_us:", "cpu_gap_us:"):
        assert col(a, f"{prefix}a->b") == pytest.approx([nan], nan_ok=True)
        assert col(a, f"{prefix}b->a") == pytest.approx([nan], nan_ok=True)


# ---------------------------------------------------------------- host side


def test_cpu_step_and_nested_ranges(analyze_x):
    x = SyntheticExport()
    x.range("step", 0, 1000)
    x.range("prep", 100, 200)
    x.range("prep", 300, 450)
    x.range("inner", 500, 600)
    x.range("deep", 520, 540)  # nested two levels down: still counted
    x.range("late", 900, 1100)  # ends after the step: not nested in it
    x.range("prep", 100, 200, tid=101)  # another thread
    x.range("step", 1000, 2500)
    x.range("inner", 1200, 1230)
    x.range("prep", 2600, 2700)  # between steps
    x.range("step", 3000, 3100)
    a = analyze_x(x, PLAIN)
    assert_values(
        a,
        {
            "cpu_step_us": [1.0, 1.5, 0.1],
            "cpu_us:prep": [0.25, 0.0, 0.0],
            "cpu_us:inner": [0.1, 0.03, 0.0],
            "cpu_us:deep": [0.02, 0.0, 0.0],
        },
    )
    assert "cpu_us:late" not in a.metrics.frame
    assert "cpu_us:step" not in a.metrics.frame


# ---------------------------------------------------------------- counts


def test_eager_and_graph_counts(analyze_x):
    x = SyntheticExport()
    x.range("step", 0, 10_000)
    x.range("step", 10_000, 20_000)
    t = iter(range(100, 10_000, 100))  # launch times inside step 0

    def launch(api="cudaMemcpyAsync"):
        s = next(t)
        return x.api(api, s, s + 10)

    for kind, nbytes in [("htod", 10), ("htod", 20), ("dtoh", 4), ("dtod", 8), ("ptop", 1),
                         ("htoh", 2)]:  # fmt: skip
        x.memcpy(kind, nbytes, 5000, 5010, launch())
    x.memset(16, 5000, 5010, launch("cudaMemsetAsync"))
    x.memset(16, 5000, 5010, launch("cudaMemsetAsync"))
    for _ in range(3):
        x.kernel("eager", 5000, 5010, launch("cudaLaunchKernel"))
    g1 = launch("cudaGraphLaunch")  # two kernels and a memset in graph 1
    x.kernel("node", 6000, 6010, g1, graph_node=1)
    x.kernel("node", 6010, 6020, g1, graph_node=2)
    x.memset(4, 6020, 6030, g1, graph_node=3)
    g2 = launch("cudaGraphLaunch")  # a memcpy in graph 2
    x.memcpy("htod", 1000, 6100, 6110, g2, graph_node=1)
    x.kernel("eager", 15_000, 15_010, x.api("cudaLaunchKernel", 10_100, 10_110))
    a = analyze_x(x, PLAIN)
    assert_values(
        a,
        {
            "eager_memcpy": [6, 0],
            "eager_memcpy_htod": [2, 0],
            "eager_memcpy_dtoh": [1, 0],
            "eager_memcpy_dtod": [1, 0],
            "eager_memcpy_other": [2, 0],  # peer-to-peer and host-to-host
            "eager_memcpy_bytes": [45, 0],
            "eager_memset": [2, 0],
            "eager_kernels": [3, 1],
            "graph_kernels": [2, 0],
            "graph_launches": [2, 0],
        },
    )


def test_api_calls_strip_version_suffix_and_stay_in_step(analyze_x):
    x = SyntheticExport()
    x.range("step", 0, 1000)
    x.range("step", 1000, 2000)
    c = x.api("cudaLaunchKernel", 10, 20)  # cudaLaunchKernel_v7000
    x.kernel("k", 100, 200, c)
    x.api("cudaLaunchKernel", 30, 40, version="")
    x.api("cudaLaunchKernel", 50, 60, version="_v11000")
    x.api("cudaMemcpyAsync", 70, 80, version="_v3020")
    x.api("cudaMemcpyAsync", 90, 95, version="_v3020")
    x.api("cudaGraphLaunch", 100, 110, version="_v10000")
    x.api("cudaStreamSynchronize", 120, 130, version="_v3020")  # not a reported name
    x.api("cudaLaunchKernel", 140, 150, tid=101)  # another thread
    x.api("cudaGraphLaunch", 995, 1010, version="_v10000")  # starts in step 0
    x.api("cudaLaunchKernel", 2100, 2110)  # after the last step
    c = x.api("cudaLaunchKernel", 1010, 1020)
    x.kernel("k", 1100, 1200, c)
    a = analyze_x(x, PLAIN)
    assert_values(
        a,
        {
            "api_calls:cudaLaunchKernel": [3, 1],
            "api_calls:cudaMemcpyAsync": [2, 0],
            "api_calls:cudaGraphLaunch": [2, 0],
        },
    )
    assert [c for c in a.metrics.frame if c.startswith("api_calls:")] == [
        "api_calls:cudaMemcpyAsync",
        "api_calls:cudaLaunchKernel",
        "api_calls:cudaGraphLaunch",
    ]


def kernel_names_export() -> SyntheticExport:
    x = SyntheticExport()
    x.range("step", 0, 1000)
    names = [
        ("fused_metadata_copy_kernel", None, None),
        ("fused_metadata_copy_kernel", None, 1),
        ("gemm", "void cutlass::gemm<float>(Params)", None),
        ("other", None, 2),
    ]
    for i, (short, demangled, node) in enumerate(names):
        c = x.api("cudaLaunchKernel" if node is None else "cudaGraphLaunch", 10 * i, 10 * i + 5)
        x.kernel(short, 100 * i + 100, 100 * i + 150, c, demangled=demangled, graph_node=node)
    c = x.api("cudaMemcpyAsync", 50, 55)
    x.memcpy("htod", 8, 600, 650, c)  # named "[CUDA memcpy Host-to-Device]": not a kernel
    return x


def test_count_kernels_from_spec_and_argument(analyze_x):
    spec = StepSpec("step", count_kernels=("fused_metadata_copy",))
    a = analyze_x(
        kernel_names_export(),
        spec,
        count_kernels=("cutlass::gemm", "^other$", "fused_metadata_copy", "CUDA memcpy", "gemm"),
    )
    kernel_cols = [c for c in a.metrics.frame if c.startswith("kernels:")]
    assert kernel_cols == [  # spec first, duplicates once, in order
        "kernels:fused_metadata_copy",
        "kernels:cutlass::gemm",
        "kernels:^other$",
        "kernels:CUDA memcpy",
        "kernels:gemm",
    ]
    assert_values(
        a,
        {
            "kernels:fused_metadata_copy": [2],  # eager and graph kernels alike
            "kernels:cutlass::gemm": [1],  # matched in the demangled name
            "kernels:^other$": [1],
            "kernels:CUDA memcpy": [0],
            "kernels:gemm": [1],
        },
    )


def test_eagle_preset_counts_fused_metadata_copy():
    assert load_preset("eagle") == StepSpec(
        "step",
        ("draft.replay", "verify.replay", "draft_extend.replay"),
        "specscope",
        ("fused_metadata_copy",),
    )


# ---------------------------------------------------------------- NVTX styles and domains


@pytest.mark.parametrize("style", ["push", "startend"])
@pytest.mark.parametrize("text_style", ["text", "textId"])
def test_nvtx_styles_give_the_same_metrics(analyze_x, style, text_style):
    base = analyze_x(build_eagle(3)).metrics.frame
    a = analyze_x(build_eagle(3, style=style, text_style=text_style))
    pd.testing.assert_frame_equal(a.metrics.frame, base)
    assert col(a, "gap_us:draft.replay->verify.replay") == pytest.approx([0.9] * 3)
    assert set(a.trace.nvtx["event_type"]) == {59 if style == "push" else 60}


def test_mixed_text_styles_in_one_export(analyze_x):
    x = SyntheticExport()
    x.range("step", 0, 1000, text_style="text")
    x.range("step", 1000, 2000, text_style="textId")
    x.range("step", 2000, 3000, style="startend", text_style="text")
    a = analyze_x(x, PLAIN)
    assert col(a, "cpu_step_us") == [1.0, 1.0, 1.0]


def test_domain_filters_steps_and_anchors(analyze_x):
    x = build_eagle(3)  # domain "specscope"
    for k in range(3):  # same names in domain "other": a step between steps, a nested anchor
        t = k * 10_000
        x.range("step", t + 9100, t + 9900, domain="other")
        x.range("draft.replay", t + 2000, t + 2100, domain="other")
        x.range("draft.replay", t + 2200, t + 2300)  # no domain
    a = analyze_x(x)
    assert len(a.steps.kept) == 3
    pd.testing.assert_frame_equal(a.metrics.frame, analyze_x(build_eagle(3)).metrics.frame)
    # Any domain: the "other" steps between the EAGLE steps are steps too.
    any_domain = analyze_x(x, StepSpec("step"))
    assert len(any_domain.steps.all_steps) == 6


def test_no_domain_export_with_no_domain_spec(analyze_x):
    a = analyze_x(build_eagle(2, domain=None), StepSpec("step", EAGLE_SPEC.anchors))
    assert col(a, "gap_us:draft.replay->verify.replay") == pytest.approx([0.9, 0.9])
    assert set(a.trace.nvtx["domain"]) == {""}


# ---------------------------------------------------------------- capture modes


@pytest.mark.parametrize("mode", ["node", "graph"])
def test_node_and_graph_mode(analyze_x, mode):
    x = build_eagle(3, mode=mode)
    c = x.api("cudaLaunchKernel", 8000, 8010)  # one eager kernel in step 0
    x.kernel("eager_k", 8100, 8200, c)
    a = analyze_x(x, count_kernels=("draft_k",))
    assert a.trace.capture_mode is CaptureMode(mode)
    assert_values(
        a,
        {
            "window_us": [10.0, 10.0, 5.8],
            "busy_us": [3.3, 3.2, 3.2],  # graph mode: the replays are busy
            "gap_us:draft.replay->verify.replay": [0.9, 0.9, 0.9],
            "gap_us:draft_extend.replay->draft.replay": [nan, 5.0, 5.0],
            "graph_launches": [3, 3, 3],
            "eager_kernels": [1, 0, 0],
        },
    )
    node_only = ["graph_kernels", "kernels:fused_metadata_copy", "kernels:draft_k"]
    node_only += ["kernel_us:fused_metadata_copy", "kernel_us:draft_k"]
    if mode == "node":
        assert_values(a, {"graph_kernels": [4, 4, 4], "kernels:draft_k": [1, 1, 1]})
        assert_values(a, {"kernel_us:draft_k": [1.0, 1.0, 1.0]})  # [1500, 2500] ns each
        assert a.metrics.unavailable == {}
    else:
        for metric in node_only:  # unavailable, not zero
            assert a.metrics.frame[metric].isna().all(), metric
            assert "node" in a.metrics.unavailable[metric]
        assert set(a.metrics.unavailable) == set(node_only)
        assert (summarize(a.metrics).loc[node_only, "n"] == 0).all()


def test_no_graphs_mode(analyze_x):
    x = kernel_names_export()
    x.rows["CUPTI_ACTIVITY_KIND_KERNEL"] = [
        r[:-1] + (None,) for r in x.rows["CUPTI_ACTIVITY_KIND_KERNEL"]
    ]
    a = analyze_x(x, PLAIN, count_kernels=("fused",))
    assert a.trace.capture_mode is CaptureMode.NO_GRAPHS
    assert_values(a, {"graph_kernels": [0], "eager_kernels": [4], "kernels:fused": [2]})
    assert a.metrics.unavailable == {}


# ---------------------------------------------------------------- absent tables


def only_kernels() -> SyntheticExport:
    x = SyntheticExport()
    for k in range(2):
        x.range("step", 1000 * k, 1000 * k + 900)
        c = x.api("cudaLaunchKernel", 1000 * k, 1000 * k + 5)
        x.kernel("k", 1000 * k + 100, 1000 * k + 200, c)
    return x


def only_memcpy() -> SyntheticExport:
    x = SyntheticExport()
    for k in range(2):
        x.range("step", 1000 * k, 1000 * k + 900)
        c = x.api("cudaMemcpyAsync", 1000 * k, 1000 * k + 5)
        x.memcpy("dtoh", 4, 1000 * k + 100, 1000 * k + 200, c)
    return x


ABSENT_CASES = {
    "no MEMCPY, no MEMSET table": (only_kernels, (), {"eager_kernels": [1, 1]}),
    "empty MEMCPY and MEMSET tables": (
        only_kernels,
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"),
        {"eager_kernels": [1, 1]},
    ),
    "no KERNEL table": (only_memcpy, (), {"eager_kernels": [0, 0], "eager_memcpy_dtoh": [1, 1]}),
}


@pytest.mark.parametrize("build, empty, expected", ABSENT_CASES.values(), ids=ABSENT_CASES.keys())
def test_absent_tables_are_zero_rows(write_export, build, empty, expected):
    from specscope.analysis.run import analyze

    a = analyze(write_export(build(), empty=empty), PLAIN)
    assert a.metrics.unavailable == {}
    assert_values(
        a,
        {
            "window_us": [1.0, 0.1],
            "busy_us": [0.1, 0.1],
            "graph_kernels": [0, 0],
            "graph_launches": [0, 0],
            **expected,
        },
    )
    f = a.metrics.frame
    assert f[["eager_memcpy", "eager_memset", "eager_kernels"]].notna().all().all()


def test_no_runtime_table_leaves_gpu_work_unprojected(analyze_x):
    x = only_kernels()
    x.rows["CUPTI_ACTIVITY_KIND_RUNTIME"] = []
    a = analyze_x(x, PLAIN)
    assert col(a, "cpu_step_us") == [0.9, 0.9]
    assert a.metrics.frame["window_us"].isna().all()
    assert "window_us" in a.metrics.unavailable


# ---------------------------------------------------------------- which steps


def test_skip_drops_warmup_but_keeps_the_predecessor(analyze_x):
    a = analyze_x(build_eagle(4), skip=1)
    assert list(a.metrics.frame.index) == [1, 2, 3]
    assert a.steps.skipped == 1
    assert any("skipped 1 warm-up" in n for n in a.metrics.notes)
    # step 1's cross-step gap still comes from step 0's draft_extend work
    assert_values(a, {"gap_us:draft_extend.replay->draft.replay": [5.0, 5.0, 5.0]})
    assert summarize(a.metrics).loc["window_us", "n"] == 3


def test_trailing_step_without_gpu_work_is_dropped(analyze_x):
    x = build_eagle(3)
    x.range("step", 30_000, 39_000, domain="specscope")  # cut by the end of the capture
    x.range("step", 40_000, 49_000, domain="specscope")
    a = analyze_x(x)
    assert list(a.metrics.frame.index) == [0, 1, 2]
    assert a.steps.dropped_trailing == 2
    assert any("dropped 2 trailing step(s) with no GPU work" in n for n in a.metrics.notes)
    assert_values(a, {"window_us": [10.0, 10.0, 5.8]})


def two_threads(second: dict, n_first: int = 3, n_second: int = 2) -> SyntheticExport:
    x = build_eagle(n_first)
    return build_eagle(n_second, x=x, t0=100_000, **second)


@pytest.mark.parametrize(
    "second, picked",
    [({"pid": 200, "tid": 200}, "pid 100 tid 100"), ({"tid": 101}, "pid 100 tid 100")],
    ids=["processes", "threads"],
)
def test_several_threads_with_steps_most_steps_wins(analyze_x, second, picked):
    a = analyze_x(two_threads(second))
    assert (a.steps.pid, a.steps.tid) == (100, 100)
    assert len(a.steps.kept) == 3
    note = next(n for n in a.metrics.notes if "threads" in n)
    assert f"using {picked} (most steps)" in note
    assert_values(a, {"window_us": [10.0, 10.0, 5.8], "busy_us": [3.2, 3.2, 3.2]})


def test_pid_picks_the_process(analyze_x):
    a = analyze_x(two_threads({"pid": 200, "tid": 200}), pid=200)
    assert (a.steps.pid, a.steps.tid) == (200, 200)
    assert list(a.metrics.frame.index) == [0, 1]
    assert_values(a, {"window_us": [10.0, 5.8], "gap_us:draft.replay->verify.replay": [0.9, 0.9]})
    with pytest.raises(SpecError, match="process 999"):
        analyze_x(two_threads({"pid": 200, "tid": 200}), pid=999)


def with_device1_kernels(n_steps: int = 3) -> SyntheticExport:
    x = build_eagle(n_steps)
    for k in range(n_steps):
        c = x.api("cudaLaunchKernel", k * 10_000 + 7000, k * 10_000 + 7010)
        x.kernel("dev1_k", k * 10_000 + 8000, k * 10_000 + 8200, c, device=1)
    return x


def test_several_devices(analyze_x):
    a = analyze_x(with_device1_kernels())
    assert a.steps.device_id == 0
    assert any("using device 0 (most operations)" in n for n in a.metrics.notes)
    assert_values(a, {"busy_us": [3.2, 3.2, 3.2], "eager_kernels": [0, 0, 0]})

    b = analyze_x(with_device1_kernels(), device=1)
    assert b.steps.device_id == 1
    assert_values(
        b,
        {
            "window_us": [10.0, 10.0, 0.2],
            "busy_us": [0.2, 0.2, 0.2],
            "eager_kernels": [1, 1, 1],
            "graph_kernels": [0, 0, 0],
            "eager_memcpy": [0, 0, 0],
            "gap_us:draft.replay->verify.replay": [nan, nan, nan],
        },
    )
    with pytest.raises(SpecError, match="device 7"):
        analyze_x(with_device1_kernels(), device=7)


def test_unclosed_ranges_are_ignored_and_counted(analyze_x):
    x = build_eagle(3)
    x.range("step", 50_000, None, domain="specscope")
    x.range("draft.replay", 31_000, None, domain="specscope")
    a = analyze_x(x)
    assert a.trace.unclosed_ranges == 2
    assert "2 NVTX range(s) never closed were ignored" in a.metrics.notes
    pd.testing.assert_frame_equal(a.metrics.frame, analyze_x(build_eagle(3)).metrics.frame)


def test_no_cuda_export_reports_host_metrics_only(analyze_x):
    x = SyntheticExport()
    for k in range(3):
        t = k * 1000
        x.range("step", t, t + 900, domain="specscope")
        x.range("draft.replay", t + 100, t + 200, domain="specscope")
        x.range("verify.replay", t + 300, t + 600, domain="specscope")
    a = analyze_x(x)
    assert a.trace.capture_mode is CaptureMode.NO_CUDA
    assert a.steps.device_id is None
    assert a.metrics.window_start_ns is None
    assert_values(
        a,
        {
            "cpu_step_us": [0.9, 0.9, 0.9],
            "cpu_us:verify.replay": [0.3, 0.3, 0.3],
            "cpu_gap_us:draft.replay->verify.replay": [0.1, 0.1, 0.1],
            "cpu_gap_us:draft_extend.replay->draft.replay": [nan, nan, nan],
        },
    )
    gpu = [*GPU_ONLY, "graph_kernels", "kernels:fused_metadata_copy", "api_calls:cudaGraphLaunch",
           *(f"gap_us:{p}" for p in EAGLE_PAIRS)]  # fmt: skip
    for metric in gpu:
        assert a.metrics.frame[metric].isna().all(), metric
        assert "no CUDA activity" in a.metrics.unavailable[metric]
    assert not any(m.startswith("cpu_") for m in a.metrics.unavailable)
    assert totals(a.trace)["kernels"].empty


# ---------------------------------------------------------------- summary


def varying_steps(durations_us: list[float]) -> SyntheticExport:
    """One step per duration; each launches one 100 ns kernel at its start (+100 ns)."""
    x = SyntheticExport()
    t = 0
    for d in durations_us:
        x.range("step", t, t + int(d * 1000))
        x.kernel("k", t + 100, t + 200, x.api("cudaLaunchKernel", t + 10, t + 20))
        t += int(d * 1000)
    return x


def test_summary_statistics_by_hand(analyze_x):
    a = analyze_x(varying_steps([3, 10, 1, 4, 2]), PLAIN)
    s = a.summary
    # sorted 1 2 3 4 10: p10 at rank 0.4 -> 1.4, p90 at rank 3.6 -> 4 + 0.6 * 6 = 7.6
    assert s.loc["cpu_step_us", ["n", "mean", "p10", "p50", "p90", "min", "max"]].tolist() == (
        pytest.approx([5, 4.0, 1.4, 3.0, 7.6, 1.0, 10.0])
    )
    assert s.loc["cpu_step_us", "unit"] == "us"
    assert list(s.columns) == ["n", "mean", "p10", "p50", "p90", "min", "max", "unit"]


@pytest.mark.parametrize("mode", ["node", "graph"])
def test_summary_matches_numpy_for_every_metric(analyze_x, mode):
    x = build_eagle(6, mode=mode)
    for k in range(6):  # vary the steps: k extra eager memcpys in step k
        for i in range(k):
            c = x.api("cudaMemcpyAsync", k * 10_000 + 7000 + 10 * i, k * 10_000 + 7005 + 10 * i)
            x.memcpy("dtod", 100 * i, k * 10_000 + 7000 + 100 * i, k * 10_000 + 7050 + 100 * i, c)
    a = analyze_x(x, skip=1)
    s = summarize(a.metrics)
    assert list(s.index) == list(a.metrics.frame.columns)
    for metric in s.index:
        v = a.metrics.frame[metric].dropna().to_numpy(dtype=float)
        row = s.loc[metric]
        assert row["n"] == len(v), metric
        if len(v) == 0:
            assert row[["mean", "p10", "p50", "p90", "min", "max"]].isna().all()
            continue
        want = [v.mean(), *np.percentile(v, [10, 50, 90]), v.min(), v.max()]
        assert row[["mean", "p10", "p50", "p90", "min", "max"]].tolist() == pytest.approx(want)
    assert s.loc["eager_memcpy", ["min", "max"]].tolist() == [2, 6]  # steps 1..5: 1+k memcpys


UNITS = {
    "window_us": "us",
    "idle_us": "us",
    "occupancy_pct": "%",
    "eager_memcpy_bytes": "B",
    "eager_memcpy": "count",
    "graph_launches": "count",
    "gap_us:a->b": "us",
    "cpu_gap_us:a->b": "us",
    "cpu_us:prep": "us",
    "cpu_step_us": "us",
    "kernels:fused_us": "count",
    "api_calls:cudaLaunchKernel": "count",
}


@pytest.mark.parametrize("metric, expected", UNITS.items())
def test_units(metric, expected):
    assert unit(metric) == expected


def test_median_step(analyze_x):
    x = varying_steps([3, 10, 1, 4, 2])
    a = analyze_x(x, PLAIN)
    assert median_step(a.metrics, "cpu_step_us") == 0  # values 1 2 [3] 4 10
    b = analyze_x(varying_steps([3, 10, 1, 4, 2]), PLAIN, skip=1)
    assert median_step(b.metrics, "cpu_step_us") == 4  # steps 1..4: 1 [2] 4 10, lower middle
    c = analyze_x(build_eagle(3, mode="graph"))
    with pytest.raises(ValueError, match="graph_kernels"):
        median_step(c.metrics, "graph_kernels")


def test_kernel_timeline_offsets(analyze_x):
    x = build_eagle(3)
    c = x.api("cudaLaunchKernel", 0, 5, pid=200, tid=200)
    x.kernel("foreign", 10_600, 10_800, c, pid=200, stream=9)  # overlaps step 1's window start
    a = analyze_x(x)
    tl = kernel_timeline(a.steps, a.metrics, 1)  # window [10_700, 20_700)
    assert list(tl.columns) == [
        "stream_id", "offset_us", "dur_us", "name", "kind", "in_graph", "copy_kind", "step",
        "anchor",
    ]  # fmt: skip
    assert tl["name"].tolist() == [
        "foreign",
        "[CUDA memcpy Host-to-Device]",
        "draft_k",
        "fused_metadata_copy_kernel",
        "verify_k",
        "extend_k",
    ]
    assert tl["offset_us"].tolist() == pytest.approx([-0.1, 0.0, 0.8, 1.8, 2.8, 4.8])
    assert tl["dur_us"].tolist() == pytest.approx([0.2, 0.1, 1.0, 0.1, 1.0, 1.0])
    assert tl["step"].tolist() == [-1, 1, 1, 1, 1, 1]
    assert tl["anchor"].tolist() == [
        "",
        "",
        "draft.replay",
        "draft.replay",
        "verify.replay",
        "draft_extend.replay",
    ]
    assert tl["kind"].tolist() == ["kernel", "memcpy", "kernel", "kernel", "kernel", "kernel"]
    assert tl["in_graph"].tolist() == [False, False, True, True, True, True]
    assert tl["copy_kind"].tolist()[1] == "htod"
    assert tl["stream_id"].tolist()[0] == 9
    # the last step's window: 20_700 -> 26_500
    last = kernel_timeline(a.steps, a.metrics, 2)
    assert last["offset_us"].tolist() == pytest.approx([0.0, 0.8, 1.8, 2.8, 4.8])


@pytest.mark.parametrize("mode", ["node", "graph"])
def test_totals_over_the_whole_capture(analyze_x, mode):
    x = build_eagle(3, mode=mode)
    c = x.api("cudaMemcpyAsync", 0, 5, pid=200, tid=200)  # another process, outside any step
    x.memcpy("dtoh", 4, 90_000, 90_300, c, pid=200, device=1)
    c = x.api("cudaMemsetAsync", 10, 15)
    x.memset(32, 95_000, 95_050, c)
    c = x.api("cudaLaunchKernel", 20, 25)
    x.kernel("draft_k", 96_000, 96_500, c, demangled="void draft_k<2>()")
    a = analyze_x(x)
    t = totals(a.trace)
    kernels = t["kernels"]
    if mode == "node":
        assert kernels.to_dict("index") == {
            "draft_k": {"instances": 3, "total_ns": 3000},
            "verify_k": {"instances": 3, "total_ns": 3000},
            "extend_k": {"instances": 3, "total_ns": 3000},
            "void draft_k<2>()": {"instances": 1, "total_ns": 500},
            "fused_metadata_copy_kernel": {"instances": 3, "total_ns": 300},
        }
        assert list(kernels["total_ns"]) == sorted(kernels["total_ns"], reverse=True)
    else:  # graph replays are neither kernels nor memory operations
        assert kernels.to_dict("index") == {"void draft_k<2>()": {"instances": 1, "total_ns": 500}}
    assert t["memory"].to_dict("index") == {
        "[CUDA memcpy Device-to-Host]": {"count": 1, "total_ns": 300, "bytes": 4},
        "[CUDA memcpy Host-to-Device]": {"count": 3, "total_ns": 300, "bytes": 192},
        "[CUDA memset]": {"count": 1, "total_ns": 50, "bytes": 32},
    }


# ---------------------------------------------------------------- projection


def test_projection_by_launch_time_and_thread(analyze_x):
    x = SyntheticExport()
    x.range("step", 0, 1000)
    x.range("step", 1000, 2000)
    x.range("a", 100, 200)
    x.range("b", 300, 400)
    c = x.api("cudaLaunchKernel", 90, 95)  # launched before range a opened: not a's work
    x.kernel("early", 500, 550, c)
    c = x.api("cudaLaunchKernel", 150, 160)  # a's work
    x.kernel("in_a", 560, 600, c)
    c = x.api("cudaLaunchKernel", 999, 1005)  # step 0's work, though it runs in step 1's time
    x.kernel("late", 1100, 1150, c)
    c = x.api("cudaLaunchKernel", 1000, 1005)  # a range holds [start, end): step 1
    x.kernel("at_edge", 1200, 1300, c)
    a = analyze_x(x, StepSpec("step", ("a", "b")))
    assert_values(
        a,
        {
            "eager_kernels": [3, 1],
            "window_us": [0.7, 0.1],  # 500 -> 1200, 1200 -> 1300
            "busy_us": [0.05 + 0.04 + 0.05, 0.1],
            "gap_us:a->b": [nan, nan],  # b launched nothing
        },
    )
    tl = kernel_timeline(a.steps, a.metrics, 0)
    assert dict(zip(tl["name"], tl["anchor"], strict=True)) == {
        "early": "",
        "in_a": "a",
        "late": "",
    }
    assert dict(zip(tl["name"], tl["step"], strict=True)) == {"early": 0, "in_a": 0, "late": 0}


def test_correlation_ids_match_within_a_process(analyze_x):
    from specscope.analysis.synthetic import global_tid

    x = SyntheticExport()
    x.range("step", 0, 1000)
    x.range("step", 1000, 2000)
    c = x.api("cudaLaunchKernel", 10, 20)
    x.kernel("mine", 100, 200, c)
    # Process 200 reuses correlation id c for its own call and kernel; a third kernel of
    # process 300 has id c and no API call at all.
    name = x.string("cudaLaunchKernel_v7000")
    x.rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append((50, 60, 1, global_tid(200, 200), c, name, 0))
    x.kernel("theirs", 300, 400, c, pid=200)
    x.kernel("orphan", 500, 550, c, pid=300)
    x.kernel("next", 1100, 1200, x.api("cudaLaunchKernel", 1010, 1020))
    a = analyze_x(x, PLAIN)
    assert_values(a, {"eager_kernels": [1, 1], "busy_us": [0.25, 0.1], "window_us": [1.0, 0.1]})
    ops = a.trace.ops.set_index("name", drop=False)
    assert ops.loc["theirs", ["pid", "api_tid", "api_start_ns"]].tolist() == [200, 200, 50]
    assert ops.loc["mine", ["pid", "api_tid", "api_start_ns"]].tolist() == [100, 100, 10]
    assert ops.loc["orphan", "api_tid"] == -1 and math.isnan(ops.loc["orphan", "api_start_ns"])


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
def test_op_columns_keep_extreme_values(write_export, monkeypatch, reader):
    """The loader reads ids packed in pairs (loader._OP_COLUMNS): values at the edges of their
    ranges come back exactly, for every op kind and with both readers."""
    from specscope.analysis.loader import load

    if reader == "adbc":
        pytest.importorskip("adbc_driver_sqlite")
    monkeypatch.setenv("SPECSCOPE_SQLITE_READER", reader)
    big_pid, big_stream, big_corr = 0xFFFFFF, 2**31 - 1, 2**37 + 5
    x = SyntheticExport()
    x.range("step", 0, 1000)
    for i in range(300):  # push the kernel names' StringIds ids up
        x.string(f"filler {i}")
    c = x.api("cudaLaunchKernel", 10, 20, pid=big_pid)
    x.kernel("k", 100, 200, c, device=7, stream=big_stream, pid=big_pid, graph_node=3,
             demangled="void k<int>()")  # fmt: skip
    x.memcpy("ptop", 2**40, 300, 400, big_corr, stream=0)
    x.memset(2**33, 500, 600, 9, device=2**31 - 1, stream=1)
    x.graph_replay(700, 800, 10, graph_id=123456, stream=65536)
    ops = load(write_export(x)).ops.set_index("name")
    cols = ["device_id", "stream_id", "pid", "correlation_id", "kind", "in_graph", "copy_kind",
            "bytes", "full_name"]  # fmt: skip
    got = {name: list(row) for name, row in ops[cols].astype(object).fillna("-").iterrows()}
    assert got == {
        "k": [7, big_stream, big_pid, c, "kernel", True, "-", 0, "void k<int>()"],
        "[CUDA memcpy Peer-to-Peer]": [
            0,
            0,
            100,
            big_corr,
            "memcpy",
            False,
            "other",
            2**40,
            "[CUDA memcpy Peer-to-Peer]",
        ],  # fmt: skip
        "[CUDA memset]": [2**31 - 1, 1, 100, 9, "memset", False, "-", 2**33, "[CUDA memset]"],
        "[CUDA graph 123456]": [0, 65536, 100, 10, "graph", True, "-", 0, "[CUDA graph 123456]"],
    }
    assert ops.loc["k", "api_start_ns"] == 10
    assert ops["device_id"].dtype == np.int32 and ops["stream_id"].dtype == np.int32


@pytest.mark.parametrize(
    "a_pids, dup",
    [((100,), False), ((100,), True), ((100, 200), False)],
    ids=["one process", "an id twice", "two processes"],
)
def test_launch_matching_against_a_dict(a_pids, dup):
    """Each op's API call: the first call with its (pid, correlation id), none for id 0; the
    id-indexed table (one process, unique ids) and the sorted search agree with a dict."""
    from specscope.analysis.loader import _call_rows

    rng = np.random.default_rng(7)
    a_corr = rng.permutation(np.arange(1, 400))
    if dup:
        a_corr[10] = a_corr[20]
    a_pid = rng.choice(a_pids, size=len(a_corr))
    corr = rng.integers(0, 450, size=1000)  # some ids without a call, some 0
    pid = rng.choice([100, 200, 300], size=len(corr)).astype(np.int32)
    first: dict[tuple[int, int], int] = {}
    for i, key in enumerate(zip(a_pid.tolist(), a_corr.tolist(), strict=True)):
        first.setdefault(key, i)
    expected = [first.get((p, c), -1) if c > 0 else -1 for p, c in zip(pid, corr, strict=True)]
    assert _call_rows(a_pid, a_corr)(pid, corr).tolist() == expected


@pytest.mark.parametrize("case", ["one step per id", "an id in two steps", "sparse ids"])
def test_graph_launches_count_distinct_ids_per_step(case):
    """``graph_launches`` counts distinct (step, correlation id) pairs, whichever way
    ``_distinct_per_step`` takes (table by id, hash of pairs)."""
    from specscope.analysis.metrics import _distinct_per_step

    rng = np.random.default_rng(3)
    corr = rng.integers(1, 300, size=2000)
    pos = corr // 30  # every id in one step
    if case == "an id in two steps":
        pos[::7] = rng.integers(0, 10, size=len(pos[::7]))
    if case == "sparse ids":
        corr = corr * 10**9
    expected = np.zeros(10, dtype=np.int64)
    for p, _ in set(zip(pos.tolist(), corr.tolist(), strict=True)):
        expected[p] += 1
    assert _distinct_per_step(pos, corr, 10).tolist() == expected.tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_union_coverage_against_a_timeline(seed):
    """``covered(t)`` = the time before t covered by at least one interval, counted on a
    unit-by-unit timeline (unsorted, nested, touching and overlapping intervals)."""
    from specscope.analysis.metrics import union_coverage

    rng = np.random.default_rng(seed)
    starts = rng.integers(0, 200, size=40)
    ends = starts + rng.integers(0, 30, size=40)
    starts[:3], ends[:3] = [50, 55, 80], [90, 60, 85]  # nested; touching at 90 below
    starts[3], ends[3] = 90, 95
    timeline = np.zeros(260, dtype=bool)
    for s, e in zip(starts, ends, strict=True):
        timeline[s:e] = True
    t = np.arange(-5, 255)
    expected = [int(timeline[: max(x, 0)].sum()) for x in t]
    covered = union_coverage(starts, ends)
    assert covered(t).tolist() == expected
    assert covered(t.astype(float) + 0.5).tolist() == pytest.approx(
        [e + (0.5 if 0 <= x < 260 and timeline[x] else 0) for e, x in zip(expected, t, strict=True)]
    )


def test_chunked_row_work_gives_the_same_metrics(analyze_x, monkeypatch):
    """Launch matching and projection run over the ops in chunks of ``CHUNK_ROWS``: chunk
    boundaries anywhere (here every 3 ops) change nothing."""
    from specscope.analysis import loader, steps

    x = build_eagle(n_steps=5)
    whole = analyze_x(x)
    monkeypatch.setattr(loader, "CHUNK_ROWS", 3)
    monkeypatch.setattr(steps, "CHUNK_ROWS", 3)
    chunked = analyze_x(x)
    pd.testing.assert_frame_equal(chunked.trace.ops, whole.trace.ops)
    pd.testing.assert_frame_equal(chunked.steps.ops, whole.steps.ops)
    pd.testing.assert_frame_equal(chunked.metrics.frame, whole.metrics.frame)
    assert len(whole.trace.ops) > 3 * 5
