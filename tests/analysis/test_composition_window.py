"""The median step's views read only what is near their window (issue 19): each piece against
the whole-capture computation it replaced, on real exports and several windows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from testdata import DATA

from specscope.analysis import composition, native
from specscope.analysis.auto import analyze_processes
from specscope.analysis.callrows import op_launches
from specscope.analysis.loader import load
from specscope.analysis.steps import with_anchors

EXPORTS = ["eagle_graph_before.sqlite", "eagle_node_after.sqlite", "real/hf_generate.sqlite",
           "real/two_procs.sqlite", "graphs/run_graph_kpool_nvtx.sqlite"]  # fmt: skip


def _analyses(name: str):
    return list(analyze_processes(load(DATA / name)).analyses.values())


def _windows(a) -> list[tuple[float, float]]:
    """A few windows over the capture: around a step's GPU work, wide, empty, before it all."""
    ops = a.steps.ops
    start, end = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
    lo, hi = float(start.min()), float(end.max())
    mid = (lo + hi) / 2
    return [(mid - 5e4, mid + 5e4), (lo, hi), (mid, mid), (lo - 1e6, lo - 1e5), (lo + 10, mid)]


def _heads_whole(a, lo: float, hi: float) -> pd.DataFrame:
    """The first operation of every anchor instance, from all of them (the code before)."""
    ops = with_anchors(a.steps, a.steps.ops)  # (every operation's anchor at once)
    o = ops[ops["anchor"].to_numpy() >= 0]
    o = o.assign(api_start_ns=op_launches(a.trace, o)[0])  # (every operation's call)
    first = o.loc[o.groupby("anchor")["start_ns"].idxmin()]
    return first[(first["start_ns"] > lo) & (first["api_start_ns"] < hi)].set_index("anchor")


@pytest.mark.parametrize("name", EXPORTS)
def test_launch_heads_of_the_instances_that_can_be_in_view_are_the_whole_captures(name):
    checked = 0
    for a in _analyses(name):
        for lo, hi in _windows(a):
            got = composition._launch_heads(a, lo, hi)
            pd.testing.assert_frame_equal(got, _heads_whole(a, lo, hi))
            checked += len(got)
    assert checked or name == "real/hf_generate.sqlite"  # (zero-config: no NVTX anchors)


@pytest.mark.parametrize("name", EXPORTS)
def test_calls_near_a_window_are_the_rows_of_every_call(name):
    """:meth:`.Trace.thread_api` with a mask: the rows ``api()`` of the thread gives."""
    for a in _analyses(name):
        trace, pid, tid = a.trace, a.steps.pid, a.steps.tid
        every = trace.api()
        every = every[(every["pid"] == pid) & (every["tid"] == tid)]
        for lo, hi in _windows(a):
            some = every["correlation_id"].to_numpy()[::7][:5]

            def near(start, end, corr, lo=lo, hi=hi, some=some):
                return ((end >= lo) & (start <= hi)) | np.isin(corr, some)

            got = trace.thread_api(pid, tid, near)
            want = every[near(*(every[c].to_numpy() for c in ("start_ns", "end_ns",
                                                                "correlation_id")))]  # fmt: skip
            assert list(got.columns) == list(want.columns)
            for c in got.columns:
                assert got[c].astype(str).tolist() == want[c].astype(str).tolist(), c
                assert got[c].dtype == want[c].dtype or c == "name"


def _gaps_loop(a, first, last, lo, hi, t0) -> pd.DataFrame:
    """:func:`composition._gap_frame` as a loop over every instance (the code before)."""
    names = a.steps.anchors["name"].to_numpy(dtype=object)
    a_steps = a.steps.anchors["step"].to_numpy()
    rows = []
    for j in range(1, len(names)):
        s, e = last[j - 1], first[j]
        if np.isnan(s) or np.isnan(e) or e <= lo or s >= hi:
            continue
        metric = f"gap_us:{names[j - 1]}->{names[j]}"
        rows.append((metric, (s - t0) / 1e3, (e - t0) / 1e3, (e - s) / 1e3, int(a_steps[j])))
    return pd.DataFrame(rows, columns=["metric", "start_us", "end_us", "gap_us", "step"])


@pytest.mark.parametrize("name", EXPORTS)
def test_gaps_in_view_are_the_loops(name):
    for a in _analyses(name):
        first, last = composition._anchor_extents(a)
        for lo, hi in _windows(a):
            got = composition._gap_frame(a, first, last, lo, hi, lo)
            pd.testing.assert_frame_equal(got, _gaps_loop(a, first, last, lo, hi, lo))


@pytest.mark.parametrize("seed", range(4))
def test_nesting_depth_in_c_is_the_loops(native_cache, monkeypatch, seed):
    """Nested ranges and ranges that overlap without nesting (start/end ranges), in start
    order: the same depth in C as in the loop."""
    if native.built(native.OPSUMS)[0] is None:
        pytest.skip("no C compiler here")
    rng = np.random.default_rng(seed)
    start = np.sort(rng.integers(0, 10_000, 2_000))
    end = start + rng.integers(0, 3_000, 2_000)
    got = composition._nesting_depth(start, end)
    monkeypatch.setenv("SPECSCOPE_NATIVE", "0")
    assert native.built(native.OPSUMS)[0] is None  # (so the loop below is the reference)
    want = composition._nesting_depth(start, end)
    assert np.array_equal(got, want) and want.max() > 2


@pytest.mark.parametrize("name", ["eagle_node_after.sqlite", "graphs/run_graph_kpool_nvtx.sqlite"])
def test_a_steps_views_make_no_frame_of_every_call(name, monkeypatch):
    """The median-step view and the gap's story read the thread's calls near the step only
    (:meth:`.Trace.thread_api`): ``Trace.api``, a frame of every call, is never built."""
    from specscope.analysis.explain import explain_gap
    from specscope.analysis.loader import Trace

    (a,) = _analyses(name)[:1]
    gap = next(c for c in a.frame.columns if c.startswith("gap_us:") and a.frame[c].notna().any())

    def every_call(*args, **kw):
        raise AssertionError("a frame of every CUDA API call")

    monkeypatch.setattr(Trace, "api", every_call)
    view = composition.median_step_view(a, gap)
    assert len(view.timeline.host.calls) and len(view.timeline.host.links)
    assert explain_gap(a, gap).launch_call is not None


def _composition_whole(a, step: int) -> pd.Series:
    """Step ``step``'s composition from every operation clipped to its window (the code
    before)."""
    from specscope.analysis.coverage import union_coverage
    from specscope.analysis.summary import step_window

    w0, w1 = step_window(a.metrics, step)
    ops = a.steps.ops
    start = np.clip(ops["start_ns"].to_numpy(dtype="float64"), w0, w1)
    end = np.clip(ops["end_ns"].to_numpy(dtype="float64"), w0, w1)
    kind = np.asarray(ops["kind"].astype(str))
    kernel, in_graph = kind == "kernel", ops["in_graph"].to_numpy(dtype=bool)
    groups = [(kind == "graph") | (kernel & in_graph), kernel & ~in_graph, kind == "memcpy",
              kind == "memset"]  # fmt: skip
    mask, covered, parts = np.zeros(len(ops), dtype=bool), 0.0, []
    for g in groups:
        mask |= g & (end > start)
        cov = union_coverage(start[mask], end[mask])
        total = float(cov(np.array([w1]))[0] - cov(np.array([w0]))[0])
        parts.append((total - covered) / 1e3)
        covered = total
    parts.append((w1 - w0 - covered) / 1e3)
    return pd.Series(parts, index=list(composition.COMPOSITION), name=step)


@pytest.mark.parametrize("name", EXPORTS)
def test_a_steps_composition_and_operations_in_view_are_the_whole_captures(name, monkeypatch):
    """Of the operations near the window alone (chunks of a few rows here: several chunks),
    each step's composition and the operations overlapping windows are those of every
    operation."""
    monkeypatch.setattr(composition, "CHUNK_ROWS", 7)
    for a in _analyses(name):
        for step in a.metrics.frame.index[:3]:
            got = composition.step_composition(a, int(step))
            pd.testing.assert_series_equal(got, _composition_whole(a, int(step)), check_exact=True)
        ops = a.steps.ops
        for lo, hi in _windows(a):
            whole = (ops["end_ns"].to_numpy() > lo) & (ops["start_ns"].to_numpy() < hi)
            assert np.array_equal(composition.overlapping(ops, lo, hi), np.flatnonzero(whole))
