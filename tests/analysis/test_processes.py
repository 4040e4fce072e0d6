"""Every process and device of one export (:func:`specscope.analysis.auto.analyze_processes`).

The proof on a real export of two processes (``tests/data/graphs/two_proc_graph.sqlite``, two
ranks on one H200): each process analysed without ``pid`` equals its ``AnalyzeOptions(pid=P)``
analysis, for NVTX steps (``eagle``) and for graph anchors; plus the cross-rank view.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import testdata

from specscope.analysis import ranks
from specscope.analysis.auto import analyze_processes, process_labels
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import StepSpec, load_preset
from specscope.analysis.synthetic import SyntheticExport
from specscope.errors import SpecError

TWO = testdata.DATA / "graphs" / "two_proc_graph.sqlite"
PIDS = [2099, 2100]
GRAPH_SPEC = StepSpec(
    "", ("draft.replay=graph:19|22", "verify.replay=graph:7|10", "draft_extend.replay=graph:31|34")
)


@pytest.mark.parametrize(
    "spec", [load_preset("eagle"), GRAPH_SPEC, None], ids=["nvtx", "graph", "auto"]
)
def test_each_process_equals_its_pid_analysis(spec):
    x = analyze_processes(TWO, spec, AnalyzeOptions(skip=1))
    assert [p.pid for p in x.processes] == PIDS
    assert x.labels == ["pid2099", "pid2100"] and [p.device for p in x.processes] == [0, 0]
    for p in x.processes:
        one = analyze(TWO, spec or load_preset("eagle"), AnalyzeOptions(skip=1, pid=p.pid))
        assert len(one.frame) == 11
        pd.testing.assert_frame_equal(p.analysis.frame, one.frame)
        assert p.analysis.tid == one.tid
    expected = ranks.cross_rank({p.rank: p.analysis.frame for p in x.processes})
    pd.testing.assert_frame_equal(x.cross_rank, expected)
    assert x.skipped == {}


def test_pid_picks_one_process():
    x = analyze_processes(TWO, None, AnalyzeOptions(pid=2100))
    assert x.labels == ["pid2100"] and x.cross_rank is None


def test_json_has_the_shape_of_several_exports():
    data = json.loads(json.dumps(analyze_processes(TWO, load_preset("eagle")).to_json()))
    assert [(e["rank"], e["pid"], e["device"]) for e in data["exports"]] == [
        ("pid2099", 2099, 0),
        ("pid2100", 2100, 0),
    ]
    assert data["exports"][0]["choice"] == "the given spec"
    assert data["ranks"]["labels"] == ["pid2099", "pid2100"] and data["ranks"]["steps"] == 12


def test_spec_without_steps_anywhere_is_the_usual_error():
    spec = StepSpec("no_such_range")
    with pytest.raises(SpecError) as expected:
        analyze(TWO, spec)
    with pytest.raises(SpecError) as got:
        analyze_processes(TWO, spec)
    assert str(got.value) == str(expected.value)


def test_process_without_steps_is_skipped_with_its_reason(write_export):
    x = SyntheticExport()
    with x.nvtx("step", 0, 1_000, domain="specscope"):
        corr = x.api("cudaLaunchKernel", 100, 110)
    x.kernel("k", 200, 300, corr)
    corr = x.api("cudaLaunchKernel", 100, 110, pid=200, tid=200)
    x.kernel("helper", 150, 250, corr, pid=200)
    out = analyze_processes(write_export(x), load_preset("eagle"))
    assert out.labels == ["pid100"]
    assert "no 'step' ranges in process 200" in out.skipped["pid 200"]


def test_several_devices_of_one_process(write_export):
    x = SyntheticExport()
    for i, name in enumerate("abcdef"):
        corr = x.api("cudaLaunchKernel", 1_000 * i, 1_000 * i + 10)
        x.kernel(name, 1_000 * i + 100, 1_000 * i + 200, corr, device=i % 2)
    out = analyze_processes(write_export(x))
    assert out.labels == ["pid100.dev0", "pid100.dev1"]
    assert [p.analysis.frame["eager_kernels"].iloc[0] for p in out.processes] == [3, 3]
    assert out.cross_rank is not None and len(out.cross_rank) == 1
    only = analyze_processes(write_export(x), None, AnalyzeOptions(device=1))
    assert only.labels == ["pid100"] and only.processes[0].device == 1


def test_process_labels():
    assert process_labels([(1, 0), (2, 0)]) == ["pid1", "pid2"]
    assert process_labels([(1, 0), (1, 1), (2, None)]) == ["pid1.dev0", "pid1.dev1", "pid2.dev-"]
