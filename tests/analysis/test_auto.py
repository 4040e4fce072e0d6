"""Zero-config analysis (:mod:`specscope.analysis.auto`): which steps are chosen, on which export.

(a) the ``eagle`` preset's NVTX ranges, (b) a repeating CUDA-graph cycle, (c) a repeating eager
kernel pattern (:mod:`specscope.analysis.patterns`), (d) NVTX ranges that recur where nothing
else repeats, (e) the whole capture as one window (:mod:`specscope.analysis.whole`); and every
committed export analysed without a spec.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
import testdata

from specscope.analysis.auto import analyze_processes
from specscope.analysis.patterns import thread_step_kernel
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import StepSpec, load_preset, split_anchor
from specscope.analysis.synthetic import SyntheticExport
from specscope.analysis.whole import WHOLE_CAPTURE
from specscope.errors import SpecError

GRAPHS = testdata.DATA / "graphs"


def only(path, **kw):
    x = analyze_processes(path, None, AnalyzeOptions(**kw))
    assert len(x.processes) == 1
    return x.processes[0]


def test_a_preset_nvtx_ranges():
    p = only(testdata.GRAPH)
    assert "preset 'eagle'" in p.choice and "--preset eagle" in p.hint
    expected = analyze(testdata.GRAPH, load_preset("eagle")).frame
    pd.testing.assert_frame_equal(p.analysis.frame, expected)


def test_a_cpu_only_export_keeps_host_only_metrics():
    p = only(testdata.DATA / "cpu_eagle_2023.sqlite")
    assert "preset 'eagle'" in p.choice and p.device is None
    assert p.analysis.frame["cpu_step_us"].notna().all()
    assert p.analysis.frame["busy_us"].isna().all()


def test_b_graph_cycle_matches_the_sglang_preset():
    path = GRAPHS / "run_graph_nonvtx.sqlite"
    p = only(path, skip=1)
    assert "graph launch cycle [1, 4, 7] \u00d7 10" in p.choice
    assert p.hint.startswith("--anchors role1=graph:1,role2=graph:4,role3=graph:7 ")
    preset = load_preset("sglang_eagle")
    expected = analyze(path, preset, AnalyzeOptions(skip=1)).summary["p50"]
    # roleN (capture order) is the preset's anchor of graph-role:N
    names = {f"role{split_anchor(a)[1].role}": split_anchor(a)[0] for a in preset.anchors}
    got = p.analysis.summary["p50"].rename(index=lambda m: _renamed(m, names))
    common = [m for m in expected.index if m in got.index and not np.isnan(expected[m])]
    assert len([m for m in common if m.startswith("gap_us:")]) == 3
    assert {"window_us", "busy_us", "idle_us", "eager_memcpy", "graph_launches"} <= set(common)
    assert np.allclose(got[common], expected[common], atol=1e-6)


def _renamed(metric: str, names: dict[str, str]) -> str:
    for role, name in names.items():
        metric = metric.replace(role, name)
    return metric


def test_c_repeating_kernel_pattern():
    path = GRAPHS / "eager_nonvtx.sqlite"
    p = only(path)
    assert "'step_marker_kernel'" in p.choice
    assert (
        p.hint
        == "--step 'kernel:^step_marker_kernel$' (or another kernel:REGEX launched once per step)"
    )
    expected = analyze(path, StepSpec("kernel:^step_marker_kernel$")).frame
    pd.testing.assert_frame_equal(p.analysis.frame, expected)
    assert len(expected) == 12 and (expected["eager_kernels"] == 66).all()


def _no_repetition() -> SyntheticExport:
    """Ten different kernels, one memcpy, once each: GPU work, no structure."""
    x = SyntheticExport()
    for i in range(10):
        corr = x.api("cudaLaunchKernel", 1_000 * i, 1_000 * i + 50)
        x.kernel(f"k{i}", 1_000 * i + 100, 1_000 * i + 100 + 10 * (i + 1), corr)
    corr = x.api("cudaMemcpyAsync", 20_000, 20_050)
    x.memcpy("htod", 64, 20_100, 20_300, corr)
    return x


def test_d_whole_capture_one_window(write_export):
    p = only(write_export(_no_repetition()))
    assert p.choice.startswith("the whole capture as one window") and "--step kernel:" in p.hint
    f = p.analysis.frame
    assert len(f) == 1 and p.analysis.spec["step"] == WHOLE_CAPTURE
    row = f.iloc[0]
    busy = (sum(10 * (i + 1) for i in range(10)) + 200) / 1e3
    assert row["window_us"] == pytest.approx((20_300 - 100) / 1e3)
    assert row["busy_us"] == pytest.approx(busy)
    assert row["idle_us"] == pytest.approx(row["window_us"] - busy)
    assert row["occupancy_pct"] == pytest.approx(100 * busy / row["window_us"])
    assert (row["eager_kernels"], row["eager_memcpy"], row["graph_launches"]) == (10, 1, 0)
    assert row["api_calls:cudaLaunchKernel"] == 10
    top = p.top_kernels
    assert top.index[0] == "k9" and top["total_us"].iloc[0] == pytest.approx(0.1)
    assert len(top) == 10 and top["pct"].sum() == pytest.approx(100)
    assert p.to_json()["top_kernels"][0]["kernel"] == "k9"


def test_no_gpu_work_and_no_steps_is_one_line_error(write_export):
    x = SyntheticExport()
    x.range("load", 0, 1_000)
    with pytest.raises(SpecError, match="no GPU work and no NVTX 'step' ranges") as e:
        analyze_processes(write_export(x))
    assert "\n" not in str(e.value)


def test_graph_cycle_that_is_too_short_falls_through(write_export):
    # two repetitions of a 2-graph cycle: below min_cycles=3, so (c)/(d) decide
    x = SyntheticExport()
    for i, g in enumerate([1, 2, 1, 2]):
        corr = x.api("cudaGraphLaunch", 1_000 * i, 1_000 * i + 50)
        x.graph_replay(1_000 * i + 100, 1_000 * i + 400, corr, graph_id=g)
    path = write_export(x)
    assert only(path).choice.startswith("the whole capture")
    assert "graph launch cycle" in analyze_processes(path, min_cycles=2).processes[0].choice


def _one_kernel_loop(ranges: str | None, steps: int = 6):
    """An eager loop of one kernel type (no pattern can repeat: every launch is alike), three
    launches per iteration, each iteration an NVTX range ``ranges`` (None: no NVTX)."""
    x, t = SyntheticExport(), 0
    for _ in range(steps):
        if ranges is not None:
            x.range(ranges, t, t + 2_900)
        for _ in range(3):
            corr = x.api("cudaLaunchKernel", t, t + 20)
            x.kernel("add", t + 50, t + 300, corr)
            t += 1_000
        t += 500
    return x


def test_d_recurring_nvtx_ranges_where_nothing_else_repeats(write_export):
    p = only(write_export(_one_kernel_loop("iteration")))
    assert p.choice.startswith("NVTX ranges 'iteration' (6 ranges at depth 0 launching 3 GPU ops")
    assert "--step iteration" in p.hint
    f = p.analysis.frame
    assert len(f) == 6 and (f["eager_kernels"] == 3).all()
    # the same steps as the ranges given by name
    expected = analyze_processes(write_export(_one_kernel_loop("iteration")), StepSpec("iteration"))
    pd.testing.assert_frame_equal(f, expected.processes[0].analysis.frame)
    # without the ranges: the whole capture
    assert only(write_export(_one_kernel_loop(None))).choice.startswith("the whole capture")


def test_d_ranges_too_few_to_be_steps(write_export):
    # two ranges (below the three a name needs): no step structure, the whole capture
    assert only(write_export(_one_kernel_loop("iteration", steps=2))).choice.startswith(
        "the whole capture"
    )


def test_hint_names_nvtx_ranges_that_look_like_steps(write_export):
    # kernel pattern chosen (no preset ranges); the 'train_step' ranges are suggested
    x, t = SyntheticExport(), 0
    for _ in range(5):
        x.range("train_step", t, t + 3_500)
        for name in ("embed", "attn", "mlp"):
            corr = x.api("cudaLaunchKernel", t, t + 20)
            x.kernel(name, t + 50, t + 500, corr)
            t += 1_000
        t += 2_000
    p = only(write_export(x))
    assert p.choice.startswith("repeating eager kernel pattern")
    assert "NVTX ranges that look like steps: --step 'train_step' (5 ranges, 3 GPU ops" in p.hint


def test_step_kernel_of_the_thread_covering_most_launches(write_export):
    # two launching threads: the main one loops over (step, a, b) 6 times, a helper thread
    # over (h, g) 4 times; the main thread's kernel is the step kernel, with its own launches
    from specscope.analysis import loader
    from specscope.analysis.patterns import find_step_kernel

    x, t = SyntheticExport(), 0
    for i in range(6):
        for name in ("step", "a", "b"):
            corr = x.api("cudaLaunchKernel", t, t + 20)
            x.kernel(name, t + 50, t + 300, corr)
            t += 1_000
        if i < 4:
            for name in ("h", "g"):
                corr = x.api("cudaLaunchKernel", t, t + 20, tid=x.tid + 1)
                x.kernel(name, t + 50, t + 300, corr, stream=9)
                t += 1_000
    found = find_step_kernel(loader.load(write_export(x)), x.pid)
    assert (found.name, found.tid, found.launches, found.periods) == ("step", x.tid, 18, 5)


def test_b_long_cycle_of_piecewise_graphs(write_export):
    # vLLM-style piecewise graphs: 24 graph pieces per step, an eager attention kernel between
    # two pieces; 6 steps
    x, t = SyntheticExport(), 0
    for _ in range(6):
        for piece in range(24):
            corr = x.api("cudaGraphLaunch", t, t + 20)
            x.graph_replay(t + 30, t + 80, corr, graph_id=100 + piece)
            corr = x.api("cudaLaunchKernel", t + 40, t + 50)
            x.kernel("attention", t + 90, t + 120, corr)
            t += 200
        t += 1_000
    with warnings.catch_warnings():  # 24 anchors: hundreds of gap columns, in one piece
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        p = only(write_export(x))
    assert "graph launch cycle [100, 101," in p.choice and "× 6" in p.choice
    f = p.analysis.frame
    assert len(f) == 6 and (f["graph_launches"] == 24).all()
    assert (f["eager_kernels"].iloc[1:] == 24).all()


def test_b_piecewise_graphs_of_many_buckets_are_counted_not_listed(write_export):
    """A graph per batch-size bucket and piece (12 pieces, 16 buckets, the batch a random walk:
    192 graphs): the steps are the same, the note counts the roles and graphs instead of
    listing every run and graph id (:data:`.auto.MAX_LISTED`)."""
    x, t, bucket = SyntheticExport(), 0, 8
    rng = np.random.default_rng(3)
    for _ in range(120):
        bucket = int(np.clip(bucket + rng.integers(-1, 2), 0, 15))
        for piece in range(12):
            corr = x.api("cudaGraphLaunch", t, t + 20)
            x.graph_replay(t + 30, t + 80, corr, graph_id=1 + bucket * 12 + piece)
            t += 200
        t += 1_000
    p = only(write_export(x))
    assert len(p.analysis.frame) == 120
    assert (p.analysis.frame["graph_launches"] == 12).all()
    graphs = sum(len(a.partition(":")[2].split("|")) for a in p.analysis.spec["anchors"])
    assert f"graph launch cycle of 12 roles over {graphs} graphs" in p.choice
    assert len(p.choice) < 200 and len(p.hint) < 300
    assert p.hint.startswith("--anchors role1=graph:ID|ID|...,... (12 roles, ")


@pytest.mark.parametrize(
    ("seq", "expected"),
    [
        ("KabcKabcKabcKadcKadcK", ("K", 4, 5)),  # the module doc's example
        # a layer kernel L repeats too, but the step (S ...) holds three layers
        ("SLaLaLaSLaLaLaSLaLaLaSLaLaLa", ("S", 7, 3)),
        ("KaKaKaKa", ("K", 2, 3)),  # several names once per period: the first launched
        ("aaaaaaaa", None),  # one kernel on its own: no loop structure
        ("KabKbaKaabKbK", None),  # periods never repeat
    ],
)
def test_step_kernel_rule(seq, expected):
    names = np.array(list(seq))
    found = thread_step_kernel(names, np.arange(len(seq)) * 10)
    assert (found if found is None else found[:3]) == expected


@pytest.mark.parametrize("seq", ["KabcKabcKabcKadcKadcK", "SLaLaLaSLaLaLaSLaLaLaSLaLaLa"])
@pytest.mark.parametrize("codes", ["dense", "sparse"])
def test_step_kernel_of_codes_is_that_of_names(seq, codes):
    # integer codes (the kernels' category codes; a table indexed by code where their range
    # is dense, np.unique where it is not) find what the names find
    names = np.array(list(seq))
    letters = sorted(set(seq))
    scale = 1 if codes == "dense" else 1 << 40
    as_codes = np.array([3 + scale * letters.index(c) for c in seq], dtype=np.int64)
    starts = np.arange(len(seq)) * 10
    by_name, by_code = thread_step_kernel(names, starts), thread_step_kernel(as_codes, starts)
    assert by_code[1:] == by_name[1:]
    assert by_code[0] == 3 + scale * letters.index(by_name[0])


@pytest.mark.parametrize("span", [5, 300, 1 << 20, 1 << 40])
def test_distinct_codes_are_np_unique(span):
    from specscope.analysis.patterns import _by_code, _distinct

    names = np.random.default_rng(span % 97).integers(0, span, 5000)
    uniq, codes = _distinct(names)
    want_uniq, want_codes = np.unique(names, return_inverse=True)
    np.testing.assert_array_equal(uniq, want_uniq)
    np.testing.assert_array_equal(codes, want_codes)
    np.testing.assert_array_equal(_by_code(codes, len(uniq)), np.argsort(codes, kind="stable"))


def _repeats_whole(pos, s1, s2):
    """The period statistics of ``patterns._repeats`` over whole arrays (its reference)."""
    a, b = pos[:-1].astype(np.int64), pos[1:].astype(np.int64)
    h1 = s1[b] - s1[a]
    h2 = s2[b] - s2[a] - a.astype(np.uint64) * h1
    length = b - a
    same = (length[1:] == length[:-1]) & (h1[1:] == h1[:-1]) & (h2[1:] == h2[:-1])
    part = np.zeros(len(a), dtype=bool)
    part[1:] |= same
    part[:-1] |= same
    return int(same.sum()), int(length[part].sum()), len(a), float(np.median(length))


@pytest.mark.parametrize("chunk", [1, 2, 7, 1 << 18])
def test_chunked_pattern_search_equals_the_whole_arrays(chunk, monkeypatch):
    # prefix hashes, period statistics and the order check a chunk at a time (bounded
    # temporaries at 20 M launches): the values of whole-array numpy, across chunk bounds
    from specscope.analysis import memory, patterns

    monkeypatch.setattr(patterns, "CHUNK_ROWS", chunk)
    monkeypatch.setattr(memory, "CHUNK_ROWS", chunk)  # (the order check: memory.increasing)
    rng = np.random.default_rng(chunk)
    seq = np.tile(np.array([0, 1, 2, 1, 3], dtype=np.uint16), 40)
    seq[rng.integers(0, len(seq), 6)] = 4  # a few periods that differ
    w = np.random.default_rng(patterns._SEED).integers(1, 2**63, size=5, dtype=np.uint64)
    s1, s2 = patterns._period_hashes(seq, 5)
    weights = w[seq]
    np.testing.assert_array_equal(s1, np.r_[np.uint64(0), np.cumsum(weights)])
    positions = np.arange(len(seq), dtype=np.uint64)
    np.testing.assert_array_equal(s2, np.r_[np.uint64(0), np.cumsum(weights * positions)])
    for code in range(5):
        pos = np.flatnonzero(seq == code).astype(np.int32)
        if len(pos) > 2:
            assert patterns._repeats(pos, s1, s2) == _repeats_whole(pos, s1, s2), code
    times = np.arange(100, dtype=np.float64)
    rows = np.arange(0, 100, 3, dtype=np.int32)
    assert memory.increasing(times, strict=False, rows=rows)
    times[rows[5]] = times[rows[4]] - 1  # one launch out of order, at any chunk position
    assert not memory.increasing(times, strict=False, rows=rows)


@pytest.mark.parametrize("name", ["real/hf_generate.sqlite", "eagle_node_before.sqlite"])
def test_eager_launches_in_chunks_are_the_whole_lookups(name, monkeypatch):
    """The eager kernels' calls, looked up a chunk at a time (operations carry no launch
    times): the launches, starts and threads of one lookup of every kernel."""
    from specscope.analysis import loader, patterns
    from specscope.analysis.callrows import op_launches
    from specscope.analysis.loader import KINDS, load

    trace = load(testdata.DATA / name)
    ops = trace.ops
    rows = np.flatnonzero(ops["kind"].array.codes == KINDS.index("kernel")).astype(np.int32)
    start, tid = op_launches(trace, ops.iloc[rows])
    graph = ops["in_graph"].to_numpy()[rows]
    eager = (tid >= 0) & ~graph
    want = (rows[eager], start[eager], tid[eager], rows[(tid >= 0) & graph])
    monkeypatch.setattr(loader, "CHUNK_ROWS", 7)  # (Trace.launches_in_chunks)
    got = patterns._eager_launches(trace, rows)
    assert len(got[0]) and (name != "eagle_node_before.sqlite" or len(got[3]))
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_step_kernel_prefers_the_longest_host_pause():
    names = np.array(list("abcabcabcabc"))
    starts = np.cumsum([50 if n == "b" else 10 for n in names])  # a long pause before each b
    assert thread_step_kernel(names, starts)[0] == "b"


EXPORTS = sorted(testdata.DATA.rglob("*.sqlite"))


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: str(p.relative_to(testdata.DATA)))
def test_every_committed_export_without_a_spec(path):
    x = analyze_processes(path)
    assert x.processes
    for p in x.processes:
        assert p.choice and p.hint
        f = p.analysis.frame
        if p.device is None:  # CPU-only export (no CUDA tables): host-only, as today
            assert path.name.startswith("cpu_") and path.stem[-5:] in (
                "_2020",
                "_2022",
                "_2023",
                "_2024",
            )
            continue
        for col in ("busy_us", "idle_us"):
            assert all(math.isfinite(v) for v in f[col]), col
