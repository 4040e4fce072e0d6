"""``analyze --dask-scheduler``: per-export analysis on an in-process Dask LocalCluster."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlite_utils
from click.testing import CliRunner
from eagle_exports import build_eagle

from specscope.cli import cli

distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as c:
        yield c


def test_dask_results_gathered_into_one_db(tmp_path: Path, cluster) -> None:
    paths = [
        build_eagle(4, pid=700 + r, tid=700 + r, period=10_000 + 500 * r).write(
            tmp_path / f"r{r}.sqlite"
        )
        for r in range(2)
    ]
    bad = tmp_path / "missing.sqlite"
    db = tmp_path / "results.sqlite"
    args = ["analyze", *map(str, paths), str(bad), "--db", str(db)]
    result = CliRunner().invoke(cli, [*args, "--dask-scheduler", cluster.scheduler_address])
    assert result.exit_code == 2, result.output
    assert "missing.sqlite: no such file" in result.output and "Traceback" not in result.output
    assert "cross-rank view: 2 ranks, 4 steps in common" in result.output
    db = sqlite_utils.Database(db)
    assert [Path(r["trace"]).name for r in db["runs"].rows] == ["r0.sqlite", "r1.sqlite"]
    assert db["step_metrics"].count > 0


def test_unreachable_scheduler_is_one_error_line(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("specscope.analysis.many.DASK_CONNECT_TIMEOUT", "1s")
    path = build_eagle(2).write(tmp_path / "r.sqlite")
    args = ["analyze", str(path), "--dask-scheduler", "tcp://127.0.0.1:1"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "cannot reach the Dask scheduler" in result.output
