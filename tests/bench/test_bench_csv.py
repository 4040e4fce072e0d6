"""The DSA metadata benches write each run's rows to a new CSV and never overwrite an old one."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")

from testdata import ROOT

_spec = importlib.util.spec_from_file_location("dsa_metadata", ROOT / "bench" / "dsa_metadata.py")
dsa_metadata = importlib.util.module_from_spec(_spec)
sys.modules["dsa_metadata"] = dsa_metadata
_spec.loader.exec_module(dsa_metadata)


def test_rows_append_under_one_header(tmp_path: Path):
    path = dsa_metadata.new_csv(tmp_path / "run", "rows.csv")
    dsa_metadata.append_csv_row(path, {"mode": "DECODE", "graph_us": 1.5})
    dsa_metadata.append_csv_row(path, {"mode": "TARGET_VERIFY", "graph_us": 2.5})
    assert path.read_text().splitlines() == ["mode,graph_us", "DECODE,1.5", "TARGET_VERIFY,2.5"]


def test_an_earlier_run_is_never_overwritten(tmp_path: Path):
    path = dsa_metadata.new_csv(tmp_path, "rows.csv")
    dsa_metadata.append_csv_row(path, {"graph_us": 1.5})
    with pytest.raises(SystemExit, match=r"rows\.csv exists: pass another --out"):
        dsa_metadata.new_csv(tmp_path, "rows.csv")
    assert path.read_text().splitlines() == ["graph_us", "1.5"]
