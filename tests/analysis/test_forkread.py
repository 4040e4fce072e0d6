"""A forked read ahead (forkread.Child) hands back what its work returned, or None."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

from specscope.analysis import forkread, progress, readcols

pytestmark = pytest.mark.skipif(
    not hasattr(os, "memfd_create") or not hasattr(os, "fork"), reason="Linux only"
)


def _result():
    one = np.broadcast_to(np.array([7], dtype=np.int32), (5000,))  # a one-value column
    return {
        "ops": (
            [
                np.arange(100_000, dtype=np.int64) * 3,
                np.arange(10, dtype=np.int32) - 5,
                one,
                np.zeros(0, dtype=np.int64),
                np.array([True, False, True]),
                np.arange(12, dtype=np.uint8).reshape(3, 4),
                np.arange(20, dtype=np.int64)[::2],  # not contiguous
                np.arange(200_000, dtype=np.int64)[::2],  # mapped, after a copy
                (np.arange(90_000) % 3 == 0).reshape(300, 300),  # mapped: bool, 2-D
                None,
            ],
            True,
        ),
        "runtime": None,
        "nvtx": [np.array([-(2**62), 2**62], dtype=np.int64)],
    }


def _equal(a, b) -> None:
    assert type(a) is type(b)
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _equal(x, y)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _equal(a[k], b[k])
    else:
        assert a == b


def test_the_child_result_comes_back_whole() -> None:
    got = forkread.Child(_result).result()
    _equal(got, _result())
    one = got["ops"][0][2]
    assert one.strides == (0,) and not one.flags.writeable  # still one element of memory
    got["ops"][0][0][:3] = -1  # the mapped arrays are the parent's to write
    assert list(got["ops"][0][0][:4]) == [-1, -1, -1, 9]


def test_a_process_holding_over_1024_open_files_gets_the_result() -> None:
    """The child's pipe gets a descriptor past 1023 (``select`` refused those: every read
    ahead of a long test session, or of a program holding many files, came back as None)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if max(soft, hard if hard != resource.RLIM_INFINITY else 1 << 20) < 1200:
        pytest.skip("fewer than 1200 open files allowed here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = []
    try:
        with open(os.devnull, "rb") as f:
            while len(held) < 1100:
                held.append(os.dup(f.fileno()))
        child = forkread.Child(_result)
        assert max(child._pipe, child._memfd) > 1023
        _equal(child.result(), _result())
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_progress_reports_are_passed_on_and_a_large_manifest_arrives() -> None:
    def work():
        for i in range(3):
            progress.report("GPU operations", i + 1, 3)
        return [np.full(3, i) for i in range(20_000)]  # a manifest over the pipe's 64 KiB

    seen = []
    with progress.hooked(lambda stage, done, total: seen.append((stage, done, total))):
        got = forkread.Child(work).result()
    assert seen == [("GPU operations", i, 3) for i in (1, 2, 3)]
    assert len(got) == 20_000 and list(got[-1]) == [19_999] * 3


def _fail():
    raise ValueError("no such table")


def _killed():
    os.kill(os.getpid(), signal.SIGKILL)


def _exits():
    os._exit(0)  # exits "well" without sending a manifest


def _stuck():
    time.sleep(60)


@pytest.mark.parametrize(
    "work", [_fail, _killed, _exits, _stuck], ids=["raises", "killed", "no-manifest", "stuck"]
)
def test_a_failed_child_gives_none(work, monkeypatch) -> None:
    monkeypatch.setattr(forkread, "STALL_S", 0.5)
    child = forkread.Child(work)
    assert child.result() is None
    assert child.result() is None  # (asked twice: the child is reaped once)


def _shmem_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssShmem:"))


def test_an_array_dropped_gives_its_memory_back() -> None:
    if not os.path.exists("/proc/self/status"):
        pytest.skip("no /proc")
    before = _shmem_kib()
    got = forkread.Child(lambda: [np.ones(8 << 20, dtype=np.int64)]).result()  # 64 MiB
    mapped = _shmem_kib()
    assert mapped - before > 60 << 10  # counted at once (populated), before any touch
    assert got[0].sum() == 8 << 20
    view = got[0][:10]
    del got
    assert _shmem_kib() >= mapped - 1024  # a view keeps the array's pages
    assert view.sum() == 10
    del view
    assert _shmem_kib() < mapped - (60 << 10)


def test_wanted_follows_the_setting_the_size_and_the_threads(tmp_path, monkeypatch) -> None:
    path = tmp_path / "x.sqlite"
    path.write_bytes(b"x" * 100)
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not forkread.wanted(path)  # a fork would not copy that thread
    finally:
        release.set()
        other.join()
    monkeypatch.setattr(forkread.threading, "active_count", lambda: 1)  # (pytest's, if any)
    assert forkread.wanted(path)
    monkeypatch.setenv("SPECSCOPE_READ_AHEAD", "threads")
    assert not forkread.wanted(path)
    monkeypatch.delenv("SPECSCOPE_READ_AHEAD")
    monkeypatch.setattr(forkread, "MAX_BYTES", 99)
    assert not forkread.wanted(path)


def test_the_child_ends_with_its_parent(tmp_path) -> None:
    """A parent that ends without taking the result takes its child with it (a killed
    ``specscope`` leaves no reader behind)."""
    marker = tmp_path / "child.pid"
    pid = os.fork()
    if pid == 0:  # the parent-to-be-killed
        try:

            def work():
                marker.write_text(str(os.getpid()))
                time.sleep(60)

            forkread.Child(work)
            time.sleep(60)
        finally:
            os._exit(0)
    for _ in range(500):
        if marker.exists() and marker.read_text():
            break
        time.sleep(0.01)
    child = int(marker.read_text())
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    for _ in range(500):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    pytest.fail("the read-ahead child outlived its parent")


def test_a_program_that_ignores_its_children_gets_none():
    """With ``SIGCHLD`` ignored the kernel reaps the child itself: no exit status to check, so
    the result is not trusted (the loader reads the tables) and nothing raises."""
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        assert forkread.Child(lambda: [np.arange(3)]).result() is None
    finally:
        signal.signal(signal.SIGCHLD, previous)


def test_arrays_allocated_in_the_memfd_are_mapped_without_being_written_out(monkeypatch):
    """What the child's reads allocate in the memfd (:class:`forkread._Arena`) is handed back
    where it is; only other arrays, and views of part of one, are written out after it."""
    memfd = os.memfd_create("test-arena", os.MFD_CLOEXEC)
    try:
        arena = forkread._Arena(memfd)
        whole = arena.empty(100_000, np.int64)
        whole[:] = np.arange(100_000) * 7
        also = arena.empty(30_000, "int32")
        also[:] = -np.arange(30_000)
        small = arena.empty(10, np.int64)  # (under MAP_MIN_BYTES: numpy's own, in the manifest)
        small[:] = 3
        other = np.arange(50_000, dtype=np.int64)
        part = whole[1:]  # (a view of part of one: written out)
        dropped = arena.empty(1 << 20, np.int64)  # (not handed back: its pages given back)
        dropped[:] = 1
        expected = [x.copy() for x in (whole, also, small, other, part)]
        written = []
        pwrite = os.pwrite
        monkeypatch.setattr(
            os, "pwrite", lambda fd, data, at: written.append(len(data)) or pwrite(fd, data, at)
        )
        manifest = forkread._encode([whole, also, small, other, part], memfd, arena)
        assert sum(written) == other.nbytes + part.nbytes
        held = os.fstat(memfd).st_blocks * 512
        pages = sum(-(-a.nbytes // 4096) * 4096 for a in (whole, also, other, part))
        assert pages <= held < pages + dropped.nbytes // 2  # (the 8 MiB of ``dropped`` gone)
        got = forkread._decode(manifest, memfd)
    finally:
        os.close(memfd)
    _equal(got, expected)


def test_the_child_allocates_in_the_memfd_only_when_asked():
    """``allocate_with`` hands the child's work the memfd's allocator; this process keeps its
    own."""

    def work():
        a = readcols._ALLOCATE(200_000, np.int64)
        a[:] = np.arange(200_000)
        return [a, readcols._ALLOCATE is np.empty]

    got = forkread.Child(work, readcols.allocate_with).result()
    assert got is not None and got[1] is False
    np.testing.assert_array_equal(got[0], np.arange(200_000))
    assert readcols._ALLOCATE is np.empty
    assert forkread.Child(work).result()[1] is True
