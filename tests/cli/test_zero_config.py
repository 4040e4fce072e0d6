"""``specscope analyze`` on traces nobody instrumented (issue [Z]): no spec, several processes in
one export, ``--totals`` without steps, ``ranges`` without ranges, bad regexes and targets."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import testdata
from click.testing import CliRunner

from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import load_preset
from specscope.analysis.synthetic import SyntheticExport
from specscope.cli import cli

GRAPHS = testdata.DATA / "graphs"


def run(*args, code: int = 0):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def test_no_spec_on_an_export_without_nvtx_finds_the_graph_cycle():
    r = run("analyze", GRAPHS / "run_graph_nonvtx.sqlite", "--format", "json")
    data = json.loads(r.stdout)
    assert data["steps"] == 10 and "graph launch cycle [1, 4, 7]" in data["choice"]
    assert "--anchors role1=graph:1,role2=graph:4,role3=graph:7" in data["hint"]
    assert data["summary"]["idle_us"]["n"] == 10
    assert any(line.startswith("note: steps: CUDA graph") for line in r.stderr.splitlines())


def test_no_spec_on_an_eager_loop_finds_the_step_kernel():
    r = run("analyze", GRAPHS / "eager_nonvtx.sqlite", "--format", "json")
    data = json.loads(r.stdout)
    assert data["steps"] == 12 and "step_marker_kernel" in data["hint"]


def test_two_processes_of_one_export_are_both_analysed():
    path = GRAPHS / "two_proc_graph.sqlite"
    data = json.loads(run("analyze", path, "--preset", "eagle", "--format", "json").stdout)
    assert [e["rank"] for e in data["exports"]] == ["pid2099", "pid2100"]
    assert data["ranks"]["labels"] == ["pid2099", "pid2100"] and data["ranks"]["steps"] == 12
    for entry in data["exports"]:  # each equal to its --pid analysis
        options = AnalyzeOptions(pid=entry["pid"]).counting("nccl")  # as for several ranks
        alone = analyze(path, load_preset("eagle"), options)
        ours = pd.DataFrame(entry["per_step"]).set_index("step").astype(float)  # null: NaN
        theirs = alone.metrics.frame[ours.columns].astype(float)
        pd.testing.assert_frame_equal(ours, theirs, check_dtype=False, check_names=False)
    picked = json.loads(run("analyze", path, "--pid", "2100", "--format", "json").stdout)
    assert picked["pid"] == 2100
    table = run("analyze", path).stdout
    assert "[pid2099]" in table and "[pid2100]" in table and "cross-rank view: 2 ranks" in table


def test_totals_work_when_the_spec_finds_no_steps():
    r = run("analyze", GRAPHS / "run_graph_nonvtx.sqlite", "--preset", "eagle", "--totals")
    assert "kernels (whole capture)" in r.stdout and "memory (whole capture)" in r.stdout
    assert "no steps" in r.stderr
    run("analyze", GRAPHS / "run_graph_nonvtx.sqlite", "--preset", "eagle", code=2)


def test_an_export_without_gpu_work_or_steps_is_one_error_line(tmp_path):
    x = SyntheticExport()
    x.range("something", 0, 100)
    r = run("analyze", x.write(tmp_path / "cpu.sqlite"), code=2)
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("Error:")


def test_ranges_says_when_there_are_none_and_shows_projection():
    r = run("ranges", GRAPHS / "run_graph_nonvtx.sqlite")
    assert r.stdout.count("\n") == 1 and "no NVTX ranges" in r.stdout
    out = run("ranges", GRAPHS / "run_graph_kpool_nvtx.sqlite", "--format", "json").stdout
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows["step"]["depth"] == 0 and rows["step"]["gpu_ops"] > 0


def test_bad_regex_and_db_targets_are_one_error_line(tmp_path):
    export = tmp_path / "e.sqlite"
    shutil.copy(GRAPHS / "run_graph_nonvtx.sqlite", export)
    before = export.read_bytes()
    cases = [
        (["--count-kernels", "copy("], "--count-kernels"),
        (["--collective", "[nccl"], "--collective"),
        (["--anchors", "a=kernel:(x"], "--anchors"),
        (["--db", export], "--db"),  # the input itself
        (["--db", tmp_path], "--db"),  # a folder
    ]
    for extra, option in cases:
        r = run("analyze", export, *extra, code=2)
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error:") and option in lines[0], lines
    assert export.read_bytes() == before


def test_compare_takes_one_process_of_an_export_and_says_which():
    path = GRAPHS / "two_proc_graph.sqlite"
    r = run("compare", path, path, "--min-steps", "5", "--format", "markdown")
    notes = [line for line in r.stderr.splitlines() if "pick another with --pid" in line]
    assert len(notes) == 2 and "using pid 2099" in notes[0]
    picked = run("compare", path, path, "--pid", "2100", "--min-steps", "5")
    assert "pick another with --pid" not in picked.stderr


def test_compare_per_rank_pairs_the_processes_of_two_exports(tmp_path):
    path = GRAPHS / "two_proc_graph.sqlite"
    out = run("compare", path, path, "--per-rank", "--min-steps", "5", "--format", "json")
    data = json.loads(out.stdout)
    assert [c["labels"] for c in data["comparisons"]] == [
        ["Before[pid2099]", "After[pid2099]"],
        ["Before[pid2100]", "After[pid2100]"],
    ]
    md = run("compare", path, path, "--per-rank", "--min-steps", "5", "--format", "markdown")
    assert md.stdout.count("### Before[pid") == 2
    one = GRAPHS / "run_graph_kpool_nvtx.sqlite"  # one process against two: one error line
    r = run("compare", one, path, "--per-rank", "--preset", "eagle", code=2)
    assert r.stderr.startswith("Error:") and len(r.stderr.splitlines()) == 1
    assert "different numbers of processes" in r.stderr


def test_report_per_rank_writes_one_report_per_process(tmp_path):
    path = GRAPHS / "two_proc_graph.sqlite"
    r = run("report", path, path, "--per-rank", "--min-steps", "5", "--out", tmp_path)
    index = tmp_path.joinpath(r.stdout.strip())
    assert index.name == "index.html" and index.is_file()
    top = index.parent
    assert sorted(p.name for p in top.iterdir()) == ["index.html", "rank0", "rank1", "summary.md"]
    summary = (top / "summary.md").read_text()
    assert "## rank0: Before[pid2099] vs After[pid2099]" in summary
    assert "## rank1: Before[pid2100] vs After[pid2100]" in summary
    page = index.read_text()
    assert 'href="rank0/report.html"' in page and 'href="rank1/report.html"' in page
    # each rank's report holds the numbers of that process alone (its --pid report)
    for rank, pid in (("rank0", "2099"), ("rank1", "2100")):
        one = run("report", path, path, "--pid", pid, "--min-steps", "5", "--out", tmp_path / pid)
        alone = tmp_path.joinpath(one.stdout.strip()).parent / "summary.md"
        assert _value_rows(alone) and _value_rows(alone) == _value_rows(top / rank / "summary.md")
        assert "--per-rank" in (top / rank / "report.html").read_text()


def _value_rows(summary):
    """The PR table's rows of a summary.md, without their labels: (metric, before, after)."""
    rows = [line.split("|") for line in summary.read_text().splitlines() if line.startswith("| ")]
    return [(r[1], r[2], r[3]) for r in rows[1:] if r[1].strip() != "---"]


def test_report_per_rank_refuses_different_process_counts(tmp_path):
    one = GRAPHS / "run_graph_kpool_nvtx.sqlite"
    two = GRAPHS / "two_proc_graph.sqlite"
    r = run("report", one, two, "--per-rank", "--preset", "eagle", "--out", tmp_path, code=2)
    assert r.stderr.startswith("Error:") and "different numbers of processes" in r.stderr
    assert list(tmp_path.iterdir()) == []


REAL = testdata.DATA / "real"


def test_compare_report_and_explain_choose_steps_as_analyze_does(tmp_path):
    """No spec given: each export's steps are chosen as `analyze` chooses them (here XLA's CUDA
    graph cycle), said in a note; the report's gap is the chosen anchors'."""
    jax = REAL / "jax_loop.sqlite"
    r = run("compare", jax, jax, "--format", "json")
    assert any("steps: CUDA graph launch cycle [4]" in line for line in r.stderr.splitlines())
    (comparison,) = json.loads(r.stdout)["comparisons"]
    assert "gap_us:role1->role1" in comparison["metrics"]
    assert "differently" not in r.stderr
    r = run("report", jax, jax, "--out", tmp_path)
    (folder,) = tmp_path.iterdir()
    assert (folder / "timeline.png").is_file()
    assert "role1 → role1" in (folder / "summary.md").read_text()
    r = run("explain", jax)
    assert r.stdout.startswith("role1 → role1")


def test_inputs_whose_steps_were_chosen_differently_are_warned_about(tmp_path):
    r = run("compare", REAL / "jax_loop.sqlite", REAL / "unified_memory.sqlite")
    assert "steps were chosen differently" in r.stderr  # a graph cycle, a kernel pattern
    r = run("compare", REAL / "jax_loop.sqlite", REAL / "torch_compile.sqlite")
    assert "differently" not in r.stderr  # both: one cycle of graph 4
    # a kernel pattern has no anchors: the report and explain take each step's marker launch
    # as its one anchor (the gap from one step's GPU work to the next one's), and say so
    r = run("report", *[REAL / "unified_memory.sqlite"] * 2, "--out", tmp_path)
    assert "each step its own anchor: --anchors 'step=kernel:" in r.stderr
    (folder,) = tmp_path.iterdir()
    assert "step → step" in (folder / "summary.md").read_text()
    assert (folder / "timeline.png").is_file()
    # a spec given by hand is taken as it is: no anchors, no gap to tell
    given = ["--step", "kernel:^elementwise_kernel$"]
    r = run("report", *[REAL / "unified_memory.sqlite"] * 2, *given, "--out", tmp_path, code=2)
    assert "give --gap" in r.output


def test_explain_and_report_take_nvtx_steps_without_anchors_as_their_own():
    """Zero-config's NVTX step ranges with nothing nested to anchor at: ``explain`` tells the
    gap between consecutive steps' GPU work (``step->step``); ``analyze`` keeps the steps as
    they are (no gap metrics of its own)."""
    loop = REAL / "eager_steps_events.sqlite"
    r = run("explain", loop, "--format", "json")
    assert "each step its own anchor: --anchors step" in r.stderr
    data = json.loads(r.stdout)
    assert data["text"].startswith("step → step")
    r = run("analyze", loop, "--format", "json")
    assert not any(k.startswith("gap_us:") for k in json.loads(r.stdout)["summary"])
    assert "its own anchor" not in r.stderr


def test_several_exports_without_nvtx_are_analysed_without_a_spec():
    r = run("analyze", REAL / "jax_loop.sqlite", REAL / "torch_compile.sqlite", "--format", "json")
    data = json.loads(r.stdout)
    assert [e["steps"] for e in data["exports"]] == [200, 40] and not data["failed"]


def test_per_rank_compare_of_an_export_without_nvtx(tmp_path):
    """Two processes, no NVTX (the two-process export with its ranges dropped): each rank's
    steps are its graph cycle, said per rank, and rank i is compared with rank i."""
    import sqlite3

    path = tmp_path / "two_proc_nonvtx.sqlite"
    shutil.copy(GRAPHS / "two_proc_graph.sqlite", path)
    path.chmod(0o644)
    with sqlite3.connect(path) as con:
        con.execute("DROP TABLE NVTX_EVENTS")
    r = run("compare", path, path, "--per-rank", "--min-steps", "5", "--format", "json")
    data = json.loads(r.stdout)
    assert [c["labels"] for c in data["comparisons"]] == [
        ["Before[pid2099]", "After[pid2099]"],
        ["Before[pid2100]", "After[pid2100]"],
    ]
    for pid in (2099, 2100):
        assert f"pid{pid}: steps: CUDA graph launch cycle" in r.stderr
    assert all("gap_us:role2->role1" in c["metrics"] for c in data["comparisons"])
