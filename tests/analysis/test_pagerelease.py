"""Pages of a column given back while a pass reads it (:mod:`specscope.analysis.pagerelease`)."""

from __future__ import annotations

import mmap
import os
import sys

import numpy as np
import pytest

from specscope.analysis.pagerelease import Pages, only_here

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="madvise: Linux only")
PAGE = mmap.PAGESIZE


@linux
def test_numpy_memory_read_up_to_a_point_reads_as_zeros_there_and_intact_after() -> None:
    """numpy's own memory: the whole pages before the point read go (zeros when read again),
    the page the point falls in and every later one are as they were."""
    values = np.arange(1, 8 * PAGE + 1, dtype=np.int64)  # (64 pages and the start's offset)
    pages = Pages(values)
    assert pages.advice == mmap.MADV_DONTNEED
    point = 20 * PAGE + 100
    pages.read_to(point)
    given = (pages.done - values.ctypes.data) // values.itemsize  # (the rows given back)
    assert 0 < given <= point // values.itemsize
    assert not values[(PAGE - values.ctypes.data % PAGE) // 8 + 1 : given].any()
    kept = np.arange(1, 8 * PAGE + 1)[given:]
    assert np.array_equal(values[given:], kept)


@linux
def test_shared_mapping_gives_its_files_pages_back() -> None:
    """A memfd's mapping (:mod:`.forkread`'s): the pages read are removed from the file itself
    (its blocks), not only unmapped; those after stay."""
    fd = os.memfd_create("pagerelease-test")
    try:
        size = 64 * PAGE
        os.ftruncate(fd, size)
        mapping = mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
        values = np.frombuffer(mapping, dtype=np.int64)
        values[:] = 7
        before = os.fstat(fd).st_blocks
        pages = Pages(values)
        assert pages.advice == mmap.MADV_REMOVE
        pages.read_to(32 * PAGE)
        assert os.fstat(fd).st_blocks < before  # (the memfd holds fewer pages)
        assert not values[: 32 * PAGE // 8].any() and (values[32 * PAGE // 8 :] == 7).all()
        del values, pages
        mapping.close()
    finally:
        os.close(fd)


def test_memory_of_another_kind_stays() -> None:
    """Memory that is neither numpy's own nor a mapping (bytes here): nothing given back."""
    data = bytearray(np.arange(4 * PAGE, dtype=np.int64).tobytes())
    values = np.frombuffer(data, dtype=np.int64)
    pages = Pages(values)
    assert pages.advice is None
    pages.read_to(values.nbytes)
    assert np.array_equal(values, np.arange(4 * PAGE))


def test_only_here_only_for_memory_nothing_else_holds() -> None:
    held = np.zeros(4)
    assert only_here(np.zeros(4)) and not only_here(held[1:3])
    pages = mmap.mmap(-1, 80)
    assert not only_here(np.frombuffer(pages, dtype=np.float64))  # (the mapping held here)
    assert not only_here(np.broadcast_to(np.zeros(1), (5,)))  # (read-only)
    del pages
