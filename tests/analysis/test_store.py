"""The results store: runs are appended with provenance, long per-step rows and summaries."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import sqlite_utils
from testdata import DATA

from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import load_preset
from specscope.analysis.store import append_run


def test_append_two_runs(tmp_path: Path) -> None:
    db_path = tmp_path / "results.sqlite"
    trace = DATA / "eagle_node_before.sqlite"
    a = analyze(trace, load_preset("eagle"), AnalyzeOptions(skip=1))
    first = append_run(db_path, a)
    second = append_run(db_path, a)
    assert second == first + 1
    db = sqlite_utils.Database(db_path)
    run = db["runs"].get(first)
    assert run["sha256"] == hashlib.sha256(trace.read_bytes()).hexdigest()
    assert run["capture_mode"] == "node" and run["gpu"] == "NVIDIA H200"
    assert run["nsys_version"].startswith("2025.3") and run["steps"] == 11
    assert json.loads(run["spec"])["anchors"][0] == "draft.replay"
    n_metrics = a.metrics.frame.shape[1]
    assert db["step_metrics"].count == 2 * 11 * n_metrics
    assert db["summary"].count == 2 * n_metrics
    idle = next(db.query("SELECT * FROM summary WHERE run_id = ? AND metric = 'idle_us'", [first]))
    assert idle["p50"] == a.summary.loc["idle_us", "p50"] and idle["unit"] == "us"
    rows = db.query(
        "SELECT value FROM step_metrics WHERE run_id = ? AND metric = 'eager_memcpy'", [second]
    )
    assert [r["value"] for r in rows] == [19.0] * 11


def test_unavailable_metrics_are_marked(tmp_path: Path) -> None:
    a = analyze(DATA / "eagle_graph_before.sqlite", load_preset("eagle"), AnalyzeOptions(skip=1))
    run_id = append_run(tmp_path / "r.sqlite", a)
    db = sqlite_utils.Database(tmp_path / "r.sqlite")
    rows = {r["metric"]: r for r in db["summary"].rows_where("run_id = ?", [run_id])}
    assert rows["graph_kernels"]["available"] == 0 and rows["graph_kernels"]["p50"] is None
    assert rows["idle_us"]["available"] == 1
