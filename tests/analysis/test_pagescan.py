"""The page scan (specscope.analysis.pagescan, opsscan) against SQLite's own reading of the
same rows: every serial type, page sizes, deep trees, holes, and each case it must refuse (the
read then falls back to SQL and gives the same arrays)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from specscope.analysis import native, opsread, opsscan, sqlread
from specscope.analysis.pagescan import TableScan, Unsupported, page_geometry

DATA = Path(__file__).resolve().parents[1] / "data"
EXPORTS = sorted(DATA.rglob("*.sqlite"))


@pytest.fixture(autouse=True, params=["native", "numpy"])
def decoder(request, monkeypatch):
    """Every test twice: cells decoded by the C fast path where it reads them
    (:mod:`specscope.analysis.native`; skipped where no compiler builds it), and by numpy only."""
    if request.param == "numpy":
        monkeypatch.setenv("SPECSCOPE_NATIVE", "0")
    elif native.library() is None:
        pytest.skip("no C compiler here: the page scan stays in numpy")
    return request.param


INTS = [0, 1, -1, 127, -128, 128, 32767, -32768, 2**23, -(2**23), 2**31 - 1, -(2**31),
        2**40, -(2**47), 2**47 - 1, 2**62, -(2**63), 2**63 - 1]  # fmt: skip


def _make(path: Path, rows: list[tuple], columns: str = "a INTEGER, b INTEGER, c INTEGER",
          page_size: int = 4096) -> Path:  # fmt: skip
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA page_size = {page_size}")
    con.execute(f"CREATE TABLE t ({columns})")
    marks = ", ".join("?" * len(rows[0])) if rows else ""
    con.executemany(f"INSERT INTO t VALUES ({marks})", rows)
    con.commit()
    con.close()
    return path


def _where(path: Path, table: str = "t") -> tuple[dict[str, int], int, int, int]:
    """Column positions, root page, min and max rowid of ``table``."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    cid = {r[1]: r[0] for r in con.execute(f"PRAGMA table_info({table})")}
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    lo, hi = con.execute(f"SELECT min(rowid), max(rowid) FROM {table}").fetchone()
    con.close()
    return cid, root[0], lo or 1, hi or 0


def _scan(path: Path, names: list[str], table: str = "t", where=None):
    """Every row of ``names`` by page scan: values and NULL masks, (columns, rows);
    ``where``: :func:`_where` of the file as it was (before damage)."""
    cid, root, lo, hi = where or _where(path, table)
    scan = TableScan(path, root, [cid[n] for n in names], hi)
    values, nulls = [[] for _ in names], [[] for _ in names]
    for leaves, _, _ in scan.parts(3, lo):
        for cols in scan.batches(leaves):
            for i, c in enumerate(cols):
                values[i].append(c.values)
                nulls[i].append(c.null if c.null is not None else np.zeros(len(c.values), bool))
    return np.array([np.concatenate(v) for v in values]), np.array(
        [np.concatenate(n) for n in nulls]
    )


def _sql(path: Path, names: list[str], table: str = "t") -> tuple[np.ndarray, np.ndarray]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute(f"SELECT {', '.join(names)} FROM {table} ORDER BY rowid").fetchall()
    con.close()
    cells = np.array(rows, dtype=object).reshape(-1, len(names)).T
    null = cells == None  # noqa: E711 (elementwise)
    return np.where(null, 0, cells).astype(np.int64), null


def _same_as_sql(path: Path, names: list[str], table: str = "t") -> None:
    values, null = _scan(path, names, table)
    want, want_null = _sql(path, names, table)
    assert np.array_equal(null, want_null)
    assert np.array_equal(np.where(null, 0, values), want)


@pytest.mark.parametrize("page_size", [512, 4096, 65536])
def test_every_integer_width_null_and_constant(tmp_path, page_size):
    rng = np.random.default_rng(page_size)
    pool = INTS + [None]
    rows = [tuple(pool[i] for i in rng.integers(0, len(pool), 3)) for _ in range(5000)]
    path = _make(tmp_path / "t.sqlite", rows, page_size=page_size)
    _same_as_sql(path, ["a", "b", "c"])
    _same_as_sql(path, ["c"])  # (only the last: the others' sizes skipped)


def test_a_deep_tree_with_holes_in_its_rowids(tmp_path):
    rows = [(i, -i, i * 1_000_003) for i in range(60_000)]
    path = _make(tmp_path / "t.sqlite", rows, page_size=512)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM t WHERE rowid % 7 = 0 OR rowid BETWEEN 20000 AND 30000")
    con.commit()
    con.close()
    _same_as_sql(path, ["a", "b", "c"])
    con = sqlite3.connect(path)
    cid_root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 't'").fetchone()[0]
    lo, hi, n = con.execute("SELECT min(rowid), max(rowid), count(*) FROM t").fetchone()
    con.close()
    scan = TableScan(path, cid_root, [0], hi)
    parts = scan.parts(5, lo)
    assert sum(top - below for _, below, top in parts) == hi - lo + 1 >= n
    assert [p[0].start for p in parts[1:]] == [p[0].stop for p in parts[:-1]]


@pytest.mark.parametrize("longest", [57, 300])  # (58 bytes and up: two-byte header entries)
def test_texts_before_the_columns_read_are_skipped(tmp_path, longest):
    rows = [("x" * (i % longest), i, None if i % 3 else -i) for i in range(3000)]
    path = _make(tmp_path / "t.sqlite", rows, "s TEXT, b INTEGER, c INTEGER")
    _same_as_sql(path, ["b", "c"])


def test_a_header_over_127_bytes(tmp_path):
    columns = ", ".join(f"c{i} INTEGER" for i in range(140))
    rows = [tuple((i * k) % 1000 - 500 for k in range(140)) for i in range(500)]
    path = _make(tmp_path / "t.sqlite", rows, columns)
    _same_as_sql(path, ["c0", "c77", "c139"])


def test_whether_a_text_is_null_and_the_rowids(tmp_path):
    rows = [(None if i % 4 else "t" * (i % 90), i) for i in range(4000)]
    path = _make(tmp_path / "t.sqlite", rows, "s TEXT, b INTEGER")
    con = sqlite3.connect(path)
    con.execute("DELETE FROM t WHERE rowid % 5 = 0")
    con.commit()
    want = con.execute("SELECT s IS NULL, b, rowid FROM t ORDER BY rowid").fetchall()
    root, hi = con.execute(
        "SELECT rootpage, (SELECT max(rowid) FROM t) FROM sqlite_master"
    ).fetchone()
    con.close()
    scan = TableScan(path, root, [0, 1], hi, present=[True, False], rowids=True)
    got = [list(scan.batches(p[0])) for p in scan.parts(2, 1)]
    text, b, rowid = (np.concatenate([c[i].values if i else c[i].null for cs in got for c in cs])
                      for i in range(3))  # fmt: skip
    assert np.array_equal(np.array(want), np.column_stack([text, b, rowid]))


@pytest.mark.parametrize("case", ["float", "text in an int column", "added column"])
def test_what_it_does_not_decode_is_refused(tmp_path, case):
    rows = [("a", i, i) for i in range(2000)]
    path = _make(tmp_path / "t.sqlite", rows, "s TEXT, b INTEGER, c INTEGER")
    con = sqlite3.connect(path)
    if case == "float":
        con.execute("UPDATE t SET c = 1.5 WHERE rowid = 10")
    elif case == "text in an int column":
        con.execute("UPDATE t SET c = 'abc' WHERE rowid = 10")
    else:
        con.execute("ALTER TABLE t ADD COLUMN d INTEGER")
        con.execute("INSERT INTO t VALUES ('b', 1, 2, 3)")
    con.commit()
    con.close()
    names = ["b", "d"] if case == "added column" else ["b", "c"]
    with pytest.raises(Unsupported):
        _scan(path, names)


@pytest.mark.parametrize("page_size", [512, 4096, 65536])
def test_records_on_overflow_pages(tmp_path, page_size):
    """Texts around the length a leaf keeps (local part, one overflow page, long chains),
    before and after the integers read; the rest of the rows in their pages."""
    usable = page_size  # (no reserved bytes)
    edges = [usable - 36, usable - 35, usable - 34, usable, 2 * usable, 5 * usable + 7, 70_000]
    rng = np.random.default_rng(page_size)
    rows = []
    for i in range(3000):
        long = edges[i % len(edges)] - 40 + int(rng.integers(0, 80)) if i % 5 == 0 else 3
        rows.append(("s" * long, INTS[i % len(INTS)], None if i % 7 == 0 else i, "t" * (i % 300)))
    path = _make(tmp_path / "t.sqlite", rows, "s TEXT, b INTEGER, c INTEGER, u TEXT", page_size)
    _same_as_sql(path, ["b", "c"])
    cid, root, lo, hi = _where(path)
    scan = TableScan(path, root, [cid["c"], cid["u"]], hi, present=[False, True])
    null = np.concatenate([cols[0].null for p in scan.parts(2, lo) for cols in scan.batches(p[0])])
    assert np.array_equal(null, _sql(path, ["c"])[1][0])


def _overflow_pointer(path: Path) -> tuple[int, int]:
    """Where the one record on overflow pages keeps its first overflow page's number (file
    offset), and that number."""
    cid, root, lo, hi = _where(path)
    size, usable = page_geometry(path)
    data = path.read_bytes()
    leaf = data[(root - 1) * size : root * size]
    assert leaf[0] == 0x0D  # (one leaf: the test's table is small)
    for k in range(int.from_bytes(leaf[3:5], "big")):
        cell = int.from_bytes(leaf[8 + 2 * k : 10 + 2 * k], "big")
        payload, at = leaf[cell], cell + 1  # (one-byte varints: records under 128 bytes...)
        if payload & 0x80:  # (...but this one: two bytes)
            payload = ((payload & 0x7F) << 7) | leaf[cell + 1]
            at += 1
        if payload > usable - 35:
            least = (usable - 12) * 32 // 255 - 23
            local = least + (payload - least) % (usable - 4)
            local = local if local <= usable - 35 else least
            offset = (root - 1) * size + at + 1 + local  # (a one-byte rowid)
            return offset, int.from_bytes(data[offset : offset + 4], "big")
    raise AssertionError("no record on overflow pages")


@pytest.mark.parametrize("damage", ["beyond the file", "no page", "a chain too long"])
def test_a_damaged_overflow_chain_is_refused(tmp_path, damage):
    rows = [("a", i, i) for i in range(20)]
    path = _make(tmp_path / "t.sqlite", rows, "s TEXT, b INTEGER, c INTEGER", page_size=512)
    con = sqlite3.connect(path)
    con.execute("UPDATE t SET s = ? WHERE rowid = 7", ("z" * 1500,))  # (8 bits of length)
    con.commit()
    con.close()
    where = _where(path)
    _same_as_sql(path, ["b", "c"])
    offset, first = _overflow_pointer(path)
    data = bytearray(path.read_bytes())
    if damage == "beyond the file":
        data[offset : offset + 4] = (10_000).to_bytes(4, "big")
    elif damage == "no page":
        data[offset : offset + 4] = bytes(4)
    else:  # the chain's last page pointing on, to the first
        page = first
        while nxt := int.from_bytes(data[(page - 1) * 512 : (page - 1) * 512 + 4], "big"):
            page = nxt
        data[(page - 1) * 512 : (page - 1) * 512 + 4] = first.to_bytes(4, "big")
    path.write_bytes(bytes(data))
    with pytest.raises(Unsupported, match="overflow"):
        _scan(path, ["b", "c"], where=where)


def test_a_pending_write_ahead_log_is_refused(tmp_path):
    path = _make(tmp_path / "t.sqlite", [(1, 2, 3)])
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA wal_autocheckpoint = 0")
    con.execute("INSERT INTO t VALUES (4, 5, 6)")
    con.commit()
    assert Path(f"{path}-wal").stat().st_size
    with pytest.raises(Unsupported):
        page_geometry(path)
    con.close()


def _ops(path: Path, reader: str, monkeypatch, execs: bool) -> list[np.ndarray]:
    monkeypatch.setenv("SPECSCOPE_SQLITE_READER", reader)
    con = sqlite3.connect(sqlread.readonly_uri(path), uri=True)
    try:
        tables = frozenset(r[0] for r in con.execute("SELECT name FROM sqlite_master"))
        return opsread.read_ops(con, path, tables, 2, execs)
    finally:
        con.close()


def _assert_same(a: list[np.ndarray], b: list[np.ndarray]) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.array_equal(x, y)


@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.stem)
def test_the_ops_read_equals_the_sql_read(path, monkeypatch):
    for execs in (False, True):
        _assert_same(
            _ops(path, "pages", monkeypatch, execs), _ops(path, "adbc", monkeypatch, execs)
        )


@pytest.mark.parametrize("change", ["float start", "long kernel row", "no deviceId"])
def test_an_export_it_cannot_decode_is_read_by_sql(tmp_path, monkeypatch, change):
    """(A long kernel row, on overflow pages, is decoded since: the same arrays still.)"""
    path = tmp_path / "e.sqlite"
    shutil.copy(DATA / "eagle_node_before.sqlite", path)
    con = sqlite3.connect(path)
    table = "CUPTI_ACTIVITY_KIND_KERNEL"
    if change == "float start":
        con.execute(f"UPDATE {table} SET start = start + 0.5 WHERE rowid = 5")
    elif change == "long kernel row":  # a record on overflow pages
        con.execute(f"ALTER TABLE {table} ADD COLUMN note TEXT")
        con.execute(f"UPDATE {table} SET note = ? WHERE rowid = 9", ("n" * 9000,))
    else:
        con.execute(f"ALTER TABLE {table} DROP COLUMN deviceId")
    con.commit()
    con.close()
    _assert_same(_ops(path, "pages", monkeypatch, True), _ops(path, "adbc", monkeypatch, True))
    _assert_same(_ops(path, "pages", monkeypatch, True), _ops(path, "sqlite3", monkeypatch, True))


_READS = {  # table: (its query, the read)
    opsread.RUNTIME: (opsread.runtime_sql, opsread.read_runtime),
    opsread.NVTX: (opsread.nvtx_sql, opsread.read_nvtx),
}


def _read(path: Path, table: str, reader: str, monkeypatch) -> list[np.ndarray]:
    """``table``'s read (the CUDA API calls, the NVTX events) of ``path`` by ``reader``."""
    monkeypatch.setenv("SPECSCOPE_SQLITE_READER", reader)
    query, read = _READS[table]
    con = sqlite3.connect(sqlread.readonly_uri(path), uri=True)
    try:
        sql = query(opsread.table_columns(con, table))
        return read(con, sqlread.columnar_connection(path), sql, path)
    finally:
        con.close()


def _nvtx(path: Path, reader: str, monkeypatch) -> list[np.ndarray]:
    return _read(path, opsread.NVTX, reader, monkeypatch)


@pytest.mark.parametrize("table", list(_READS))
@pytest.mark.parametrize("path", EXPORTS, ids=lambda p: p.stem)
def test_the_api_calls_and_nvtx_reads_equal_the_sql_reads(path, table, monkeypatch):
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        if not opsread.table_columns(con, table):
            pytest.skip(f"no {table} in this export")
    want = _read(path, table, "sqlite3", monkeypatch)
    _assert_same(_read(path, table, "pages", monkeypatch), want)


@pytest.mark.parametrize(
    "change", ["long texts", "texts on overflow pages", "no text column", "open ranges"]
)
def test_nvtx_events_of_other_shapes(tmp_path, monkeypatch, change):
    path = tmp_path / "e.sqlite"
    shutil.copy(DATA / "cpu_eagle_2023.sqlite", path)
    con = sqlite3.connect(path)
    if change == "long texts":
        con.execute("UPDATE NVTX_EVENTS SET text = printf('%.300c', 'r') WHERE rowid % 3 = 0")
    elif change == "texts on overflow pages":  # (decoded, not read by SQL: scanned below)
        con.execute("UPDATE NVTX_EVENTS SET text = printf('%.9000c', 'r') WHERE rowid % 5 = 0")
    elif change == "no text column":
        con.execute("ALTER TABLE NVTX_EVENTS DROP COLUMN text")
    else:
        con.execute("UPDATE NVTX_EVENTS SET end = NULL, eventType = 59 WHERE rowid % 4 = 0")
    con.commit()
    con.close()
    _assert_same(_nvtx(path, "pages", monkeypatch), _nvtx(path, "sqlite3", monkeypatch))
    if change == "texts on overflow pages":
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
            sql = opsread.nvtx_sql(opsread.table_columns(con, opsread.NVTX))
        monkeypatch.setenv("SPECSCOPE_SQLITE_READER", "pages")
        scanned = opsscan.read_scanned(path, opsread.NVTX_COLUMNS, opsscan.nvtx_parts, sql)
        assert scanned is not None  # the pages decoded, chains and all
        _assert_same(scanned, _nvtx(path, "sqlite3", monkeypatch))


@pytest.mark.parametrize("seed", range(10))
def test_damaged_pages_are_refused_or_read(tmp_path, seed):
    """Bytes of a table's pages overwritten at random: the scan reads or refuses
    (:class:`Unsupported`), never fails otherwise (nor loops: a page twice in the tree); the
    odd seeds with texts on overflow pages in every 50th row (damaged chains)."""
    rows = [(i, -i, None if i % 5 else i * 7) for i in range(20000)]
    columns, names = "a INTEGER, b INTEGER, c INTEGER", ["a", "b", "c"]
    if seed % 2:
        rows = [(r[0], "x" * (3000 if r[0] % 50 == 0 else 1), *r[1:]) for r in rows]
        columns, names = "a INTEGER, s TEXT, b INTEGER, c INTEGER", ["a", "b", "c"]
    path = _make(tmp_path / "t.sqlite", rows, columns, page_size=512)
    where = _where(path)
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(seed)
    for at in rng.integers(1024, len(data), 40):
        data[at] = rng.integers(0, 256)
    path.write_bytes(bytes(data))
    try:
        _scan(path, names, where=where)
    except Unsupported:
        pass


def test_an_interior_page_that_points_back_is_refused(tmp_path):
    path = _make(tmp_path / "t.sqlite", [(i, i, i) for i in range(20000)], page_size=512)
    where = _where(path)
    root = where[1]
    data = bytearray(path.read_bytes())
    page = (root - 1) * 512
    assert data[page] == 0x05  # an interior root
    cells = int.from_bytes(data[page + 3 : page + 5], "big")
    for i in range(cells):  # every child the root itself: each level 'cells + 1' times larger
        cell = int.from_bytes(data[page + 12 + 2 * i : page + 14 + 2 * i], "big")
        data[page + cell : page + cell + 4] = root.to_bytes(4, "big")
    data[page + 8 : page + 12] = root.to_bytes(4, "big")
    path.write_bytes(bytes(data))
    with pytest.raises(Unsupported):
        _scan(path, ["a"], where=where)


def test_without_preadv_the_sql_reader_reads(monkeypatch):
    path = DATA / "eagle_node_after.sqlite"
    want = _ops(path, "sqlite3", monkeypatch, False)
    monkeypatch.delattr("os.preadv")
    with pytest.raises(Unsupported):
        page_geometry(path)
    _assert_same(_ops(path, "pages", monkeypatch, False), want)


@pytest.mark.parametrize("damage", ["cells over each other", "a cell over the header"])
def test_a_leaf_whose_cells_lie_over_each_other_is_refused(tmp_path, damage):
    """SQLite calls such a page malformed; a value read there could be any bytes."""
    path = _make(tmp_path / "t.sqlite", [(i, -i, i * 3) for i in range(50)], page_size=4096)
    where = _where(path)
    _same_as_sql(path, ["a", "b", "c"])
    root = where[1]
    data = bytearray(path.read_bytes())
    page = (root - 1) * 4096 + (100 if root == 1 else 0)  # the one leaf's header
    assert data[page] == 0x0D
    first = int.from_bytes(data[page + 8 : page + 10], "big")  # the first cell's offset
    if damage == "cells over each other":
        data[page + 10 : page + 12] = first.to_bytes(2, "big")  # the second cell: the first's
    else:
        data[page + 10 : page + 12] = (page % 4096 + 8).to_bytes(2, "big")  # in the pointers
    path.write_bytes(bytes(data))
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:  # what SQLite says of it
        assert con.execute("PRAGMA integrity_check").fetchone()[0] != "ok"
    finally:
        con.close()
    with pytest.raises(Unsupported, match="over"):
        _scan(path, ["a", "b", "c"], where=where)
