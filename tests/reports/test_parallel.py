"""``run_split``: both lists run, a failing or hanging child's jobs are redone here (their error
raised here), and without fork the jobs run in order in this process."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from specscope.reports import parallel

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


@pytest.fixture(autouse=True)
def idle(monkeypatch):
    """As on an idle machine, whatever the load while the tests run, and with no other thread
    (an earlier test may leave one behind; :func:`test_no_fork_beside_another_thread`)."""
    monkeypatch.setattr(parallel, "idle_cpu", lambda: True)
    monkeypatch.setattr(parallel, "can_fork", lambda: hasattr(os, "fork"))


def writer(path: Path, text: str):
    def job() -> None:
        path.write_text(f"{text} {os.getpid()}")

    return job


@needs_fork
def test_the_child_runs_its_jobs(tmp_path):
    here, there = tmp_path / "here", tmp_path / "there"
    parallel.run_split([writer(here, "a")], [writer(there, "b")])
    assert here.read_text() == f"a {os.getpid()}"
    text, pid = there.read_text().split()
    assert text == "b" and int(pid) != os.getpid()  # drawn by the child


def misbehaves_in_child(marker: Path, misbehave):
    """A job that calls ``misbehave`` in a forked child and writes ``marker`` in this process."""
    parent = os.getpid()

    def job() -> None:
        if os.getpid() != parent:
            misbehave()
        marker.write_text("ok")

    return job


def fail() -> None:
    raise RuntimeError("child")


@needs_fork
def test_a_failing_child_is_redone_here(tmp_path):
    parallel.run_split([], [misbehaves_in_child(tmp_path / "ran here", fail)])
    assert (tmp_path / "ran here").read_text() == "ok"

    def always_fails() -> None:
        raise ValueError("bad input")

    with pytest.raises(ValueError, match="bad input"):
        parallel.run_split([], [always_fails])


@needs_fork
def test_a_hanging_child_is_killed_and_redone_here(tmp_path):
    started = time.monotonic()
    job = misbehaves_in_child(tmp_path / "ran here", lambda: time.sleep(60))
    parallel.run_split([], [job], timeout_s=0.3)
    assert (tmp_path / "ran here").read_text() == "ok"
    assert time.monotonic() - started < 30


def test_without_fork_the_jobs_run_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "can_fork", lambda: False)
    order = []
    parallel.run_split([lambda: order.append(1)], [lambda: order.append(2)])
    assert order == [1, 2]


@pytest.mark.parametrize(
    "cpus, load, idle", [(2, 0.5, True), (2, 1.0, True), (2, 1.6, False), (1, 0.0, False)]
)
def test_a_child_only_with_an_idle_cpu(monkeypatch, cpus, load, idle):
    monkeypatch.undo()  # the real idle_cpu, on a pretend machine
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert parallel.idle_cpu() is idle


def test_the_collector_is_frozen_while_the_jobs_run():
    import gc

    counts = []
    parallel.run_split([lambda: counts.append(gc.get_freeze_count())], [])
    assert counts[0] > 0 and gc.get_freeze_count() == 0


def test_no_fork_beside_another_thread(monkeypatch):
    import threading

    monkeypatch.undo()  # the real can_fork
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not parallel.can_fork()
    finally:
        stop.set()
        other.join()


@needs_fork
@pytest.mark.parametrize(
    "load, warm, forked", [(1.3, True, True), (1.3, False, False), (1.7, True, False)]
)
def test_a_warm_child_needs_half_a_cpu(tmp_path, monkeypatch, load, warm, forked):
    monkeypatch.undo()  # the real idle_cpu and can_fork, on a pretend machine of 2 CPUs
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    there = tmp_path / "there"
    parallel.run_split([], [writer(there, "b")], warm=warm)
    assert (int(there.read_text().split()[1]) != os.getpid()) is forked


@needs_fork
@pytest.mark.parametrize(
    "cpus, load, long, forked",
    [(2, 3.5, True, True), (2, 3.5, False, False), (1, 0.0, True, False)],
)
def test_long_warm_jobs_fork_whatever_the_load(tmp_path, monkeypatch, cpus, load, long, forked):
    """A per-rank report's figures (seconds of drawing): a child on any load, not on one CPU."""
    monkeypatch.undo()
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: set(range(cpus)), raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    there = tmp_path / "there"
    parallel.run_split([], [writer(there, "b")], warm=True, long=long)
    assert (int(there.read_text().split()[1]) != os.getpid()) is forked
