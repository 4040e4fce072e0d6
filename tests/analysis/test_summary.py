"""Summaries over the per-step metrics, pinned by hand and against numpy: statistics,
the median step, the kernel timeline of one step and the totals over the whole capture.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from eagle_exports import build_eagle
from metric_values import PLAIN

from specscope.analysis.summary import kernel_timeline, median_step, summarize, totals
from specscope.analysis.synthetic import SyntheticExport

nan = math.nan


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
