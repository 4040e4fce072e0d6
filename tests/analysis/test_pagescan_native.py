"""The page scan's C fast path (specscope.analysis.native, pagescan.c) against its reference,
the numpy decoding of :class:`specscope.analysis.pagescan.TableScan`: chunk by chunk, the C
loop gives the same columns, or gives up (None) and numpy takes the chunk: on every table of
the committed exports, on random rows of every serial type, and on damaged pages, where it
must never read what numpy refuses. Then how it is built: cached, turned off, no compiler."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from test_pagescan import EXPORTS, INTS, _make, _where  # (its exports, tables, rows)

from specscope.analysis import native
from specscope.analysis.pagescan import CHUNK_PAGES, Column, TableScan, Unsupported

TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
          "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS", "StringIds")  # fmt: skip
TEXT = ("TEXT",)


@pytest.fixture(scope="module")
def built(native_cache):
    """The compiled fast path, in a cache of this module's own (skipped without a compiler)."""
    fn = native.library()
    if fn is None:
        pytest.skip("no C compiler here: the page scan stays in numpy")
    return fn


def _scan_of(path: Path, table: str, all_columns: bool = True) -> TableScan | None:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        info = con.execute(f"PRAGMA table_info({table})").fetchall()
        if not info:
            return None
        root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        hi = con.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0
    finally:
        con.close()
    positions = [r[0] for r in info]
    present = [r[2].upper() in TEXT for r in info]  # texts: only whether they are NULL
    return TableScan(path, root[0], positions, hi, present=present, rowids=all_columns)


def _same(a: list[Column], b: list[Column]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.values.dtype == y.values.dtype == np.int64
        assert np.array_equal(x.values, y.values)
        assert (x.null is None) == (y.null is None)
        if x.null is not None:
            assert x.null.dtype == y.null.dtype == bool
            assert np.array_equal(x.null, y.null)


def _compare(scan: TableScan, monkeypatch, chunk: int = CHUNK_PAGES) -> tuple[int, int]:
    """Every chunk of ``scan`` by the fast path and by numpy: equal where the fast path reads
    it, refused by numpy nowhere the fast path reads; (chunks read fast, chunks in all)."""
    fast, total = 0, 0
    fd = os.open(scan.path, os.O_RDONLY)
    try:
        for lo in range(0, len(scan.leaves), chunk):
            pages = scan.leaves[lo : lo + chunk]
            buf, hdr = scan._read_pages(fd, pages), scan._headers(pages)
            got = scan._decode_native(buf, hdr)
            with monkeypatch.context() as m:
                m.setattr(native, "library", lambda: None)
                try:
                    want = scan._decode(buf, hdr, fd)
                except Unsupported:
                    want = None
            total += 1
            if got is not None:
                assert want is not None, "the fast path read a chunk numpy refuses"
                _same(got, want)
                fast += 1
    finally:
        os.close(fd)
    return fast, total


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.stem)
def test_every_table_of_the_exports_reads_the_same(path, built, monkeypatch):
    read = 0
    for table in TABLES:
        if (scan := _scan_of(path, table)) is not None:
            fast, total = _compare(scan, monkeypatch)
            read += fast
            if table != "StringIds" and not _long_texts(path, table):  # (the usual case:
                assert fast == total, table  # the GPU and API tables, NVTX without long texts)
    assert read  # the fast path did read here


def _long_texts(path: Path, table: str) -> bool:
    """Whether ``table`` is NVTX_EVENTS with a ``text`` of over 57 bytes: its record header
    then holds a serial type of two bytes, which the fast path leaves to numpy (PyTorch's
    ``emit_nvtx`` names, ``tests/data/real/emit_nvtx.sqlite``)."""
    if table != "NVTX_EVENTS":
        return False
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as con:
        if "text" not in {r[1] for r in con.execute("PRAGMA table_info(NVTX_EVENTS)")}:
            return False
        return (
            con.execute("SELECT max(length(CAST(text AS BLOB))) > 57 FROM NVTX_EVENTS").fetchone()[
                0
            ]
            == 1
        )


def _random_table(path: Path, rng, page_size: int, n: int) -> Path:
    """Columns of every serial type: integers of each width, NULLs, 0 and 1, short and long
    texts (two-byte header entries), a float."""

    def value(kind: int, i: int):
        r = rng.random()
        if r < 0.1:
            return None
        if kind == 0:
            return int(rng.choice(INTS))
        if kind == 1:
            return int(rng.integers(-(2**62), 2**62)) >> int(rng.integers(0, 62))
        if kind == 2:  # 58 bytes and up (a header entry of two bytes, left to numpy) only in
            # the first rows: the pages after them are in the usual case at any page size
            return "x" * int(rng.integers(0, 80) if i < n // 8 else rng.integers(0, 58))
        return float(rng.random()) if r > 0.95 else int(rng.integers(0, 3))

    rows = [(value(0, i), value(1, i), value(2, i), value(1, i), value(3, i)) for i in range(n)]
    columns = "a INTEGER, b INTEGER, s TEXT, c INTEGER, d INTEGER"
    return _make(path, rows, columns, page_size)


@pytest.mark.parametrize("page_size", [512, 4096, 65536])
@pytest.mark.parametrize("seed", range(3))
def test_random_rows_of_every_serial_type(tmp_path, built, monkeypatch, page_size, seed):
    rng = np.random.default_rng(seed)
    path = _random_table(tmp_path / "t.sqlite", rng, page_size, 6000)
    cid, root, _, hi = _where(path)
    fast = 0
    for names, present in ((("a", "b", "c"), ()), (("a", "s", "c"), (False, True, False))):
        scan = TableScan(path, root, [cid[x] for x in names], hi, present=present, rowids=True)
        fast += _compare(scan, monkeypatch, chunk=3)[0]
    assert fast  # (chunks of three pages: some hold no float, no long text)


@pytest.mark.parametrize("seed", range(12))
def test_damaged_pages_are_read_alike_or_left_to_numpy(tmp_path, built, monkeypatch, seed):
    """Bytes overwritten at random (as ``test_pagescan``'s fuzz): no chunk the fast path reads
    differs from numpy's reading, or is one numpy refuses."""
    rng = np.random.default_rng(100 + seed)
    path = _random_table(tmp_path / "t.sqlite", rng, 512, 4000)
    _, root, _, hi = _where(path)
    scan = TableScan(path, root, [0, 1, 3], hi, rowids=True)  # (the tree, before the damage)
    data = bytearray(path.read_bytes())
    for at in rng.integers(1024, len(data), 60):
        data[at] = rng.integers(0, 256)
    path.write_bytes(bytes(data))
    _compare(scan, monkeypatch, chunk=2)


def test_what_is_not_the_usual_case_is_left_to_numpy(tmp_path, built):
    """A record on overflow pages, a header entry of two bytes, a float: None, for numpy."""
    for row in [(1, "y" * 9000, 2), (1, "y" * 100, 2), (1.5, "", 2)]:
        path = tmp_path / f"t{len(row[1])}{type(row[0]).__name__}.sqlite"
        _, root, _, hi = _where(_make(path, [(7, "", 8), row], "a, s, b"))
        scan = TableScan(path, root, [0, 2], hi)
        fd = os.open(path, os.O_RDONLY)
        try:
            buf, hdr = scan._read_pages(fd, scan.leaves), scan._headers(scan.leaves)
        finally:
            os.close(fd)
        assert scan._decode_native(buf, hdr) is None


def _child(env: dict[str, str]) -> str:
    """``native.library()`` in a fresh interpreter with ``env``: "built" or "none"."""
    code = "from specscope.analysis import native; print('built' if native.library() else 'none')"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                         capture_output=True, text=True, check=True)  # fmt: skip
    return out.stdout.strip()


def test_built_once_then_loaded_from_the_cache(tmp_path, built):
    cache = tmp_path / "cache"
    old = os.umask(0o002)  # (a user's umask with private groups: the build still loads)
    try:
        assert _child({"SPECSCOPE_CACHE": str(cache)}) == "built"
    finally:
        os.umask(old)
    (so,) = cache.glob("pagescan-*.so")
    made = so.stat().st_mtime_ns
    so.chmod(0o775)  # group-writable: not loaded
    assert _child({"SPECSCOPE_CACHE": str(cache)}) == "none"
    so.chmod(0o755)
    assert _child({"SPECSCOPE_CACHE": str(cache)}) == "built"
    assert [p.name for p in cache.iterdir()] == [so.name]  # no temporary left, no second build
    assert so.stat().st_mtime_ns == made


def test_turned_off_without_a_compiler_or_a_writable_cache(tmp_path, built):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert _child({"SPECSCOPE_CACHE": str(tmp_path / "c"), "SPECSCOPE_NATIVE": "0"}) == "none"
    assert _child({"SPECSCOPE_CACHE": str(tmp_path / "c"), "CC": "no-such-cc"}) == "none"
    assert _child({"SPECSCOPE_CACHE": str(blocker / "under")}) == "none"
    broken = tmp_path / "broken-cc"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    assert _child({"SPECSCOPE_CACHE": str(tmp_path / "d"), "CC": str(broken)}) == "none"
    assert not list((tmp_path / "d").glob("*"))  # a failed build leaves nothing behind


def test_a_source_missing_or_without_the_function_leaves_numpy(tmp_path, built, monkeypatch):
    """A package installed without ``pagescan.c``, or a build without ``decode_leaves``: numpy
    only, with why (never an error in the read)."""
    monkeypatch.setenv("SPECSCOPE_CACHE", str(tmp_path / "a"))
    monkeypatch.setattr(native, "SOURCE", tmp_path / "missing.c")
    fn, why = native.describe()
    assert fn is None and "missing.c" in why
    other = tmp_path / "other.c"
    other.write_text("int something_else(void) { return 1; }\n")
    monkeypatch.setenv("SPECSCOPE_CACHE", str(tmp_path / "b"))
    monkeypatch.setattr(native, "SOURCE", other)
    fn, why = native.describe()
    assert fn is None and "decode_leaves" in why
