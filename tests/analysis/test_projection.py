"""GPU work projected onto NVTX ranges and range depths (``specscope ranges``), on a hand-built
export whose numbers are worked out in the comments, and on a real H200 export."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import testdata

from specscope.analysis.loader import load
from specscope.analysis.projection import nvtx_ranges, range_depths, range_instances
from specscope.analysis.synthetic import SyntheticExport


def test_depths_of_nested_and_sibling_ranges() -> None:
    #   [0 ------------------------ 100]        depth 0
    #     [10 -- 40][50 -------- 90]            depth 1 each
    #                 [60 - 70]                 depth 2
    assert range_depths(np.array([0, 10, 50, 60]), np.array([100, 40, 90, 70])).tolist() == [
        0, 1, 1, 2,
    ]  # fmt: skip
    # the same bounds recorded twice: the first encloses the second (and all inside both)
    starts, ends = np.array([0, 10, 0]), np.array([100, 40, 100])
    assert range_depths(starts, ends).tolist() == [0, 2, 1]


def test_projection_counts_work_launched_inside_each_range(tmp_path) -> None:
    x = SyntheticExport()
    with x.nvtx("step", 0, 1_000):
        with x.nvtx("prepare", 10, 100):
            a = x.api("cudaLaunchKernel", 20, 30)
            b = x.api("cudaMemcpyAsync", 40, 50)
        c = x.api("cudaLaunchKernel", 200, 210)
    d = x.api("cudaLaunchKernel", 2_000, 2_010)  # outside every range
    x.kernel("k1", 300, 400, a)  # 100 ns
    x.memcpy("htod", 64, 450, 500, b)  # 50 ns
    x.kernel("k2", 600, 900, c)  # 300 ns
    x.kernel("k3", 2_100, 2_200, d)
    trace = load(x.write(tmp_path / "t.sqlite"))
    r = range_instances(trace).set_index("name")
    # step: a, b, c -> 3 ops, 100 + 50 + 300 ns, first start 300 -> last end 900
    assert r.loc["step", ["depth", "gpu_ops"]].tolist() == [0, 3]
    assert r.loc["step", "gpu_us"] == pytest.approx(0.45)
    assert r.loc["step", "gpu_proj_us"] == pytest.approx(0.6)
    # prepare: a, b -> 300 .. 500
    assert r.loc["prepare", ["depth", "gpu_ops"]].tolist() == [1, 2]
    assert r.loc["prepare", "gpu_proj_us"] == pytest.approx(0.2)
    table = nvtx_ranges(trace).set_index("name")
    assert table.loc["step", "count"] == 1 and table.loc["prepare", "depth"] == 1.0


def test_real_export_steps_are_top_level_ranges_with_gpu_work() -> None:
    table = nvtx_ranges(load(testdata.DATA / "graphs" / "run_graph_kpool_nvtx.sqlite"))
    table = table.set_index("name")
    assert table.loc["step", "depth"] == 0 and table.loc["step", "gpu_ops"] > 0
    # in graph mode a replay is one operation, launched from its replay range
    for phase in ("draft.replay", "verify.replay", "draft_extend.replay"):
        assert table.loc[phase, "depth"] == 1 and table.loc[phase, "gpu_ops"] == 1
    # every operation launched inside a step is projected onto it: the phases add up
    phases = table.drop(index="step")
    assert (phases["gpu_ops"] * phases["count"]).sum() == table.loc["step", "gpu_ops"] * 10


@pytest.mark.parametrize("in_order", [False, True])
def test_range_reduce_equals_one_slice_at_a_time(in_order):
    """Slices nested, overlapping, to the end; in no order (taken in order of their starts)
    or in order."""
    from specscope.analysis.projection import _range_reduce

    rng = np.random.default_rng(3)
    values = rng.integers(0, 10_000, 300)
    lo = rng.integers(0, 300, 1_000)
    lo = np.sort(lo) if in_order else lo
    hi = np.minimum(lo + rng.integers(1, 80, 1_000), 300)
    for ufunc, ref in ((np.maximum, np.max), (np.minimum, np.min)):
        expected = [ref(values[a:b]) for a, b in zip(lo, hi, strict=True)]
        assert _range_reduce(ufunc, values, lo, hi).tolist() == expected


def test_step_range_candidates(write_export):
    from specscope.analysis.loader import load
    from specscope.analysis.projection import step_range_candidates

    x = SyntheticExport()
    for k in range(4):  # 'iteration' encloses 'layer' (depth 1); 'log' launches nothing
        t = 10_000 * k
        x.range("iteration", t, t + 5_000)
        for j in range(2):
            x.range("layer", t + 100 + 2_000 * j, t + 1_900 + 2_000 * j)
            corr = x.api("cudaLaunchKernel", t + 200 + 2_000 * j, t + 300 + 2_000 * j)
            x.kernel("k", t + 400 + 2_000 * j, t + 900 + 2_000 * j, corr)
        x.range("log", t + 6_000, t + 7_000)
    found = step_range_candidates(load(write_export(x)), 100)
    assert found == [("iteration", 4, 2.0)]


def test_top_level_is_depth_zero():
    from specscope.analysis.projection import top_level

    rng = np.random.default_rng(5)
    starts = rng.integers(0, 1_000, 400)
    ends = starts + rng.integers(0, 300, 400)  # nested, overlapping, identical bounds
    starts[:2], ends[:2] = 10, 20
    expected = np.flatnonzero(range_depths(starts, ends) == 0)
    assert sorted(top_level(starts, ends).tolist()) == expected.tolist()


@pytest.mark.parametrize("name", ["real/eager_steps_events.sqlite", "eagle_node_before.sqlite"])
def test_step_range_candidates_count_the_calls_a_chunk_at_a_time(name, monkeypatch):
    """The operations carry no launch times: each range's launches are counted over chunks of
    operations (a chunk's calls looked up and counted alone), as over all of them at once."""
    from specscope.analysis import loader, projection

    trace = load(testdata.DATA / name)
    pid = int(trace.nvtx["pid"].iloc[0])
    whole = projection.step_range_candidates(trace, pid)
    monkeypatch.setattr(loader, "CHUNK_ROWS", 7)  # (Trace.launches_in_chunks)
    assert projection.step_range_candidates(trace, pid) == whole and whole


@pytest.mark.parametrize(
    "name", ["eagle_node_before.sqlite", "graphs/run_graph_kpool_nvtx.sqlite",
             "cpu_eagle_2023.sqlite", "real/two_procs.sqlite"],
)  # fmt: skip
def test_projection_a_few_operations_at_a_time_is_the_whole_one(name, monkeypatch) -> None:
    """The launches are looked up and projected a chunk of operations at a time (chunks of 7
    operations here, the ranges of every thread across many of them): the same per range as
    the whole capture's operations in one chunk, to the bit."""
    from specscope.analysis import loader

    whole = range_instances(load(testdata.DATA / name))
    monkeypatch.setattr(loader, "CHUNK_ROWS", 7)
    chunked = range_instances(load(testdata.DATA / name))
    assert whole["gpu_ops"].sum() > 0 or name.startswith("cpu")
    pd.testing.assert_frame_equal(chunked, whole, check_exact=True)


def test_ranges_of_many_threads_each_project_their_own_launches(tmp_path) -> None:
    """Ranges on several threads, each launching its own kernel inside its range, one thread
    with ranges and no launch, and a launch on a thread without ranges: each range counts the
    operations its thread launched inside it, no other thread's."""
    x = SyntheticExport()
    for k in range(6):  # threads 11..16: a range [1000k, 1000k + 500] and a launch inside
        tid = 11 + k
        with x.nvtx("request", 1_000 * k, 1_000 * k + 500, tid=tid):
            call = x.api("cudaLaunchKernel", 1_000 * k + 10, 1_000 * k + 20, tid=tid)
        x.kernel("k", 1_000 * k + 100, 1_000 * k + 100 + 10 * (k + 1), call)
    with x.nvtx("request", 0, 9_000, tid=30):  # (a thread that launched nothing)
        pass
    other = x.api("cudaLaunchKernel", 300, 310, tid=40)  # (inside thread 11's range's time)
    x.kernel("k", 400, 450, other)
    r = range_instances(load(x.write(tmp_path / "t.sqlite")))
    by_tid = r.set_index("tid")
    assert by_tid.loc[list(range(11, 17)), "gpu_ops"].tolist() == [1] * 6
    assert by_tid.loc[list(range(11, 17)), "gpu_us"].tolist() == [
        pytest.approx(0.01 * (k + 1)) for k in range(6)
    ]
    assert by_tid.loc[30, "gpu_ops"] == 0 and by_tid.loc[30, "gpu_proj_us"] == 0
