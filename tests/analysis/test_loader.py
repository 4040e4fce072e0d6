"""The loader on tiny hand-built exports: NVTX text styles, unclosed ranges, absent
tables, launch matching within a process, and op columns that keep extreme values.

The EAGLE-shaped export (``build_eagle``) and its hand-computed times are drawn in
``tests/eagle_exports.py``; ``test_metrics.py`` lists the per-step values.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest
from eagle_exports import build_eagle
from metric_values import PLAIN, assert_values, col
from testdata import DATA

from specscope.analysis.callrows import op_launches
from specscope.analysis.loader import load
from specscope.analysis.synthetic import SyntheticExport

nan = math.nan


# ---------------------------------------------------------------- NVTX text styles


@pytest.mark.parametrize("style", ["push", "startend"])
@pytest.mark.parametrize("text_style", ["text", "textId"])
def test_nvtx_styles_give_the_same_metrics(analyze_x, style, text_style):
    base = analyze_x(build_eagle(3)).metrics.frame
    a = analyze_x(build_eagle(3, style=style, text_style=text_style))
    pd.testing.assert_frame_equal(a.metrics.frame, base)
    assert col(a, "gap_us:draft.replay->verify.replay") == pytest.approx([0.9] * 3)
    assert set(a.trace.nvtx["event_type"]) == {59 if style == "push" else 60}


def test_mixed_text_styles_in_one_export(analyze_x):
    x = SyntheticExport()
    x.range("step", 0, 1000, text_style="text")
    x.range("step", 1000, 2000, text_style="textId")
    x.range("step", 2000, 3000, style="startend", text_style="text")
    a = analyze_x(x, PLAIN)
    assert col(a, "cpu_step_us") == [1.0, 1.0, 1.0]


def test_unclosed_ranges_are_ignored_and_counted(analyze_x):
    x = build_eagle(3)
    x.range("step", 50_000, None, domain="specscope")
    x.range("draft.replay", 31_000, None, domain="specscope")
    a = analyze_x(x)
    assert a.trace.unclosed_ranges == 2
    assert "2 NVTX range(s) never closed were ignored" in a.metrics.notes
    pd.testing.assert_frame_equal(a.metrics.frame, analyze_x(build_eagle(3)).metrics.frame)


def test_ranges_nsys_closed_at_the_capture_end_are_unclosed(analyze_x):
    """nsys closes a range still open when the capture stops at the capture's end
    (``ANALYSIS_DETAILS.duration``, to the nanosecond; nsys 2023.4 and 2025.3 alike): never
    closed by the program, as a range with a NULL end, so the same analysis. A range the
    program closed a nanosecond before the end is a range as any other."""
    base = build_eagle(3)
    end = 60_000
    base.capture(end)
    x = build_eagle(3)
    x.capture(end)
    x.range("step", 50_000, end, domain="specscope")
    a = analyze_x(x)
    assert a.trace.capture_end == end and a.trace.unclosed_ranges == 1
    assert "1 NVTX range(s) never closed were ignored" in a.metrics.notes
    pd.testing.assert_frame_equal(a.metrics.frame, analyze_x(base).metrics.frame)
    y = build_eagle(3)
    y.capture(end)
    y.range("step", 50_000, end - 1, domain="specscope")
    b = analyze_x(y)
    assert b.trace.unclosed_ranges == 0
    assert len(b.trace.nvtx) == len(a.trace.nvtx) + 1
    assert b.trace.nvtx["end_ns"].max() == end - 1


def test_a_range_open_when_nsys_2023_stopped_its_capture():
    """``tests/data/cpu_capture_end_2023.sqlite`` (``scripts/cpu_capture_end.py``): 0.2 s steps,
    a capture of 1 s from --delay and --duration; nsys 2023.4.4 ended the last range itself."""
    trace = load(DATA / "cpu_capture_end_2023.sqlite")
    assert trace.nsys_version.startswith("2023.4") and trace.unclosed_ranges == 1
    dur = trace.nvtx["end_ns"] - trace.nvtx["start_ns"]
    assert len(dur) == 4 and ((dur > 199e6) & (dur < 202e6)).all()
    assert trace.nvtx["end_ns"].max() < trace.capture_end


def test_the_capture_end_is_read_where_the_export_gives_one(write_export):
    x = SyntheticExport()
    assert load(write_export(x)).capture_end is None  # (no ANALYSIS_DETAILS)
    x.capture(123_456)
    assert load(write_export(x)).capture_end == 123_456
    y = SyntheticExport()
    y.capture(0)  # (no capture lasts 0 ns: not a capture end)
    assert load(write_export(y)).capture_end is None


# ---------------------------------------------------------------- absent tables


def only_kernels() -> SyntheticExport:
    x = SyntheticExport()
    for k in range(2):
        x.range("step", 1000 * k, 1000 * k + 900)
        c = x.api("cudaLaunchKernel", 1000 * k, 1000 * k + 5)
        x.kernel("k", 1000 * k + 100, 1000 * k + 200, c)
    return x


def only_memcpy() -> SyntheticExport:
    x = SyntheticExport()
    for k in range(2):
        x.range("step", 1000 * k, 1000 * k + 900)
        c = x.api("cudaMemcpyAsync", 1000 * k, 1000 * k + 5)
        x.memcpy("dtoh", 4, 1000 * k + 100, 1000 * k + 200, c)
    return x


ABSENT_CASES = {
    "no MEMCPY, no MEMSET table": (only_kernels, (), {"eager_kernels": [1, 1]}),
    "empty MEMCPY and MEMSET tables": (
        only_kernels,
        ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"),
        {"eager_kernels": [1, 1]},
    ),
    "no KERNEL table": (only_memcpy, (), {"eager_kernels": [0, 0], "eager_memcpy_dtoh": [1, 1]}),
}


@pytest.mark.parametrize("build, empty, expected", ABSENT_CASES.values(), ids=ABSENT_CASES.keys())
def test_absent_tables_are_zero_rows(write_export, build, empty, expected):
    from specscope.analysis.run import analyze

    a = analyze(write_export(build(), empty=empty), PLAIN)
    assert a.metrics.unavailable == {}
    assert_values(
        a,
        {
            "window_us": [1.0, 0.1],
            "busy_us": [0.1, 0.1],
            "graph_kernels": [0, 0],
            "graph_launches": [0, 0],
            **expected,
        },
    )
    f = a.metrics.frame
    assert f[["eager_memcpy", "eager_memset", "eager_kernels"]].notna().all().all()


def test_no_runtime_table_leaves_gpu_work_unprojected(analyze_x):
    x = only_kernels()
    x.rows["CUPTI_ACTIVITY_KIND_RUNTIME"] = []
    a = analyze_x(x, PLAIN)
    assert col(a, "cpu_step_us") == [0.9, 0.9]
    assert a.metrics.frame["window_us"].isna().all()
    assert "window_us" in a.metrics.unavailable


# ---------------------------------------------------------------- launch matching and op columns


def test_correlation_ids_match_within_a_process(analyze_x):
    from specscope.analysis.synthetic import global_tid

    x = SyntheticExport()
    x.range("step", 0, 1000)
    x.range("step", 1000, 2000)
    c = x.api("cudaLaunchKernel", 10, 20)
    x.kernel("mine", 100, 200, c)
    # Process 200 reuses correlation id c for its own call and kernel; a third kernel of
    # process 300 has id c and no API call at all.
    name = x.string("cudaLaunchKernel_v7000")
    x.rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append((50, 60, 1, global_tid(200, 200), c, name, 0))
    x.kernel("theirs", 300, 400, c, pid=200)
    x.kernel("orphan", 500, 550, c, pid=300)
    x.kernel("next", 1100, 1200, x.api("cudaLaunchKernel", 1010, 1020))
    a = analyze_x(x, PLAIN)
    assert_values(a, {"eager_kernels": [1, 1], "busy_us": [0.25, 0.1], "window_us": [1.0, 0.1]})
    ops = a.trace.ops
    start, tid = op_launches(a.trace, ops)
    ops = ops.assign(api_start_ns=start, api_tid=tid).set_index("name", drop=False)
    assert ops.loc["theirs", ["pid", "api_tid", "api_start_ns"]].tolist() == [200, 200, 50]
    assert ops.loc["mine", ["pid", "api_tid", "api_start_ns"]].tolist() == [100, 100, 10]
    assert ops.loc["orphan", "api_tid"] == -1 and math.isnan(ops.loc["orphan", "api_start_ns"])
    # a few pairs (found without a table of every call) and many (with one) alike
    pid, corr = np.array([200, 100, 300], np.int32), np.array([c, c, c], np.int32)
    few = a.trace.launches(pid, corr)
    table = a.trace.launches(pid, corr, a.trace.launch_rows())
    for got in (few, table):
        assert got[0][:2].tolist() == [50, 10] and np.isnan(got[0][2])
        assert got[1].tolist() == [200, 100, -1] and got[1].dtype == np.int32


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
def test_op_columns_keep_extreme_values(write_export, monkeypatch, reader, large):
    """The loader reads ids packed in pairs (loader._OP_COLUMNS): values at the edges of their
    ranges come back exactly, for every op kind and with both readers; read as a large export
    (narrow halves: int16 name ids, streams and flags where they fit), the values that do not
    fit make the read again wider."""
    from specscope.analysis import memory
    from specscope.analysis.loader import load

    if reader == "adbc":
        pytest.importorskip("adbc_driver_sqlite")
    monkeypatch.setenv("SPECSCOPE_SQLITE_READER", reader)
    if large:
        monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0)
    big_pid, big_stream, big_corr = 0xFFFFFF, 2**31 - 1, 2**37 + 5
    x = SyntheticExport()
    x.range("step", 0, 1000)
    for i in range(300):  # push the kernel names' StringIds ids up
        x.string(f"filler {i}")
    c = x.api("cudaLaunchKernel", 10, 20, pid=big_pid)
    x.kernel("k", 100, 200, c, device=7, stream=big_stream, pid=big_pid, graph_node=3,
             demangled="void k<int>()")  # fmt: skip
    x.memcpy("ptop", 2**40, 300, 400, big_corr, stream=0)
    x.memset(2**33, 500, 600, 9, device=2**31 - 1, stream=1)
    x.graph_replay(700, 800, 10, graph_id=123456, stream=65536)
    trace = load(write_export(x))
    ops = trace.ops.set_index("name")
    cols = ["device_id", "stream_id", "pid", "correlation_id", "kind", "in_graph", "copy_kind",
            "bytes", "full_name"]  # fmt: skip
    got = {name: list(row) for name, row in ops[cols].astype(object).fillna("-").iterrows()}
    assert got == {
        "k": [7, big_stream, big_pid, c, "kernel", True, "-", 0, "void k<int>()"],
        "[CUDA memcpy Peer-to-Peer]": [
            0,
            0,
            100,
            big_corr,
            "memcpy",
            False,
            "other",
            2**40,
            "[CUDA memcpy Peer-to-Peer]",
        ],  # fmt: skip
        "[CUDA memset]": [2**31 - 1, 1, 100, 9, "memset", False, "-", 2**33, "[CUDA memset]"],
        "[CUDA graph 123456]": [0, 65536, 100, 10, "graph", True, "-", 0, "[CUDA graph 123456]"],
    }
    k = trace.ops[trace.ops["name"] == "k"]
    assert op_launches(trace, k)[0].tolist() == [10]
    assert ops["device_id"].dtype == np.int32 and ops["stream_id"].dtype == np.int32  # (wide)


@pytest.mark.parametrize("ids", ["dense", "sparse", "sparse, in order"])
@pytest.mark.parametrize(
    "a_pids, dup",
    [
        ((100,), False),
        ((100,), True),
        ((100, 200), False),
        ((100, 200), True),
        (tuple(range(100, 200)), False),
    ],
    ids=["one process", "an id twice", "two processes", "two, an id twice", "many processes"],
)
def test_launch_matching_against_a_dict(a_pids, dup, ids):
    """Each op's API call: the first call with its (pid, correlation id), none for id 0; the
    id-indexed table (dense ids, none twice), the search among ids in order (each process'
    calls in id order, as nsys writes them; sparse: CUPTI's unrecorded driver calls take ids
    too) and the sorted search agree with a dict."""
    from specscope.analysis.callrows import call_rows, rows_of_few

    rng = np.random.default_rng(7)
    a_corr = np.arange(1, 400) * (1 if ids == "dense" else 1000)  # (1000: not dense)
    if ids != "sparse, in order":
        a_corr = rng.permutation(a_corr)
    if dup:
        a_corr[10] = a_corr[20]
    a_pid = rng.choice(a_pids, size=len(a_corr))
    corr = rng.integers(0, 450 * (1 if ids == "dense" else 1000), size=1000)  # (some without a
    # call, some 0)
    corr[::3] = rng.choice(a_corr, size=len(corr[::3]))  # (many with one)
    pid = rng.choice([100, 200, 300], size=len(corr)).astype(np.int32)
    first: dict[tuple[int, int], int] = {}
    for i, key in enumerate(zip(a_pid.tolist(), a_corr.tolist(), strict=True)):
        first.setdefault(key, i)
    expected = [first.get((p, c), -1) if c > 0 else -1 for p, c in zip(pid, corr, strict=True)]
    assert call_rows(a_pid, a_corr)(pid, corr).tolist() == expected
    # a few pairs (a step marker's launches): the calls of their ids first, the same rows
    a_gtid = (a_pid.astype(np.int64) << 24) | 7
    few = slice(0, 20)
    assert rows_of_few(a_gtid, a_corr, pid[few], corr[few]).tolist() == expected[few]
    none = np.array([450, 0]), np.array([100, 100])  # ids no call has
    assert rows_of_few(a_gtid, a_corr, none[1], none[0]).tolist() == [-1, -1]


def test_xz_compressed_export_is_read_and_left_untouched(tmp_path, monkeypatch):
    """``analyze FILE.sqlite.xz`` said "not a SQLite file"; it reads the export now, from a
    temporary copy deleted with the trace, and the .xz is not written."""
    import gc
    import lzma

    from click.testing import CliRunner

    from specscope.cli import cli

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    plain = DATA / "eagle_node_before.sqlite"
    xz = tmp_path / "in" / "before.sqlite.xz"
    xz.parent.mkdir()
    xz.write_bytes(lzma.compress(plain.read_bytes(), format=lzma.FORMAT_XZ))
    written = (xz.stat().st_mtime_ns, xz.read_bytes())  # reading may move atime, not these
    from_xz = CliRunner().invoke(cli, ["analyze", str(xz), "--skip", "1", "--format", "csv"])
    assert from_xz.exit_code == 0, from_xz.output
    direct = CliRunner().invoke(cli, ["analyze", str(plain), "--skip", "1", "--format", "csv"])
    assert from_xz.stdout == direct.stdout
    gc.collect()
    assert os.listdir(xz.parent) == ["before.sqlite.xz"]
    assert (xz.stat().st_mtime_ns, xz.read_bytes()) == written
    assert os.listdir(tmp_path / "tmp") == []  # the decompressed copy is gone
    broken = tmp_path / "in" / "broken.sqlite.xz"
    broken.write_bytes(xz.read_bytes()[:4000])
    r = CliRunner().invoke(cli, ["analyze", str(broken)])
    assert r.exit_code == 2 and f"run `xz -dk {broken}`" in r.stderr
    assert os.listdir(tmp_path / "tmp") == []


def test_by_device_groups_the_rows_of_each_device_in_their_order():
    """:func:`.devices.by_device` is a stable sort by device, in the columns' order and dtypes
    (the devices' made again from their ids: int8 or int16 where those hold them); one-value
    columns stay views; grouped columns come back as they are."""
    from specscope.analysis.devices import by_device

    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(2, 60))
        ids = np.array([0, 1, 3, 7, -2, 1 << 20], dtype=np.int32)[: rng.integers(1, 7)]
        device = rng.choice(ids, n).astype(np.int32)
        columns = {
            "start_ns": rng.integers(0, 1 << 40, n),
            "device_id": device,
            "kind": rng.integers(0, 4, n).astype(np.int8),
            "pid": np.broadcast_to(np.array([9], dtype=np.int32), (n,)),
        }
        order = np.argsort(device, kind="stable")
        out = by_device(dict(columns))
        assert list(out) == list(columns)
        grouped = bool((np.diff(device) >= 0).all())
        for name, values in columns.items():
            expected = values if name == "pid" else values[order]
            dtype = values.dtype
            if name == "device_id" and not grouped:
                dtype = np.int8 if np.abs(device).max() < 128 else np.int32
            assert out[name].dtype == dtype and np.array_equal(out[name], expected)
        assert out["pid"].strides == (0,)
        if grouped:
            assert all(out[k] is columns[k] for k in columns)


# ---------------------------------------------------------------- capture mode from the read


def _one_of_each(node_in: str | None) -> SyntheticExport:
    """A kernel, a copy and a memset launched eagerly; ``node_in``: the one of them given a
    ``graphNodeId`` (None: none)."""
    x = SyntheticExport()
    x.range("step", 0, 900)
    for i, op in enumerate(("kernel", "memcpy", "memset")):
        c = x.api("cudaLaunchKernel", 10 * i, 10 * i + 5)
        where = {"graph_node": 7} if op == node_in else {}
        if op == "kernel":
            x.kernel("k", 100, 200, c, **where)
        elif op == "memcpy":
            x.memcpy("htod", 64, 300, 400, c, **where)
        else:
            x.memset(64, 500, 600, c, **where)
    return x


@pytest.mark.parametrize(
    "node_in, mode",
    [(None, "no-graphs"), ("kernel", "node"), ("memcpy", "node"), ("memset", "no-graphs")],
)
def test_capture_mode_of_the_read_ops_is_the_sql_one(write_export, node_in, mode):
    # Trace.ops sets capture_mode from the ops it read (no SQL scan of the node tables); a
    # trace asked before its ops are read answers by SQL. A memset in a graph alone does not
    # make the export NODE either way (the SQL asks the KERNEL and MEMCPY tables only).
    from specscope.analysis import loader

    path = write_export(_one_of_each(node_in))
    by_sql = loader.load(path).capture_mode
    read = loader.load(path)
    assert len(read.ops) == 3 and "capture_mode" in read.__dict__
    assert by_sql.value == read.capture_mode.value == mode


@pytest.mark.parametrize("path", sorted(DATA.rglob("*.sqlite")), ids=lambda p: p.name)
def test_capture_mode_of_the_read_ops_on_every_export(path):
    from specscope.analysis import loader

    read, asked = loader.load(path), loader.load(path)
    assert len(read.ops) >= 0
    assert read.capture_mode is asked.capture_mode
    assert len(asked.ops) == len(read.ops)  # (its mode known before the read: the same launches)
    pd.testing.assert_frame_equal(read.graph_launches, asked.graph_launches)


def test_api_pieces_and_a_threads_last_call(write_export):
    # the calls as arrays, of one thread and of some names; a thread's last call's end (a step
    # marker's last step ends there) whatever the call; None for a thread without calls
    from specscope.analysis import loader

    x = SyntheticExport()
    x.api("cudaLaunchKernel", 10, 20)
    x.api("cudaMemcpyAsync", 30, 90, tid=77)
    x.api("cudaStreamSynchronize", 40, 60)
    x.api("cudaLaunchKernel", 50, 55, tid=77)
    trace = loader.load(write_export(x))
    assert trace.thread_calls_end(x.pid, x.tid) == 60
    assert trace.thread_calls_end(x.pid, 77) == 90
    assert trace.thread_calls_end(x.pid, 78) is None
    ids = trace.api_name_ids(["cudaLaunchKernel"])
    (piece,) = trace.api_pieces(ids, thread=(x.pid, 77))
    assert piece[0].tolist() == [50]
    (whole,) = trace.api_pieces()
    assert whole[0].tolist() == [10, 30, 40, 50]


@pytest.mark.parametrize("merged", [False, True], ids=["a label each", "labels shared"])
def test_labelled_codes_are_the_categorical_of_their_labels(merged):
    """:func:`.opnames.labelled` gives the categorical pandas makes of every row's label
    (object categories, sorted where codes share a label: one NVTX domain of several
    processes), whichever codes share a label."""
    from specscope.analysis.opnames import labelled

    codes = np.random.default_rng(3).integers(-40, 300, 20_000)
    label = (lambda c: f"d{c % 7}") if merged else (lambda c: f"d{c}")
    got = labelled(codes, label)
    values = np.array([label(int(c)) for c in codes], dtype=object)
    categories = sorted(set(values)) if merged else [label(int(c)) for c in np.unique(codes)]
    want = pd.Categorical(values, categories=pd.Index(categories, dtype=object))
    pd.testing.assert_extension_array_equal(got, want)
    assert got.categories.dtype == object and got.codes.dtype == want.codes.dtype


@pytest.mark.parametrize("dtype", [np.int16, np.int32])
@pytest.mark.parametrize("held", [False, True])
def test_op_flags_unpacked_a_chunk_at_a_time_as_whole(monkeypatch, dtype, held):
    """The packed flags (int16, or int32 with exec ids above bit 15) unpacked in chunks, each
    chunk's pages given back where nothing else holds the column: the same columns as the
    whole column's casts and shifts (the exec ids: :func:`.launches.exec_ids` of the whole
    column, where asked for); a column held elsewhere left as it was."""
    from specscope.analysis import loader
    from specscope.analysis.launches import exec_ids

    monkeypatch.setattr(loader, "CHUNK_ROWS", 1000)
    rng = np.random.default_rng(7)
    n = 100_003
    copy = rng.integers(-128, 128, n)
    low = (copy & 0xFF) | (rng.integers(0, 2, n) << 8) | (rng.integers(0, 4, n) << 12)
    execs = dtype == np.int32
    if execs:
        low |= rng.integers(0, 1 << 14, n) << 16  # (exec ids)
    low = low.astype(dtype)
    want = (low.astype(np.int8), ((low >> 8) & 1).astype(bool), ((low >> 12) & 0xF).astype(np.int8))
    kept = low.copy()
    columns = [kept if held else low.copy()]
    *got, ids = loader._unpack_op_flags(columns, 0, execs)
    assert columns == [None]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and np.array_equal(g, w)
    assert ids is None if not execs else np.array_equal(ids, exec_ids(low))
    assert np.array_equal(kept, low)  # (held by the caller: as it was)


def test_empty_tables_read_as_absent_ones(tmp_path):
    """``nsys export --lazy=false`` writes every table, empty ones too: NVTX ranges recorded on a
    CPU then held empty CUDA tables, and were analysed as a CUDA capture in which no step
    launched anything (capture mode no-graphs, a report refused). Empty, they are absent."""
    import json
    import shutil
    import sqlite3
    from contextlib import closing

    from click.testing import CliRunner

    from specscope.cli import cli

    plain = DATA / "cpu_eagle_2023.sqlite"
    every = tmp_path / "every_table.sqlite"
    shutil.copyfile(plain, every)
    with closing(sqlite3.connect(every)) as con:
        for table in ("KERNEL", "MEMCPY", "MEMSET", "RUNTIME", "GRAPH_TRACE"):
            columns = "start INTEGER, end INTEGER, globalTid INTEGER, correlationId INTEGER"
            con.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_{table} ({columns})")
        con.commit()
    trace = load(every)
    assert trace.capture_mode.value == "no-cuda" and not trace.has("CUPTI_ACTIVITY_KIND_RUNTIME")

    def analysed(path):
        r = CliRunner().invoke(cli, ["analyze", str(path), "--format", "json"])
        assert r.exit_code == 0, r.output
        return {k: v for k, v in json.loads(r.stdout).items() if k != "trace"}

    assert analysed(every) == analysed(plain)
