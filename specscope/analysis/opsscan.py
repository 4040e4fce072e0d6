"""The ops query of :mod:`.opsread`, computed from the tables' pages (:mod:`.pagescan`).

:func:`scan_parts` gives, for one GPU-operation table, the parts :func:`.sqlread.int_columns_many`
reads: each a run of the table's leaf pages whose cells are decoded in numpy and turned into
the columns of :data:`.opsread.OP_COLUMNS` by :func:`op_values`, the same expressions as the
SQL of :func:`.opsread.op_queries` (``coalesce`` as the default where NULL, the shifts and masks
of int64 two's complement, which numpy's and SQLite's agree on). Each part carries that SQL for
its rowid range: where a page holds what the scan does not decode, the whole read is made by
SQL instead (``tests/analysis/test_pagescan.py`` checks both give the same arrays).

The page scan is the default; ``SPECSCOPE_SQLITE_READER=adbc`` or ``sqlite3`` reads by SQL.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specscope.analysis import opsread
from specscope.analysis.pagescan import Column, TableScan, Unsupported
from specscope.analysis.sqlread import NULL_INT, readonly_uri, rowid_bounds

_NEEDS = {  # the columns each kind's ops query reads, besides start, end and the ids
    "kernel": ("shortName", "demangledName", "graphNodeId"),
    "memcpy": ("copyKind", "bytes", "graphNodeId"),
    "memset": ("bytes", "graphNodeId"),
    "graph": ("graphId",),
}
_IDS = ("correlationId", "deviceId", "streamId", "globalPid")


def wanted() -> bool:
    """Whether the GPU operations are read by page scans (not when ``SPECSCOPE_SQLITE_READER``
    names a SQL reader)."""
    return os.environ.get("SPECSCOPE_SQLITE_READER", "pages") == "pages"


def scanned_parts(path: Path | None, parts_of: Callable[..., list], *args) -> list | None:
    """``parts_of(path, *args)``, the page-scan parts of a table, or None where it is read by
    SQL: no ``path``, a SQL reader chosen (:func:`wanted`), or the table refused
    (:class:`.pagescan.Unsupported`)."""
    if path is None or not wanted():
        return None
    try:
        return parts_of(path, *args)
    except Unsupported:
        return None


def read_scanned(path: Path | None, ncols: int, parts_of: Callable[..., list], *args):
    """The ``ncols`` columns of the parts :func:`scanned_parts` gives, read (:func:`read_parts`);
    None where the table is read by SQL, or a page refused on the way."""
    try:
        parts = scanned_parts(path, parts_of, *args)
        return None if parts is None else read_parts(parts, ncols)
    except Unsupported:
        return None


@dataclass(frozen=True)
class ScanQuery:
    """One part of a table read by page scan: its leaves, how the query's columns are made of
    theirs, and the SQL of the same rows."""

    scan: TableScan
    leaves: slice
    values: Callable[[dict[str, Column]], list[np.ndarray]]
    sql: str

    def batches(self) -> Iterator[list[np.ndarray]]:
        names = self.scan.names
        for cols in self.scan.batches(self.leaves):
            yield self.values(dict(zip(names, cols, strict=True)))


def scan_parts(
    path: Path, table: str, kind: int, select: str, parts: int, execs: bool
) -> list[tuple[ScanQuery, int]]:
    """``parts`` page-scan parts of ``table`` (ops of ``KINDS[kind]``) with the bound of their
    rows; ``select``: the table's ops query (no ``WHERE``), the parts' SQL. Raises
    :class:`.pagescan.Unsupported` where the table is not decoded (then read by SQL)."""
    wanted_names = ("start", "end", *_IDS, *_NEEDS[opsread.KINDS[kind]])
    return table_parts(path, table, wanted_names, op_values(kind, execs), select, parts)


RUNTIME_PART_ROWS = 1 << 20
"""A CUDA API calls table of more rows than this (by rowid range) is read in ``2 * threads``
page-scan parts (:func:`runtime_parts`), fewer in one."""


def runtime_parts(path: Path, select: str, threads: int = 1) -> list[tuple[ScanQuery, int]]:
    """The CUPTI_ACTIVITY_KIND_RUNTIME table's read (:func:`.opsread.runtime_sql`: start, end,
    globalTid or 0, correlationId or 0, nameId or -1) as page-scan parts: one, or where the
    table is larger than :data:`RUNTIME_PART_ROWS` and ``threads`` > 1, two per thread (the 40
    M calls of an eager export: on one thread, read alone for seconds after the GPU
    operations' threads were done)."""
    names = ("start", "end", "globalTid", "correlationId", "nameId")

    def values(cols: dict[str, Column]) -> list[np.ndarray]:
        n = len(cols["start"].values)
        defaults = (NULL_INT, NULL_INT, 0, 0, -1)
        return [_coalesce(cols, n, c, d) for c, d in zip(names, defaults, strict=True)]

    parts = table_parts(path, opsread.RUNTIME, names, values, select, 1)
    if threads > 1 and sum(bound for _, bound in parts) > RUNTIME_PART_ROWS:
        parts = table_parts(path, opsread.RUNTIME, names, values, select, 2 * threads)
    return parts


def nvtx_parts(path: Path, select: str) -> list[tuple[ScanQuery, int]]:
    """The NVTX events read (:func:`.opsread.nvtx_sql`'s query ``select``: start, end or 0,
    whether end is NULL, textId or -1, globalTid or 0, domainId or 0, eventType, whether text
    is set, rowid; ranges and domain creations only) as one page-scan part."""
    names = ("start", "end", "eventType", "text", "globalTid", "textId", "domainId")
    kinds = np.array(opsread.NVTX_EVENT_TYPES, dtype=np.int64)

    def values(cols: dict[str, Column]) -> list[np.ndarray]:
        n = len(cols["start"].values)
        keep = np.isin(_coalesce(cols, n, "eventType", -1), kinds)

        def null(c):  # IS NULL (a column the table lacks: NULL)
            col = cols.get(c)
            if col is None or col.null is None:
                return np.full(n, col is None)
            return col.null

        out = [
            _coalesce(cols, n, "start", NULL_INT),
            _coalesce(cols, n, "end", 0),
            null("end").astype(np.int64),
            _coalesce(cols, n, "textId", -1),
            _coalesce(cols, n, "globalTid", 0),
            _coalesce(cols, n, "domainId", 0),
            _coalesce(cols, n, "eventType", -1),
            (~null("text")).astype(np.int64),
            cols["rowid"].values,
        ]
        return [c[keep] for c in out]

    return table_parts(path, opsread.NVTX, names, values, select, 1, present={"text"}, rowids=True)


def read_parts(parts: list[tuple[ScanQuery, int]], ncols: int) -> list[np.ndarray] | None:
    """The ``ncols`` int64 columns of ``parts`` read in turn into arrays of their bounds' rows
    (no pieces held beside the result), cut to the rows read; None without parts."""
    if not parts:
        return None
    out = [np.empty(sum(bound for _, bound in parts), dtype=np.int64) for _ in range(ncols)]
    n = 0
    for query, _ in parts:
        for batch in query.batches():
            m = len(batch[0])
            if n + m > len(out[0]):
                raise Unsupported("more rows than the rowid range allows")
            for column, values in zip(out, batch, strict=True):
                column[n : n + m] = values
            n += m
    return [c[:n].copy() if n < len(c) else c for c in out]  # (fewer: holes, or rows left out)


def table_parts(path, table, wanted_names, values, select, parts, present=(), rowids=False):
    """``parts`` page-scan parts of ``table`` reading the columns ``wanted_names`` it has,
    the query's columns made of them by ``values``; each with its bound and its SQL (``select``
    with the part's rowid range; ``select`` itself for a single part). ``present``: names of
    which only whether they are NULL is read; ``rowids``: the rowid too (as ``"rowid"``). The
    schema is read on a connection of its own (this may run on any thread)."""
    with closing(sqlite3.connect(readonly_uri(path), uri=True)) as con:
        info = con.execute(f"PRAGMA table_xinfo({table})").fetchall()
        root = con.execute(
            "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        lo, hi = rowid_bounds(con, table)
    if any(r[6] for r in info):  # hidden or generated columns are not in every record
        raise Unsupported("generated columns")
    position = {r[1]: r[0] for r in info}
    rowid_alias = {r[1] for r in info if r[5] and str(r[2]).upper() == "INTEGER"}
    names = [c for c in wanted_names if c in position]
    if not {"start", "end"} <= set(names) or rowid_alias & set(names):
        raise Unsupported("a column the scan does not read")
    if not root or not root[0]:
        raise Unsupported("no B-tree")
    if lo is None:
        return []
    scan = TableScan(
        path, int(root[0]), [position[c] for c in names], int(hi),
        names=(*names, "rowid") if rowids else names, present=[c in present for c in names],
        rowids=rowids,
    )  # fmt: skip
    split = scan.parts(parts, int(lo))
    where = "" if len(split) == 1 else " WHERE rowid > {} AND rowid <= {}"
    return [
        (ScanQuery(scan, leaves, values, select + where.format(below, top)), top - below)
        for leaves, below, top in split
    ]


def _coalesce(cols: dict[str, Column], n: int, *names_then_default) -> np.ndarray:
    """SQL's ``coalesce`` of the columns ``names`` (those not read: NULL) and a default."""
    *names, default = names_then_default
    out = np.full(n, default, dtype=np.int64)
    for c in reversed(names):  # the first non-NULL wins
        if c in cols:
            col = cols[c]
            out = col.values if col.null is None else np.where(col.null, out, col.values)
    return out


def op_values(kind: int, execs: bool):
    """The function making the ops query's columns (start, end, corr, device:stream, names,
    misc, [bytes]) of ``KINDS[kind]`` from a scan's columns (those the table lacks: NULL), as
    :func:`.opsread.op_queries`' SQL does."""
    name = opsread.KINDS[kind]

    def values(cols: dict[str, Column]) -> list[np.ndarray]:
        n = len(cols["start"].values)

        def coalesce(*names_then_default):
            return _coalesce(cols, n, *names_then_default)

        def packed(high, low):
            return (high << 32) | (low & opsread.LOW32)

        out = [coalesce("start", NULL_INT), coalesce("end", NULL_INT)]
        out.append(coalesce("correlationId", 0))
        out.append(packed(coalesce("deviceId", 0), coalesce("streamId", 0)))
        if name == "kernel":
            out.append(
                packed(
                    coalesce("shortName", "demangledName", -3),
                    coalesce("demangledName", "shortName", -3),
                )
            )
        else:
            code = {
                "memcpy": lambda: -10 - coalesce("copyKind", 0),
                "memset": lambda: np.full(n, -2, dtype=np.int64),
                "graph": lambda: -1000 - coalesce("graphId", 0),
            }[name]()
            out.append(packed(code, code))
        misc = ((coalesce("globalPid", 0) >> 24) & opsread.PID_MASK) << 32 | (kind << 12)
        if name == "graph":
            misc |= 1 << 8
        elif "graphNodeId" in cols:
            node = cols["graphNodeId"]
            in_graph = ~node.null if node.null is not None else np.ones(n, dtype=bool)
            misc |= in_graph.astype(np.int64) << 8
            if execs:
                high = node.values >> 32
                fits = in_graph & (high >= 0) & (high <= opsread.EXEC_SATURATED - 1)
                misc |= np.where(fits, high, opsread.EXEC_SATURATED) << 16
        if name == "memcpy":
            misc |= coalesce("copyKind", 0) & 255
        out.append(misc)
        if name in ("memcpy", "memset"):
            out.append(coalesce("bytes", 0))
        return out

    return values
