"""The processes of one export analysed two at a time (specscope.analysis.eachprocess): the
same analyses, in the same order, as one after the other; a failure on a thread is the
outcome of the usual order; and small exports are analysed as they always were."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from specscope.analysis import eachprocess
from specscope.analysis.auto import analyze_processes
from specscope.analysis.loader import load
from specscope.analysis.spec import load_preset
from specscope.errors import SpecError

DATA = Path(__file__).resolve().parents[1] / "data"
EXPORTS = [DATA / "real" / "two_procs.sqlite", DATA / "graphs" / "two_proc_graph.sqlite"]


def _json(path: Path, spec) -> str:
    """The analysis as JSON, or the error it ends with."""
    try:
        return "".join(analyze_processes(load(path), spec).json_pieces())
    except SpecError as e:
        return f"error: {e}"


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.stem)
@pytest.mark.parametrize("preset", [None, "eagle"])
def test_two_at_a_time_gives_the_same_analyses(monkeypatch, path, preset):
    spec = None if preset is None else load_preset(preset)
    monkeypatch.setenv("SPECSCOPE_PROCESS_THREADS", "1")
    one_by_one = _json(path, spec)
    monkeypatch.setenv("SPECSCOPE_PROCESS_THREADS", "2")
    monkeypatch.setattr(eachprocess, "MIN_ROWS", 0)  # (these small exports on threads too)
    ran_on = set()
    real = eachprocess.each_process

    def watched(trace, pids, work):
        assert len(pids) >= 2  # (two processes: the threads are used)
        return real(trace, pids, lambda pid: (ran_on.add(threading.current_thread().name),
                                              work(pid))[1])  # fmt: skip

    monkeypatch.setattr("specscope.analysis.auto.each_process", watched)
    assert _json(path, spec) == one_by_one
    assert any(name.startswith("process") for name in ran_on)


def test_a_failure_on_a_thread_is_retried_here_and_errors_keep_their_order(monkeypatch):
    monkeypatch.setenv("SPECSCOPE_PROCESS_THREADS", "2")
    monkeypatch.setattr(eachprocess, "MIN_ROWS", 0)
    trace = load(EXPORTS[0])
    main = threading.current_thread()

    def off_main_fails(pid: int) -> int:
        if threading.current_thread() is not main:
            raise RuntimeError("a thread's failure")
        return pid * 10

    assert eachprocess.each_process(trace, [3, 1, 2], off_main_fails) == [30, 10, 20]

    def second_and_third_fail(pid: int) -> int:
        if pid > 1:
            raise SpecError(f"pid {pid}")
        return pid

    with pytest.raises(SpecError, match="pid 2"):
        eachprocess.each_process(trace, [1, 2, 3], second_and_third_fail)


def test_one_process_small_exports_or_one_thread_stay_in_order(monkeypatch):
    trace = load(EXPORTS[0])
    seen = []

    def work(pid: int) -> int:
        seen.append((pid, threading.current_thread() is threading.main_thread()))
        return pid

    assert eachprocess.each_process(trace, [5, 4], work) == [5, 4]  # (a small export)
    monkeypatch.setattr(eachprocess, "MIN_ROWS", 0)
    monkeypatch.setenv("SPECSCOPE_PROCESS_THREADS", "1")
    assert eachprocess.each_process(trace, [7, 6], work) == [7, 6]
    assert seen == [(5, True), (4, True), (7, True), (6, True)]
    monkeypatch.setenv("SPECSCOPE_PROCESS_THREADS", "nonsense")  # (the default: the CPUs)
    assert eachprocess.threads() in (1, 2)


def test_what_fails_before_the_threads_is_left_to_each_process(monkeypatch):
    """A read every process needs that fails (a damaged table): no thread is started, and each
    process' analysis meets the failure as it did one after the other."""
    monkeypatch.setenv("SPECSCOPE_PROCESS_THREADS", "2")
    monkeypatch.setattr(eachprocess, "MIN_ROWS", 0)

    def damaged(trace):
        raise SpecError("a damaged table")

    monkeypatch.setattr(eachprocess, "_shared", damaged)
    on = []
    got = eachprocess.each_process(load(EXPORTS[0]), [1, 2], lambda pid: on.append(
        threading.current_thread() is threading.main_thread()) or pid)  # fmt: skip
    assert got == [1, 2] and on == [True, True]


@pytest.mark.parametrize("threads", ["1", "2"])
def test_each_process_freed_memory_given_back_after_it(monkeypatch, threads):
    """After each process' analysis, on a thread or not and failing or not, the heap memory it
    freed goes back to the system (:func:`.memory.give_back`, for the export's operations);
    before the two threads start, what the reads freed."""
    monkeypatch.setenv("SPECSCOPE_PROCESS_THREADS", threads)
    monkeypatch.setattr(eachprocess, "MIN_ROWS", 0)
    trace = load(EXPORTS[0])
    given: list[int] = []
    monkeypatch.setattr(eachprocess, "give_back", given.append)
    assert eachprocess.each_process(trace, [3, 1, 2], lambda pid: pid) == [3, 1, 2]
    assert given == [len(trace.ops)] * (3 if threads == "1" else 4)
    given.clear()

    def fails(pid: int) -> int:
        raise SpecError(f"pid {pid}")

    with pytest.raises(SpecError, match="pid 1"):
        eachprocess.each_process(trace, [1], fails)
    assert given == [len(trace.ops)]


def test_processes_of_a_large_export_query_their_coverage_by_chunked_passes(monkeypatch):
    """Each process of an export of more than WHOLE_COVERAGE_MAX operations, however few its
    own, queries the coverage by chunked passes (no whole prefix); the analyses the same as
    with whole prefixes."""
    from specscope.analysis import coverage

    spec = load_preset("eagle")
    whole = _json(EXPORTS[1], spec)
    trace = load(EXPORTS[1])
    counts = [len(trace.ops[trace.ops["pid"] == pid]) for pid in trace.ops["pid"].unique()]
    assert max(counts) < len(trace.ops)
    monkeypatch.setattr(coverage, "WHOLE_COVERAGE_MAX", max(counts))  # (each process' fit)
    chunks = []
    real = coverage.union_coverage

    def recorded(starts, ends, chunk=coverage.CHUNK_ROWS):
        chunks.append((len(starts), chunk))
        return real(starts, ends, chunk)

    monkeypatch.setattr(coverage, "union_coverage", recorded)
    assert _json(EXPORTS[1], spec) == whole
    assert chunks and all(chunk == coverage.CHUNK_ROWS for _, chunk in chunks)
    monkeypatch.setattr(coverage, "WHOLE_COVERAGE_MAX", len(trace.ops))
    chunks.clear()
    assert _json(EXPORTS[1], spec) == whole
    assert chunks and all(chunk == n for n, chunk in chunks)  # (whole prefixes)
