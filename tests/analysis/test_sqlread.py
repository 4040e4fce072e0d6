"""Both readers (ADBC columnar and the sqlite3 module) give identical frames."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from testdata import AFTER, DATA

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
    from specscope.analysis.readcols import SPLIT32
    from specscope.analysis.sqlread import columnar_connection, int_columns_many

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


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
@pytest.mark.parametrize("large", [True, False])
def test_narrow32_columns_are_int32_in_a_large_read_where_every_value_fits(
    reader: str, large: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specscope.analysis import memory, readcols, sqlread

    rows = [(1, 7), (2, -(2**31)), (3, 2**31 - 1), (4, 2**31)]  # the last fits int64 only
    con, path = _two_column_table(reader, tmp_path, monkeypatch, ("a", "b"), rows)
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0 if large else 1 << 20)
    connect = lambda: sqlread.columnar_connection(path)  # noqa: E731
    ranges = sqlread.rowid_ranges(con, "t", 2)
    narrow = readcols.NARROW32

    def read(last: int) -> list[np.ndarray]:
        queries = [(f"SELECT a, b FROM t{where} AND a <= {last}", n) for where, n in ranges]
        return sqlread.int_columns_many(con, connect, queries, 2, (narrow, narrow), threads=2)

    fits = read(3)
    assert [c.tolist() for c in fits] == [[1, 2, 3], [7, -(2**31), 2**31 - 1]]
    assert [c.dtype for c in fits] == [np.int32 if large else np.int64] * 2
    wide = read(4)  # read again, b as int64
    assert [c.tolist() for c in wide] == [[1, 2, 3, 4], [7, -(2**31), 2**31 - 1, 2**31]]
    assert [c.dtype for c in wide] == [np.int32 if large else np.int64, np.int64]


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
@pytest.mark.parametrize("large", [True, False])
def test_narrow16_columns_are_int16_in_a_large_read_where_every_value_fits(
    reader: str, large: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name ids of the CUDA API calls: int16 where every value fits (a large read), else
    the read again with them int64, as a small read gives them; the values the same."""
    from specscope.analysis import memory, readcols, sqlread

    rows = [(1, -1), (2, -(2**15)), (3, 2**15 - 1), (4, 2**15)]  # the last fits int32 only
    con, path = _two_column_table(reader, tmp_path, monkeypatch, ("a", "b"), rows)
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0 if large else 1 << 20)
    connect = lambda: sqlread.columnar_connection(path)  # noqa: E731
    ranges = sqlread.rowid_ranges(con, "t", 2)
    dtypes = (readcols.NARROW32, readcols.NARROW16)

    def read(last: int) -> list[np.ndarray]:
        queries = [(f"SELECT a, b FROM t{where} AND a <= {last}", n) for where, n in ranges]
        return sqlread.int_columns_many(con, connect, queries, 2, dtypes, threads=2)

    fits = read(3)
    assert [c.tolist() for c in fits] == [[1, 2, 3], [-1, -(2**15), 2**15 - 1]]
    assert [c.dtype for c in fits] == [np.int32, np.int16] if large else [np.int64] * 2
    wide = read(4)  # read again, b as int64
    assert wide[1].tolist() == [-1, -(2**15), 2**15 - 1, 2**15] and wide[1].dtype == np.int64
    assert memory.narrow_ids(wide[1]).tolist() == wide[1].tolist()


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
@pytest.mark.parametrize("large", [True, False])
@pytest.mark.parametrize(
    ("last", "durations"),
    [
        ((7, 7), True),  # 0 ns
        ((7, 7 + 2**32 - 1), True),  # the longest uint32 holds
        ((7, 7 + 2**32), False),  # one too long: the column turns into the ends
        ((7, 6), False),  # an end before its start
        ((None, None), True),  # NULL start and end: NULL_INT and a duration of 0
        ((5, None), False),  # a NULL end alone
    ],
)
@pytest.mark.parametrize("first", [False, True])
def test_duration32_columns_are_uint32_durations_where_every_one_fits(
    reader: str, large: bool, last, durations: bool, first: bool, tmp_path: Path, monkeypatch
) -> None:
    """The CUDA API calls' ends: each call's duration (end less start, uint32) in a large
    read where every one fits, else the ends (int64) as a small read gives them, whether the
    row that does not fit comes in the first batch or after durations were written (the
    column turns into the ends, without a second read); the ends (:func:`.readcols.call_ends`)
    the same, bit for bit, either way."""
    from specscope.analysis import memory, readcols, sqlread

    rows = [(10, 25), (-(2**40), -(2**40) + 3), (2**62, 2**62 + 1000)]
    rows = [last, *rows] if first else [*rows, last]
    con, path = _two_column_table(reader, tmp_path, monkeypatch, ("s", "e"), rows)
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0 if large else 1 << 20)
    queries = [("SELECT s, e FROM t WHERE rowid <= 2", 2)]
    queries += [("SELECT s, e FROM t WHERE rowid > 2", 5)]  # (a bound with room: holes)
    connect = lambda: sqlread.columnar_connection(path)  # noqa: E731
    dtypes = ("i8", readcols.DURATION32)
    start, ends = sqlread.int_columns_many(con, connect, queries, 2, dtypes, threads=2)
    null = sqlread.NULL_INT
    want = [(null if s is None else s, null if e is None else e) for s, e in rows]
    assert start.tolist() == [s for s, _ in want]
    assert readcols.call_ends(start, ends).tolist() == [e for _, e in want]
    assert ends.dtype == (np.uint32 if large and durations else np.int64)
    assert readcols.call_ends(start, ends, np.array([3, 0])).tolist() == [want[3][1], want[0][1]]
    calls, read_many = [], sqlread._read_many
    monkeypatch.setattr(sqlread, "_read_many", lambda *a: calls.append(a) or read_many(*a))
    sqlread.int_columns_many(con, connect, queries, 2, dtypes, threads=2)
    assert len(calls) == 1  # (one read: no second one as int64)


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("uniform", [False, True])
def test_split16_halves_are_int16_in_a_large_read_where_every_value_fits(
    reader: str, large: bool, uniform: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:data:`.readcols.SPLIT16` (both halves) and :data:`.readcols.SPLIT32_UNIFORM16` (the low
    half): int16 where every value fits, else the read again with int32 halves; the values the
    same either way."""
    from specscope.analysis import memory, readcols, sqlread

    rows = [(1, 5), (-(2**15), 2**15 - 1), (3, -7), (4, 2**15)]  # the last low fits int32 only
    con, path = _two_column_table(reader, tmp_path, monkeypatch, ("hi", "lo"), rows)
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0 if large else 1 << 20)
    connect = lambda: sqlread.columnar_connection(path)  # noqa: E731
    marker = readcols.SPLIT32_UNIFORM16 if uniform else readcols.SPLIT16
    packed = "(hi << 32) | (lo & 4294967295)"

    def read(last: int) -> list[np.ndarray]:
        queries = [(f"SELECT {packed} FROM t WHERE rowid <= {last}", last)]
        return sqlread.int_columns_many(con, connect, queries, 1, (marker,), threads=2)

    for last, fits in [(3, True), (4, False)]:
        high, low = read(last)
        assert high.tolist() == [h for h, _ in rows[:last]]
        assert low.tolist() == [lo for _, lo in rows[:last]]
        narrow = np.int16 if large and fits else np.int32
        assert low.dtype == narrow
        assert high.dtype == (np.int32 if uniform else narrow)


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
@pytest.mark.parametrize(
    ("highs", "uniform"),
    [
        ([5, 5, 5, 5], True),  # one value: kept as one element
        ([5, 5, 5, 6], False),  # another in the last query: an array after all
        ([6, 5, 5, 5], False),  # another in the first
    ],
)
def test_split32_uniform_high_halves_stay_one_value_while_every_row_has_it(
    reader: str, highs: list[int], uniform: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specscope.analysis import memory, readcols, sqlread

    rows = [(h, lo) for h, lo in zip(highs, [10, -3, 2**31 - 1, 0], strict=True)]
    con, path = _two_column_table(reader, tmp_path, monkeypatch, ("hi", "lo"), rows)
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0)
    packed = "(hi << 32) | (lo & 4294967295)"
    queries = [
        (f"SELECT {packed} FROM t WHERE rowid <= 2", 2),
        (f"SELECT {packed} FROM t WHERE rowid > 2", 5),  # a bound with room to spare: holes
    ]
    connect = lambda: sqlread.columnar_connection(path)  # noqa: E731
    high, low = sqlread.int_columns_many(
        con, connect, queries, 1, (readcols.SPLIT32_UNIFORM,), threads=2
    )
    assert high.tolist() == highs and low.tolist() == [lo for _, lo in rows]
    assert high.dtype == low.dtype == np.int32
    assert (high.strides == (0,)) is uniform  # one element of memory, or an array
    if uniform:
        assert not high.flags.writeable


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
@pytest.mark.parametrize(
    ("values", "uniform"),
    [([2**40 + 5] * 4, True), ([2**40 + 5] * 3 + [7], False), ([7] + [2**40 + 5] * 3, False)],
)
def test_uniform64_columns_stay_one_value_while_every_row_has_it(
    reader: str, values: list[int], uniform: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launching thread of every call (int64): one element while every row has it, what
    :func:`.memory.one_value_view` makes of the column read whole; an array otherwise."""
    from specscope.analysis import memory, readcols, sqlread

    rows = [(v, k) for k, v in enumerate(values)]
    con, path = _two_column_table(reader, tmp_path, monkeypatch, ("v", "k"), rows)
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0)
    queries = [("SELECT v FROM t WHERE rowid <= 2", 2), ("SELECT v FROM t WHERE rowid > 2", 5)]
    connect = lambda: sqlread.columnar_connection(path)  # noqa: E731
    (got,) = sqlread.int_columns_many(con, connect, queries, 1, (readcols.UNIFORM64,), threads=2)
    assert got.tolist() == values and got.dtype == np.int64
    assert (got.strides == (0,)) is uniform
    want = memory.one_value_view(np.array(values, dtype=np.int64))
    assert got.strides == want.strides and got.flags.writeable == want.flags.writeable


def test_plain_exports_are_sqlite_files(tmp_path: Path) -> None:
    from specscope.analysis.sqlread import plain_exports

    small = DATA / "cpu_eagle_2023.sqlite"
    assert plain_exports([small])
    assert plain_exports([small, DATA / "eagle_node_before.sqlite"])
    big = tmp_path / "big.sqlite"  # a sparse file: the header and a size, nothing read
    with big.open("wb") as f:
        f.write(b"SQLite format 3\x00")
        f.truncate(64 << 20)
    assert plain_exports([small, big])
    assert not plain_exports([])
    assert not plain_exports([tmp_path])  # a folder of exports
    assert not plain_exports([tmp_path / "missing.sqlite"])
    (tmp_path / "x.sqlite.xz").write_bytes(b"\xfd7zXZ\x00")
    assert not plain_exports([small, tmp_path / "x.sqlite.xz"])


def _analyze_in_child(path: Path, env: dict) -> tuple[str, str]:
    """``specscope analyze PATH --format json`` in a fresh interpreter: (stdout, whether pyarrow
    was imported: 'yes'/'no', from the last line of stderr)."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, atexit\n"
        "atexit.register(lambda: print('pyarrow', 'yes' if sys.modules.get('pyarrow') else 'no',"
        " file=sys.stderr))\n"
        f"sys.argv = ['specscope', 'analyze', {str(path)!r}, '--format', 'json']\n"
        "from specscope.cli import main\nmain()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SPECSCOPE_SQLITE_READER"} | env
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    return run.stdout, run.stderr.strip().splitlines()[-1]


def test_a_small_export_is_analysed_without_pyarrow_and_alike() -> None:
    pytest.importorskip("adbc_driver_sqlite")
    path = DATA / "graphs" / "run_graph_kpool_nvtx.sqlite"
    light, imported = _analyze_in_child(path, {})
    assert imported == "pyarrow no"
    columnar, imported = _analyze_in_child(path, {"SPECSCOPE_SQLITE_READER": "adbc"})
    assert imported == "pyarrow yes"
    assert light == columnar


def test_a_pandas_that_needs_pyarrow_keeps_the_usual_reader(tmp_path: Path) -> None:
    """Were pandas unable to import without pyarrow, the light reader is not chosen and pyarrow
    is imported as usual (a stand-in pandas that imports pyarrow, first on the path)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("pyarrow")
    fake = tmp_path / "pandas"
    fake.mkdir()
    (fake / "__init__.py").write_text("import pyarrow\nSTAND_IN = True\n")
    code = (
        "import sys\n"
        "from specscope.analysis.sqlread import prefer_light_reader\n"
        f"chosen = prefer_light_reader([{str(DATA / 'cpu_eagle_2023.sqlite')!r}])\n"
        "import pandas, pyarrow\n"
        "print(chosen, pandas.STAND_IN, pyarrow is not None)\n"
    )
    paths = [str(tmp_path), str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]
    env = {k: v for k, v in os.environ.items() if k != "SPECSCOPE_SQLITE_READER"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["False", "True", "True"]


def test_ends_read_by_sql_become_durations_where_every_one_fits(monkeypatch) -> None:
    """:func:`.readcols.as_durations`: a SQL read's ends as a page scan gives them, chunk by
    chunk; the ends as they are where one duration does not fit, or the read is small."""
    from specscope.analysis import memory, readcols

    monkeypatch.setattr(memory, "CHUNK_ROWS", 3)
    start = np.arange(10, dtype=np.int64) * 1000
    ends = start + np.arange(10, dtype=np.int64)
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0)
    took = readcols.as_durations(start, ends)
    assert took.dtype == np.uint32 and np.array_equal(readcols.call_ends(start, took), ends)
    late = ends.copy()
    late[8] = start[8] + 2**32  # (in the last chunk but one)
    assert readcols.as_durations(start, late) is late
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 11)
    assert readcols.as_durations(start, ends) is ends


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
@pytest.mark.parametrize(
    ("highs", "dtype", "uniform"),
    [
        ([5, 5, 5, 5], np.int32, True),  # one device: one element, as SPLIT32_UNIFORM16's
        ([0, 1, 2, 3], np.int8, False),  # a TP server's devices: int8
        ([0, 1, 2, 300], np.int32, False),  # a later value int8 does not hold: int32
        ([300, 1, 2, 3], np.int32, False),  # the first one
        ([5, 5, 5, -129], np.int32, False),
    ],
)
def test_split32_uniform8_16_high_halves_are_int8_where_every_value_fits(
    reader: str, highs: list[int], dtype, uniform: bool, tmp_path: Path, monkeypatch
) -> None:
    """:data:`.readcols.SPLIT32_UNIFORM8_16` (the devices of the GPU operations): its high half
    one value while every row has it, else int8 where every value fits, else int32; the
    values the same either way (rows of two queries on two threads)."""
    from specscope.analysis import memory, readcols, sqlread

    rows = [(h, lo) for h, lo in zip(highs, [10, -3, 7, 0], strict=True)]
    con, path = _two_column_table(reader, tmp_path, monkeypatch, ("hi", "lo"), rows)
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0)
    packed = "(hi << 32) | (lo & 4294967295)"
    queries = [
        (f"SELECT {packed} FROM t WHERE rowid <= 2", 2),
        (f"SELECT {packed} FROM t WHERE rowid > 2", 5),
    ]
    connect = lambda: sqlread.columnar_connection(path)  # noqa: E731
    high, low = sqlread.int_columns_many(
        con, connect, queries, 1, (readcols.SPLIT32_UNIFORM8_16,), threads=2
    )
    assert high.tolist() == highs and low.tolist() == [lo for _, lo in rows]
    assert high.dtype == dtype and low.dtype == np.int16
    assert (high.strides == (0,)) is uniform


def test_uniform_small_array_widened_by_a_value_it_cannot_hold_keeps_every_row() -> None:
    """:class:`.readcols.Uniform` with ``small``: batches written from several threads into
    the int8 array, one of them bringing a value int8 does not hold, end as int32 with every
    row as written (none lost to the copy)."""
    import threading

    from specscope.analysis.readcols import Uniform

    n, batch = 64_000, 1000
    want = np.arange(n) % 7
    want[n // 2 + 17] = 1000
    column = Uniform(n, small=np.int8)
    starts = list(range(0, n, batch))

    def write(mine: list[int]) -> None:
        for lo in mine:
            column[lo : lo + batch][0:batch] = want[lo : lo + batch]

    threads = [threading.Thread(target=write, args=(starts[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = column.result()
    assert got.dtype == np.int32 and np.array_equal(got, want)
    fits = Uniform(10, small=np.int8)
    fits[0:10][0:10] = np.arange(10)
    assert fits.result().dtype == np.int8 and fits.result().tolist() == list(range(10))


def test_the_adbc_connection_closes_with_its_trace(monkeypatch):
    """A trace read through ADBC closes its connection when it is freed: the driver kept the
    export open otherwise (two descriptors per export: a long-lived program, or a test session,
    ran out of them)."""
    pytest.importorskip("adbc_driver_sqlite")
    monkeypatch.setenv("SPECSCOPE_SQLITE_READER", "adbc")

    def open_on_export() -> int:
        fds = os.listdir("/proc/self/fd")
        return sum(os.path.realpath(f"/proc/self/fd/{fd}") == str(AFTER.resolve()) for fd in fds)

    before = open_on_export()
    for _ in range(3):
        trace = load(AFTER)
        assert trace._columnar is not None
        trace.int_columns("SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL", 2)
        assert open_on_export() > before  # (open while the trace lives)
        trace.con.close()
        del trace
    gc.collect()
    assert open_on_export() == before
