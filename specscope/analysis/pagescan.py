"""Integer columns of an export's table decoded straight from the SQLite file's pages, in numpy.

Every row SQLite returns costs it a step of its virtual machine and a call per cell, whatever
reads it (ADBC's Arrow batches and a C loop over ``sqlite3_step`` cost the same: 0.86-0.98 s
for the 1.9 M kernels of ``ops2m``, ``bench/row_loop.c``). The rows of a table are the cells of
its B-tree's leaf pages (https://www.sqlite.org/fileformat2.html, "B-tree Pages" and "Record
Format"); decoding those cells with a few vectorised numpy passes per 1024 pages reads the same
columns in 0.38-0.40 s on one core, and numpy lets go of the GIL, so the parts of a table are
decoded on several threads.

What a scan gives for a column: its value in every row (``int64``) and where it was NULL (or
only the latter, for a column that may hold text).

Where the machine has a C compiler, each chunk is first handed to ``pagescan.c``
(:mod:`.native`): one C loop over the cells reads the usual case 2-3x faster than the numpy
passes, which remain the reference and take every chunk it gives back
(``tests/analysis/test_pagescan_native.py`` compares the two).

Only what an nsys export holds is decoded; anything else raises :class:`Unsupported` and the
caller reads the table with SQL instead (:func:`.opsread.read_ops`), so results never differ:

- a rowid table (not ``WITHOUT ROWID``) whose B-tree has table pages only (interior ``0x05``,
  leaf ``0x0d``), every leaf at one depth;
- records on overflow pages (a long NVTX text, say) are put together from their chains, one
  by one in Python: nsys rows are under 200 bytes, such records rare;
- the columns read holding integers or NULL (no floats, texts or blobs), but for those asked
  only whether they are NULL;
- every record holding at least the columns read (no rows from before an ``ALTER TABLE ... ADD
  COLUMN``);
- no pending write-ahead log (a ``-wal`` file beside the export).

A damaged file is refused where SQLite would call it malformed and a value could be any
bytes: a page twice in the tree, cells outside their page's content area or over each other,
an overflow chain that leaves the file or does not end with its record. The file is opened
read-only and only read (``os.pread``); nothing is written beside it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specscope.analysis import native
from specscope.analysis.sqlread import SQLITE_MAGIC

CHUNK_PAGES = 1024
"""Leaf pages decoded at once (4 MiB of 4 KiB pages: the gathers stay in the CPU's caches;
256 pages cost 2x more in Python per chunk, 4096 1.5x more in cache misses)."""
_LEAF, _INTERIOR = 0x0D, 0x05
# bytes of an integer by serial type (0 NULL, 8 and 9 the constants 0 and 1, 7 a float)
_INT_BYTES = np.array([0, 1, 2, 3, 4, 6, 8, 8, 0, 0, 0, 0], dtype=np.uint8)
_SIZE = np.zeros(128, dtype=np.uint8)  # bytes of a value by its one-byte serial type
_SIZE[:12] = _INT_BYTES
_SIZE[12:] = (np.arange(12, 128) - 12 - (np.arange(12, 128) & 1)) // 2  # blobs, texts
_SHIFT = (64 - 8 * _INT_BYTES.astype(np.int64)) & 63  # right shift of an 8-byte word by type
_PAD = 256  # a header entry or an 8-byte word read at the end of the last page stays inside


class Unsupported(Exception):
    """A file, table or row this reader does not decode (module doc); the SQL readers do."""


@dataclass(frozen=True)
class Column:
    """One column of a scan: its values and where it was NULL (``null``: None where never)."""

    values: np.ndarray
    null: np.ndarray | None


def page_geometry(path: Path) -> tuple[int, int]:
    """Page size and usable bytes per page of the SQLite file at ``path``."""
    if not hasattr(os, "preadv"):  # (Windows)
        raise Unsupported("no os.preadv on this platform")
    with open(path, "rb") as f:
        header = f.read(100)
    if len(header) < 100 or header[:16] != SQLITE_MAGIC:
        raise Unsupported("not a SQLite file")
    size = int.from_bytes(header[16:18], "big")
    size = 65536 if size == 1 else size
    if size < 512 or size & (size - 1):
        raise Unsupported("page size")
    if header[21:24] != b"\x40\x20\x20":  # the payload fractions every SQLite writes
        raise Unsupported("payload fractions")
    wal = Path(f"{path}-wal")
    if header[18] == 2 and wal.exists() and wal.stat().st_size:
        raise Unsupported("a write-ahead log is pending")
    return size, size - header[20]


class TableScan:
    """The leaf pages of one table's B-tree, in rowid order, and the decoding of their cells.

    ``root``: the table's root page (``sqlite_master.rootpage``); ``positions``: the index in
    the record of each column to decode (the ``cid`` of ``PRAGMA table_info``);
    ``max_rowid``: the table's largest rowid (from SQL: a seek), the upper bound of the last
    leaf's rowids; ``names``: what the caller calls those columns; ``present``: per column,
    True where only whether it is NULL is wanted (a text, say: its ``values`` are empty);
    ``rowids``: one more column, each row's rowid.
    """

    def __init__(
        self,
        path: Path,
        root: int,
        positions: Sequence[int],
        max_rowid: int,
        names: Sequence[str] = (),
        present: Sequence[bool] = (),
        rowids: bool = False,
    ):
        self.path = Path(path)
        self.names = tuple(names)  # (the columns' names, for the caller)
        self.page_size, self.usable = page_geometry(self.path)
        self.positions = tuple(positions)
        self.present = tuple(present) or (False,) * len(self.positions)
        self.rowids = rowids
        self.width = max(self.positions) + 1  # header entries read per record
        self._pages = os.stat(self.path).st_size // self.page_size
        self.leaves, self.uppers = self._leaves(root, max_rowid)

    # -------------------------------------------------------------------- the tree
    def _read_pages(self, fd: int, pages: np.ndarray) -> np.ndarray:
        """The bytes of ``pages`` (page numbers), one after the other, padded."""
        if len(pages) and (pages.min() < 1 or pages.max() > self._pages):
            raise Unsupported("a page number beyond the file")
        size = self.page_size
        buf = np.empty(len(pages) * size + _PAD, dtype=np.uint8)
        buf[-_PAD:] = 0
        view = memoryview(buf)
        breaks = np.flatnonzero(np.diff(pages) != 1) + 1
        for a, b in zip(np.r_[0, breaks], np.r_[breaks, len(pages)], strict=True):
            want = (b - a) * size
            if os.preadv(fd, [view[a * size : b * size]], (int(pages[a]) - 1) * size) != want:
                raise Unsupported("a short read")
        return buf

    def _leaves(self, root: int, max_rowid: int) -> tuple[np.ndarray, np.ndarray]:
        """The leaf pages in order and the largest rowid each may hold (from the interior
        cells' keys: a child holds the rowids up to its key, the right-most child up to its
        parent's bound)."""
        pages, uppers = np.array([root], dtype=np.int64), np.array([max_rowid], dtype=np.int64)
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for _ in range(64):  # depth (a 64-deep B-tree would hold more rows than exist)
                # every page of a level is of one kind: the first tells whether these are the
                # leaves (each leaf's kind is checked as it is decoded, not read twice here)
                if self._read_pages(fd, pages[:1])[self._headers(pages[:1])[0]] == _LEAF:
                    return pages, uppers
                buf = self._read_pages(fd, pages)
                hdr = self._headers(pages)
                if not (buf[hdr] == _INTERIOR).all():
                    raise Unsupported("not a table B-tree")
                pages, uppers = self._children(buf, hdr, uppers)
                if len(pages) > self._pages or len(np.unique(pages)) < len(pages):
                    raise Unsupported("a page twice in the tree")  # (a damaged file's loop)
        finally:
            os.close(fd)
        raise Unsupported("B-tree too deep")

    def _headers(self, pages: np.ndarray) -> np.ndarray:
        """Where each page's header starts in a buffer of these pages read in turn."""
        return np.arange(len(pages), dtype=np.int64) * self.page_size + np.where(pages == 1, 100, 0)

    def _children(self, buf, hdr, uppers) -> tuple[np.ndarray, np.ndarray]:
        """The child pages of the interior pages in ``buf`` (in order) and their rowid bounds."""
        count = self._cell_count(buf, hdr, 12)
        right = _be(buf, hdr + 8, 4)
        first = np.cumsum(count) - count
        entry = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(first, count)
        page_start = hdr - hdr % self.page_size
        cell = np.repeat(page_start, count) + _be(buf, np.repeat(hdr + 12, count) + 2 * entry, 2)
        self._check_cells(cell, np.repeat(page_start, count), 5)
        child = _be(buf, cell, 4)
        key, _ = _varints(buf, cell + 4)
        out = np.empty(len(child) + len(hdr), dtype=np.int64)
        bound = np.empty_like(out)
        last = np.cumsum(count + 1) - 1  # each page's right-most child, after its cells
        cells = np.ones(len(out), dtype=bool)
        cells[last] = False
        out[cells], out[last] = child, right
        bound[cells], bound[last] = key, uppers
        return out, bound

    def _cell_count(self, buf: np.ndarray, hdr: np.ndarray, header_bytes: int) -> np.ndarray:
        """The cells of each page, whose pointers must fit in the page after its header."""
        count = _be(buf, hdr + 3, 2)
        if len(count) and (hdr % self.page_size + header_bytes + 2 * count).max() > self.usable:
            raise Unsupported("more cells than a page holds")
        return count

    def _check_cells(self, cell: np.ndarray, page_start: np.ndarray, least: int) -> None:
        """Every cell at least ``least`` bytes inside its page's usable part."""
        offset = cell - page_start
        if len(cell) and (offset.min() < 8 or (offset + least).max() > self.usable):
            raise Unsupported("a cell outside its page")

    # -------------------------------------------------------------------- the rows
    def parts(self, n: int, min_rowid: int) -> list[tuple[slice, int, int]]:
        """``n`` runs of leaves of about equal length, each with the rowids it may hold
        (``below < rowid <= top``: ``top - below`` bounds its rows, exactly where the rowids
        have no holes)."""
        edges = np.linspace(0, len(self.leaves), max(1, n) + 1).astype(np.int64)
        out, below = [], min_rowid - 1
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            if b > a:
                top = max(below, int(self.uppers[b - 1]))
                out.append((slice(int(a), int(b)), below, top))
                below = top
        return out

    def batches(self, leaves: slice) -> Iterator[list[Column]]:
        """The columns of :attr:`positions` for the rows of the leaves ``leaves``,
        :data:`CHUNK_PAGES` pages at a time."""
        pages = self.leaves[leaves]
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for lo in range(0, len(pages), CHUNK_PAGES):
                chunk = pages[lo : lo + CHUNK_PAGES]
                yield self._decode(self._read_pages(fd, chunk), self._headers(chunk), fd)
        finally:
            os.close(fd)

    def _decode(self, buf: np.ndarray, hdr: np.ndarray, fd: int) -> list[Column]:
        if (fast := self._decode_native(buf, hdr)) is not None:
            return fast
        if len(hdr) and not (buf[hdr] == _LEAF).all():
            raise Unsupported("not a table leaf")
        count = self._cell_count(buf, hdr, 8)
        first = np.cumsum(count) - count
        entry = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(first, count)
        page_start = np.repeat(hdr - hdr % self.page_size, count)
        cell = page_start + _be(buf, np.repeat(hdr + 8, count) + 2 * entry, 2)
        self._check_cells(cell, page_start, 4)
        payload, n1 = _varints(buf, cell)
        if self.rowids:
            rowid, n2 = _varints(buf, cell + n1)
        else:
            rowid, n2 = None, _varint_lengths(buf, cell + n1)  # (its value is not needed)
        record = cell + n1 + n2
        spilled = payload > self.usable - 35  # (the most a table leaf keeps in the page)
        if spilled.any():
            local = self._local(payload[spilled])
            in_page = payload.copy()
            in_page[spilled] = local + 4  # (the first overflow page's number after them)
            self._check_layout(cell, record + in_page, page_start, hdr, count)
            out = self._with_spilled(buf, record, payload, spilled, local, fd)
        else:
            end = record + payload
            self._check_layout(cell, end, page_start, hdr, count)
            types, body = self._types(buf, record, end)
            out = self._values(buf, body, types, end)
        return out + [Column(rowid, None)] if self.rowids else out

    def _decode_native(self, buf: np.ndarray, hdr: np.ndarray) -> list[Column] | None:
        """:meth:`_decode` by the C fast path (:mod:`.native`) where it is built and every
        page is in its usual case; None otherwise (the numpy decoding follows)."""
        fn = native.library()
        if fn is None or not len(hdr):
            return None
        count = _be(buf, hdr + 3, 2)
        if count.max() > (self.usable - 8) // 2:  # (a damaged count: numpy's decoding refuses it)
            return None
        cells = int(count.sum())
        got = native.decode_leaves(
            fn, buf, hdr, cells, self.page_size, self.usable, self.width,
            self.positions, self.present, self.rowids,
        )  # fmt: skip
        if got is None:
            return None
        values, nulls, null_counts, rowids = got
        empty = np.zeros(0, dtype=np.int64)
        out = [
            Column(empty if present else values[j], nulls[j] if null_counts[j] else None)
            for j, present in enumerate(self.present)
        ]
        return out + [Column(rowids, None)] if self.rowids else out

    def _check_layout(self, cell, end, page_start, hdr, count) -> None:
        """Every cell (``cell`` to ``end``: what of it is in the page) inside its page's
        content area, after the header and the cell pointers and up to the usable end, and
        none over another: SQLite calls such a page malformed, and a value read there would
        be any bytes."""
        if not len(cell):
            return
        if (end - page_start).max() > self.usable:
            raise Unsupported("a record longer than its page")
        if (cell < np.repeat(hdr + 8 + 2 * count, count)).any():
            raise Unsupported("a cell over its page's header")
        same = page_start[1:] == page_start[:-1]
        if (cell[1:] < cell[:-1])[same].all():  # the usual order: each cell before the last
            if (end[1:] > cell[:-1])[same].any():
                raise Unsupported("cells over each other")
            return
        order = np.argsort(cell, kind="stable")  # (pages apart in the buffer: one sort)
        if (end[order][:-1] > cell[order][1:]).any():
            raise Unsupported("cells over each other")

    def _local(self, payload: np.ndarray) -> np.ndarray:
        """The bytes of a record of ``payload`` bytes kept in its table leaf when it goes on
        on overflow pages (https://www.sqlite.org/fileformat2.html, "Cell Payload Overflow
        Pages"); the first overflow page's number follows them."""
        usable = self.usable
        least = (usable - 12) * 32 // 255 - 23
        local = least + (payload - least) % (usable - 4)
        return np.where(local <= usable - 35, local, least)

    def _with_spilled(self, buf, record, payload, spilled, local, fd) -> list[Column]:
        """:meth:`_values` of records some of which go on on overflow pages: those
        (``spilled``, of which ``local`` bytes are in the leaf) put together whole in a buffer
        of their own and decoded there, the others where they are."""
        kept = ~spilled
        end = record[kept] + payload[kept]
        types, body = self._types(buf, record[kept], end)
        here = self._values(buf, body, types, end)
        whole, at = self._spilled_records(buf, record[spilled], payload[spilled], local, fd)
        types, body = self._types(whole, at, at + payload[spilled])
        there = self._values(whole, body, types, at + payload[spilled])
        out = []
        for a, b in zip(here, there, strict=True):
            values = a.values
            if len(a.values) or len(b.values):  # (a column asked only whether it is NULL)
                values = np.empty(len(record), dtype=np.int64)
                values[kept], values[spilled] = a.values, b.values
            null = None
            if a.null is not None or b.null is not None:
                null = np.zeros(len(record), dtype=bool)
                null[kept] = False if a.null is None else a.null
                null[spilled] = False if b.null is None else b.null
            out.append(Column(values, null))
        return out

    def _spilled_records(self, buf, record, payload, local, fd):
        """The whole payloads of records that go on on overflow pages, one after the other in
        a buffer (padded), and where each starts there: the ``local`` bytes in the leaf
        (:meth:`_local`), then each overflow page's ``usable - 4`` bytes after the next one's
        number."""
        usable = self.usable
        pieces, starts, at = [], [], 0
        for r, size, mine in zip(record.tolist(), payload.tolist(), local.tolist(), strict=True):
            data = bytearray(buf[r : r + mine].tobytes())
            page = int.from_bytes(buf[r + mine : r + mine + 4].tobytes(), "big")
            for _ in range(-(-(size - mine) // (usable - 4))):  # the pages the rest needs
                if not 1 <= page <= self._pages:
                    raise Unsupported("an overflow page beyond the file")
                content = os.pread(fd, usable, (page - 1) * self.page_size)
                if len(content) != usable:
                    raise Unsupported("a short read")
                page = int.from_bytes(content[:4], "big")
                data += content[4 : 4 + size - len(data)]
            if len(data) != size or page:  # (the last page of a chain points nowhere)
                raise Unsupported("an overflow chain that does not end with its record")
            pieces.append(data)
            starts.append(at)
            at += size
        whole = np.frombuffer(b"".join(pieces) + bytes(_PAD), dtype=np.uint8)
        return whole, np.array(starts, dtype=np.int64)

    def _types(self, buf, record, end) -> tuple[np.ndarray, np.ndarray]:
        """The serial types of the first :attr:`width` columns of each record, (rows, width),
        and where each record's body starts. One-byte header entries are read as a block;
        a chunk with longer ones (texts of 58 bytes or more, a header over 127 bytes) entry
        by entry."""
        n, width = len(record), self.width
        if not n:
            return np.zeros((0, width), dtype=np.int64), record
        header = buf[record]
        types = np.lib.stride_tricks.as_strided(
            buf, shape=(len(buf) - width, width), strides=(1, 1), writeable=False
        )[record + 1]
        if header.max() < 0x80 and header.min() > width and types.max() < 0x80:
            return types, record + header  # (the usual case)
        size, at = _varints(buf, record)
        at = record + at
        types = np.empty((n, width), dtype=np.int64)
        for k in range(width):
            types[:, k], length = _varints(buf, at)
            at = at + length
        if (at > record + size).any() or (record + size > end).any():
            raise Unsupported("a record with fewer columns than the table")
        return types, record + size

    def _values(self, buf, offset, types, end) -> list[Column]:
        """The columns of :attr:`positions` from records whose body starts at ``offset``."""
        if len(types) and ((types == 10) | (types == 11) | (types < 0)).any():
            raise Unsupported("a reserved serial type")
        if types.dtype == np.uint8:
            sizes = _SIZE.take(types)  # (take: half the time of indexing)
        else:  # integers by the table, blobs and texts (12 and up) by their length
            sizes = np.where(types < 12, _INT_BYTES[np.minimum(types, 11)], (types - 12) >> 1)
        starts = {}
        for k in range(self.width):
            if k in self.positions:
                starts[k] = offset
            offset = offset + sizes[:, k]
        if len(end) and (offset > end).any():
            raise Unsupported("a record longer than its payload")
        words = np.ndarray(  # big-endian 8-byte words at every byte offset (unaligned)
            shape=(len(buf) - 7,), dtype="<i8", buffer=buf, strides=(1,)
        )
        out = []
        for k, present in zip(self.positions, self.present, strict=True):
            t = types[:, k]
            null = t == 0
            null = null if null.any() else None
            if present:  # only whether it is NULL (any type)
                out.append(Column(np.zeros(0, dtype=np.int64), null))
                continue
            if len(t) and (t.max() > 9 or (t == 7).any()):
                raise Unsupported("a value that is not an integer")
            size = sizes[:, k]  # (an integer's bytes: 0 for NULL and the constants 0 and 1)
            values = words[starts[k]].byteswap()
            low, high = (int(size.min()), int(size.max())) if len(size) else (8, 8)
            if low == high and low:
                values >>= 64 - 8 * low  # arithmetic: big-endian two's complement
            else:
                values >>= _SHIFT.take(t)
                zero = size == 0
                values[zero] = t[zero] == 9
            out.append(Column(values, null))
        return out


def _be(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """Big-endian unsigned integers of ``width`` bytes at ``at`` (int64)."""
    out = buf[at].astype(np.int64)
    for i in range(1, width):
        out = (out << 8) | buf[at + i]
    return out


def _varint_lengths(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The length in bytes of the SQLite varint at each offset ``at``."""
    more = buf[at] >= 0x80
    length = 1 + more.astype(np.int64)
    for i in range(1, 8):
        if not more.any():
            break
        more &= buf[at + i] >= 0x80
        length += more
    return length


def _varints(buf: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The SQLite varints at ``at`` (values up to 2**63) and their lengths."""
    length = _varint_lengths(buf, at)
    value = np.zeros(len(at), dtype=np.int64)
    for i in range(int(length.max()) if len(at) else 0):
        byte = buf[at + i].astype(np.int64)
        inside = i < length
        if i == 8:  # the ninth byte gives all 8 bits
            value = np.where(inside, (value << 8) | byte, value)
        else:
            value = np.where(inside, (value << 7) | (byte & 0x7F), value)
    return value, length
