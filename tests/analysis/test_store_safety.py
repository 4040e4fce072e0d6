"""The results store under stress: a writer killed mid-run leaves nothing; concurrent writers
all succeed; a run written only in part (older specscope) is refused when read."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from testdata import ROOT

from specscope.analysis.store import read_run
from specscope.errors import SpecscopeError

# Builds a hand-made analysis of STEPS steps x 10 metrics (its source: this script's argv[2]),
# prints "ready" and appends it to argv[1].
WRITER = """
import sys
import numpy as np, pandas as pd
from specscope.analysis.metrics import StepMetrics
from specscope.analysis.run import Analysis
from specscope.analysis.store import append_run
from specscope.analysis.summary import summarize
steps = int(sys.argv[3])
frame = pd.DataFrame(
    {f"m{i}_us": np.arange(steps, dtype=float) + i for i in range(10)},
    index=pd.RangeIndex(steps, name="step"),
)
m = StepMetrics(frame)
a = Analysis(sys.argv[2], m, "node", "GPU", "2025", {}, summary=summarize(m))
print("ready", flush=True)
print(append_run(sys.argv[1], a), flush=True)
"""


def _writer(db: Path, source: Path, steps: int) -> subprocess.Popen:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", WRITER, str(db), str(source), str(steps)]
    pipe = subprocess.PIPE
    return subprocess.Popen(args, stdout=pipe, stderr=pipe, env=env, text=True)


def _whole_runs(db: Path) -> dict[int, int]:
    """run id -> steps; asserts that every run has all its step rows and its summary."""
    con = sqlite3.connect(db)
    try:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'runs'").fetchone():
            return {}
        runs = dict(con.execute("SELECT id, steps FROM runs"))
        for run_id, steps in runs.items():
            rows = con.execute("SELECT count(*) FROM step_metrics WHERE run_id = ?", (run_id,))
            assert rows.fetchone()[0] == 10 * steps, f"run {run_id} is partial"
            summary = con.execute("SELECT count(*) FROM summary WHERE run_id = ?", (run_id,))
            assert summary.fetchone()[0] == 10
        orphans = "SELECT count(*) FROM step_metrics WHERE run_id NOT IN (SELECT id FROM runs)"
        assert con.execute(orphans).fetchone()[0] == 0
        return runs
    finally:
        con.close()


@pytest.mark.parametrize("delay_s", [0.05, 0.3, 0.8, 1.5, 4.0])
def test_killed_writer_leaves_no_partial_run(tmp_path: Path, delay_s: float) -> None:
    db, source = tmp_path / "results.sqlite", tmp_path / "export.sqlite"
    source.write_bytes(b"x")
    first = _writer(db, source, 100)
    assert first.communicate(timeout=60)[0].split() == ["ready", "1"]
    big = _writer(db, source, 300_000)  # 3 M step rows: seconds to write
    assert big.stdout.readline().strip() == "ready"
    time.sleep(delay_s)
    big.send_signal(signal.SIGKILL)
    big.communicate(timeout=60)
    runs = _whole_runs(db)
    assert 1 in runs and set(runs) <= {1, 2}
    read_run(db)  # the latest run reads (run 1, or run 2 if it finished first)


def test_concurrent_writers_to_a_new_db_all_succeed(tmp_path: Path) -> None:
    db, source = tmp_path / "new.sqlite", tmp_path / "export.sqlite"
    source.write_bytes(b"x")
    procs = [_writer(db, source, 20_000 + i) for i in range(6)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [o[1][-500:] for o in outs]
    assert all("Traceback" not in err for _, err in outs)
    runs = _whole_runs(db)
    assert sorted(runs.values()) == [20_000 + i for i in range(6)]


def test_partly_written_run_is_refused(tmp_path: Path) -> None:
    db, source = tmp_path / "results.sqlite", tmp_path / "export.sqlite"
    source.write_bytes(b"x")
    assert _writer(db, source, 50).communicate(timeout=60)[0].split() == ["ready", "1"]
    con = sqlite3.connect(db)
    con.execute("DELETE FROM summary WHERE run_id = 1")
    con.commit()
    con.close()
    with pytest.raises(SpecscopeError, match="run 1 was not completely written"):
        read_run(db)
