"""Real exports recorded on an H200 (nsys 2025.3.1) and on a CPU machine (nsys 2023.4.4).

The H200 fixtures were made by ``scripts/record_fixtures.sh`` running ``scripts/fixture_program.py``
(12 measured steps of an EAGLE-shaped loop; ``before``: 4 eager ``fused_metadata_copy_kernel``
launches and 6 eager copies per prepare, ``after``: none and 2); beside each export lie the
``nsys stats`` CSVs made from the same file, the oracle for our totals. ``tests/data/graphs/``
holds the graph-mode fixtures of issue 15 and ``tests/data/real/`` two third-party programs (its
README).
"""

from __future__ import annotations

import pandas as pd
import pytest
from testdata import DATA

from specscope.analysis.loader import CaptureMode, load
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import load_preset
from specscope.analysis.summary import totals

H200 = ["eagle_node_before", "eagle_node_after", "eagle_graph_before"]
# every export of tests/data/graphs/ (graph and node mode, no NVTX, two processes, eager loop)
GRAPHS = [f"graphs/{p.stem}" for p in sorted((DATA / "graphs").glob("*.sqlite"))]
# programs nobody instrumented for specscope (tests/data/real/README.md): HF transformers'
# generate (eager PyTorch), a jitted JAX loop (XLA's CUDA graphs, driver-API launches),
# torch.compile's CUDA graph trees and unified memory with page-fault tracing, two processes
# replaying PyTorch CUDA graphs (exported twice: plain and --ts-normalize), an eager NVTX loop
REAL = [f"real/{p.stem}" for p in sorted((DATA / "real").glob("*.sqlite"))]


def _equal_to_stats(ours: pd.DataFrame, csv, key: str, columns: dict[str, str]) -> None:
    """``ours`` (:func:`totals`) has the rows of the ``nsys stats`` CSV (by ``key``) and, per
    row, its ``columns`` (ours -> the CSV's)."""
    if csv.stat().st_size == 0:  # (nsys stats writes nothing where there is no row: graph
        assert ours.empty  # mode without an eager kernel, scripts/real/bucket_graphs.py)
        return
    stats = pd.read_csv(csv).set_index(key)
    assert sorted(ours.index) == sorted(stats.index)
    for name, row in stats.iterrows():
        for mine, theirs in columns.items():
            assert ours.loc[name, mine] == row[theirs], name


@pytest.mark.parametrize("name", H200 + GRAPHS + REAL)
def test_kernel_totals_equal_nsys_stats(name: str) -> None:
    ours = totals(load(DATA / f"{name}.sqlite"))["kernels"]
    columns = {"instances": "Instances", "total_ns": "Total Time (ns)"}
    _equal_to_stats(ours, DATA / f"{name}_cuda_gpu_kern_sum.csv", "Name", columns)


@pytest.mark.parametrize("name", H200 + GRAPHS + REAL)
def test_memcpy_totals_equal_nsys_stats(name: str) -> None:
    ours = totals(load(DATA / f"{name}.sqlite"))["memory"]
    columns = {"count": "Count", "total_ns": "Total Time (ns)"}
    _equal_to_stats(ours, DATA / f"{name}_cuda_gpu_mem_time_sum.csv", "Operation", columns)


@pytest.mark.parametrize(
    ("name", "copies", "eager_memcpy", "mode"),
    [
        ("eagle_node_before", 4, 19, CaptureMode.NODE),
        ("eagle_node_after", 0, 7, CaptureMode.NODE),
        ("eagle_graph_before", 4, 19, CaptureMode.GRAPH),
    ],
)
def test_eagle_steps(name: str, copies: int | None, eager_memcpy: int, mode) -> None:
    a = analyze(DATA / f"{name}.sqlite", load_preset("eagle"), AnalyzeOptions(skip=1))
    f = a.metrics.frame
    assert a.trace.capture_mode is mode
    assert a.trace.nsys_version.startswith("2025.3")
    assert a.gpu == "NVIDIA H200"
    assert len(f) == 11  # 12 recorded, 1 skipped
    assert (f["graph_launches"] == 3).all()
    assert (f["api_calls:cudaGraphLaunch"] == 3).all()
    # per prepare: eager copies alternate H2D/D2D, plus the D2H of accept
    assert (f["eager_memcpy"] == eager_memcpy).all()
    assert (f["eager_memcpy_dtoh"] == 1).all()
    assert (f["busy_us"] <= f["window_us"]).all() and (f["idle_us"] > 0).all()
    for pair in [
        "draft_extend.replay->draft.replay",
        "draft.replay->verify.replay",
        "verify.replay->draft_extend.replay",
    ]:
        assert f[f"gap_us:{pair}"].notna().all()
        assert (f[f"cpu_gap_us:{pair}"] > 0).all()
    # the copy kernels run eagerly: counted in graph mode as in node mode
    assert (f["kernels:fused_metadata_copy"] == copies).all()
    assert "kernels:fused_metadata_copy" not in a.metrics.unavailable
    if mode is CaptureMode.GRAPH:
        assert "graph_kernels" in a.metrics.unavailable
        assert any("eager launches only" in n for n in a.metrics.notes)
    else:
        assert (f["graph_kernels"] == 60).all()  # 4 + 6 + 2 layers x 5 kernels


def test_copy_kernels_counted_in_graph_mode_between_variants() -> None:
    """`specscope run` in graph mode: kpool_fused copies draft metadata with 4 eager
    fused_metadata_copy kernels per step (one per sibling draft step), draft_alias with none."""
    spec = load_preset("eagle")
    kpool = analyze(
        DATA / "graphs/run_graph_kpool_nvtx.sqlite", spec, AnalyzeOptions(skip=1)
    ).metrics.frame
    alias = analyze(
        DATA / "graphs/run_graph_alias_nvtx.sqlite", spec, AnalyzeOptions(skip=1)
    ).metrics.frame
    assert (kpool["kernels:fused_metadata_copy"] == 4).all()
    assert (alias["kernels:fused_metadata_copy"] == 0).all()


def test_after_is_faster_than_before() -> None:
    """The fixture's 'after' drops 4 copy kernels and 12 copies per step: less idle, less gap."""
    spec = load_preset("eagle")
    before = analyze(DATA / "eagle_node_before.sqlite", spec, AnalyzeOptions(skip=1)).summary
    after = analyze(DATA / "eagle_node_after.sqlite", spec, AnalyzeOptions(skip=1)).summary
    for metric in ["idle_us", "gap_us:draft_extend.replay->draft.replay", "cpu_step_us"]:
        assert after.loc[metric, "p50"] < before.loc[metric, "p50"], metric


def test_start_end_step_ranges() -> None:
    """``eagle_node_after`` opens its steps with nvtx start/end ranges (eventType 60)."""
    t = load(DATA / "eagle_node_after.sqlite")
    steps = t.nvtx[t.nvtx["name"] == "step"]
    # the capture range opens after warm-up, so only the 12 measured steps are recorded
    assert set(steps["event_type"]) == {60} and len(steps) == 12


@pytest.mark.parametrize("name", ["cpu_eagle_2023", "cpu_eagle_startend_2023"])
def test_cpu_export_from_nsys_2023(name: str) -> None:
    a = analyze(DATA / f"{name}.sqlite", load_preset("eagle"), AnalyzeOptions(skip=2))
    assert a.trace.nsys_version.startswith("2023.4")
    assert a.trace.capture_mode is CaptureMode.NO_CUDA
    f = a.metrics.frame
    assert len(f) == 8
    assert f["idle_us"].isna().all() and "idle_us" in a.metrics.unavailable
    # the program busy-waits ~200/600/300/800/150/250/500 us in its seven phases
    assert f["cpu_us:verify.replay"].median() == pytest.approx(800, rel=0.2)
    assert f["cpu_us:draft.prepare"].median() == pytest.approx(200, rel=0.2)
    assert (f["cpu_step_us"] > f.filter(like="cpu_us:").sum(axis=1)).all()


def test_programs_nobody_instrumented_without_options() -> None:
    """Zero-config on real third-party programs: the JAX loop's steps are its CUDA graph
    replays (one per jitted call), HF generate's are its 24 decode steps (a kernel pattern)."""
    from specscope.analysis.auto import analyze_processes

    (jax,) = analyze_processes(DATA / "real/jax_loop.sqlite").processes
    assert "CUDA graph launch cycle" in jax.choice and jax.analysis.n_steps == 200
    assert (jax.analysis.frame["graph_launches"] == 1).all()
    (hf,) = analyze_processes(DATA / "real/hf_generate.sqlite").processes
    assert "repeating eager kernel pattern" in hf.choice and hf.analysis.n_steps == 24
    frame = hf.analysis.frame
    assert (frame["busy_us"] > 0).all() and (frame["idle_us"] >= 0).all()


def test_pytorch_cuda_graphs_and_unified_memory_without_options() -> None:
    """Zero-config on two more programs: torch.compile(mode="reduce-overhead") replays one CUDA
    graph per call (the cycle [graph] x 40; the clone after call i is an eager D2D copy before
    call i + 1, so step i + 1's: a step begins right after the previous cycle's launch, and
    the first step has none); the unified-memory
    loop launches a mul and an add per iteration under one short name
    (vectorized_elementwise_kernel), told apart by their demangled names: 8 steps, and its
    page-fault migrations are not eager copies of a step."""
    from specscope.analysis.auto import analyze_processes

    (tc,) = analyze_processes(DATA / "real/torch_compile.sqlite").processes
    assert "CUDA graph launch cycle" in tc.choice and tc.analysis.n_steps == 40
    f = tc.analysis.frame
    assert (f["graph_launches"] == 1).all() and (f["api_calls:cudaGraphLaunch"] == 1).all()
    assert f["eager_memcpy_dtod"].tolist() == [0] + [1] * 39
    (um,) = analyze_processes(DATA / "real/unified_memory.sqlite").processes
    assert "repeating eager kernel pattern" in um.choice and um.analysis.n_steps == 8
    assert "MulFunctor" in um.choice  # the demangled name: the short one is shared
    f = um.analysis.frame
    assert (f["eager_kernels"] == 2).all() and (f["eager_memcpy"] == 0).all()
    memory = totals(um.analysis.trace)["memory"]
    assert set(memory.index) == {
        "[CUDA memcpy Unified Host-to-Device]",
        "[CUDA memcpy Unified Device-to-Host]",
    }


def test_two_processes_and_a_loop_of_one_kernel_without_options() -> None:
    """Zero-config on two more real exports (``scripts/real/sweep.sh``): two processes that
    each replay one PyTorch CUDA graph 50 times, one ``decode`` NVTX range and one eager H2D
    copy per replay (every step a cycle [graph] x 50, per process); and an eager loop of one
    kernel type (12 adds and one H2D copy per NVTX ``step`` range, 60 times), where no kernel
    pattern can repeat: the ranges that recur are the steps."""
    from specscope.analysis.auto import analyze_processes

    ranks = analyze_processes(DATA / "real/two_procs.sqlite").processes
    assert len(ranks) == 2 and len({r.analysis.pid for r in ranks}) == 2
    for r in ranks:
        assert "CUDA graph launch cycle" in r.choice and r.analysis.n_steps == 50
        f = r.analysis.frame
        assert (f["graph_launches"] == 1).all() and (f["api_calls:cudaGraphLaunch"] == 1).all()
        assert "--step 'decode' (50 ranges" in r.hint
    (loop,) = analyze_processes(DATA / "real/eager_steps_events.sqlite").processes
    assert loop.choice.startswith("NVTX ranges 'step' (60 ranges") and loop.analysis.n_steps == 60
    f = loop.analysis.frame
    assert (f["eager_kernels"] == 12).all() and (f["eager_memcpy_htod"] == 1).all()
    assert (f["busy_us"] > 0).all() and (f["busy_us"] <= f["window_us"]).all()


def test_piecewise_cuda_graphs_without_options() -> None:
    """vLLM's shape of a decode step (``scripts/real/piecewise_graphs.py``): one CUDA graph
    piece per layer boundary (5 per step), eager attention between them, and a second set of
    pieces once the batch moves to the next bucket. Zero-config finds both cycles as one step
    kind with 5 roles; the eager work between two cycles (the sampled tokens' argmax and D2H
    copy, the next inputs' H2D copy) is the next step's, so the first step has none of it."""
    from specscope.analysis.auto import analyze_processes

    (p,) = analyze_processes(DATA / "real/piecewise_graphs.sqlite").processes
    assert "[1, 4, 7, 10, 13] × 20, [16, 19, 22, 25, 28] × 20" in p.choice
    assert p.analysis.n_steps == 40 and p.analysis.trace.capture_mode is CaptureMode.GRAPH
    f = p.analysis.frame
    assert (f["graph_launches"] == 5).all() and (f["api_calls:cudaGraphLaunch"] == 5).all()
    assert f["eager_kernels"].tolist() == [16] + [17] * 39  # 4 layers x 4 attention kernels
    assert f["eager_memcpy_htod"].tolist() == [0] + [1] * 39
    assert f["eager_memcpy_dtoh"].tolist() == [0] + [1] * 39
    assert (f["eager_memcpy_dtod"] == 4).all()  # each attention's output into its buffer
    for pair in ["role5->role1", "role1->role2", "role4->role5"]:
        assert (f[f"gap_us:{pair}"].dropna() > 0).all()


def test_graphs_replayed_from_a_worker_thread_without_options() -> None:
    """SGLang's overlap scheduler's shape (``scripts/real/overlap_thread.py``): a worker thread
    replays the model's CUDA graph and launches the argmax and the copies, while the main
    thread waits for the tokens of the step before. The steps are the worker's cycle."""
    from specscope.analysis.auto import analyze_processes

    (p,) = analyze_processes(DATA / "real/overlap_thread.sqlite").processes
    a = p.analysis
    assert "CUDA graph launch cycle [1] × 40" in p.choice and a.n_steps == 40
    assert a.steps.tid != a.steps.pid  # the worker, not the main thread
    f = a.frame
    assert (f["graph_launches"] == 1).all() and (f["api_calls:cudaGraphLaunch"] == 1).all()
    # a step's eager work is what came before its replay: the step before's argmax and D2H copy
    # (on a second stream), its own inputs' H2D copy
    assert f["eager_memcpy_htod"].tolist() == [0] + [1] * 39
    assert f["eager_memcpy_dtoh"].tolist() == [0] + [1] * 39
    assert (f["busy_us"] <= f["window_us"]).all()


def _only(name: str):
    """The one process zero-config analyses in ``tests/data/real/NAME.sqlite``."""
    from specscope.analysis.auto import analyze_processes

    (p,) = analyze_processes(DATA / f"real/{name}.sqlite").processes
    return p


def test_a_capture_that_stops_inside_a_step_without_options() -> None:
    """``scripts/real/partial_capture.py``: the capture starts inside step 2 and stops inside
    the last step. nsys 2025.3 closes the last ``step`` range itself, at the capture's end: it
    is no step (it would hold half a step's work and the stop's own wait)."""
    p = _only("partial_capture")
    a = p.analysis
    assert a.trace.unclosed_ranges == 1
    assert "NVTX ranges 'step' (36 ranges" in p.choice and a.n_steps == 36
    f = a.frame
    assert (f["eager_kernels"] == 16).all() and (f["eager_memcpy_htod"] == 1).all()
    assert f["cpu_step_us"].max() < 1000  # (the range nsys closed: 3137 us, with 8 launches)
    assert "1 NVTX range(s) never closed were ignored" in a.metrics.notes


def test_a_cpu_only_front_end_beside_its_gpu_worker_without_options() -> None:
    """``scripts/real/server_procs.py``: a front end with NVTX ranges and no CUDA beside a GPU
    worker without NVTX. The worker's graph cycle is the only analysis."""
    p = _only("server_procs")
    a = p.analysis
    assert "CUDA graph launch cycle [1] × 60" in p.choice and a.n_steps == 60
    assert set(a.trace.nvtx["name"]) == {"tokenize", "detokenize"}
    assert a.steps.pid not in set(a.trace.nvtx["pid"])  # (the worker: no NVTX of its own)
    f = a.frame
    assert (f["graph_launches"] == 1).all()
    # a step's eager work came before its replay: the step before's argmax and D2H, its H2D
    for col in ("eager_kernels", "eager_memcpy_htod", "eager_memcpy_dtoh"):
        assert f[col].tolist() == [0] + [1] * 59, col


def test_cudnn_convolutions_node_mode_worker_and_pytorch_ranges_without_options() -> None:
    """Three more exports of the second sweep (``scripts/real/sweep_more.sh``)."""
    conv = _only("conv_net")  # cuDNN and cutlass kernels, eager
    assert "kernel 'Kernel2' launched once per ~32" in conv.choice
    f = conv.analysis.frame
    assert len(f) == 30 and (f["eager_kernels"][:-1] == 32).all()
    node = _only("node_overlap")  # a worker thread's graphs in node mode
    a = node.analysis
    assert "CUDA graph launch cycle [1] × 30" in node.choice and a.steps.tid != a.steps.pid
    assert (a.frame["graph_kernels"] == 12).all() and (a.frame["graph_launches"] == 1).all()
    torch_ranges = _only("pytorch_functions")  # --pytorch=functions-trace's NVTX ranges
    assert "vectorized_layer_norm_kernel" in torch_ranges.choice
    assert "--step 'torch.nn.modules.Module.__call__' (40 ranges" in torch_ranges.hint
    assert (torch_ranges.analysis.frame["eager_kernels"] == 4).all()
    every_api = _only("all_apis")  # --cuda-trace-all-apis=true
    f = every_api.analysis.frame
    assert len(f) == 60 and (f["api_calls:cudaLaunchKernel"] == 12).all()


@pytest.mark.parametrize("mode", ["graph", "node"])
def test_prefills_between_graph_decodes_without_options(mode: str) -> None:
    """``scripts/real/mixed_batches.py 48 8``: a server's schedule, every 8th step an eager
    prefill at another shape instead of a decode's graph replay. The decodes' cycle makes the
    steps; a prefill's eager work (17 kernels and its argmax, its prompt's H2D copy) lands in
    the step of the replay after it, as a step's preparation does; the first precedes step 0."""
    p = _only(f"mixed_{mode}")
    assert "CUDA graph launch cycle [1] × 42" in p.choice
    f = p.analysis.frame
    after = [7, 14, 21, 28, 35]  # (prefills at 8, 16, ..., 40: the replays of 7 decodes apart)
    expect = [0] + [19 if k in after else 1 for k in range(1, 42)]
    assert f["eager_kernels"].tolist() == expect
    assert f["eager_memcpy_htod"].tolist() == [0] + [2 if k in after else 1 for k in range(1, 42)]
    assert (f["graph_launches"] == 1).all()
    assert (f.loc[after, "busy_us"] > 2 * f["busy_us"].median()).all()


def test_copies_and_a_memset_inside_graph_replays_are_not_eager() -> None:
    """``scripts/real/stream_graphs.py copies 40`` in node mode: each replay runs a D2D copy, an
    H2D copy from pinned memory and a memset beside its 13 kernels (the ``nsys stats`` CSVs
    count them: 80 H2D copies, 40 of each other); only the step's own H2D input copy and D2H
    token copy are eager (step 0 starts at its replay's launch: it has neither)."""
    p = _only("graph_copies_node")
    assert "CUDA graph launch cycle [1] × 40" in p.choice
    f = p.analysis.frame
    assert f["eager_memcpy"].tolist() == [0] + [2] * 39
    assert f["eager_memcpy_dtod"].sum() == 0 and f["eager_memset"].sum() == 0
    assert (f["graph_kernels"] == 13).all()


@pytest.mark.parametrize("mode", ["graph", "node"])
def test_graphs_overlapping_on_two_streams(mode: str) -> None:
    """``scripts/real/stream_graphs.py overlap 40 32768``: two graphs per step, one micro-batch
    each, replayed on two streams and overlapping on the GPU; then the next step's inputs are
    copied in (32 MiB each, about 1.2 ms) before its replays. role1 -> role2 is an overlap (a
    negative gap, no busy or idle time in it); role2 -> role1 is mostly those copies, which
    the next role1 queues behind though it is launched after role2 ended: work-bound, not
    host-bound. The replays reach into that gap (role1's outlasts role2's; the next role2
    starts before the next role1): graph replays in graph mode, their graph nodes in node mode,
    and in neither eager work."""
    from specscope.analysis.explain import GRAPH_NODE, explain_gap

    p = _only(f"stream_overlap_{mode}")
    assert "CUDA graph launch cycle [1, 4] × 40" in p.choice
    f = p.analysis.frame
    assert (f["gap_us:role1->role2"] < 0).all()
    assert (f["gap_busy_us:role1->role2"] == 0).all() and (f["gap_idle_us:role1->role2"] == 0).all()
    s = explain_gap(p.analysis, "role2->role1")
    n = s.numbers
    assert 0 < n["host_lag_us"] < n["gap_busy_us"] and n["gap_idle_us"] < 0.2 * n["gap_us"]
    assert s.queued_us > 0.8 * n["launch_latency_us"]  # (B waited in the queue, not launching)
    data = s.to_json()
    assert data["bound"] == "work" and "work-bound: role1 was launched" in data["text"]
    assert s.work[0].name == "memcpy HtoD" and s.work[0].count == 2
    mark = GRAPH_NODE if mode == "node" else " replay"
    assert any(i.name.endswith(mark) for i in s.work) and "eager work" not in data["text"]


def test_pytorch_emit_nvtx_ranges_are_named_by_their_operator() -> None:
    """``scripts/real/emit_nvtx.py 30``: an eager MLP under ``torch.autograd.profiler.emit_nvtx
    (record_shapes=True)``, whose every range name carries its operator id and shapes. Named by
    their operator, the ranges recur: 8 names where there were 840 (one per range), 120
    ``aten::linear`` ranges (4 per step), 7 ``cpu_us:`` metrics where there were 784 (one per
    call, in one step each)."""
    from specscope.analysis.auto import analyze_processes

    trace = load(DATA / "real/emit_nvtx.sqlite")
    counts = trace.nvtx["name"].value_counts()
    assert len(counts) == 8 and counts["aten::linear"] == 120 and counts["aten::argmax"] == 30
    (p,) = analyze_processes(trace.path).processes
    assert "kernel 'reduce_kernel' launched once per ~9" in p.choice
    cpu = sorted(c for c in p.analysis.frame.columns if c.startswith("cpu_us:"))
    # (each aten::argmax range holds its step's marker launch, so it straddles two steps)
    assert "cpu_us:aten::linear" in cpu and len(cpu) == 7


def test_an_export_without_cuda_api_calls(tmp_path) -> None:
    """``nsys export --tables`` of the GPU tables alone (``scripts/real/export_variants.sh``:
    ``tables_gpu``) leaves no CUDA API calls: no launch to tie a step to, so the whole capture
    is one window, and the API-call counts are unknown (NaN, said why), not 0."""
    import shutil
    import sqlite3
    from contextlib import closing

    from specscope.analysis.auto import analyze_processes
    from specscope.analysis.metrics import NO_API_CALLS

    path = tmp_path / "gpu_tables.sqlite"
    shutil.copyfile(DATA / "real/mixed_graph.sqlite", path)
    with closing(sqlite3.connect(path)) as con:
        con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME")
        con.commit()
    (p,) = analyze_processes(path).processes
    assert p.choice.startswith("the whole capture as one window")
    m = p.analysis.metrics
    api = [c for c in m.frame.columns if c.startswith("api_calls:")]
    assert len(api) == 3 and m.frame[api].isna().all().all()
    assert all(m.unavailable[c] == NO_API_CALLS for c in api)
    assert m.frame.loc[0, "eager_kernels"] > 0  # (the GPU side is all there)
    from click.testing import CliRunner

    from specscope.cli import cli

    r = CliRunner().invoke(cli, ["analyze", str(path)])
    assert r.exit_code == 0 and f"3 CUDA API metric(s) unavailable: {NO_API_CALLS}" in r.output


def test_transformers_static_cache_generate_without_options() -> None:
    """``scripts/real/hf_generate.py 2 --static``: transformers' ``generate`` with a static KV
    cache, whose decoding forward transformers compiles itself (CUDA graph trees). The second
    call replays a graph recorded again inside the capture (7, beside the first call's 4):
    both are one role, 23 decode steps each; the step holding the second call's prefill and
    recording is noted as another kind of step."""
    p = _only("hf_static")
    assert "CUDA graph launch cycle [4] × 23, [7] × 23" in p.choice
    assert "role1=graph:4|7" in p.hint
    f = p.analysis.frame
    assert len(f) == 46 and (f["graph_launches"] == 1).all()
    # (each call's last decode launches 2 kernels fewer; step 23: the prefill and recording)
    assert f["eager_kernels"].tolist() == [0] + [55] * 21 + [53, 331] + [55] * 21 + [53]
    (note,) = [n for n in p.analysis.notes if "another kind of step" in n]
    assert "(372 eager operations against 64: step 23)" in note


def test_an_export_with_every_table_is_the_default_export() -> None:
    """``scripts/real/export_lazy.sh``: one graph-mode report of ``mixed_batches.py 48 8``
    exported as nsys does by default (45 tables) and with ``--lazy=false`` (218, the empty ones
    too): the same zero-config analysis, the same totals."""
    from click.testing import CliRunner

    from specscope.cli import cli

    def outputs(name: str) -> list[str]:
        path = str(DATA / "real" / f"{name}.sqlite")
        views = (["--format", "json"], ["--totals"])
        runs = [CliRunner().invoke(cli, ["analyze", path, *view]) for view in views]
        assert all(r.exit_code == 0 for r in runs)
        return [r.stdout.replace(path, "TRACE") for r in runs]

    assert outputs("lazy_false") == outputs("lazy_default")


def test_one_loop_recorded_by_nsys_2023_and_2025_is_analysed_alike() -> None:
    """``scripts/real/record_older_nsys.sh``: ``eager_steps.py 30 30`` recorded on the H200 by nsys
    2023.4.4 (CUPTI 12.4, older than the driver) and by 2025.3.1: the same steps and counts,
    every kernel recorded by both (the note of a capture that lost kernels in neither)."""
    frames = []
    for name in ("nsys2023_eager", "nsys2025_eager"):
        p = _only(name)
        assert p.choice.startswith("NVTX ranges 'step' (30 ranges")
        assert not [n for n in p.analysis.notes if "kernel launch calls but" in n]
        frames.append(p.analysis.frame)
    counts = ["eager_kernels", "eager_memcpy_htod", "api_calls:cudaLaunchKernel"]
    for f in frames:
        assert len(f) == 30 and (f[counts] == [30, 1, 30]).all().all()
    assert _only("nsys2023_eager").analysis.nsys_version == "2023.4.4.54"


def test_graph_replays_nsys_2023_did_not_record_are_said_lost(tmp_path) -> None:
    """``mixed_batches.py 48 8`` recorded on the H200 by nsys 2023.4.4 (CUPTI 12.4, older than
    the driver): in graph mode it wrote every ``cudaGraphLaunch`` and no replay (no
    ``GRAPH_TRACE`` table), and zero-config can only find the prefills' kernel pattern; the
    note says the capture lost GPU work. In node mode it recorded the graphs' kernels: the
    decodes' cycle, as nsys 2025.3 gives it (``mixed_node``), and no such note."""
    lost = _only("nsys2023_mixed_graph")
    assert lost.analysis.capture_mode == "no-graphs"
    (note,) = [n for n in lost.analysis.notes if "the capture lost GPU work" in n]
    assert note.startswith("the median step made 7 CUDA graph launch calls but 0 graph replays")
    from click.testing import CliRunner

    from specscope.cli import cli

    path = str(DATA / "real" / "nsys2023_mixed_graph.sqlite")
    told = CliRunner().invoke(cli, ["explain", path])
    assert told.exit_code == 0 and f"cannot tell: {note}" in told.output  # (its idle: not real)
    compared = CliRunner().invoke(cli, ["compare", str(DATA / "real" / "mixed_graph.sqlite"), path])
    assert f"warning: {path}: {note}" in compared.output  # (a side's idle: not comparable)
    args = ["report", str(DATA / "real" / "mixed_graph.sqlite"), path, "--out", str(tmp_path)]
    reported = CliRunner().invoke(cli, args)  # (the steps chosen differ: no common gap)
    assert reported.exit_code == 2 and f"warning: {path}: {note}" in reported.output
    node, new = _only("nsys2023_mixed_node"), _only("mixed_node")
    assert node.choice == new.choice.replace(f"tid {new.analysis.tid}", f"tid {node.analysis.tid}")
    assert not [n for n in node.analysis.notes if "the capture lost GPU work" in n]
    for col in ("graph_launches", "graph_kernels", "eager_kernels", "eager_memcpy"):
        assert (node.analysis.frame[col] == new.analysis.frame[col]).all(), col


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("nsys2024_eager", "nsys2025_eager"),
        ("nsys2024_mixed_graph", "mixed_graph"),
        ("nsys2024_mixed_node", "mixed_node"),
    ],
)
def test_the_loops_recorded_by_nsys_2024_are_analysed_as_2025s(old, new) -> None:
    """``scripts/real/record_older_nsys.sh`` with nsys 2024.2.3 (Debian experimental's; CUPTI
    12.5, older than the H200's CUDA 13.0 driver, as 2023.4.4's): unlike 2023.4.4 it recorded
    graph mode's replays, and every export reads as nsys 2025.3.1's of the same program: the
    same steps, capture mode and counts, and no note of lost GPU work."""
    a, b = _only(old), _only(new)
    assert a.analysis.nsys_version == "2024.2.3.38"
    assert a.choice == b.choice.replace(f"tid {b.analysis.tid}", f"tid {a.analysis.tid}")
    assert a.analysis.capture_mode == b.analysis.capture_mode
    assert not [n for n in a.analysis.notes if "the capture lost GPU work" in n]
    fa, fb = a.analysis.frame, b.analysis.frame
    counts = [c for c in fb.columns if c.startswith(("eager_", "graph_", "api_calls:"))]
    assert len(fa) == len(fb) and counts
    for col in counts:
        assert fa[col].fillna(-1).tolist() == fb[col].fillna(-1).tolist(), col
