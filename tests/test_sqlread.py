"""Both readers (ADBC columnar and the sqlite3 module) give identical frames."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from specscope.analysis.loader import load

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("name", ["eagle_node_before", "eagle_graph_before", "cpu_eagle_2023"])
def test_readers_agree(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("adbc_driver_sqlite")
    columnar = load(DATA / f"{name}.sqlite")
    assert columnar._columnar is not None
    monkeypatch.setenv("SPECSCOPE_SQLITE_READER", "sqlite3")
    plain = load(DATA / f"{name}.sqlite")
    assert plain._columnar is None
    pd.testing.assert_frame_equal(columnar.ops, plain.ops)
