"""Many exports: parallel processes, one corrupt export among many, the CLI and the results DB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlite_utils
from click.testing import CliRunner
from eagle_exports import EAGLE_SPEC, build_eagle

from specscope.analysis import progress
from specscope.analysis.inputs import expand
from specscope.analysis.many import analyze_many, rank_labels
from specscope.cli import cli


@pytest.fixture
def rank_exports(tmp_path: Path) -> list[Path]:
    out = []
    for r in range(3):
        x = build_eagle(5, pid=500 + r, tid=600 + r, period=10_000 + 1_000 * r)
        out.append(x.write(tmp_path / f"rank{r}.sqlite"))
    return out


@pytest.fixture
def corrupt(tmp_path: Path) -> Path:
    bad = tmp_path / "rank9.sqlite"
    bad.write_bytes(b"SQLite format 3\x00" + b"\x10\x00" + b"\xff" * 200)
    return bad


def test_process_pool_results_in_input_order(rank_exports, corrupt) -> None:
    paths = [rank_exports[0], corrupt, *rank_exports[1:]]
    seen = []
    results = analyze_many(paths, EAGLE_SPEC, jobs=2, on_result=lambda r: seen.append(r.path))
    assert [r.path for r in results] == paths and sorted(seen) == sorted(paths)
    assert [r.ok for r in results] == [True, False, True, True]
    assert "rank9.sqlite" in results[1].error and "\n" not in results[1].error
    assert [r.analysis.pid for r in results if r.ok] == [500, 501, 502]
    assert results[0].analysis.summary.loc["window_us", "p50"] == pytest.approx(10.0)
    assert results[0].analysis.to_json()["steps"] == 5  # detached analyses still render


def test_expand_folder_and_labels(tmp_path, rank_exports) -> None:
    assert expand([tmp_path]) == rank_exports
    assert rank_labels(rank_exports) == ["rank0", "rank1", "rank2"]
    assert rank_labels([Path("a/x.sqlite"), Path("b/x.sqlite")]) == ["a/x.sqlite", "b/x.sqlite"]
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(cli, ["analyze", str(empty)])
    assert result.exit_code == 2 and "folder without *.sqlite exports" in result.output


def test_cli_table_csv_json(tmp_path, rank_exports) -> None:
    runner = CliRunner()
    table = runner.invoke(cli, ["analyze", str(tmp_path), "--jobs", "2"])
    assert table.exit_code == 0, table.output
    assert table.output.count("nsys 2025.3.2.0") == 3
    assert "cross-rank view: 3 ranks, 5 steps in common" in table.output
    csv = runner.invoke(cli, ["analyze", *map(str, rank_exports), "--format", "csv", "-j", "1"])
    lines = csv.output.splitlines()
    assert lines[0].startswith("step,slowest_rank,last_to_arrive,window_us:min") and len(lines) == 6
    assert all(line.split(",")[1] == "rank2" for line in lines[1:-1])
    data = json.loads(
        runner.invoke(cli, ["analyze", *map(str, rank_exports[:2]), "--format", "json"]).output
    )
    assert [e["rank"] for e in data["exports"]] == ["rank0", "rank1"] and data["failed"] == []
    assert data["ranks"]["labels"] == ["rank0", "rank1"] and data["ranks"]["steps"] == 5
    assert data["ranks"]["stragglers"][1]["slowest_steps"] == 4


def test_cli_one_corrupt_export_fails_alone(tmp_path, rank_exports, corrupt) -> None:
    db = tmp_path / "results.sqlite"
    args = ["analyze", str(rank_exports[0]), str(corrupt), str(rank_exports[1]), "--db", str(db)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "rank9.sqlite" in errors[0]
    assert "1 of 3 export(s) failed" in result.output and str(corrupt) in result.output
    assert "cross-rank view: 2 ranks" in result.output
    runs = list(sqlite_utils.Database(db)["runs"].rows)
    assert [Path(r["trace"]).name for r in runs] == ["rank0.sqlite", "rank1.sqlite"]


def test_cli_refuses_totals_with_several(rank_exports) -> None:
    result = CliRunner().invoke(cli, ["analyze", *map(str, rank_exports), "--totals"])
    assert result.exit_code == 2 and "single export" in result.output


def test_progress_hook_is_quiet_without_a_bar_and_fed_by_the_loader(rank_exports, monkeypatch):
    from specscope.analysis.run import analyze

    monkeypatch.delenv("SPECSCOPE_PROGRESS", raising=False)
    monkeypatch.setenv("CI", "true")
    assert not progress.wanted()
    calls = []
    with progress.hooked(lambda *a: calls.append(a)):
        analyze(rank_exports[0], EAGLE_SPEC)
    stages = {c[0] for c in calls}
    assert {"NVTX ranges", "CUDA API calls", "GPU operations"} <= stages
    assert calls[-1][1] <= calls[-1][2]
    progress.report("nobody listens", 1, 1)  # no hook: a no-op
    with progress.progress_bar("x", enabled=True):  # draws on a non-terminal without failing
        progress.report("GPU operations", 1, 2)
