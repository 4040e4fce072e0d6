"""Steps without NVTX: graph anchors, ``--step kernel:REGEX`` (:mod:`.launch_steps`).

The proof that the definitions agree: on H200 exports that have both NVTX ranges and CUDA
graphs, NVTX-defined steps (``--preset eagle``) and graph-defined steps give the same per-step
GPU metrics for every step after the first.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import testdata
from click.testing import CliRunner

from specscope.analysis.launch_steps import cycle_steps
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import (
    Marker,
    StepSpec,
    load_preset,
    parse_marker,
    self_anchored,
    split_anchor,
)
from specscope.cli import cli
from specscope.errors import SpecError

DATA = testdata.DATA / "graphs"
NAMES = ("draft.replay", "verify.replay", "draft_extend.replay")
ANCHORS = {  # per export: graph ids of draft, verify, draft-extend (several: one per bucket)
    "run_graph_kpool_nvtx": ("1", "4", "7"),
    "cycle_graph_nvtx": ("19|22", "7|10", "31|34"),
}
COUNTS = [
    "eager_memcpy",
    "eager_memcpy_htod",
    "eager_memcpy_dtoh",
    "eager_memcpy_dtod",
    "eager_memcpy_bytes",
    "eager_memset",
    "eager_kernels",
    "graph_launches",
    "api_calls:cudaMemcpyAsync",
    "api_calls:cudaLaunchKernel",
    "api_calls:cudaGraphLaunch",
]


def graph_spec(ids: tuple[str, ...]) -> StepSpec:
    return StepSpec("", tuple(f"{n}=graph:{i}" for n, i in zip(NAMES, ids, strict=True)))


@pytest.mark.parametrize("name", sorted(ANCHORS))
def test_nvtx_and_graph_steps_agree(name):
    path = DATA / f"{name}.sqlite"
    nvtx = analyze(path, load_preset("eagle"), AnalyzeOptions(skip=1)).metrics.frame
    graph = analyze(path, graph_spec(ANCHORS[name]), AnalyzeOptions(skip=1)).metrics.frame
    assert len(nvtx) == len(graph) >= 9
    assert graph.index.tolist() == nvtx.index.tolist()
    gaps = [c for c in nvtx if c.startswith("gap_us:")]
    assert len(gaps) == 3
    for col in [*gaps, "idle_us", "busy_us", "window_us"]:
        assert np.allclose(graph[col], nvtx[col], atol=1.0), col
    for col in COUNTS:
        assert (graph[col] == nvtx[col]).all(), col


@pytest.mark.parametrize("name", sorted(ANCHORS))
def test_medians_equal_after_every_nvtx_event_is_deleted(name, tmp_path):
    """The issue's proof: a copy of the export with NVTX_EVENTS emptied, analysed with graph
    anchors, gives the NVTX analysis' per-step medians (gaps and idle within 1 µs, counts
    exact)."""
    import shutil
    import sqlite3

    path = DATA / f"{name}.sqlite"
    bare = shutil.copy(path, tmp_path / "bare.sqlite")
    with sqlite3.connect(bare) as con:
        con.execute("DELETE FROM NVTX_EVENTS")
    con.close()
    nvtx = analyze(path, load_preset("eagle"), AnalyzeOptions(skip=1)).summary
    graph = analyze(bare, graph_spec(ANCHORS[name]), AnalyzeOptions(skip=1)).summary
    gaps = [m for m in nvtx.index if m.startswith("gap_us:")]
    for m in [*gaps, "idle_us", "busy_us", "window_us"]:
        assert abs(graph.loc[m, "p50"] - nvtx.loc[m, "p50"]) <= 1.0, m
    for m in COUNTS:
        assert graph.loc[m, "p50"] == nvtx.loc[m, "p50"], m


@pytest.mark.parametrize(
    ("name", "ids", "steps"),
    [
        ("run_graph_nonvtx", ("1", "4", "7"), 10),
        ("run_node_nonvtx", ("1", "4", "7"), 10),
        ("cycle_graph_nonvtx", ("19|22", "7|10", "31|34"), 12),
        ("cycle_node_nonvtx", ("19|22", "7|10", "31|34"), 12),
    ],
)
def test_graph_anchors_without_nvtx(name, ids, steps):
    a = analyze(DATA / f"{name}.sqlite", graph_spec(ids))
    frame = a.metrics.frame
    assert len(frame) == steps
    assert (frame["graph_launches"] == 3).all()
    for pair in ("draft_extend.replay->draft.replay", "draft.replay->verify.replay"):
        assert frame[f"gap_us:{pair}"].iloc[1:].notna().all()
    assert (frame["idle_us"] > 0).all()


def test_sglang_preset_picks_roles_by_capture_order():
    path = DATA / "cycle_graph_nonvtx.sqlite"
    preset = analyze(path, load_preset("sglang_eagle"), AnalyzeOptions(skip=1)).metrics.frame
    explicit = analyze(
        path, graph_spec(ANCHORS["cycle_graph_nvtx"]), AnalyzeOptions(skip=1)
    ).metrics.frame
    pd.testing.assert_frame_equal(preset, explicit)


def test_step_kernel_regex_on_an_eager_loop():
    spec = StepSpec("kernel:step_marker", count_kernels=("step_marker",))
    frame = analyze(DATA / "eager_nonvtx.sqlite", spec).metrics.frame
    assert len(frame) == 12
    assert (frame["kernels:step_marker"] == 1).all()
    assert (frame["eager_memcpy"] == 7).all() and (frame["eager_kernels"] == 66).all()


def test_cycle_steps_definition():
    # role 0 twice before the first cycle closes (capture began mid-cycle): the later one
    anchors = pd.DataFrame(
        {"role": [0, 0, 1, 0, 1, 0], "start_ns": [0, 10, 20, 40, 50, 70],
         "end_ns": [5, 15, 25, 45, 55, 75]}
    )  # fmt: skip
    starts, ends = cycle_steps(anchors, 2)
    assert starts.tolist() == [10, 25] and ends.tolist() == [25, 55]  # the last A: no step
    starts, ends = cycle_steps(anchors.iloc[2:], 2)  # no A before the first B: no step 0
    assert starts.tolist() == [25] and ends.tolist() == [55]


def test_marker_parsing():
    assert parse_marker("graph:7|10") == Marker("graph", graph_ids=(7, 10))
    assert parse_marker("graph-role:2") == Marker("graph-role", role=2)
    assert parse_marker("kernel:step_.*") == Marker("kernel", pattern="step_.*")
    assert parse_marker("draft.replay") is None
    assert split_anchor("draft.replay") == ("draft.replay", None)
    spec = StepSpec("", ("a=graph:1", "b=kernel:x"))
    assert spec.anchor_names == ("a", "b") and spec.from_launches
    for bad in ("a=graph:x", "a=graph-role:0", "a=kernel:(", "=graph:1", "a=foo:1"):
        with pytest.raises(SpecError):
            split_anchor(bad)


def test_a_spec_without_anchors_anchored_at_its_own_steps():
    """:func:`self_anchored` (what ``explain`` and ``report`` give zero-config's steps found
    without anchors): the step range or the step's marker launch as the one anchor."""
    assert self_anchored(StepSpec("decode")) == StepSpec("decode", ("decode",))
    marker = StepSpec("kernel:^nvjet$")
    assert self_anchored(marker) == StepSpec("kernel:^nvjet$", ("step=kernel:^nvjet$",))
    assert self_anchored(marker).anchor_markers == (Marker("kernel", pattern="^nvjet$"),)
    assert self_anchored(StepSpec("graph:4")).anchors == ("step=graph:4",)
    assert self_anchored(StepSpec("step", ("draft.replay",))) is None  # anchors of its own
    assert self_anchored(StepSpec("", ("a=graph:1",))) is None  # a cycle
    for name in ("batch=8", "a,b", "a->b", " "):  # no anchor could be named so
        assert self_anchored(StepSpec(name)) is None
    domain = StepSpec("step", domain="specscope")
    assert self_anchored(domain) == StepSpec("step", ("step",), domain="specscope")


@pytest.mark.parametrize(
    "args",
    [
        ["--anchors", "a=graph:x"],
        ["--anchors", "a=graph:99,b=graph:98"],  # no such graphs
        ["--preset", "sglang_eagle", "--anchors", "draft.replay,verify.replay"],  # NVTX anchors
    ],
)
def test_cli_bad_anchors_are_one_line_errors(args):
    out = CliRunner().invoke(cli, ["analyze", str(DATA / "run_graph_nonvtx.sqlite"), *args])
    assert out.exit_code == 2, out.output
    assert out.output.startswith("Error:") and len(out.output.strip().splitlines()) == 1


def test_cli_graph_anchors():
    out = CliRunner().invoke(
        cli,
        ["analyze", str(DATA / "cycle_graph_nonvtx.sqlite"), "--skip", "1", "--format", "csv",
         "--anchors", "draft.replay=graph:19|22,verify.replay=graph:7|10,"
         "draft_extend.replay=graph:31|34"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "gap_us:draft_extend.replay->draft.replay" in out.output
