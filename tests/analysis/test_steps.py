"""Step finding on tiny hand-built exports: NVTX domains, warm-up skipping, trailing steps,
the thread, process and device a run is measured on, and how GPU work is projected onto steps.

The EAGLE-shaped export (``build_eagle``) and its hand-computed times are drawn in
``tests/eagle_exports.py``; ``test_metrics.py`` lists the per-step values.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from eagle_exports import EAGLE_SPEC, build_eagle
from metric_values import assert_values, col

from specscope.analysis.spec import StepSpec
from specscope.analysis.summary import kernel_timeline, summarize
from specscope.analysis.synthetic import SyntheticExport
from specscope.errors import SpecError

nan = math.nan


# ---------------------------------------------------------------- NVTX domains


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


def test_nested_same_name_step_ranges_are_noted(analyze_x):
    x = build_eagle(3)
    x.range("step", 1000, 2000, domain="specscope")  # a "step" inside step 0
    a = analyze_x(x)
    assert len(a.steps.kept) == 3
    assert any("1 'step' range(s) nested inside another" in n for n in a.metrics.notes)
    assert not any("nested" in n for n in analyze_x(build_eagle(3)).metrics.notes)


def test_no_domain_export_with_no_domain_spec(analyze_x):
    a = analyze_x(build_eagle(2, domain=None), StepSpec("step", EAGLE_SPEC.anchors))
    assert col(a, "gap_us:draft.replay->verify.replay") == pytest.approx([0.9, 0.9])
    assert set(a.trace.nvtx["domain"]) == {""}


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


def test_chunked_row_work_gives_the_same_metrics(analyze_x, monkeypatch):
    """Launch matching and projection run over the ops in chunks of ``CHUNK_ROWS``: chunk
    boundaries anywhere (here every 3 ops) change nothing."""
    from specscope.analysis import callrows, loader, opnames, steps

    x = build_eagle(n_steps=5)
    whole = analyze_x(x)
    for module in (loader, callrows, opnames):  # (launches, the calls' processes, the names)
        monkeypatch.setattr(module, "CHUNK_ROWS", 3)
    monkeypatch.setattr(steps, "CHUNK_ROWS", 3)
    chunked = analyze_x(x)
    pd.testing.assert_frame_equal(chunked.trace.ops, whole.trace.ops)
    pd.testing.assert_frame_equal(chunked.steps.ops, whole.steps.ops)
    pd.testing.assert_frame_equal(chunked.metrics.frame, whole.metrics.frame)
    assert len(whole.trace.ops) > 3 * 5


@pytest.mark.parametrize("chunk", [1, 3, 1 << 18])
def test_runs_of_launch_times_looked_up_a_chunk_at_a_time(chunk, monkeypatch):
    # runs of equal launch times (a graph launch's kernels) cut by chunk bounds: every op gets
    # the interval of its time, as a lookup of each op's own time gives
    from specscope.analysis import steps as steps_module

    monkeypatch.setattr(steps_module, "CHUNK_ROWS", chunk)
    times = np.repeat(np.array([5.0, 12.0, 12.5, 30.0, 41.0, 70.0]), [3, 1, 4, 2, 5, 1])
    intervals = [
        (np.array([0, 10, 40]), np.array([10, 20, 60])),
        (np.array([11, 29]), np.array([13, 31])),
    ]
    got = steps_module._lookup_runs(times, *intervals)
    for result, (s, e) in zip(got, intervals, strict=True):
        want = steps_module.interval_index(s, e, times.astype(np.int64))
        assert result.dtype == np.int32 and result.tolist() == want.tolist()


@pytest.mark.parametrize("name", ["eagle_node_before.sqlite", "eagle_graph_before.sqlite"])
def test_anchors_relative_to_their_steps_are_the_anchors(name, monkeypatch):
    """Each operation's anchor held as int8 relative to its step's first anchor, as it is
    (none is within reach), or relative in the first chunks and as it is from a chunk on that
    has one out of reach: the same anchors, extents and metrics."""
    from testdata import DATA

    from specscope.analysis import loader as loader_module
    from specscope.analysis import steps as steps_module
    from specscope.analysis.gaps import anchor_extents
    from specscope.analysis.loader import load
    from specscope.analysis.metrics import per_step_metrics
    from specscope.analysis.spec import load_preset
    from specscope.analysis.steps import find_steps, op_anchors, with_anchors

    def found(rel_max: int, chunk: int):
        monkeypatch.setattr(steps_module, "REL_MAX", rel_max)
        monkeypatch.setattr(loader_module, "CHUNK_ROWS", chunk)  # (Trace.launches_in_chunks)
        trace = load(DATA / name)
        st = find_steps(trace, load_preset("eagle"))
        return st, trace

    plain, trace = found(-1, 1 << 18)  # (no anchor within reach: as they are)
    assert plain.anchor_base is None and "anchor" in plain.ops
    want = plain.ops["anchor"].to_numpy()
    want_ext = anchor_extents(plain, trace.launches)
    want_metrics = per_step_metrics(trace, plain).frame
    for rel_max, chunk in [(127, 1 << 18), (127, 64), (1, 64)]:
        st, trace = found(rel_max, chunk)
        relative = st.anchor_base is not None
        assert relative == (rel_max == 127)  # (3 anchors a step: 1 is out of reach)
        assert ("anchor_rel" in st.ops) == relative
        assert np.array_equal(op_anchors(st), want)
        assert np.array_equal(op_anchors(st, 100, 300), want[100:300])
        assert np.array_equal(with_anchors(st, st.ops)["anchor"].to_numpy(), want)
        pd.testing.assert_frame_equal(anchor_extents(st, trace.launches), want_ext)
        pd.testing.assert_frame_equal(per_step_metrics(trace, st).frame, want_metrics)
