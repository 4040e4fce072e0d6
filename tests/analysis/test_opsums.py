"""The C loops of specscope.analysis.opsums against their numpy references (the code beside
each caller, which runs where the loops cannot): the per-step sums of random operations (steps
out of order and missing, every kind and copy kind, names matching or not, ties of starts and
calls, NaN calls, int8 to int64 columns, more than one chunk of rows) and of the committed
exports, the same to the bit; values outside a reference's range are left to it."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specscope.analysis import coverage, gaps, metrics, native, opsums, run
from specscope.analysis.coverage import union_coverage
from specscope.analysis.loader import COPY_KINDS, KINDS
from specscope.analysis.memory import CHUNK_ROWS
from specscope.analysis.spec import StepSpec
from specscope.analysis.steps import Steps

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def built(native_cache):
    """The compiled loops, in a cache of this module's own (skipped without a compiler)."""
    if native.built(native.OPSUMS)[0] is None:
        pytest.skip("no C compiler here: the sums stay in numpy")


def _reference(monkeypatch, fn, *args):
    """``fn(*args)`` with the C loops turned off (the numpy reference)."""
    with monkeypatch.context() as m:
        m.setenv("SPECSCOPE_NATIVE", "0")
        assert native.built(native.OPSUMS)[0] is None
        return fn(*args)


def _random_steps(rng, n: int, n_steps: int, step_dtype, sorted_steps: bool) -> Steps:
    """Operations of every kind over ``n_steps`` steps (some kept), with some outside any
    step (-1) and anchors of instances in trace order or not."""
    step = rng.integers(-1, n_steps, n)
    if sorted_steps:
        step.sort()
    kind = rng.integers(0, len(KINDS), n).astype(np.int8)
    copy = np.where(kind == KINDS.index("memcpy"), rng.integers(0, len(COPY_KINDS), n), -1)
    names = ["fused_metadata_copy", "gemm_a", "gemm_b", "flash_fwd", "copy_kernel"]
    name = rng.integers(-1, len(names), n)
    full = rng.integers(-1, len(names), n)
    start = rng.integers(0, max(10, n // 20), n) * 10  # (coarse: many ties of starts)
    n_anchors = max(1, n_steps * 3)
    anchor = rng.integers(-1, n_anchors, n)
    if sorted_steps:
        anchor.sort()
    ops = pd.DataFrame(
        {
            "start_ns": start,
            "end_ns": start + rng.integers(0, 5_000, n),
            "pid": np.full(n, 1, dtype=np.int32),
            "correlation_id": rng.integers(0, 300, n).astype(np.int32),
            "name": pd.Categorical.from_codes(name, names),
            "full_name": pd.Categorical.from_codes(full, [f"void {x}()" for x in names]),
            "kind": pd.Categorical.from_codes(kind, KINDS),
            "in_graph": rng.random(n) < 0.5,
            "copy_kind": pd.Categorical.from_codes(copy, COPY_KINDS),
            "bytes": rng.integers(0, 1 << 20, n).astype(np.int32),
            "step": step.astype(step_dtype),
            "anchor": anchor.astype(step_dtype),
        }
    )
    all_steps = pd.DataFrame({"step": np.arange(n_steps)})
    kept = np.sort(rng.choice(n_steps, max(1, n_steps * 2 // 3), replace=False))
    anchors = pd.DataFrame({"start_ns": np.arange(n_anchors), "end_ns": np.arange(n_anchors)})
    spec = StepSpec(step="step", anchors=("a", "b", "c"))
    return Steps(spec, 1, 1, 0, all_steps, kept, anchors, ops)


def _random_calls(rng):
    """A :meth:`.Trace.launches` of process 1's correlation ids 0..299 (those of
    :func:`_random_steps`): a random start (a fifth NaN, none) and thread each; it counts
    the operations asked for."""
    start = rng.integers(0, 30, 300) * 100.0  # (coarse: ties of calls too)
    start[rng.random(300) < 0.2] = np.nan
    tid = np.where(np.isnan(start), -1, rng.integers(1, 4, 300)).astype(np.int32)

    def launches(pid: np.ndarray, corr: np.ndarray):
        assert (pid == 1).all()
        launches.asked += len(corr)
        return start[corr], tid[corr]

    launches.asked = 0
    return launches


def _same_sums(got: dict, want: dict) -> None:
    assert got.keys() == want.keys()
    for key in got:
        if key == "launches":  # (the same launches per step: what the count is made of)
            n = int(max([0, *(int(p.max()) + 1 for p in (got[key][0], want[key][0]) if len(p))]))
            assert np.array_equal(
                metrics._distinct_per_step(*got[key], n), metrics._distinct_per_step(*want[key], n)
            )
            assert got[key][1].dtype == want[key][1].dtype
        else:
            assert got[key].dtype == want[key].dtype, key
            assert np.array_equal(got[key], want[key]), key


CASES = [  # (operations, steps, dtype of step and anchor, steps in trace order)
    (1, 1, np.int32, True),
    (5_000, 40, np.int32, False),
    (5_000, 40, np.int64, True),
    (CHUNK_ROWS + 12_345, 300, np.int32, True),  # (more than one chunk)
    (20_000, 3, np.int16, False),
]


@pytest.mark.parametrize("n,n_steps,dtype,in_order", CASES)
def test_random_operations_sum_alike(built, monkeypatch, n, n_steps, dtype, in_order):
    rng = np.random.default_rng(n + n_steps)
    steps = _random_steps(rng, n, n_steps, dtype, in_order)
    patterns = ["metadata", "gemm_[ab]", "void flash", "no such kernel"]
    got = metrics._class_counts(steps, patterns)
    want = _reference(monkeypatch, metrics._class_counts, steps, patterns)
    _same_sums(got, want)

    ops = steps.ops
    group, times = ops["step"].to_numpy(), (ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy())
    first_last = metrics.group_first_last(group, n_steps, *times)
    want_fl = _reference(monkeypatch, metrics.group_first_last, group, n_steps, *times)
    for a, b in zip(first_last, want_fl, strict=True):
        assert np.array_equal(a, b, equal_nan=True)

    calls = _random_calls(rng)
    extents = gaps.anchor_extents(steps, calls)
    want = _reference(monkeypatch, gaps.anchor_extents, steps, calls)
    pd.testing.assert_frame_equal(extents, want)


@pytest.mark.parametrize("n,n_steps,dtype,in_order", CASES[1:])  # (one row: one group)
def test_totals_per_name_and_kind_alike(built, monkeypatch, n, n_steps, dtype, in_order):
    """A comparison's totals per (name, kind) of the reported steps' operations: the same
    pairs in the same order, counts, and sums to the bit (whole ns summed exactly, here
    durations from 0 to 10 s, whose µs are not whole), also where each group's rows follow one
    another; and the same totals for the operations in another order."""
    steps = _random_steps(np.random.default_rng(n + 7), n, n_steps, dtype, in_order)
    ops = steps.ops
    ops["end_ns"] = ops["start_ns"] + np.random.default_rng(n).integers(0, 10**10, len(ops))
    got = run._kept_pair_totals(steps)
    assert got is not None
    reported = run._reported_ops(steps)[1:]
    want = _reference(monkeypatch, lambda: run._pair_totals(*reported, 1e3))
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert np.array_equal(got["us"].to_numpy().view(np.int64), want["us"].to_numpy().view(np.int64))
    backwards = _reference(monkeypatch, lambda: run._pair_totals(*(r[::-1] for r in reported), 1e3))
    pd.testing.assert_frame_equal(got, backwards.loc[got.index], check_exact=True)
    # each group's rows together (pandas sums those by numpy's add.reduceat): the same
    for column in ("name", "kind"):
        ops[column] = ops[column].cat.set_categories(ops[column].cat.categories[:1])
        ops[column] = ops[column].fillna(ops[column].cat.categories[0])
    together = run._kept_pair_totals(steps)
    reported = run._reported_ops(steps)[1:]
    want = _reference(monkeypatch, lambda: run._pair_totals(*reported, 1e3))
    pd.testing.assert_frame_equal(together, want, check_exact=True)
    # a step past the steps: left to the reference (its IndexError, as before the loop)
    ops.loc[0, "step"] = n_steps + 1
    assert run._kept_pair_totals(steps) is None


def test_anchor_heads_look_up_the_calls_of_heads_and_ties_only(built):
    """The operations carry no launch times: the C path asks for the calls of each instance's
    head and of the operations tied with it on the first start, not of every operation."""
    steps = _random_steps(np.random.default_rng(3), 20_000, 40, np.int32, True)
    ops, n = steps.ops, len(steps.anchors)
    anchor, start = ops["anchor"].to_numpy(), ops["start_ns"].to_numpy()
    calls = _random_calls(np.random.default_rng(4))
    gaps.anchor_extents(steps, calls)
    rows = pd.DataFrame({"anchor": anchor, "start": start})[anchor >= 0]
    first = rows.groupby("anchor")["start"].transform("min")
    at_first = rows[rows["start"] == first].groupby("anchor").size()
    tied = at_first[at_first > 1]
    assert len(tied)  # (the case is here)
    assert calls.asked == (at_first.index.size + tied.sum()) < len(ops)
    assert at_first.index.size <= n


def test_the_loops_do_run(built):
    """(The comparisons above compare something: each loop answers here.)"""
    steps = _random_steps(np.random.default_rng(1), 1000, 10, np.int32, True)
    ops = steps.ops
    step, times = ops["step"].to_numpy(), (ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy())
    assert opsums.first_last(step, 10, *times) is not None
    assert opsums.anchor_heads(step, 10, *times) is not None
    assert metrics._class_counts_c(ops, len(steps.kept), _columns(steps), {}) is not None


def _columns(steps: Steps) -> tuple:
    ops = steps.ops
    return (
        ops["step"].to_numpy(),
        metrics.kept_position(steps),
        ops["kind"].array.codes,
        ops["in_graph"].to_numpy(),
        ops["copy_kind"].array.codes,
        ops["bytes"].to_numpy(),
        ops["correlation_id"].to_numpy(),
        ops["start_ns"].to_numpy(),
        ops["end_ns"].to_numpy(),
    )


def test_values_outside_the_references_range_are_left_to_them(built, monkeypatch):
    start = np.arange(4, dtype=np.int64)
    # a group below -1 (numpy would index from the end) or past the end
    assert opsums.first_last(np.array([0, -2, 1, 0], np.int32), 3, start, start) is None
    assert opsums.first_last(np.array([0, 3, 1, 0], np.int32), 3, start, start) is None
    assert opsums.anchor_heads(np.array([0, 5, 1, 0]), 3, start, start) is None
    # columns of another type (floats, a view with a stride): the reference takes them
    assert opsums.first_last(np.zeros(4), 3, start, start) is None
    assert opsums.first_last(np.zeros(8, np.int64)[::2], 3, start, start) is None
    assert opsums.first_last(np.zeros(4, np.int64), 3, start.astype(np.int32), start) is None
    # columns of different lengths: never read past one's end
    assert opsums.first_last(np.zeros(9, np.int32), 3, start, start) is None
    assert opsums.anchor_heads(np.zeros(9, np.int32), 3, start, start) is None
    assert opsums.coverage_prefix(start, start[:3], None) is None
    # a step past the steps: IndexError from the reference, as before the loops
    steps = _random_steps(np.random.default_rng(2), 100, 5, np.int32, True)
    steps.ops.loc[3, "step"] = 7
    assert metrics._class_counts_c(steps.ops, len(steps.kept), _columns(steps), {}) is None
    with pytest.raises(IndexError):
        metrics._class_counts(steps, [])


def test_without_the_loops_the_reference_runs(monkeypatch):
    monkeypatch.setenv("SPECSCOPE_NATIVE", "0")
    start = np.arange(4, dtype=np.int64)
    assert opsums.first_last(np.zeros(4, np.int32), 3, start, start) is None
    first, last = metrics.group_first_last(np.array([0, 0, 2, -1]), 3, start, start + 1)
    assert np.array_equal(first, [0, np.nan, 2], equal_nan=True)
    assert np.array_equal(last, [2, np.nan, 3], equal_nan=True)


@pytest.mark.parametrize(
    "name",
    ["eagle_graph_before.sqlite", "eagle_node_after.sqlite", "real/piecewise_graphs.sqlite",
     "graphs/run_graph_kpool_nvtx.sqlite", "real/two_procs.sqlite", "real/hf_generate.sqlite",
     "real/eager_steps_events.sqlite"],
)  # fmt: skip
def test_analyses_of_real_exports_are_the_same(built, monkeypatch, name):
    from specscope.analysis.auto import analyze_processes
    from specscope.analysis.loader import load

    def frames() -> list[pd.DataFrame]:
        analyses = analyze_processes(load(DATA / name)).analyses.values()
        return [f for a in analyses for f in (a.metrics.frame, a.op_totals)]

    got = frames()
    want = _reference(monkeypatch, frames)
    assert got and len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.mark.parametrize(
    "n,runs",
    [(1, 1), (3_000, None), (3_000, 1), (50_000, None), (20_000, 3), (9_000, 16), (9_000, 40)],
)
def test_coverage_prefix_and_queries_alike(built, monkeypatch, n, runs):
    """The union coverage of random intervals (overlapping, nested, apart; their starts in
    no order, or in a few sorted runs with starts equal across runs, as the tables of GPU
    operations come), queried at integer and float times: the C prefix (merged or by an order)
    and the int64 search against numpy's."""
    rng = np.random.default_rng(n)
    starts = rng.integers(0, 20 * n, n) // 7 * 7
    if runs is not None:  # (each run in start order)
        cut = np.sort(rng.choice(np.arange(1, n), runs - 1, replace=False)) if runs > 1 else []
        starts = np.concatenate([np.sort(part) for part in np.split(starts, cut)])
        merged = opsums.coverage_merged(starts, starts + 1)
        n_runs = 1 + np.count_nonzero(starts[1:] < starts[:-1])
        assert (merged is not None) == (n_runs <= opsums.MERGE_MAX_RUNS)
    ends = starts + rng.integers(0, 60, n) ** 2
    t = np.r_[rng.integers(-5, 21 * n, 500), starts[:50], ends[:50]]
    t_float = np.r_[t + rng.choice([0.0, 0.25, 0.5, 0.999], len(t)), -3.5]
    for times, chunk in itertools.product((t, t_float), (CHUNK_ROWS, 1000)):  # (whole, chunked)
        got = union_coverage(starts, ends, chunk)(times)
        with monkeypatch.context() as m:
            m.setattr(coverage, "_as_times_of", lambda s, q: q)  # (numpy's float search)
            want = _reference(monkeypatch, _covered, starts, ends, chunk, times)
        assert got.dtype == want.dtype
        assert np.array_equal(got, want)
    assert opsums.coverage_prefix(starts, ends, coverage.start_order(starts)) is not None


def _covered(starts, ends, chunk, times):
    return union_coverage(starts, ends, chunk)(times)


@pytest.mark.parametrize(
    "name", ["eagle_graph_before.sqlite", "real/two_procs.sqlite", "two_rank/rank0.sqlite"]
)
def test_launch_calls_of_the_operations_alike(built, monkeypatch, name):
    """Each operation's API call start and thread, through the id tables in C and in numpy (one
    process, and two in one export)."""
    from specscope.analysis.callrows import IdTables, call_pids, call_rows, op_launches
    from specscope.analysis.loader import load

    def launches() -> pd.DataFrame:
        trace = load(DATA / name)
        start, tid = op_launches(trace, trace.ops)
        return pd.DataFrame({"start": start, "tid": tid})

    got = launches()
    pd.testing.assert_frame_equal(got, _reference(monkeypatch, launches))
    assert got["tid"].ge(0).any()
    trace = load(DATA / name)
    a_start, _, a_gtid, a_corr, _ = trace._runtime
    tables = call_rows(call_pids(a_gtid), a_corr)
    assert isinstance(tables, IdTables)  # (so the C loop was the one above)
    ops = trace.ops
    start, tid = np.full(len(ops), np.nan), np.full(len(ops), -1, dtype=np.int32)
    pid, corr = ops["pid"].to_numpy(), ops["correlation_id"].to_numpy()
    assert opsums.launch_lookup(pid, corr, tables, a_start, a_gtid, start, tid)
    assert np.array_equal(start, got["start"].to_numpy(), equal_nan=True)


def test_launch_calls_of_an_eager_export_alike(built, monkeypatch):
    """An eager export's sparse correlation ids (Hugging Face ``generate``; its 12 k calls fit
    an id table, so the table is refused here, as at millions of calls): each operation's call
    found in C from the last one's place, as numpy's search finds it."""
    from specscope.analysis import callrows, loader

    monkeypatch.setattr(callrows, "_id_tables", lambda *args, **kw: None)

    def launches() -> pd.DataFrame:
        trace = loader.load(DATA / "real/hf_generate.sqlite")
        start, tid = callrows.op_launches(trace, trace.ops)
        return pd.DataFrame({"start": start, "tid": tid})

    got = launches()
    pd.testing.assert_frame_equal(got, _reference(monkeypatch, launches))
    assert got["tid"].ge(0).all()
    trace = loader.load(DATA / "real/hf_generate.sqlite")
    _, _, a_gtid, a_corr, _ = trace._runtime
    rows = callrows.call_rows(callrows.call_pids(a_gtid), a_corr)
    assert isinstance(rows, callrows.SortedIds)  # (so the C loop was the one above)


@pytest.mark.parametrize("n_calls,dtype,shuffled", [(1, np.int64, False), (7, np.int32, False),
                                                    (50_000, np.int32, False),
                                                    (50_000, np.int64, False),
                                                    (50_000, np.int32, True)])  # fmt: skip
def test_sorted_ids_looked_up_from_the_last_place_alike(built, n_calls, dtype, shuffled):
    """Random sparse increasing ids; operations mostly in id order with jumps back and
    forward (or in no order: looked up sorted, :func:`.opsums._search_order`), ids no call
    has, ids <= 0 and another process' ids: the C gallop finds what numpy's search finds."""
    from specscope.analysis.callrows import SortedIds

    rng = np.random.default_rng(n_calls)
    ids = np.cumsum(rng.integers(1, 9, n_calls)).astype(dtype)
    n = 3 * n_calls + 5
    corr = np.sort(rng.choice(ids, n)).astype(np.int32)
    jumps = rng.random(n) < 0.05
    corr[jumps] = rng.integers(-2, int(ids[-1]) + 20, int(jumps.sum()))
    corr[[0, -1]] = 0, ids[-1] + 1  # (none of these has a call, whatever the draws)
    pid = np.full(n, 42, dtype=np.int32)
    pid[rng.random(n) < 0.02] = 7
    pid[1] = 7
    if shuffled:
        order = rng.permutation(n)
        pid, corr = pid[order], corr[order]
        assert opsums._search_order(corr) is not None
    a_start = rng.integers(0, 10**12, n_calls)
    a_gtid = (42 << 24) | rng.integers(1, 1 << 20, n_calls)
    rows = SortedIds(42, ids)
    start, tid = np.full(n, np.nan), np.full(n, -1, dtype=np.int32)
    assert opsums.sorted_lookup(pid, corr, rows, a_start, a_gtid, start, tid)
    row = rows(pid, corr)
    hit = row >= 0
    assert hit.any() and not hit.all()
    want = np.full(n, np.nan)
    want[hit] = a_start[row[hit]]
    assert np.array_equal(start, want, equal_nan=True)
    assert np.array_equal(tid[hit], (a_gtid[row[hit]] & 0xFFFFFF).astype(np.int32))
    assert (tid[~hit] == -1).all()


@pytest.mark.parametrize(
    "n,n_int,touching,shuffled",
    [(1, 1, False, False), (5_000, 40, False, False), (60_000, 3_000, True, False),
     (3_000, 0, 0, False), (60_000, 3_000, False, True)],
)  # fmt: skip
def test_launch_times_looked_up_in_intervals_alike(
    built, monkeypatch, n, n_int, touching, shuffled
):
    """Launch times mostly increasing with jumps back (or in no order: looked up sorted), in
    runs and apart, before, inside, between and after the intervals (touching or not): the C
    search from the last time's place finds the interval numpy's finds."""
    from specscope.analysis import steps

    rng = np.random.default_rng(n + n_int)
    bounds = np.cumsum(rng.integers(1, 1_000, 2 * n_int + 1)).astype(np.int64)
    starts, ends = bounds[:-1:2].copy(), bounds[1::2].copy()
    if touching:
        ends = np.r_[starts[1:], starts[-1] + 50] if n_int else ends
    hi = int(bounds[-1]) + 2_000
    t = np.sort(rng.integers(-500, hi, n)).astype(np.float64)
    back = rng.random(n) < 0.05
    t[back] = rng.integers(-500, hi, int(back.sum()))
    t = np.repeat(t, rng.integers(1, 4, n))[:n]  # runs of equal times
    if shuffled:
        t = rng.permutation(t)
        assert opsums._search_order(t) is not None
    got = steps._lookup_runs(t, (starts, ends), (starts[:1], ends[:1]))
    want = _reference(monkeypatch, steps._lookup_runs, t, (starts, ends), (starts[:1], ends[:1]))
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert n < 100 or n_int == 0 or (got[0] >= 0).any()
    out = np.empty(n, dtype=np.int32)
    assert opsums.interval_lookup(t, starts, ends, out)
    t[n // 2] = np.nan  # (never in a launch time: the reference decides)
    assert not opsums.interval_lookup(t, starts, ends, out)


def test_api_calls_per_step_counted_alike(built):
    """Calls of three families and others, in and between steps, counted per step in C as
    numpy counts them."""
    from specscope.analysis.metrics import _api_counts_c

    rng = np.random.default_rng(7)
    bounds = np.cumsum(rng.integers(1, 500, 400)).astype(np.int64)
    s_start, s_end = bounds[:-1:2].copy(), bounds[1::2].copy()
    members = {"a": np.array([3, 9]), "b": np.array([4]), "c": np.array([40])}
    fast = _api_counts_c(members, s_start, s_end)
    start = np.sort(rng.integers(0, int(bounds[-1]) + 100, 30_000))
    name = rng.choice(np.array([1, 3, 4, 9, 40, 41, 70], dtype=np.int16), len(start))
    assert fast(start, name)
    for k, (family, ids) in enumerate(members.items()):
        mine = start[np.isin(name, ids)]
        index = np.searchsorted(s_start, mine, side="right") - 1
        inside = (index >= 0) & (mine < s_end[np.maximum(index, 0)])
        want = np.bincount(index[inside], minlength=len(s_start))
        assert want.sum() > 100 and np.array_equal(fast.counts[k], want), family
    assert not fast(start, np.r_[name[:-1], -1].astype(np.int16))  # (a negative id: reference)


@pytest.mark.parametrize("n_devices,n", [(1, 10), (3, 50_000), (8, 5_000), (2, 1)])
def test_devices_rows_put_together_alike(built, monkeypatch, n_devices, n):
    """by_device's reordering of columns of every width (and one of one value) in C and by
    numpy's gather: the same columns."""
    from specscope.analysis.devices import by_device
    from specscope.analysis.memory import one_value_view

    def columns() -> dict[str, np.ndarray]:
        r = np.random.default_rng(n)
        return {
            "device_id": (r.integers(0, n_devices, n) * 3 + 1).astype(np.int32),
            "start_ns": r.integers(0, 1 << 40, n),
            "stream_id": r.integers(0, 50, n).astype(np.int32),
            "kind": r.integers(0, 4, n).astype(np.int8),
            "flag": r.random(n) < 0.5,
            "api_start_ns": r.random(n),
            "tiny": r.integers(0, 9, n).astype(np.int16),
            "pid": one_value_view(np.full(n, 7, dtype=np.int32)),
        }

    got, want = by_device(columns()), _reference(monkeypatch, by_device, columns())
    assert list(got) == list(want)
    for name in got:
        assert got[name].dtype == want[name].dtype, name
        assert np.array_equal(got[name], want[name]), name
    device = columns()["device_id"]
    ids, counts = np.unique(device, return_counts=True)
    scatter = opsums.DeviceScatter(device, ids, counts)
    assert scatter.fn is not None  # (C did move them)
    assert scatter.device is None  # (not held while they move: the order from the slots)
    assert np.array_equal(scatter.rows, np.argsort(device, kind="stable"))


@pytest.mark.parametrize("distinct,dtype", [(1, np.int32), (40, np.int32), (300, np.int64)])
def test_name_codes_made_categorical_alike(built, monkeypatch, distinct, dtype):
    """The op names' codes (StringIds ids and negative codes of copies, memsets, graphs) as a
    categorical's codes: C and numpy alike, int8 or int16 as the distinct names need."""
    from specscope.analysis.opnames import unique_inverse

    rng = np.random.default_rng(distinct)
    values = np.r_[rng.choice(np.arange(-1005, 5000), distinct, replace=False), -2]
    codes = rng.choice(values, CHUNK_ROWS + 77).astype(dtype)
    got = unique_inverse(codes)
    want = _reference(monkeypatch, unique_inverse, codes)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    lo, hi = int(codes.min()), int(codes.max())
    assert opsums.dense_inverse(codes, lo, hi, np.min_scalar_type) is not None
    assert opsums.dense_inverse(codes, lo + 1, hi, np.min_scalar_type) is None  # (out of range)


def test_moved_columns_pages_given_back_only_when_nothing_else_holds_them(built, monkeypatch):
    """by_device gives back the pages of a column it moved where nothing else holds that
    memory, and only there: the arrays the caller kept are as they were, the others moved
    alike."""
    from specscope.analysis import pagerelease
    from specscope.analysis.devices import by_device
    from specscope.analysis.pagerelease import Pages

    given = []

    class Recorded(Pages):
        def __init__(self, values):
            given.append(values.nbytes)
            super().__init__(values)

    monkeypatch.setattr(pagerelease, "Pages", Recorded)

    rng = np.random.default_rng(3)
    n = 100_000
    device = rng.integers(0, 3, n).astype(np.int32)
    kept = rng.integers(0, 1 << 40, n)  # (the caller keeps this one)
    kept_copy = kept.copy()
    columns = {
        "device_id": device,
        "a": rng.integers(0, 1 << 40, n),
        "b": kept,
        "c": rng.integers(0, 1 << 40, n),
        "d": rng.random(n),
    }
    want = {k: v.copy() for k, v in columns.items()}
    order = np.argsort(device, kind="stable")
    got = by_device(columns)
    assert np.array_equal(kept, kept_copy)  # (not given back)
    for name in ("a", "b", "c", "d"):
        assert np.array_equal(got[name], want[name][order])
    assert sorted(given) == [n * 8] * 3  # (a, c and d: given back as they moved; b kept)


def test_moved_column_read_in_stretches_whose_pages_go_back(built, monkeypatch):
    """DeviceScatter.column with the column's pages: the same column as moved whole, each
    stretch's pages given back once read (the column read as zeros after), in stretches of
    STRETCH_BYTES."""
    from specscope.analysis import pagerelease
    from specscope.analysis.pagerelease import Pages

    monkeypatch.setattr(opsums, "STRETCH_BYTES", 1 << 16)
    rng = np.random.default_rng(4)
    n = 200_003
    device = rng.integers(0, 5, n).astype(np.int8)
    ids, counts = np.unique(device, return_counts=True)
    scatter = opsums.DeviceScatter(device, ids, counts)
    values = rng.integers(1, 1 << 40, n)
    want = values[np.argsort(device, kind="stable")]
    assert np.array_equal(scatter.column(values.copy()), want)
    read = []

    class Recorded(Pages):
        def read_to(self, nbytes: int) -> None:
            read.append(nbytes)
            super().read_to(nbytes)

    monkeypatch.setattr(pagerelease, "Pages", Recorded)
    assert np.array_equal(scatter.column(values, True), want)
    assert read == [min(k + (1 << 16), n * 8) for k in range(0, n * 8, 1 << 16)]
    if sys.platform.startswith("linux"):
        assert not values[1024:-1024].any()  # (given back: zero pages)


def test_columns_shared_out_between_two_threads_by_bytes(built):
    """by_device's two shares: the largest column first, each to the share with fewer bytes
    (a column of one value has none)."""
    from specscope.analysis.devices import _gathered, _shares

    rng = np.random.default_rng(5)
    n = 1000
    columns = {
        "a8": rng.integers(0, 1 << 40, n),
        "b4": rng.integers(0, 100, n).astype(np.int32),
        "c8": rng.integers(0, 1 << 40, n),
        "d1": rng.integers(0, 3, n).astype(np.int8),
        "e4": rng.integers(0, 100, n).astype(np.int32),
        "f4": rng.integers(0, 100, n).astype(np.int32),
        "one": np.broadcast_to(np.int64(7), (n,)),  # (a column of one value: no bytes)
    }
    mine, theirs = _shares(dict(columns))
    assert list(mine) == ["a8", "b4", "f4"] and list(theirs) == ["c8", "e4", "d1", "one"]
    device = rng.integers(0, 4, n).astype(np.int32)
    ids, counts = np.unique(device, return_counts=True)
    scatter = opsums.DeviceScatter(device, ids, counts)
    order = np.argsort(device, kind="stable")
    want = {name: values[order] for name, values in columns.items() if name != "one"}
    for share in (mine, theirs):
        for name, values in _gathered(share, scatter).items():
            assert np.array_equal(values, want[name] if name != "one" else columns[name]), name


@pytest.mark.parametrize("rows_dtype", [np.int32, np.int64])
def test_places_of_a_few_rows_found_alike(built, monkeypatch, rows_dtype):
    """Where the rows of a column of few values go (DeviceScatter.places): the C pass over
    the slots and numpy's reference alike, and by_device moves such a column (FewRows) to
    where it moves a whole one."""
    from specscope.analysis.devices import FewRows, by_device

    rng = np.random.default_rng(11)
    n = 20_000
    device = rng.integers(0, 5, n).astype(np.int32)
    ids, counts = np.unique(device, return_counts=True)
    for rows in (np.flatnonzero(rng.random(n) < 0.05), np.arange(0), np.array([0, n - 1])):
        rows = rows.astype(rows_dtype)
        got = opsums.DeviceScatter(device, ids, counts).places(rows)
        monkeypatch.setattr(opsums, "_function", lambda name: None)
        want = opsums.DeviceScatter(device, ids, counts).places(rows)
        monkeypatch.undo()
        assert got.dtype == want.dtype == np.int64 and np.array_equal(got, want)
        assert np.array_equal(want, np.argsort(np.argsort(device, kind="stable"))[rows])
    back = np.array([5, 3])  # (not increasing: the C pass refuses them, numpy places them)
    place = np.argsort(np.argsort(device, kind="stable"))
    assert np.array_equal(opsums.DeviceScatter(device, ids, counts).places(back), place[back])
    nbytes = np.where(rng.random(n) < 0.05, rng.integers(1, 1 << 20, n), 0).astype(np.int32)
    moved = by_device({"device_id": device, "bytes": FewRows.of(nbytes)})["bytes"]
    assert np.array_equal(moved.dense(), nbytes[np.argsort(device, kind="stable")])
    assert moved.dense().dtype == np.int32


@pytest.mark.parametrize("distinct", [2, 300])
def test_device_rows_counted_from_the_slots_as_numpy_counts_them(built, distinct):
    """by_device's devices found by one C pass (present_values) and their rows counted from
    the slots the moves read; beyond 256 devices (no slots) counted by numpy: the same counts
    as np.unique's either way."""
    rng = np.random.default_rng(distinct)
    device = rng.integers(3, 3 + distinct, CHUNK_ROWS + 5).astype(np.int16)
    ids, counts = np.unique(device, return_counts=True)
    got = opsums.present_values(device, int(device.min()), int(device.max()))
    assert np.array_equal(got, ids)
    assert opsums.present_values(device, int(device.min()) + 1, int(device.max())) is None
    scatter = opsums.DeviceScatter(device, ids)
    assert (scatter.fn is not None) == (distinct <= 256)
    assert np.array_equal(scatter.counts, counts)
    assert np.array_equal(scatter.starts, np.r_[0, np.cumsum(counts)[:-1]])


def test_device_ids_far_apart_make_no_table_of_their_range(built, monkeypatch):
    """Device ids spread over the int32 range (a damaged or unusual export): no table of
    their whole range (2**31 entries were 8 GiB), and the rows grouped by the reference."""
    from specscope.analysis.devices import by_device

    device = np.array([7, 2**31 - 1, 0, 7, 0], dtype=np.int32)
    ids, counts = np.unique(device, return_counts=True)
    scatter = opsums.DeviceScatter(device, ids, counts)
    assert scatter.fn is None and scatter.slot_of.nbytes < 1 << 20
    columns = {"device_id": device, "start_ns": np.arange(5, dtype=np.int64)}
    assert by_device(columns)["start_ns"].tolist() == [2, 4, 0, 3, 1]


def test_coverage_queries_in_c_as_numpy_answers_them(built, monkeypatch):
    """Float times before, at and after the first start, inside holes and overlaps, in no
    order, with NaN: the C search from the last time's place answers as the numpy search of
    the whole prefix does, to the bit; beyond int64 it declines (the reference answers)."""
    rng = np.random.default_rng(7)
    starts = np.sort(rng.integers(1_000, 90_000, 4_000)).astype(np.int64)
    ends = starts + rng.integers(0, 400, len(starts))
    s, emax, holes = opsums.coverage_prefix(starts, ends, None)
    q = np.r_[rng.uniform(0, 95_000, 3_000), np.sort(rng.uniform(900, 95_000, 3_000))]
    q = np.r_[q, starts[:20] + 0.0, ends[:20] - 0.5, 999.5, 1_000.0, np.nan]
    rng.shuffle(q[:3_000])
    got = opsums.covered_at(s, emax, holes, q)
    want = _reference(monkeypatch, lambda: union_coverage(starts, ends)(q))
    assert got is not None and got.dtype == want.dtype
    assert np.array_equal(got, want)
    assert (got[:-1] > 0).any() and got[-1] == 0.0
    assert opsums.covered_at(s, emax, holes, np.r_[q[:5], 1e19]) is None
    assert opsums.covered_at(s, emax, holes, q.astype(np.float32)) is None
