"""Damaged values are dropped with a note (or refused), never turned into absurd metrics, and
both readers (ADBC and sqlite3) give the same answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from damage import damaged_copy
from testdata import BEFORE

from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import check_regexes, load_preset
from specscope.errors import SpecscopeError

K = "CUPTI_ACTIVITY_KIND_KERNEL"
KSEL = f"SELECT rowid FROM {K} ORDER BY rowid LIMIT 3 OFFSET 500"
CASES = {
    "null end": ([K], f"UPDATE {K} SET end = NULL WHERE rowid IN ({KSEL})", "3 no end time"),
    "null start": ([K], f"UPDATE {K} SET start = NULL WHERE rowid IN ({KSEL})", "3 no start"),
    "end before start": (
        [K],
        f"UPDATE {K} SET end = start - 7000000 WHERE rowid IN ({KSEL})",
        "3 end before start",
    ),
    "int64 max end": (
        [K],
        f"UPDATE {K} SET end = 9223372036854775807 WHERE rowid IN ({KSEL})",
        "3 beyond the capture",
    ),
    "null nvtx start": (
        ["NVTX_EVENTS"],
        "UPDATE NVTX_EVENTS SET start = NULL WHERE rowid IN (SELECT rowid FROM NVTX_EVENTS"
        " WHERE end IS NOT NULL ORDER BY rowid LIMIT 2 OFFSET 10)",
        "NVTX range rows of the export: 2 no start time",
    ),
    "null string": (["StringIds"], "UPDATE StringIds SET value = NULL WHERE id % 7 = 0", None),
    "blob string": (
        ["StringIds"],
        "UPDATE StringIds SET value = CAST(x'ff00fe' AS BLOB) WHERE id % 5 = 0",
        None,
    ),
    "duplicate correlation ids": (
        [],
        "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET correlationId = 5 WHERE correlationId > 0",
        "share a correlation id",
    ),
}


def _run(path: Path, reader: str, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_SQLITE_READER", reader)
    try:
        return analyze(path, load_preset("eagle"), AnalyzeOptions(skip=1)).detach()
    except SpecscopeError as e:
        return str(e)


def _in_range(frame: pd.DataFrame) -> None:
    for col in frame:
        values = frame[col].dropna().to_numpy()
        if col.startswith("occupancy") or col.endswith("_pct"):
            assert ((values >= 0) & (values <= 100)).all(), col
        if col.endswith("_us") and not col.startswith("gap_us"):
            assert (values >= 0).all() and (values < 1e9).all(), col


@pytest.mark.parametrize("case", list(CASES))
def test_damaged_values(tmp_path: Path, case: str, monkeypatch) -> None:
    tables, sql, note = CASES[case]
    path = damaged_copy(BEFORE, tmp_path / "d.sqlite", tables, sql)
    before = path.read_bytes()
    fast, slow = _run(path, "adbc", monkeypatch), _run(path, "sqlite3", monkeypatch)
    assert path.read_bytes() == before
    if isinstance(fast, str):  # refused: one line, both readers alike
        assert fast == slow and "\n" not in fast
        return
    pd.testing.assert_frame_equal(fast.frame, slow.frame)
    assert fast.notes == slow.notes
    _in_range(fast.frame)
    if note is not None:
        assert any(note in n for n in fast.notes), fast.notes
    if "correlation" not in case:
        assert fast.n_steps >= 10  # the damage costs a step at most


def test_occupancy_of_a_clean_export_is_unchanged(monkeypatch) -> None:
    a = _run(BEFORE, "adbc", monkeypatch)
    assert not any("dropped" in n for n in a.notes)
    assert np.isfinite(a.frame["idle_us"]).all()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"--count-kernels": ["copy|memset", "(bad"]}, r"--count-kernels '\(bad': not a valid"),
        ({"--highlight": "[x"}, r"--highlight '\[x': not a valid regex"),
        ({"--collective": "*nccl"}, r"--collective '\*nccl'"),
        ({"--anchors": ["draft.replay", "kernel:(x"]}, r"--anchors: bad regex in 'kernel:\(x'"),
    ],
)
def test_user_regexes_are_compiled_up_front(options: dict, message: str) -> None:
    with pytest.raises(SpecscopeError, match=message) as e:
        check_regexes(options)
    assert "\n" not in str(e.value)


def test_good_regexes_pass() -> None:
    check_regexes({"--count-kernels": ["copy|memset"], "--highlight": None, "--anchors": ["a"]})


def test_interleaved_processes_share_no_ids_unless_one_repeats():
    """Calls of several processes interleaved in time, each process' ids increasing: no
    duplicates (looked at process by process); an id twice in one process is counted."""
    from types import SimpleNamespace

    from specscope.analysis.callrows import process_stretches
    from specscope.analysis.validate import _duplicates

    pids = np.array([5, 6, 5, 6, 5, 7, 6, 7], dtype=np.int64)
    corr = np.array([1, 1, 2, 2, 3, 1, 3, 9], dtype=np.int64)

    def trace(c, p=pids):
        gtid = (p << 24) | 11
        runtime = [np.zeros(len(c)), np.zeros(len(c)), gtid, c, np.zeros(len(c))]
        return SimpleNamespace(
            has=lambda table: True,
            _runtime=runtime,
            _process_stretches=lambda: process_stretches(gtid),
        )

    assert _duplicates(trace(corr)) == 0
    # each process' calls together (as the loader groups a TP server's ranks): looked at a
    # stretch at a time, the same counts
    order = np.argsort(pids, kind="stable")
    assert _duplicates(trace(corr[order], pids[order])) == 0
    grouped = corr[order].copy()
    grouped[1] = 1  # pid 5: 1, 1, 3
    assert _duplicates(trace(grouped, pids[order])) == 2
    grouped = corr[order].copy()
    grouped[[0, 1]] = [2, 1]  # pid 5 out of order, no id twice
    assert _duplicates(trace(grouped, pids[order])) == 0
    repeated = corr.copy()
    repeated[4] = 2  # pid 5: 1, 2, 2
    assert _duplicates(trace(repeated)) == 2
    backwards = corr.copy()
    backwards[[0, 2]] = [2, 1]  # pid 5 out of order, no id twice
    assert _duplicates(trace(backwards)) == 0


def test_readable_strings_as_read_and_made_readable():
    """Every id an integer and every value a string: the strings as they are; else a blob
    decoded, a NULL or number named by its id, a row without an integer id left out."""
    from specscope.analysis.validate import readable_strings

    clean = {1: "cudaLaunchKernel_v7000", 2: "aten::mm"}
    assert readable_strings(clean) == {1: "cudaLaunchKernel_v7000", 2: "aten::mm"}
    odd = {1: "x", 2: b"\xffy", 3: None, 4: 7, "5": "z"}
    assert readable_strings(odd) == {1: "x", 2: "\ufffdy", 3: "<string 3>", 4: "<string 4>"}


@pytest.mark.parametrize(("recorded", "noted"), [(10, False), (5, False), (4, True), (0, True)])
def test_a_capture_that_lost_kernels_is_noted(write_export, recorded, noted):
    """Ten kernel launch calls per step, ``recorded`` of them with their kernel (an nsys older
    than the driver records few): a note under half of them, none from half on."""
    from specscope.analysis.spec import StepSpec
    from specscope.analysis.synthetic import SyntheticExport

    x = SyntheticExport()
    for k in range(20):
        t = 10_000 * k
        with x.nvtx("step", t, t + 9_000):
            for i in range(10):
                call = x.api("cudaLaunchKernel", t + 100 + 500 * i, t + 200 + 500 * i)
                if i < recorded:
                    x.kernel("k", t + 300 + 500 * i, t + 400 + 500 * i, call)
    a = analyze(write_export(x), StepSpec("step"), AnalyzeOptions())
    said = [n for n in a.notes if "kernel launch calls but" in n]
    assert bool(said) == noted
    if noted:
        assert said[0].startswith(f"the median step made 10 kernel launch calls but {recorded} ")
