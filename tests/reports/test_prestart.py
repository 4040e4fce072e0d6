"""``prestarted``: the child warms up, runs the one job handed to it, says whether it did, and is
killed when no job comes; without fork or an idle CPU there is no helper."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import pytest

from specscope.reports import parallel
from specscope.reports.prestart import prestarted

needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")


@pytest.fixture(autouse=True)
def idle(monkeypatch):
    """As on an idle machine of two CPUs with no other thread (see
    tests/reports/test_parallel.py)."""
    monkeypatch.setattr(parallel, "idle_cpu", lambda: True)
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 2)
    monkeypatch.setattr(parallel, "can_fork", lambda: hasattr(os, "fork"))


def write_pid(path: Path) -> None:
    path.write_text(str(os.getpid()))


def fail() -> None:
    raise RuntimeError("in the child")


def nothing() -> None:
    pass


@needs_fork
def test_the_child_warms_up_then_runs_the_job(tmp_path):
    warmed, ran = tmp_path / "warmed", tmp_path / "ran"
    with prestarted(functools.partial(write_pid, warmed)) as helper:
        assert helper is not None
        assert helper.submit(functools.partial(write_pid, ran))
        assert not helper.submit(nothing)  # one job only
        assert helper.wait()
    assert int(ran.read_text()) == int(warmed.read_text()) == helper.pid != os.getpid()


@needs_fork
def test_a_failing_job_is_reported(tmp_path):
    with prestarted(nothing) as helper:
        assert helper.submit(fail)
        assert helper.wait() is False


@needs_fork
def test_a_failed_warm_up_is_no_error_here(tmp_path):
    """The child leaves when its warm-up fails: handing it the job, or waiting for it, says so
    (the pipe may be closed already) instead of raising."""
    with prestarted(fail) as helper:
        time.sleep(0.2)  # most often the child is gone by now
        ran = helper.submit(functools.partial(write_pid, tmp_path / "ran"))
        assert not (ran and helper.wait())
    assert not (tmp_path / "ran").exists()


@needs_fork
def test_a_job_that_does_not_pickle_is_not_handed_over(tmp_path):
    with prestarted(nothing) as helper:
        assert helper.submit(lambda: None) is False
        assert helper.submit(functools.partial(write_pid, tmp_path / "ran"))
        assert helper.wait()


@needs_fork
def test_without_a_job_the_child_is_killed_on_leaving(tmp_path):
    started = time.monotonic()
    with prestarted(functools.partial(time.sleep, 60)) as helper:
        pid = helper.pid
    assert time.monotonic() - started < 30
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped already


@needs_fork
def test_a_hanging_job_is_killed():
    with prestarted(nothing) as helper:
        assert helper.submit(functools.partial(time.sleep, 60))
        assert helper.wait(timeout_s=0.3) is False


def test_no_helper_without_fork_or_a_second_cpu(monkeypatch):
    monkeypatch.setattr(parallel, "can_fork", lambda: False)
    with prestarted(nothing) as helper:
        assert helper is None
    monkeypatch.setattr(parallel, "can_fork", lambda: True)
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 1)
    with prestarted(nothing) as helper:
        assert helper is None


@needs_fork
def test_a_helper_even_on_a_busy_machine(monkeypatch):
    """The helper does nothing twice: it starts whatever the load (module doc)."""
    monkeypatch.setattr(parallel, "idle_cpu", lambda: False)
    with prestarted(nothing) as helper:
        assert helper is not None
