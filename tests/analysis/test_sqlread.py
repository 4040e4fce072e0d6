"""Both readers (ADBC columnar and the sqlite3 module) give identical frames."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from testdata import DATA

from specscope.analysis.loader import load


@pytest.mark.parametrize("name", ["eagle_node_before", "eagle_graph_before", "cpu_eagle_2023"])
def test_readers_agree(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("adbc_driver_sqlite")
    columnar = load(DATA / f"{name}.sqlite")
    assert columnar._columnar is not None
    monkeypatch.setenv("SPECSCOPE_SQLITE_READER", "sqlite3")
    plain = load(DATA / f"{name}.sqlite")
    assert plain._columnar is None
    pd.testing.assert_frame_equal(columnar.ops, plain.ops)


def _two_column_table(reader, tmp_path, monkeypatch, names, rows):
    """A file with table t (two INTEGER columns, `rows`), read through `reader`:
    (sqlite3 connection, path)."""
    import sqlite3

    if reader == "adbc":
        pytest.importorskip("adbc_driver_sqlite")
    monkeypatch.setenv("SPECSCOPE_SQLITE_READER", reader)
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE t ({names[0]} INTEGER, {names[1]} INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    con.commit()
    return con, path


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
def test_many_fills_columns_a_query_leaves_out_with_zero(
    reader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specscope.analysis.sqlread import columnar_connection, int_columns_many

    rows = [(1, 10), (2, 20), (3, 30)]
    con, path = _two_column_table(reader, tmp_path, monkeypatch, ("a", "b"), rows)
    queries = [
        ("SELECT a, b, 7 FROM t WHERE rowid <= 2", 2),
        ("SELECT a FROM t WHERE rowid > 2", 1),  # b and the third column: 0
    ]
    cols = int_columns_many(con, lambda: columnar_connection(path), queries, 3, threads=2)
    assert [c.tolist() for c in cols] == [[1, 2, 3], [10, 20, 0], [7, 7, 0]]


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
def test_split32_columns_come_back_as_halves(
    reader: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specscope.analysis.sqlread import SPLIT32, columnar_connection, int_columns_many

    pairs = [(7, 2**31 - 1), (-2, -10), (2**31 - 1, 0), (-(2**31), 5)]
    con, path = _two_column_table(reader, tmp_path, monkeypatch, ("hi", "lo"), pairs)
    packed = "(hi << 32) | (lo & 4294967295)"
    queries = [
        (f"SELECT rowid, {packed} FROM t WHERE rowid <= 2", 2),
        (f"SELECT rowid, {packed} FROM t WHERE rowid > 2", 2),
        ("SELECT 9", 1),  # the split column left out: both halves 0
    ]
    connect = lambda: columnar_connection(path)  # noqa: E731
    rowid, high, low = int_columns_many(con, connect, queries, 2, ("i8", SPLIT32), threads=2)
    assert rowid.tolist() == [1, 2, 3, 4, 9]
    assert high.tolist() == [h for h, _ in pairs] + [0]
    assert low.tolist() == [lo for _, lo in pairs] + [0]
    assert high.dtype == low.dtype == np.int32
