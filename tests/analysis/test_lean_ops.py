"""The lean per-operation state of large exports gives the same analyses as the plain one.

Above ``memory.ONE_VALUE_MIN_ROWS`` operations, a column of one value (device, pid, launching
thread) is a stride-0 view, correlation ids and bytes are int32 where they fit; the tests lower the
threshold to 0 so that the small committed exports take that path, and compare every output
with the plain path.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from testdata import AFTER, DATA, GRAPH

from specscope.analysis import loader, memory, opnames
from specscope.analysis.auto import analyze_processes
from specscope.analysis.coverage import union_coverage
from specscope.analysis.loader import load
from specscope.analysis.memory import one_value_view
from specscope.analysis.opnames import unique_inverse
from specscope.analysis.run import DEFAULT_OPTIONS, AnalyzeOptions
from specscope.analysis.spec import load_preset
from specscope.analysis.steps import interval_index, op_index_dtype
from specscope.analysis.summary import totals

EXPORTS = [AFTER, GRAPH, DATA / "cpu_eagle_2023.sqlite"]


def _outputs(path, monkeypatch, min_rows: int) -> list[str]:
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", min_rows)
    out = []
    for spec in (None, load_preset("eagle")):
        trace = load(path)
        for options in (DEFAULT_OPTIONS, AnalyzeOptions(skip=1, count_kernels=("gemm",))):
            export = analyze_processes(trace, spec, options)
            out += [p.analysis.json_text() for p in export.processes]
            out += [p.analysis.frame.to_csv() for p in export.processes]
        out += [frame.to_csv() for frame in totals(trace).values()]
    return out


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.stem)
def test_one_value_columns_give_the_same_analyses(path, monkeypatch) -> None:
    lean = _outputs(path, monkeypatch, 0)
    plain = _outputs(path, monkeypatch, loader.CHUNK_ROWS)
    assert lean == plain


def test_one_value_columns_are_views(monkeypatch) -> None:
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0)  # (the read narrows them, as it goes)
    lean = load(AFTER).ops
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", loader.CHUNK_ROWS)
    plain = load(AFTER).ops
    pd.testing.assert_frame_equal(lean, plain, check_dtype=False)
    for col in ("device_id", "pid"):
        assert lean[col].to_numpy().strides == (0,)
        assert lean[col].dtype == plain[col].dtype
    assert lean["correlation_id"].dtype == np.int32
    assert (
        lean["bytes"].dtype == pd.SparseDtype(np.int32, 0) and lean["stream_id"].dtype == np.int16
    )
    assert lean["start_ns"].to_numpy().strides == (8,)
    # the sparse byte counts: of copies and memsets only; a chunk of them as an array
    nbytes = lean["bytes"].array
    dense = np.asarray(nbytes)
    assert nbytes.sp_index.npoints == np.count_nonzero(dense) < len(dense)
    kinds = lean["kind"].to_numpy()[dense != 0]
    assert set(kinds) <= {"memcpy", "memset"}
    for lo, hi in [(0, 1), (3, 50), (0, len(dense)), (len(dense) - 5, len(dense) + 9)]:
        assert np.array_equal(memory.dense_rows(nbytes, lo, hi), dense[lo:hi])
        assert np.array_equal(memory.dense_rows(dense, lo, hi), dense[lo:hi])


def test_api_name_ids_narrowed_to_what_holds_them(monkeypatch) -> None:
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0)
    assert load(AFTER)._runtime[4].dtype == np.int16  # (StringIds ids of a small export)
    for values, dtype in [
        ([-5, 0, 32767], np.int16),
        ([0, 32768], np.int32),
        ([-32769, 7], np.int32),
        ([0, 1 << 40], np.int64),
    ]:
        narrowed = memory.narrow_ids(np.array(values, dtype=np.int64))
        assert narrowed.dtype == dtype and narrowed.tolist() == values


@pytest.mark.parametrize(
    "path", [AFTER, DATA / "real" / "two_procs_normalized.sqlite"], ids=lambda p: p.stem
)
def test_api_call_ends_read_as_durations_give_the_same_calls(path, monkeypatch) -> None:
    """A large read holds each CUDA API call's duration (uint32), not its end: the calls'
    frame, a thread's last end and the launch calls' ends are the same as from the ends (an
    export of moved times included: durations are not moved), and so is the validation."""
    from specscope.analysis.validate import _call_ends, clean

    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0)
    lean = load(path)
    lean.ops, lean._runtime  # noqa: B018 (read now: the loader's reads are lazy)
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", loader.CHUNK_ROWS)
    plain = load(path)
    assert lean._runtime[1].dtype == np.uint32 and plain._runtime[1].dtype == np.int64
    pd.testing.assert_frame_equal(lean.api(), plain.api(), check_dtype=False)
    calls = plain.api()
    gtid = plain._runtime[2]
    pid, tid = int(gtid[0]) >> 24 & 0xFFFFFF, int(gtid[0]) & 0xFFFFFF
    assert lean.thread_calls_end(pid, tid) == plain.thread_calls_end(pid, tid)
    ops = plain.ops
    args = (ops["pid"].to_numpy(), ops["correlation_id"].to_numpy())
    for a, b in zip(lean.launch_calls(*args), plain.launch_calls(*args), strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    assert clean(lean) == clean(plain)
    # a call before the capture: every end worked out, the same rows dropped
    runtime = list(lean._runtime)
    bounds = (int(calls["start_ns"].min()) + 1, int(calls["end_ns"].max()))
    assert np.array_equal(_call_ends(runtime, bounds), plain._runtime[1])
    everything = (int(calls["start_ns"].min()), int(calls["end_ns"].max()))
    latest = _call_ends(runtime, everything)
    assert latest.strides == (0,) and int(latest[0]) == int(calls["end_ns"].max())


def test_one_value_view_only_for_one_value(monkeypatch) -> None:
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0)
    same = np.full(10, 7, dtype=np.int32)
    view = one_value_view(same)
    assert view.strides == (0,) and view.dtype == np.int32 and (view == 7).all()
    mixed = np.array([7, 7, 8], dtype=np.int32)
    assert one_value_view(mixed) is mixed
    assert len(one_value_view(np.zeros(0, dtype=np.int32))) == 0


@pytest.mark.parametrize("n_codes", [1, 127, 128, 40_000])
def test_unique_inverse_is_numpys_in_the_smallest_dtype(n_codes: int, monkeypatch) -> None:
    monkeypatch.setattr(opnames, "CHUNK_ROWS", 1000)  # several chunks
    rng = np.random.default_rng(n_codes)
    codes = rng.integers(-5, n_codes - 5, size=5000 + n_codes).astype(np.int32)
    codes[:n_codes] = np.arange(-5, n_codes - 5)  # every code present
    uniq, inverse = unique_inverse(codes)
    want_uniq, want_inverse = np.unique(codes, return_inverse=True)
    np.testing.assert_array_equal(uniq, want_uniq)
    np.testing.assert_array_equal(inverse, want_inverse)
    want = np.int8 if n_codes <= 127 else np.int16 if n_codes <= 32767 else np.int32
    assert inverse.dtype == want


def test_interval_index_in_int32_is_the_int64_one() -> None:
    starts, ends = np.array([0, 10, 30]), np.array([5, 20, 40])
    t = np.array([-1, 0, 4, 5, 10, 25, 39, 40, 100])
    wide = interval_index(starts, ends, t)
    narrow = interval_index(starts, ends, t, op_index_dtype(len(starts)))
    assert narrow.dtype == np.int32
    np.testing.assert_array_equal(narrow, wide)
    assert op_index_dtype(2**31) == np.int64


def test_coverage_with_an_int32_order_is_the_sorted_one() -> None:
    rng = np.random.default_rng(3)
    starts = rng.integers(0, 1000, size=3000)
    ends = starts + rng.integers(0, 50, size=3000)
    t = rng.integers(-10, 1100, size=200)
    by_order = union_coverage(starts, ends, chunk=256)(t)
    order = np.argsort(starts, kind="stable")
    sorted_ = union_coverage(starts[order], ends[order], chunk=256)(t)
    np.testing.assert_array_equal(by_order, sorted_)


@pytest.mark.parametrize(
    "runs",
    [[50], [40, 5, 3], [3, 40, 5], [5, 3, 40], [20, 20], [10, 10, 10], [1, 60, 1]],
    ids=str,
)
@pytest.mark.parametrize("ties", [False, True])
def test_start_order_is_the_stable_argsort(runs: list[int], ties: bool, monkeypatch) -> None:
    """Sorted runs (tables of ops) merged, or sorted; ties resolved as the stable sort does."""
    from specscope.analysis import coverage

    monkeypatch.setattr(coverage, "CHUNK_ROWS", 7)  # several chunks
    monkeypatch.setattr(coverage, "WHOLE_COVERAGE_MAX", 0)  # merged, as above 4 M ops
    rng = np.random.default_rng(len(runs) + ties)
    high = 15 if ties else 10**6
    starts = np.concatenate([np.sort(rng.integers(0, high, size=n)) for n in runs])
    order = coverage.start_order(starts)
    if len(runs) == 1:
        assert order is None
        return
    want = np.argsort(starts, kind="stable")
    np.testing.assert_array_equal(np.asarray(order), want)
    assert np.asarray(order).dtype == np.int32
    n = len(starts)  # every stretch and row, as union_coverage takes them
    for lo in range(0, n + 3, 3):
        for width in (0, 1, 4, 9, n):
            np.testing.assert_array_equal(order[lo : lo + width], want[lo : lo + width])
    assert [order[i] for i in range(n)] == want.tolist() and order[-1] == want[-1]
    ends = starts + rng.integers(0, 30, size=n)
    t = rng.integers(-5, high + 40, size=50)
    np.testing.assert_array_equal(
        union_coverage(starts, ends, chunk=7)(t),
        union_coverage(starts[want], ends[want], chunk=7)(t),
    )


@pytest.mark.parametrize("chunk", [1, 2, 5, 1000])
def test_per_step_json_in_pieces_is_the_whole_text(chunk: int, monkeypatch) -> None:
    """The per-step JSON written in pieces of a few steps is byte for byte pandas' text of all
    steps (and the whole JSON parses)."""
    import json

    from specscope.analysis import run

    (p,) = analyze_processes(AFTER, load_preset("eagle")).processes
    whole = p.analysis.frame.reset_index().to_json(orient="records")
    monkeypatch.setattr(run, "JSON_CHUNK_STEPS", chunk)
    assert p.analysis.per_step_json() == whole
    data = json.loads(p.analysis.json_text())
    assert len(data["per_step"]) == p.analysis.n_steps


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.stem)
def test_coverage_built_beside_the_counts_gives_the_same_analyses(path, monkeypatch) -> None:
    """parallel.beside (coverage_beside, the ops' names): work on a second thread (every size
    here); the analyses are those of the one-thread order."""
    from specscope.analysis import parallel

    monkeypatch.setattr(parallel, "BESIDE_MIN_ROWS", 0)
    beside = _outputs(path, monkeypatch, loader.CHUNK_ROWS)
    monkeypatch.setattr(parallel, "BESIDE_MIN_ROWS", 1 << 60)
    assert beside == _outputs(path, monkeypatch, loader.CHUNK_ROWS)


@pytest.mark.parametrize("threshold", [0, 1 << 60], ids=["thread", "inline"])
def test_coverage_beside_raises_the_errors_of_both(monkeypatch, threshold) -> None:
    from specscope.analysis import coverage, parallel

    monkeypatch.setattr(parallel, "BESIDE_MIN_ROWS", threshold)
    steps = analyze_processes(load(AFTER), load_preset("eagle")).processes[0].analysis.steps
    steps.__dict__.pop("_coverage", None)
    with pytest.raises(ZeroDivisionError):
        coverage.coverage_beside(steps, lambda: 1 / 0)
    assert callable(steps.__dict__.get("_coverage", coverage.ops_coverage(steps)))

    def broken(*_):
        raise MemoryError("the coverage's own error")

    steps.__dict__.pop("_coverage", None)
    monkeypatch.setattr(coverage, "_coverage_of", broken)
    with pytest.raises(MemoryError, match="own error"):
        coverage.coverage_beside(steps, lambda: 1)


def _calls_of_rows(api: np.ndarray, tid: np.ndarray):
    """A :meth:`.Trace.launches` whose call of the operation with correlation id ``c`` (of
    process 5) is row ``c - 1``'s of ``api``, ``tid``; it counts the operations asked for."""

    def launches(pid: np.ndarray, corr: np.ndarray):
        assert (pid == 5).all()
        launches.asked += len(corr)
        return api[corr - 1], tid[corr - 1]

    launches.asked = 0
    return launches


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk", [1, 3, 7, 1 << 18])
def test_anchor_extents_in_chunks_are_each_instances_own(seed: int, chunk: int, monkeypatch):
    """Instances spanning chunks, out of order, with ties on the first start (earliest call,
    no call last, then trace order): the extents of each instance's own rows."""
    from types import SimpleNamespace

    from specscope.analysis import gaps

    monkeypatch.setattr(gaps, "CHUNK_ROWS", chunk)
    rng = np.random.default_rng(seed)
    n_ops, n_anchors = 60, 9
    anchor = np.sort(rng.integers(-1, n_anchors - 1, n_ops)).astype(np.int32)  # one never
    swap = rng.integers(0, n_ops, 6)
    anchor[swap] = anchor[swap[::-1]]  # a few out of instance order
    start = rng.integers(0, 5, n_ops) * 10  # many equal starts
    api = rng.choice([np.nan, 1.0, 2.0, 3.0], n_ops)
    tid = np.where(np.isnan(api), -1, rng.integers(0, 1000, n_ops))
    ops = pd.DataFrame(
        {"anchor": anchor, "start_ns": start, "end_ns": start + rng.integers(1, 50, n_ops),
         "pid": np.full(n_ops, 5), "correlation_id": np.arange(n_ops) + 1}
    )  # fmt: skip
    steps = SimpleNamespace(
        anchors=pd.DataFrame({"start_ns": np.arange(n_anchors)}), ops=ops, anchor_base=None
    )
    got = gaps.anchor_extents(steps, _calls_of_rows(api, tid))
    for k in range(n_anchors):
        rows = np.flatnonzero(anchor == k)
        row = got.iloc[k]
        if not len(rows):
            assert np.isnan(row["first_ns"]) and row["launch_tid"] == -1
            continue
        first = start[rows].min()
        head = min(
            (r for r in rows if start[r] == first),
            key=lambda r: (np.inf if np.isnan(api[r]) else api[r], r),
        )
        assert row["first_ns"] == first and row["last_ns"] == ops["end_ns"][rows].max()
        assert row["launch_tid"] == tid[head]
        assert (np.isnan(row["launch_ns"]) and np.isnan(api[head])) or row["launch_ns"] == api[head]


@pytest.mark.parametrize("path", [AFTER, GRAPH], ids=lambda p: p.stem)
def test_api_calls_in_pieces_are_the_whole_table(path, monkeypatch) -> None:
    """:meth:`Trace.api_chunks` pieces add up to :meth:`Trace.api`, and the per-step API call
    counts built from small pieces are those of one piece."""
    trace = load(path)
    names = ["cudaLaunchKernel", "cudaGraphLaunch", "cudaMemcpyAsync"]
    whole = trace.api(names)
    pieces = list(trace.api_chunks(names, rows=5))
    assert len(pieces) > 1
    joined = pd.concat(pieces, ignore_index=True)
    pd.testing.assert_frame_equal(
        joined.astype({"name": object}), whole.astype({"name": object}), check_dtype=False
    )
    spec = load_preset("eagle")
    one = analyze_processes(load(path), spec, DEFAULT_OPTIONS).processes[0].analysis
    monkeypatch.setattr(loader.Trace.api_chunks, "__defaults__", (None, 5))
    small = analyze_processes(load(path), spec, DEFAULT_OPTIONS).processes[0].analysis
    api_cols = [c for c in one.frame.columns if c.startswith("api_calls:")]
    assert api_cols and one.frame[api_cols].to_numpy().sum() > 0
    assert one.json_text() == small.json_text()


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.stem)
def test_class_counts_by_sorting_are_the_bincounts(path, monkeypatch) -> None:
    """The per-step op counts come out the same whichever way a chunk's keys are counted."""
    from specscope.analysis import metrics

    def outputs() -> list[str]:
        trace = load(path)
        options = AnalyzeOptions(count_kernels=("gemm", "."))
        export = analyze_processes(trace, load_preset("eagle"), options)
        return [p.analysis.json_text() for p in export.processes]

    dense = outputs()
    monkeypatch.setattr(metrics, "dense", lambda span, n: False)
    monkeypatch.setattr(metrics, "CHUNK_ROWS", 64)  # many chunks, kernel patterns per chunk
    assert outputs() == dense


def test_few_distinct_values_in_order_of_first_appearance():
    from specscope.analysis.memory import few_distinct, one_valued

    values = np.array([7, 3, 7, 9, 3, 3, 9, 7])
    assert few_distinct(values) == [7, 3, 9]
    assert few_distinct(values, most=3) == [7, 3, 9]
    assert few_distinct(values, most=2) is None
    assert few_distinct(np.zeros(0, dtype=np.int64)) == []
    assert one_valued(np.broadcast_to(np.array([5]), (10,))) and one_valued(np.full(3, 2))
    assert not one_valued(values)


CHUNK = memory.CHUNK_ROWS


@pytest.mark.parametrize("at", [None, 0, CHUNK - 2, CHUNK - 1, CHUNK, 2 * CHUNK + 3])
def test_increasing_looks_at_every_pair_across_chunks(at):
    # strictly increasing, a chunk at a time: a pair that is not (equal values) found wherever
    # it is, the pairs that straddle two chunks too
    from specscope.analysis.memory import increasing

    values = np.arange(2 * CHUNK + 10, dtype=np.int32) * 3
    if at is not None:
        values[at + 1] = values[at]
    assert increasing(values) is (at is None)
    assert increasing(values[:1]) and increasing(values[:0])


def test_call_pids_of_one_thread_are_a_view():
    from specscope.analysis.callrows import call_pids

    gtid = one_value_view(np.full(CHUNK * 5, (4242 << 24) | 17, dtype=np.int64))
    pids = call_pids(gtid)
    assert pids.strides == (0,) and pids.shape == gtid.shape and int(pids[-1]) == 4242
    mixed = np.array([(1 << 24) | 5, (2 << 24) | 5], dtype=np.int64)
    assert call_pids(mixed).tolist() == [1, 2]


@pytest.mark.parametrize("n", [0, 1, 2, 7, 8, 9, 50])
def test_start_order_breaks_found_a_chunk_at_a_time(n, monkeypatch):
    """Where the starts decrease (the bounds of the sorted runs a merged order is made of),
    found over chunks of rows, with breaks at and across the chunks' edges."""
    from specscope.analysis import coverage

    monkeypatch.setattr(coverage, "CHUNK_ROWS", 4)
    starts = np.random.default_rng(n).integers(0, 5, n)
    got = coverage._breaks(starts)
    assert got.dtype == np.int64
    assert np.array_equal(got, np.flatnonzero(starts[1:] < starts[:-1]))


@pytest.mark.parametrize("path", [AFTER, GRAPH], ids=lambda p: p.stem)
def test_coverage_started_before_the_steps_is_taken_and_the_same(path, monkeypatch) -> None:
    """coverage_ahead: the coverage of every operation of a one-device export built while
    the steps are found, taken by the metrics (the steps' operations are those), the same
    analysis as without it; nothing left on the trace, taken or not (a spec without steps)."""
    from specscope.analysis import coverage, parallel, run

    monkeypatch.setattr(parallel, "BESIDE_MIN_ROWS", 0)  # (a second thread at every size)
    taken = []
    real = coverage._taken_ahead
    monkeypatch.setattr(coverage, "_taken_ahead", lambda *a: taken.append(real(*a)) or taken[-1])
    trace = load(path)
    ahead = run.analyze_trace(trace, load_preset("eagle"))
    assert len(taken) == 1 and taken[0] is not None and "_coverage_ahead" not in trace.__dict__
    monkeypatch.setattr(run, "coverage_ahead", lambda trace: None)
    plain = run.analyze_trace(load(path), load_preset("eagle"))
    pd.testing.assert_frame_equal(ahead.frame, plain.frame)
    monkeypatch.undo()
    monkeypatch.setattr(parallel, "BESIDE_MIN_ROWS", 0)
    with pytest.raises(Exception, match="no_such_range"):
        run.analyze_trace(trace, run.StepSpec("no_such_range"))
    assert "_coverage_ahead" not in trace.__dict__


@pytest.mark.parametrize("name", ["eagle_node_after", "real/two_procs", "graphs/two_proc_graph"])
@pytest.mark.parametrize("too_long", [False, True])
def test_op_ends_read_as_durations_give_the_same_ops(name, too_long, monkeypatch, tmp_path):
    """A large read holds each GPU operation's duration (uint32) until the loader makes the
    ends (one device: at once; several: after the regrouping, which moves 4 bytes an
    operation): the same frame as read from the ends. An operation of more than 4.29 s: the
    read holds the ends themselves, and the frame is the same again."""
    import shutil
    import sqlite3

    from specscope.analysis import opsread
    from specscope.analysis.readcols import DURATION32, ends_given_back

    path = DATA / f"{name}.sqlite"
    if too_long:
        path = shutil.copy(path, tmp_path / "long.sqlite")
        con = sqlite3.connect(path)
        con.execute(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + 5000000000"
            " WHERE rowid = (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)"
        )
        con.commit()
        con.close()
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", loader.CHUNK_ROWS)
    plain = load(path).ops
    monkeypatch.setattr(memory, "ONE_VALUE_MIN_ROWS", 0)
    seen = []
    read_ops = loader.read_ops

    def recorded(*args):
        columns = read_ops(*args)
        seen.append(columns[1].dtype)
        return columns

    monkeypatch.setattr(loader, "read_ops", recorded)
    lean = load(path).ops
    assert opsread._OP_DTYPES[1] == DURATION32
    assert seen == [np.dtype(np.int64) if too_long else np.dtype(np.uint32)]
    assert lean["end_ns"].dtype == np.int64
    pd.testing.assert_series_equal(lean["end_ns"], plain["end_ns"])
    pd.testing.assert_frame_equal(lean, plain, check_dtype=False)
    start = np.array([5, 10, 2**40], dtype=np.int64)
    columns = {"end": np.array([1, 0, 2**32 - 1], dtype=np.uint32)}
    ends_given_back(start, columns, "end")
    assert columns["end"].tolist() == [6, 10, 2**40 + 2**32 - 1]
    kept = {"end": columns["end"]}
    ends_given_back(start, kept, "end")  # (ends already: as they are)
    assert kept["end"] is columns["end"]


def test_chunked_coverage_takes_the_merged_order_however_few_the_rows(monkeypatch) -> None:
    """A coverage queried by chunked passes (each rank of a large export's) orders its starts
    by merging the few rows out of order into the longest run (no argsort of every row, nor
    an int64 order of them), even below WHOLE_COVERAGE_MAX rows; the same order, the same
    coverage."""
    from specscope.analysis import coverage

    rng = np.random.default_rng(9)
    runs = [5000, 300, 40]
    starts = np.concatenate([np.sort(rng.integers(0, 10**6, size=n)) for n in runs])
    ends = starts + rng.integers(0, 50, size=len(starts))
    want = np.argsort(starts, kind="stable")
    assert isinstance(coverage.start_order(starts), np.ndarray)  # (few rows, whole: a sort)
    merged = coverage.start_order(starts, merged=True)
    assert isinstance(merged, coverage.MergedOrder)
    assert [merged[i] for i in range(len(starts))] == want.tolist()
    orders = []
    real = coverage.start_order
    monkeypatch.setattr(coverage, "start_order", lambda s, merged=False: (
        orders.append(merged), real(s, merged))[1])  # fmt: skip
    t = rng.integers(-5, 10**6 + 60, size=40)
    np.testing.assert_array_equal(
        union_coverage(starts, ends, chunk=100)(t),
        union_coverage(starts[want], ends[want], chunk=len(starts))(t),
    )
    assert orders[0] is True
