"""Each per-step metric pinned on tiny hand-built exports, with hand-computed expected values.

Times below are ns in the export and µs in the metrics (1000 ns = 1.0 µs). The EAGLE-shaped
export (``build_eagle``) is drawn in ``tests/eagle_exports.py``; per step it gives, by hand:
window 10.0 µs (last step: 700 -> 6500 = 5.8), busy 0.1 + 1.1 + 1.0 + 1.0 = 3.2, gaps
draft->verify 3500 - 2600 = 0.9, verify->extend 5500 - 4500 = 1.0, extend->draft (cross-step)
11500 - 6500 = 5.0 (NaN in step 0), cpu gaps 1.0, 1.0 and 11000 - 6000 = 5.0.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from eagle_exports import build_eagle
from metric_values import PLAIN, assert_values, col

from specscope.analysis.loader import CaptureMode
from specscope.analysis.metrics import unit
from specscope.analysis.spec import StepSpec, load_preset
from specscope.analysis.summary import summarize, totals
from specscope.analysis.synthetic import SyntheticExport
from specscope.errors import SpecError

nan = math.nan
GPU_ONLY = ("window_us", "busy_us", "idle_us", "occupancy_pct", "eager_memcpy", "graph_launches")
EAGLE_PAIRS = (
    "draft_extend.replay->draft.replay",
    "draft.replay->verify.replay",
    "verify.replay->draft_extend.replay",
)


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
    # One step with only anchor a: every expected pair is a column, all NaN (the library's
    # default; the CLI's require_anchors makes it an error, test_missing_anchor_is_an_error)
    x, spec = anchored([[("a", 0, 100, [(100, 200, 7)])]])
    a = analyze_x(x, spec)
    assert any("anchor range(s) 'b' not found" in n for n in a.metrics.notes)
    for prefix in ("gap_us:", "cpu_gap_us:"):
        assert col(a, f"{prefix}a->b") == pytest.approx([nan], nan_ok=True)
        assert col(a, f"{prefix}b->a") == pytest.approx([nan], nan_ok=True)


def test_missing_anchor_is_an_error(analyze_x):
    """A misspelled anchor: one error naming it (and the closest names), not a note."""
    x, spec = anchored([[("a", 0, 100, [(100, 200, 7)])]])
    with pytest.raises(SpecError, match=r"anchor range\(s\) 'b' not found .*closest: .*'a'"):
        analyze_x(x, spec, require_anchors=True)


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


@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_calls_in_each_step_are_the_per_call_lookup(order):
    # the API call counts of disjoint steps by two searches per step among the sorted call
    # starts: the counts of each call's step (interval_index), with calls before, between,
    # after and at the very bounds of the steps (adjacent steps share a bound)
    from specscope.analysis.metrics import _in_each
    from specscope.analysis.steps import interval_index

    rng = np.random.default_rng(5)
    bounds = np.sort(rng.choice(np.arange(100, 10_000), 40, replace=False))
    s_start, s_end = bounds[0::2].copy(), bounds[1::2].copy()
    s_end[3] = s_start[4]  # (two adjacent steps)
    t = np.concatenate([rng.integers(0, 10_100, 3000), bounds, bounds - 1])
    t = np.sort(t) if order == "sorted" else rng.permutation(t)
    step = interval_index(s_start, s_end, t)
    want = np.bincount(step[step >= 0], minlength=len(s_start))
    np.testing.assert_array_equal(_in_each(s_start, s_end, t), want)


def test_api_calls_of_overlapping_steps_count_once(write_export):
    # steps that overlap (none do today: nested step ranges are dropped) take the per-call
    # lookup: a call in both counts in the step that began last, as before
    from types import SimpleNamespace

    import pandas as pd

    from specscope.analysis import loader
    from specscope.analysis.metrics import _api_metrics

    x = SyntheticExport()
    for t in (100, 600, 1500):
        x.api("cudaLaunchKernel", t, t + 5)
    all_steps = pd.DataFrame({"step": [0, 1], "start_ns": [0, 500], "end_ns": [1000, 2000]})
    steps = SimpleNamespace(all_steps=all_steps, pid=x.pid, tid=x.tid, kept=np.array([0, 1]))
    counts = _api_metrics(loader.load(write_export(x)), steps)
    assert counts["api_calls:cudaLaunchKernel"].tolist() == [1, 2]


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
    if mode == "node":
        assert_values(a, {"graph_kernels": [4, 4, 4], "kernels:draft_k": [1, 1, 1]})
        assert_values(a, {"kernel_us:draft_k": [1.0, 1.0, 1.0]})  # [1500, 2500] ns each
        assert a.metrics.unavailable == {}
    else:
        # graph mode: draft_k runs inside the graph, unseen: the patterns count eager launches
        # (none here), and only the graph-internal count itself is unavailable, not zero
        assert_values(a, {"kernels:draft_k": [0, 0, 0], "kernel_us:draft_k": [0.0, 0.0, 0.0]})
        assert a.metrics.frame["graph_kernels"].isna().all()
        assert set(a.metrics.unavailable) == {"graph_kernels"}
        assert "node" in a.metrics.unavailable["graph_kernels"]
        assert summarize(a.metrics).loc["graph_kernels", "n"] == 0
        assert any("eager launches only" in n for n in a.metrics.notes)


def test_no_graphs_mode(analyze_x):
    x = kernel_names_export()
    x.rows["CUPTI_ACTIVITY_KIND_KERNEL"] = [
        r[:-1] + (None,) for r in x.rows["CUPTI_ACTIVITY_KIND_KERNEL"]
    ]
    a = analyze_x(x, PLAIN, count_kernels=("fused",))
    assert a.trace.capture_mode is CaptureMode.NO_GRAPHS
    assert_values(a, {"graph_kernels": [0], "eager_kernels": [4], "kernels:fused": [2]})
    assert a.metrics.unavailable == {}


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


# ---------------------------------------------------------------- units


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


# ---------------------------------------------------------------- helpers that count and cover


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


@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 20])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_union_coverage_against_a_timeline(seed, chunk):
    """``covered(t)`` = the time before t covered by at least one interval, counted on a
    unit-by-unit timeline (unsorted, nested, touching and overlapping intervals), whatever
    the chunks the intervals are worked through in."""
    from specscope.analysis.coverage import union_coverage

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
    covered = union_coverage(starts, ends, chunk=chunk)
    assert covered(t).tolist() == expected
    by_start = np.argsort(starts, kind="stable")  # sorted starts: no order kept
    assert union_coverage(starts[by_start], ends[by_start], chunk)(t).tolist() == expected
    assert covered(t.astype(float) + 0.5).tolist() == pytest.approx(
        [e + (0.5 if 0 <= x < 260 and timeline[x] else 0) for e, x in zip(expected, t, strict=True)]
    )


@pytest.mark.parametrize("export", ["eagle_node_after", "eagle_graph_before"])
def test_per_step_metrics_do_not_depend_on_chunks(monkeypatch, export):
    """Counts summed over chunks of ops (the union coverage and the anchor extents worked
    through in chunks too) equal those of one chunk: every per-step metric of a real export,
    with pattern counts."""
    from pathlib import Path

    from specscope.analysis import coverage, gaps, metrics
    from specscope.analysis.run import AnalyzeOptions, analyze

    path = Path(__file__).parents[1] / "data" / f"{export}.sqlite"
    options = AnalyzeOptions(count_kernels=("gemm", "fused"))
    whole = analyze(path, load_preset("eagle"), options).metrics.frame
    monkeypatch.setattr(metrics, "CHUNK_ROWS", 7)
    monkeypatch.setattr(gaps, "CHUNK_ROWS", 7)
    monkeypatch.setattr(coverage, "CHUNK_ROWS", 7)
    monkeypatch.setattr(coverage.union_coverage, "__defaults__", (7,))
    monkeypatch.setattr(coverage, "WHOLE_COVERAGE_MAX", 0)  # ops_coverage: the chunked pass
    chunked = analyze(path, load_preset("eagle"), options).metrics.frame
    assert whole.columns.tolist() == chunked.columns.tolist()
    np.testing.assert_array_equal(whole.to_numpy(), chunked.to_numpy())
