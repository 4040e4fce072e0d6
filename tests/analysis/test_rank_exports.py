"""An export of tensor-parallel ranks, each process on its own GPU, their rows interleaved in
time: ``bench/merge_ranks.py`` joins three exports of ``bench/make_export.py`` (seeds 1-3) as
nsys writes such a run. Each rank's analysis in the joined export must equal the analysis of
its own export (device and pid aside: only its own operations run on its device), whether the
analysis reads that device's operations in place (:func:`.devices.by_device`) or not, and the
JSON written in pieces must be the JSON of the whole."""

from __future__ import annotations

import json
import sqlite3

import numpy as np
import pandas as pd
import pytest
import testdata

from specscope.analysis import apicalls, callrows, loader
from specscope.analysis.auto import analyze_processes
from specscope.analysis.devices import device_rows, device_stretches, process_devices
from specscope.analysis.loader import load
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import load_preset
from specscope.analysis.steps import find_steps
from specscope.analysis.validate import validated

OPS = 3_000
SEEDS = (1, 2, 3)


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> tuple[list, object]:
    make_export = testdata.bench_module("make_export")
    merge_ranks = testdata.bench_module("merge_ranks")
    folder = tmp_path_factory.mktemp("ranks")
    inputs = [folder / f"seed{s}.sqlite" for s in SEEDS]
    for path, seed in zip(inputs, SEEDS, strict=True):
        make_export.generate(path, OPS, seed=seed)
    merged = folder / "ranks.sqlite"
    merge_ranks.merge(merged, inputs)
    return inputs, merged


def test_each_rank_equals_its_own_export(exports):
    inputs, merged = exports
    eagle = load_preset("eagle")
    x = analyze_processes(merged, eagle)
    assert [p.device for p in x.processes] == [0, 1, 2]
    assert len({p.pid for p in x.processes}) == 3
    for p, path in zip(x.processes, inputs, strict=True):
        alone = analyze(path, eagle)
        assert len(alone.frame) > 10
        pd.testing.assert_frame_equal(p.analysis.frame, alone.frame)
        assert p.analysis.notes == alone.notes
        pd.testing.assert_frame_equal(p.analysis.op_totals, alone.op_totals)
    assert x.cross_rank is not None and len(x.cross_rank) > 10


@pytest.mark.parametrize("spec", [load_preset("eagle"), None])
def test_analyses_without_their_operations_are_the_same(exports, spec):
    """``ops_kept=False`` (the CLI's analyze without --timeline) keeps each analysis without
    its operations, and nothing else changes: the same metrics, summaries, notes and view."""
    _, merged = exports
    kept = analyze_processes(merged, spec)
    lean = analyze_processes(merged, spec, ops_kept=False)
    assert len(lean.processes) == len(kept.processes) == 3
    for a, b in zip(kept.processes, lean.processes, strict=True):
        assert a.analysis.steps is not None and b.analysis.steps is None
        assert b.analysis.trace is not None  # (--totals reads it)
        pd.testing.assert_frame_equal(a.analysis.frame, b.analysis.frame)
        pd.testing.assert_frame_equal(a.analysis.summary, b.analysis.summary)
        assert a.analysis.notes == b.analysis.notes and (a.choice, a.hint) == (b.choice, b.hint)
    pd.testing.assert_frame_equal(kept.cross_rank, lean.cross_rank)
    assert "".join(kept.json_pieces()) == "".join(lean.json_pieces())


def test_a_ranks_operations_are_read_in_place(exports):
    """The joined export's operations come grouped by device (rows interleaved in the file);
    a rank's steps hold a stretch of them, not a copy."""
    _, merged = exports
    trace = load(merged)
    validated(trace)
    ops = trace.ops
    devices = ops["device_id"].to_numpy()
    assert (np.diff(devices) >= 0).all() and set(devices) == {0, 1, 2}
    pid = int(ops.loc[devices == 1, "pid"].iloc[0])
    s = find_steps(trace, load_preset("eagle"), pid=pid)
    assert s.device_id == 1 and (s.ops["device_id"] == 1).all()
    assert len(s.ops) == int((devices == 1).sum())
    assert np.shares_memory(s.ops["start_ns"].to_numpy(), ops["start_ns"].to_numpy())
    assert device_rows(trace, 1) == slice(*np.flatnonzero(devices == 1)[[0, -1]] + [0, 1])
    assert device_rows(trace, 5) == slice(0, 0)  # (no such device)


def test_the_same_without_the_grouping(exports, monkeypatch):
    """Operations left in file order (a frame made otherwise): each rank's are picked out,
    with the same steps and metrics."""
    _, merged = exports
    eagle = load_preset("eagle")
    grouped = analyze_processes(merged, eagle)
    monkeypatch.setattr(loader, "by_device", lambda columns: columns)
    trace = load(merged)
    assert (np.diff(trace.ops["device_id"].to_numpy()) < 0).any()  # interleaved
    plain = analyze_processes(trace, eagle)
    for a, b in zip(grouped.processes, plain.processes, strict=True):
        pd.testing.assert_frame_equal(a.analysis.frame, b.analysis.frame)
    # a rank's operations picked by their positions
    s = find_steps(trace, eagle, pid=plain.processes[2].pid)
    assert isinstance(device_rows(trace, 2), np.ndarray)
    assert (s.ops["device_id"] == 2).all()


def test_device_option_and_missing_device(exports):
    _, merged = exports
    x = analyze_processes(merged, load_preset("eagle"))
    pid = x.processes[1].pid
    one = analyze(merged, load_preset("eagle"), AnalyzeOptions(pid=pid, device=1))
    pd.testing.assert_frame_equal(one.frame, x.processes[1].analysis.frame)
    with pytest.raises(Exception, match="no GPU work of the steps on device 0"):
        analyze(merged, load_preset("eagle"), AnalyzeOptions(pid=pid, device=0))


def test_json_in_pieces_is_the_json_of_the_whole(exports):
    _, merged = exports
    x = analyze_processes(merged, load_preset("eagle"))
    text = "".join(x.json_pieces(trace="t", failed=[]))
    assert json.loads(text) == json.loads(json.dumps(x.to_json())) | {"trace": "t", "failed": []}
    data = json.loads(text)
    assert [e["device"] for e in data["exports"]] == [0, 1, 2]
    assert len(data["ranks"]["per_step"]) == data["ranks"]["steps"] > 10
    assert list(data["exports"][0])[-1] == "per_step"  # written last, in pieces


def test_which_devices_each_process_ran_on(exports, monkeypatch):
    """From each device's stretch, and the same from the (pid, device) pairs of a frame left
    in file order; one process on two devices, and a device shared by two processes."""
    _, merged = exports
    trace = load(merged)
    pids = sorted(set(trace.ops["pid"].tolist()))
    assert process_devices(trace) == {p: [k] for k, p in enumerate(pids)}
    ops = trace.ops
    pid = ops["pid"].to_numpy().copy()
    pid[pid == pids[1]] = pids[0]  # the second rank's work as the first process'
    device = ops["device_id"].to_numpy().copy()
    device[(device == 2) & (np.arange(len(device)) % 2 == 0)] = 0  # device 0 shared
    trace.__dict__["ops"] = ops.assign(pid=pid)
    assert process_devices(trace) == {pids[0]: [0, 1], pids[2]: [2]}
    trace.__dict__["ops"] = ops.assign(pid=pid, device_id=device)  # (not grouped now)
    assert device_stretches(trace) is None
    assert process_devices(trace) == {pids[0]: [0, 1], pids[2]: [0, 2]}


def test_zero_config_and_graph_launches_of_interleaved_ranks(exports):
    """Zero-config: each rank as in its own export. The graph launches grouped from the read
    (after each device's rows are put together) are those of SQL's ``GROUP BY``."""
    inputs, merged = exports
    x = analyze_processes(merged, None)
    for p, path in zip(x.processes, inputs, strict=True):
        alone = analyze_processes(path, None).processes[0]
        assert p.choice == alone.choice
        pd.testing.assert_frame_equal(p.analysis.frame, alone.analysis.frame)
    from_read = load(merged)
    from_read.graph_execs = True
    by_sql = load(merged)
    from_read.ops, by_sql.ops  # noqa: B018  (the first read carries the exec ids)
    assert by_sql._ops_launches is None  # (SQL's GROUP BY)
    assert from_read._ops_launches.result() is not None  # (grouped from the read)
    launches = from_read.graph_launches
    assert len(launches) > 100 and set(launches["device_id"]) == {0, 1, 2}
    pd.testing.assert_frame_equal(launches, by_sql.graph_launches)


@pytest.mark.parametrize("lookup", ["table", "search"])
@pytest.mark.parametrize("preset", ["eagle", None])
def test_eager_ranks_each_equal_their_own_export(tmp_path, monkeypatch, preset, lookup):
    """Ranks that launch every kernel on its own (``make_export.py --launches eager``): sparse
    correlation ids, each process' in order, the processes' calls interleaved. The launches
    are matched by the id-indexed table where ids are dense enough (these small exports), or
    among the calls ordered by process (``callrows._key_order``: a real export's ids are too
    sparse for the table; ``search`` refuses it here). With the preset and zero-config (the
    kernel-pattern search), each rank equals its own export."""
    if lookup == "search":
        monkeypatch.setattr(callrows, "dense", lambda span, n: False)
    make_export = testdata.bench_module("make_export")
    merge_ranks = testdata.bench_module("merge_ranks")
    inputs = [tmp_path / f"eager{s}.sqlite" for s in SEEDS[:2]]
    for path, seed in zip(inputs, SEEDS, strict=False):
        make_export.generate(path, OPS, seed=seed, launches="eager")
        if preset is None:  # (zero-config finds the kernel pattern without NVTX)
            con = sqlite3.connect(path)
            with con:
                con.execute("DELETE FROM NVTX_EVENTS")
            con.close()
    merged = tmp_path / "eager_ranks.sqlite"
    merge_ranks.merge(merged, inputs)
    spec = None if preset is None else load_preset(preset)
    x = analyze_processes(merged, spec)
    assert [p.device for p in x.processes] == [0, 1]
    for p, path in zip(x.processes, inputs, strict=True):
        (alone,) = analyze_processes(path, spec).processes
        assert len(alone.analysis.frame) > 10
        assert p.choice == alone.choice
        mine = p.analysis.frame.drop(columns=[c for c in p.analysis.frame if "nccl" in c])
        pd.testing.assert_frame_equal(mine, alone.analysis.frame)


def test_the_calls_of_each_process_together(exports, monkeypatch):
    """The ranks' CUDA API calls, interleaved in the file, come grouped by process (pids in
    order, each one's calls in their order); a thread's calls are read from its process'
    stretch, the same as picked out of the calls as read, and the analyses are the same."""
    _, merged = exports
    trace = load(merged)
    start, _, gtid, corr, _ = trace._runtime
    pid = (gtid >> 24) & 0xFFFFFF
    assert (np.diff(pid) >= 0).all() and len(np.unique(pid)) == 3
    stretches = callrows.process_stretches(gtid)
    assert [(s.start, s.stop) for s in stretches.values()] == [
        (int(np.searchsorted(pid, p)), int(np.searchsorted(pid, p, "right"))) for p in stretches
    ]
    monkeypatch.setattr(apicalls, "calls_by_process", lambda calls: calls)
    plain = load(merged)
    p_start, _, p_gtid, _, _ = plain._runtime
    assert (np.diff((p_gtid >> 24) & 0xFFFFFF) < 0).any()  # (the file's order: interleaved)
    assert callrows.process_stretches(p_gtid) is None
    for p, rows_of_p in stretches.items():
        thread = (p, int(gtid[rows_of_p.start]) & 0xFFFFFF)
        for rows in (None, 100):
            got, want = (
                [np.concatenate([piece[k] for piece in t.api_pieces(rows=rows, thread=thread)])
                 for k in range(5)]
                for t in (trace, plain)
            )  # fmt: skip
            assert len(got[0]) > 100
            for a, b in zip(got, want, strict=True):
                assert np.array_equal(a, b)
        assert trace.thread_calls_end(*thread) == plain.thread_calls_end(*thread)
        assert np.array_equal(start[pid == p], p_start[((p_gtid >> 24) & 0xFFFFFF) == p])
        # a few pairs' calls (a step marker's): found in the process' stretch alone
        few = corr[rows_of_p][::50][:20]
        asked = (np.full(len(few) + 1, p), np.append(few, 10**9))  # (and one never made)
        for got, want in zip(trace.launch_calls(*asked), plain.launch_calls(*asked), strict=True):
            np.testing.assert_array_equal(got, want)
        assert np.isnan(trace.launch_calls(*asked)[0][-1])
        for got, want in zip(trace.launches(*asked), plain.launches(*asked), strict=True):
            np.testing.assert_array_equal(got, want)
    # the launch lookup of several processes' dense ids: a table, made once
    assert isinstance(trace.launch_rows(), callrows.IdTables)
    assert trace.launch_rows() is trace.launch_rows()
    (none,) = trace.api_pieces(thread=(1, 1))  # (no such process: one piece, empty)
    assert [len(c) for c in none] == [0] * 5
    eagle = load_preset("eagle")
    for a, b in zip(
        analyze_processes(trace, eagle).processes,
        analyze_processes(plain, eagle).processes,
        strict=True,
    ):
        pd.testing.assert_frame_equal(a.analysis.frame, b.analysis.frame)


def test_process_stretches():
    """The rows of each process' calls from their globalTids (pid << 24 | tid, higher bits
    aside), a chunk at a time; None where a process' calls are in two runs."""
    gtid = np.array([5 << 24 | 5, 5 << 24 | 6, 7 << 24 | 7, (1 << 56) | 9 << 24 | 9])
    assert callrows.process_stretches(gtid) == {5: slice(0, 2), 7: slice(2, 3), 9: slice(3, 4)}
    assert callrows.process_stretches(gtid[[0, 2, 1]]) is None
    assert callrows.process_stretches(gtid[:0]) == {}
    assert callrows.process_stretches(np.tile(gtid[:3], callrows.MOST_RUNS)) is None
    one = np.broadcast_to(np.int64(3 << 24 | 4), (10,))
    assert callrows.process_stretches(one) == {3: slice(0, 10)}
    long = np.repeat(gtid, loader.CHUNK_ROWS // 2 + 1)  # (runs across chunks)
    n = loader.CHUNK_ROWS // 2 + 1
    assert callrows.process_stretches(long) == {
        5: slice(0, 2 * n),
        7: slice(2 * n, 3 * n),
        9: slice(3 * n, 4 * n),
    }


@pytest.mark.parametrize("pids", [(7, 5, 9), (300_000, 5, 90_000)], ids=["near", "far apart"])
def test_calls_by_process_is_a_stable_sort_by_pid(pids, monkeypatch):
    """:func:`.callrows.calls_by_process`: each process' calls together in pid order, in their
    order, whether the pids are counted (near one another) or found one at a time; moved by
    the C loops, each column's pages given back as it is read where the list alone held it
    (the list emptied then)."""
    from specscope.analysis import opsums, pagerelease
    from specscope.analysis.pagerelease import Pages

    given, moved = [], []

    class Recorded(Pages):
        def __init__(self, values):
            given.append(values.dtype)
            super().__init__(values)

    monkeypatch.setattr(pagerelease, "Pages", Recorded)
    column = opsums.DeviceScatter.column
    monkeypatch.setattr(opsums.DeviceScatter, "column", lambda self, values, give_back=False: (
        moved.append(values.dtype), column(self, values, give_back))[1])  # fmt: skip
    rng = np.random.default_rng(5)
    pid = np.array(pids)[rng.integers(0, 3, 5000)]
    gtid = (1 << 56) | pid << 24 | (pid + rng.integers(0, 2, 5000))
    calls = [np.arange(5000) * 10, np.arange(5000, dtype=np.uint32), gtid]
    calls += [np.arange(5000, dtype=np.int32), rng.integers(0, 9, 5000).astype(np.int16)]
    held = [c.copy() for c in calls]
    got = callrows.calls_by_process(held)
    order = np.argsort(pid, kind="stable")
    for a, b in zip(got, calls, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b[order])
    assert held == [] and sorted(map(str, given)) == sorted(str(c.dtype) for c in calls)
    assert sorted(map(str, moved)) == sorted(map(str, given))
    one = [c[pid == pids[0]] for c in calls]  # (one process: as they are)
    assert all(a is b for a, b in zip(callrows.calls_by_process(one), one, strict=True))


def test_a_large_read_of_the_ranks_gives_the_same_frames_and_analyses(exports, monkeypatch):
    """Read as a large export is (the devices int8, the ends as durations until the
    regrouping has moved them, the flags unpacked a chunk at a time, every moved column's
    pages given back as it is read): the operations' frame and the analyses of the ranks are
    those of the plain read."""
    from specscope.analysis import memory

    _, merged = exports
    eagle = load_preset("eagle")
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 1 << 40)
    plain = load(merged)
    want = analyze_processes(plain, eagle)
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0)
    monkeypatch.setattr(loader, "CHUNK_ROWS", 1000)  # (unpacked and made ends in chunks)
    read = []
    read_ops = loader.read_ops

    def recorded(*args):
        columns = read_ops(*args)
        read.append((columns[1].dtype, columns[3].dtype))
        return columns

    monkeypatch.setattr(loader, "read_ops", recorded)
    lean = load(merged)
    assert lean.ops["end_ns"].dtype == np.int64
    assert read == [(np.dtype(np.uint32), np.dtype(np.int8))]
    pd.testing.assert_frame_equal(lean.ops, plain.ops, check_dtype=False)
    got = analyze_processes(lean, eagle)
    for a, b in zip(got.processes, want.processes, strict=True):
        pd.testing.assert_frame_equal(a.analysis.frame, b.analysis.frame)
