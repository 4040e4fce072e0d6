"""The command line: output formats, spec flags, the results database, ``ranges``, help text."""

from __future__ import annotations

import io
import json

import click
import pandas as pd
import pytest
import sqlite_utils
from click.testing import CliRunner
from eagle_exports import build_eagle

from specscope.analysis.synthetic import SyntheticExport
from specscope.cli import cli

STATS = ["n", "mean", "p10", "p50", "p90", "min", "max", "unit"]


def run(*args: str, code: int = 0):
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    return result


def test_json_has_the_documented_keys(eagle_export):
    path = eagle_export(3)
    data = json.loads(run("analyze", path, "--format", "json").stdout)
    for key in ("trace", "nsys_version", "capture_mode", "steps", "summary", "per_step"):
        assert key in data
    assert data["trace"] == str(path)
    assert data["nsys_version"] == "2025.3.2.0"
    assert data["capture_mode"] == "node"
    assert data["steps"] == 3
    for metric, entry in data["summary"].items():
        assert list(entry)[:8] == STATS, metric
    w = data["summary"]["window_us"]
    assert (w["n"], w["min"], w["max"], w["unit"]) == (3, 5.8, 10, "us")
    assert w["mean"] == pytest.approx(25.8 / 3)
    assert data["summary"]["occupancy_pct"]["unit"] == "%"
    assert [s["step"] for s in data["per_step"]] == [0, 1, 2]
    assert set(data["per_step"][0]) == {"step", *data["summary"]}
    assert data["per_step"][0]["gap_us:draft_extend.replay->draft.replay"] is None  # NaN
    assert data["per_step"][1]["gap_us:draft_extend.replay->draft.replay"] == 5


def test_json_marks_unavailable_metrics(eagle_export):
    result = run("analyze", eagle_export(3, mode="graph"), "--format", "json", "--totals")
    data = json.loads(result.stdout)
    assert data["capture_mode"] == "graph"
    g = data["summary"]["graph_kernels"]
    assert g["n"] == 0 and g["mean"] is None and "node" in g["unavailable"]
    assert "unavailable" not in data["summary"]["window_us"]
    assert data["totals"]["kernels"] == []
    # graph mode counts the eager launches of a pattern: only graph_kernels is unknown
    assert "unavailable" not in data["summary"]["kernel_us:fused_metadata_copy"]
    warnings = result.stderr.splitlines()
    assert "warning: 1 GPU metric(s) unavailable: " + g["unavailable"] in warnings
    assert any("eager launches only" in w for w in warnings)


def test_csv_has_one_row_per_step(eagle_export):
    out = run("analyze", eagle_export(4), "--format", "csv", "--skip", "1").stdout
    frame = pd.read_csv(io.StringIO(out), index_col="step")
    assert list(frame.index) == [1, 2, 3]
    assert frame["window_us"].tolist() == pytest.approx([10.0, 10.0, 5.8])
    assert frame["kernels:fused_metadata_copy"].tolist() == [1, 1, 1]


def test_table_output(eagle_export):
    result = run("analyze", eagle_export(3), "--totals", "--timeline")
    out = result.stdout
    assert "nsys 2025.3.2.0" in out and "capture mode node" in out and "steps 3" in out
    assert "window_us" in out and "kernels (whole capture)" in out
    # idle_us 6.8, 6.8, 2.6: the median step is step 0 (lower middle of 2.6 [6.8] 6.8 by step)
    assert "kernel timeline of step 0 (median idle_us)" in out
    assert result.stderr == ""


def test_step_anchors_domain_instead_of_preset(eagle_export):
    path = eagle_export(3)
    out = run(
        "analyze", path, "--step", "step", "--anchors", "draft.replay, verify.replay",
        "--domain", "specscope", "--format", "csv",
    ).stdout  # fmt: skip
    frame = pd.read_csv(io.StringIO(out), index_col="step")
    gaps = sorted(c for c in frame if c.startswith("gap_us:"))
    assert gaps == ["gap_us:draft.replay->verify.replay", "gap_us:verify.replay->draft.replay"]
    assert frame["gap_us:draft.replay->verify.replay"].tolist() == pytest.approx([0.9] * 3)
    # verify(k-1) ends 4500, draft(k) starts 11_500
    assert frame["gap_us:verify.replay->draft.replay"].tolist()[1:] == pytest.approx([7.0] * 2)
    assert not any(c.startswith("kernels:") for c in frame)  # no preset, no count_kernels


def test_empty_domain_means_any_domain(eagle_export):
    path = eagle_export(3, domain=None)
    run("analyze", path, "--preset", "eagle", code=2)  # the preset wants domain "specscope"
    data = json.loads(run("analyze", path, "--domain", "", "--format", "json").stdout)
    assert data["steps"] == 3 and data["spec"]["domain"] is None


def test_count_kernels_adds_columns(eagle_export):
    out = run(
        "analyze", eagle_export(3), "--count-kernels", "_k$", "--count-kernels", "^verify",
        "--format", "csv",
    ).stdout  # fmt: skip
    frame = pd.read_csv(io.StringIO(out), index_col="step")
    assert frame["kernels:_k$"].tolist() == [3, 3, 3]
    assert frame["kernels:^verify"].tolist() == [1, 1, 1]
    assert frame["kernels:fused_metadata_copy"].tolist() == [1, 1, 1]  # from the preset


def test_db_appends_runs(eagle_export, tmp_path_factory):
    db_path = tmp_path_factory.mktemp("db") / "results.sqlite"
    first, second = eagle_export(3), eagle_export(4, mode="graph")
    r1 = run("analyze", first, "--db", db_path)
    assert f"note: appended run 1 to {db_path}" in r1.stderr.splitlines()
    r2 = run("analyze", second, "--db", db_path, "--skip", "1")
    assert "note: skipped 1 warm-up step(s)" in r2.stderr.splitlines()
    assert "warning: skipped" not in r2.stderr  # information is not a warning
    db = sqlite_utils.Database(db_path)
    assert {"runs", "step_metrics", "summary"} <= set(db.table_names())
    runs = list(db["runs"].rows)
    assert [(r["id"], r["trace"], r["steps"], r["skip"]) for r in runs] == [
        (1, str(first), 3, 0),
        (2, str(second), 3, 1),
    ]
    assert [r["capture_mode"] for r in runs] == ["node", "graph"]
    for run_id in (1, 2):
        metrics = db["summary"].count_where("run_id = ?", [run_id])
        assert metrics > 20
        assert db["step_metrics"].count_where("run_id = ?", [run_id]) == 3 * metrics
    row = next(db["summary"].rows_where("run_id = 2 AND metric = 'graph_kernels'"))
    assert row["n"] == 0 and not row["available"]
    values = [
        r["value"]
        for r in db["step_metrics"].rows_where(
            "run_id = 1 AND metric = 'window_us'", order_by="step"
        )
    ]
    assert values == pytest.approx([10.0, 10.0, 5.8])


def test_ranges_lists_names_with_counts(eagle_export):
    path = eagle_export(3)
    out = run("ranges", path, "--format", "csv").stdout
    frame = pd.read_csv(io.StringIO(out)).set_index("name")
    assert frame["count"].to_dict() == {
        "draft.replay": 3,
        "draft_extend.replay": 3,
        "step": 3,
        "verify.replay": 3,
    }
    assert set(frame["domain"]) == {"specscope"}
    assert frame.loc["step", "mean_us"] == pytest.approx(9.0)
    table = run("ranges", path).stdout
    assert "draft_extend.replay" in table and "specscope" in table
    records = json.loads(run("ranges", path, "--format", "json").stdout)
    assert {r["name"]: r["count"] for r in records}["step"] == 3


def test_warnings_are_single_lines(eagle_export, write_export):
    x = build_eagle(3)
    build_eagle(2, x=x, pid=200, tid=200, t0=100_000)
    x.range("step", 200_000, None, domain="specscope")
    result = run("analyze", write_export(x))
    lines = result.stderr.splitlines()
    assert all(line.startswith(("warning: ", "note: ")) for line in lines), lines
    assert any(line.startswith("warning: ") and "never closed" in line for line in lines)
    # both processes are analysed, each under its label, then the cross-rank view
    assert "[pid100]" in result.stdout and "[pid200]" in result.stdout
    assert "cross-rank view: 2 ranks, 2 steps in common" in result.stdout
    picked = run("analyze", write_export(x), "--pid", "200", "--format", "json")
    assert json.loads(picked.stdout)["pid"] == 200


def test_no_cuda_export_is_not_an_error(write_export):
    x = SyntheticExport()
    for k in range(3):
        x.range("step", 1000 * k, 1000 * k + 900, domain="specscope")
    result = run("analyze", write_export(x), "--format", "json", "--timeline")
    data = json.loads(result.stdout)
    assert data["capture_mode"] == "no-cuda"
    assert data["summary"]["cpu_step_us"]["p50"] == 0.9
    assert data["summary"]["window_us"]["n"] == 0
    why = [line for line in result.stderr.splitlines() if "no CUDA activity" in line]
    assert len(why) == 1 and why[0].startswith("warning: ") and "GPU metric(s)" in why[0]
    # the table format with --timeline says there is no timeline instead of failing
    table = run("analyze", write_export(x), "--timeline", "--median-by", "cpu_step_us")
    assert "no kernel timeline" in table.stderr


def test_every_command_has_help_with_an_example():
    commands = {"specscope": cli, **cli.commands}
    assert {"analyze", "ranges"} <= set(commands)
    for name, command in commands.items():
        assert command.help and command.help.strip(), f"{name} has no help text"
        assert any(line.strip().startswith("Example:") for line in command.help.splitlines()), (
            f"{name}'s help has no 'Example:' line"
        )
        args = [] if command is cli else [name]
        out = run(*args, "--help").stdout
        assert "Example:" in out, name
        if command is not cli:  # the example runs this command
            assert f"Example: specscope {name}" in out, name
        if isinstance(command, click.Command):
            for param in command.params:
                if isinstance(param, click.Option) and not param.hidden and param.name != "help":
                    assert param.help or param.name == "fmt", f"{name} {param.name}: no help"


def test_preset_and_step_together_is_one_error_line(eagle_export):
    result = run("analyze", eagle_export(3), "--preset", "eagle", "--step", "step", code=2)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error:") and "--preset" in lines[0]
