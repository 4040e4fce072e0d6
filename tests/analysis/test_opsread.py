"""Reading the GPU ops ahead (opsread.prefetch) gives the loader's own frames, or nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from testdata import DATA

from specscope.analysis import forkread, opsread
from specscope.analysis.loader import load
from specscope.errors import TraceError


@pytest.fixture(params=["process", "threads"])
def small_prefetch(request, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads ahead of small exports, in a child process (where it can be) and on threads."""
    pytest.importorskip("adbc_driver_sqlite")
    monkeypatch.setattr(opsread, "PREFETCH_MIN_BYTES", 0)  # the test exports are small
    monkeypatch.setenv("SPECSCOPE_READ_AHEAD", request.param)
    # (idle threads of earlier tests, Dask's say, would keep the read in this process; the
    # child touches nothing of theirs)
    monkeypatch.setattr(forkread.threading, "active_count", lambda: 1)
    if request.param == "process" and not forkread.wanted(DATA / "eagle_node_before.sqlite"):
        pytest.skip("no read ahead in a child process here")
    return request.param


def _forked(path) -> bool:
    return isinstance(opsread._pending[path.resolve()]["ops"], opsread._Forked)


@pytest.mark.parametrize("name", ["eagle_node_before", "eagle_graph_before", "cpu_eagle_2023"])
def test_prefetched_ops_are_the_loaders(name: str, small_prefetch) -> None:
    path = DATA / f"{name}.sqlite"
    opsread.prefetch(path, execs=True)
    assert _forked(path) == (small_prefetch == "process")
    ahead = load(path)
    ops = ahead.ops
    # the NVTX events taken with the operations, their frame made then (the read's columns
    # given up), where the export has them
    assert not opsread.pending(path, "nvtx")
    assert ("_nvtx_all" in ahead.__dict__) == ahead.has("NVTX_EVENTS")
    nvtx = ahead._nvtx_all
    if ahead.has(opsread.RUNTIME):  # (what the projection onto steps looks launches up in)
        assert len(ahead._runtime[0])
    for what in ("ops", "runtime", "nvtx"):
        assert opsread.take(path, what) is None  # taken by the loader
    assert not opsread.pending(path)
    direct = load(path)
    direct.graph_execs = True
    pd.testing.assert_frame_equal(ops, direct.ops)
    pd.testing.assert_frame_equal(nvtx[0], direct._nvtx_all[0])
    assert nvtx[1] == direct._nvtx_all[1]
    if ahead.has(opsread.RUNTIME):
        for a, b in zip(ahead._runtime, direct._runtime, strict=True):
            np.testing.assert_array_equal(a, b)
    pd.testing.assert_frame_equal(ahead.graph_launches, direct.graph_launches)


def test_nothing_prefetched_for_small_compressed_or_other_files(tmp_path, small_prefetch) -> None:
    text = tmp_path / "notes.sqlite"
    text.write_text("not SQLite")
    opsread.prefetch(text)
    assert opsread.take(text, "ops") is None
    assert opsread.take(DATA / "eagle_node_before.sqlite", "nvtx") is None  # never asked for


def test_a_failed_prefetch_leaves_the_error_to_the_loader(tmp_path, small_prefetch) -> None:
    """A SQLite file without nsys tables: the read ahead finds nothing to read (or fails) and
    the loader reports what is wrong, as without it."""
    import sqlite3

    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x INTEGER)")
    con.commit()
    con.close()
    opsread.prefetch(path)
    with pytest.raises(TraceError, match="not an nsys export"):
        load(path)
    for what in ("ops", "runtime", "nvtx"):
        opsread.take(path, what)  # (whatever it read is dropped)


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", str(DATA / "eagle_node_after.sqlite"), "--preset", "eagle"],
        ["analyze", str(DATA / "graphs" / "cycle_node_nonvtx.sqlite")],  # exec ids read ahead
        ["compare", str(DATA / "eagle_node_before.sqlite"), str(DATA / "eagle_node_after.sqlite")],
        ["compare", *[str(DATA / "graphs" / "cycle_node_nonvtx.sqlite")] * 2],
        ["explain", str(DATA / "eagle_node_before.sqlite"), str(DATA / "eagle_node_after.sqlite")],
        ["graphs", str(DATA / "graphs" / "cycle_node_nonvtx.sqlite")],
    ],
    ids=["analyze", "analyze-zero-config", "compare", "compare-zero-config", "explain", "graphs"],
)
def test_cli_output_is_the_same_with_the_read_ahead(args) -> None:
    """``analyze``, ``compare``, ``explain`` and ``graphs`` prefetch large exports only (their
    first); forced on for small ones, the JSON is byte for byte the one without it."""
    code = (
        "import sys; from specscope.analysis import opsread, sqlread; "
        "opsread.PREFETCH_MIN_BYTES = int(sys.argv[1]); "
        "read = opsread.prefetch; "
        "opsread.prefetch = lambda *a, **k: (read(*a, **k), print(bool(opsread._pending), "
        "file=sys.stderr)); "
        "from specscope.cli import main; sys.argv = ['specscope', *sys.argv[2:]]; main()"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code, limit, *args, "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
            env=os.environ | {"SPECSCOPE_READ_AHEAD": mode},
        )
        for limit, mode in (("0", "process"), ("0", "threads"), (str(1 << 40), "process"))
    ]
    assert [r.stderr.startswith("True") for r in runs] == [True, True, False]
    assert runs[0].stdout == runs[1].stdout == runs[2].stdout and runs[0].stdout.startswith("{")


def test_api_calls_read_first_are_taken_from_the_read_ahead(small_prefetch) -> None:
    """Validation reads the CUDA API calls before the operations: the prefetched ones, not a
    second read."""
    path = DATA / "eagle_node_before.sqlite"
    opsread.prefetch(path)
    ahead = load(path)
    assert "runtime" in opsread._pending[path.resolve()]
    runtime = ahead._runtime
    assert "runtime" not in opsread._pending[path.resolve()]
    for a, b in zip(runtime, load(path)._runtime, strict=True):
        np.testing.assert_array_equal(a, b)
    ahead.ops  # noqa: B018  (takes the operations)
    assert not opsread.pending(path)


def test_a_taken_read_is_held_by_the_loader_alone(small_prefetch) -> None:
    """A read taken from the child gives up the child's hold on it (before the other reads
    are taken): a column the loader replaces gives its pages back, or its memory is reused."""
    if small_prefetch != "process":
        pytest.skip("a child's result only")
    path = DATA / "eagle_node_before.sqlite"
    opsread.prefetch(path)
    forked = opsread._pending[path.resolve()]["ops"]
    got = opsread.take(path, "ops")
    assert got is not None
    left = forked.child.result()
    assert set(left) == {"runtime", "nvtx"}  # (the operations: the loader's alone)
    assert opsread.take(path, "runtime") is not None and set(left) == {"nvtx"}


@pytest.mark.parametrize("name", ["real/hf_generate.sqlite", "real/two_procs.sqlite"])
def test_api_calls_read_in_pieces_are_the_sql_reads(name: str, monkeypatch) -> None:
    """The CUDA API calls page-scanned in pieces on threads (as a table of millions is), into
    columns as narrow as they end up, are the columns the SQL read gives and :mod:`.memory`
    narrows."""
    import sqlite3

    from specscope.analysis import memory, opsscan
    from specscope.analysis.opsread import read_runtime, runtime_sql, table_columns

    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 64)  # (narrowed as 20 M ops' would be)
    monkeypatch.setattr(opsscan, "RUNTIME_PART_ROWS", 100)
    monkeypatch.setenv("SPECSCOPE_READ_THREADS", "2")
    path = DATA / name
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    sql = runtime_sql(table_columns(con, "CUPTI_ACTIVITY_KIND_RUNTIME"))
    assert len(opsscan.runtime_parts(path, sql, 2)) == 4
    scanned = read_runtime(None, None, sql, path)
    monkeypatch.setenv("SPECSCOPE_SQLITE_READER", "sqlite3")  # (no page scan)
    by_sql = read_runtime(con, None, sql, path)
    for got, want in zip(scanned, by_sql, strict=True):
        assert got.dtype == want.dtype and got.strides == want.strides
        assert np.array_equal(got, want)
    assert scanned[3].dtype == np.int32 and scanned[4].dtype == np.int16
    assert scanned[1].dtype == np.uint32  # (each call's duration)


def test_api_calls_a_page_scan_refuses_are_read_by_sql(monkeypatch) -> None:
    """A piece the page scan does not decode: every piece is read by its SQL instead, on a
    connection of the reading thread's own (the read ahead has none), with the same columns."""
    import sqlite3

    from specscope.analysis import memory, opsscan
    from specscope.analysis.opsread import read_runtime, runtime_sql, table_columns
    from specscope.analysis.pagescan import Unsupported

    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 64)
    monkeypatch.setattr(opsscan, "RUNTIME_PART_ROWS", 100)
    monkeypatch.setenv("SPECSCOPE_READ_THREADS", "2")
    path = DATA / "real/hf_generate.sqlite"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    sql = runtime_sql(table_columns(con, "CUPTI_ACTIVITY_KIND_RUNTIME"))
    want = read_runtime(None, None, sql, path)
    batches = opsscan.ScanQuery.batches

    def refused(self):
        if self.leaves.start:  # (every piece but the first)
            raise Unsupported("a page this scan does not decode")
        yield from batches(self)

    monkeypatch.setattr(opsscan.ScanQuery, "batches", refused)
    got = read_runtime(None, None, sql, path)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def test_a_failing_nvtx_frame_leaves_its_error_to_its_reader(small_prefetch, monkeypatch) -> None:
    """The NVTX events' frame is made as the operations are taken (read ahead); where it
    fails (a damaged table), the operations load all the same and the error is the one the
    reader of the ranges meets, as before."""
    from specscope.analysis import loader

    path = DATA / "eagle_node_before.sqlite"

    def damaged(self):
        raise TraceError(f"{path.name}: NVTX_EVENTS is damaged")

    monkeypatch.setattr(loader.Trace, "_nvtx_all", property(damaged))
    opsread.prefetch(path)
    trace = load(path)
    assert len(trace.ops) > 0
    with pytest.raises(TraceError, match="damaged"):
        trace.nvtx  # noqa: B018


def test_a_path_read_ahead_is_not_read_again(small_prefetch) -> None:
    """A second prefetch of an export whose reads were not all taken starts no second read."""
    path = DATA / "eagle_node_before.sqlite"
    opsread.prefetch(path)
    reads = opsread._pending[path.resolve()]
    opsread.prefetch(path)
    assert opsread._pending[path.resolve()] is reads
    load(path).ops  # noqa: B018  (taken)
    for what in ("runtime", "nvtx"):
        opsread.take(path, what)
