"""Build exports in the Nsight Systems SQLite schema from code, for tests and benchmarks.

Only the tables and columns that :mod:`specscope.analysis.loader` reads are written, with the
column names and meanings of nsys 2025.3 (``../shared/NSYS.md``). Rows are collected in lists
and written with one ``executemany`` per table, so millions of rows are cheap.

    >>> x = SyntheticExport()
    >>> with x.nvtx("step", 0, 1_000, domain="specscope"):
    ...     corr = x.api("cudaLaunchKernel", 100, 110)
    >>> x.kernel("k", 200, 300, corr)
    >>> x.write("t.sqlite")  # doctest: +SKIP

Thread and process ids are encoded into ``globalTid``/``globalPid`` the way nsys does
(``pid = (g >> 24) & 0xFFFFFF``, ``tid = g & 0xFFFFFF``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

# eventType values of NVTX_EVENTS (ENUM_NSYS_EVENT_TYPE).
NVTX_PUSHPOP = 59
NVTX_STARTEND = 60
NVTX_MARK = 34
NVTX_DOMAIN_CREATE = 75

MEMCPY_KINDS = {"htod": 1, "dtoh": 2, "dtod": 8, "ptop": 10, "htoh": 9}

_DDL = {
    "META_DATA_EXPORT": "name TEXT NOT NULL, value TEXT",
    "StringIds": "id INTEGER PRIMARY KEY, value TEXT NOT NULL",
    "NVTX_EVENTS": (
        "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,"
        " text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, domainId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,"
        " globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,"
        " returnValue INTEGER NOT NULL"
    ),
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
        " contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,"
        " globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL,"
        " graphNodeId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
        " contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,"
        " globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,"
        " graphNodeId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
        " contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,"
        " globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL,"
        " graphNodeId INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": (
        "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,"
        " contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,"
        " globalPid INTEGER, graphId INTEGER NOT NULL, graphExecId INTEGER NOT NULL"
    ),
    "TARGET_INFO_GPU": "vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT",
    "ANALYSIS_DETAILS": (
        "globalVid INTEGER NOT NULL, duration INTEGER NOT NULL, startTime INTEGER NOT NULL,"
        " stopTime INTEGER NOT NULL"
    ),
    "ENUM_CUDA_MEMCPY_OPER": "id INTEGER PRIMARY KEY, name TEXT NOT NULL, label TEXT NOT NULL",
}
# ENUM_CUDA_MEMCPY_OPER of nsys 2021.2 and later (what `nsys stats` names memcpys by); exports
# of earlier versions have no such table (``SyntheticExport(memcpy_enum=False)``).
MEMCPY_ENUM = [
    (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
    (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
    (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
    (3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"),
    (4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"),
    (5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"),
    (6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"),
    (7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"),
    (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
    (9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"),
    (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
    (11, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"),
    (12, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host"),
    (13, "CUDA_MEMCPY_KIND_UVM_DTOD", "Unified Device-to-Device"),
]


def global_tid(pid: int, tid: int) -> int:
    """nsys' serialized GlobalId of a thread (hardware/VM id 1 in the top bits)."""
    return (1 << 48) | ((pid & 0xFFFFFF) << 24) | (tid & 0xFFFFFF)


def global_pid(pid: int) -> int:
    return global_tid(pid, 0)


class SyntheticExport:
    """Rows of a small nsys export, written to a fresh SQLite file by :meth:`write`.

    ``pid``/``tid`` default to one process with one thread; times are ns. Tables that received
    no rows are not created (as nsys does), unless listed in ``write(..., empty=[...])``.
    ``memcpy_enum``: write ``ENUM_CUDA_MEMCPY_OPER`` as nsys 2021.2 and later do.
    """

    def __init__(
        self,
        *,
        pid: int = 100,
        tid: int = 100,
        nsys_version: str | None = "2025.3.2.0",
        gpu_name: str = "NVIDIA H200",
        memcpy_enum: bool = True,
    ) -> None:
        self.pid, self.tid = pid, tid
        self.rows: dict[str, list[tuple]] = {t: [] for t in _DDL}
        self._strings: dict[str, int] = {}
        self._domains: dict[tuple[int, str], int] = {}
        self._corr = 0
        if nsys_version is not None:
            self.rows["META_DATA_EXPORT"] += [
                ("EXPORT_PRODUCT_VERSION", nsys_version),
                ("EXPORT_SCHEMA_VERSION", "3.20.3"),
            ]
        self.rows["TARGET_INFO_GPU"].append((1, 0, gpu_name, "0000:00:06.0"))
        if memcpy_enum:
            self.rows["ENUM_CUDA_MEMCPY_OPER"] += MEMCPY_ENUM

    def string(self, value: str) -> int:
        """The StringIds id of ``value`` (added on first use)."""
        if value not in self._strings:
            self._strings[value] = len(self._strings) + 1
            self.rows["StringIds"].append((self._strings[value], value))
        return self._strings[value]

    def domain(self, name: str, pid: int | None = None) -> int:
        """The domainId of ``name`` in process ``pid`` (an eventType-75 row on first use)."""
        pid = self.pid if pid is None else pid
        key = (pid, name)
        if key not in self._domains:
            did = len([k for k in self._domains if k[0] == pid]) + 1
            self._domains[key] = did
            g = global_tid(pid, self.tid)
            self.rows["NVTX_EVENTS"].append(
                (-1000, None, NVTX_DOMAIN_CREATE, None, name, g, None, None, did)
            )
        return self._domains[key]

    def range(
        self,
        name: str,
        start: int,
        end: int | None,
        *,
        domain: str | None = None,
        pid: int | None = None,
        tid: int | None = None,
        style: str = "push",
        text_style: str = "textId",
    ) -> None:
        """An NVTX range: ``style`` push (59) or startend (60); name in ``text`` or ``textId``."""
        pid = self.pid if pid is None else pid
        tid = self.tid if tid is None else tid
        did = self.domain(domain, pid) if domain else 0
        etype = NVTX_PUSHPOP if style == "push" else NVTX_STARTEND
        text, text_id = (name, None) if text_style == "text" else (None, self.string(name))
        g = global_tid(pid, tid)
        self.rows["NVTX_EVENTS"].append((start, end, etype, None, text, g, g, text_id, did))

    def capture(self, duration: int, *, start_time: int = 1_700_000_000_000_000_000) -> None:
        """The session's ``ANALYSIS_DETAILS`` row: the capture lasted ``duration`` ns (its end,
        on the session's clock); ``start_time``: its wall-clock start (ns since the epoch)."""
        self.rows["ANALYSIS_DETAILS"].append((0, duration, start_time, start_time + duration))

    @contextlib.contextmanager
    def nvtx(self, name: str, start: int, end: int, **kw) -> Iterator[None]:
        """``range`` as a context manager, for readable nesting in tests."""
        yield
        self.range(name, start, end, **kw)

    def api(
        self,
        name: str,
        start: int,
        end: int,
        *,
        pid: int | None = None,
        tid: int | None = None,
        version: str = "_v7000",
    ) -> int:
        """A CUDA runtime call; returns its new correlation id."""
        self._corr += 1
        pid = self.pid if pid is None else pid
        tid = self.tid if tid is None else tid
        row = (start, end, 1, global_tid(pid, tid), self._corr, self.string(name + version), 0)
        self.rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append(row)
        return self._corr

    def _gpu_row(
        self,
        table: str,
        start: int,
        end: int,
        corr: int,
        *values: object,
        device: int = 0,
        stream: int = 7,
        pid: int | None = None,
        graph_node: int | None = None,
    ) -> None:
        """Append a row to the GPU activity `table`: the columns every such table starts with
        (start, end, deviceId = `device`, contextId = 1, streamId = `stream`, correlationId =
        `corr`, globalPid of `pid`, by default this export's), the table's own `values`, then
        graphNodeId = `graph_node` (set for a node of a CUDA graph) where the table has one.

        The builders below take ``device``, ``stream``, ``pid`` and ``graph_node`` as
        ``**where`` and pass them here."""
        pid = self.pid if pid is None else pid
        row = (start, end, device, 1, stream, corr, global_pid(pid), *values)
        if "graphNodeId" in _DDL[table]:
            row += (graph_node,)
        self.rows[table].append(row)

    def kernel(
        self, name: str, start: int, end: int, corr: int, *, demangled: str | None = None, **where
    ) -> None:
        """A kernel: shortName `name`, demangledName `demangled` (default `name`); `where`:
        device, stream, pid, graph_node (see `_gpu_row`)."""
        short, full = self.string(name), self.string(demangled or name)
        self._gpu_row("CUPTI_ACTIVITY_KIND_KERNEL", start, end, corr, full, short, **where)

    def memcpy(self, kind: str, nbytes: int, start: int, end: int, corr: int, **where) -> None:
        """A copy of `nbytes` bytes, `kind` a key of MEMCPY_KINDS; `where` as in `kernel`."""
        copy_kind = MEMCPY_KINDS[kind]
        self._gpu_row("CUPTI_ACTIVITY_KIND_MEMCPY", start, end, corr, nbytes, copy_kind, **where)

    def memset(self, nbytes: int, start: int, end: int, corr: int, **where) -> None:
        """A memset of `nbytes` bytes to 0; `where` as in `kernel`."""
        self._gpu_row("CUPTI_ACTIVITY_KIND_MEMSET", start, end, corr, 0, nbytes, **where)

    def graph_replay(self, start: int, end: int, corr: int, *, graph_id: int = 1, **where) -> None:
        """One row of CUPTI_ACTIVITY_KIND_GRAPH_TRACE (``--cuda-graph-trace=graph``); `where`
        as in `kernel`."""
        table = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
        self._gpu_row(table, start, end, corr, graph_id, graph_id, **where)

    def write(self, path: str | Path, *, empty: tuple[str, ...] = ()) -> Path:
        """Write a new SQLite file at ``path`` (refuses to overwrite)."""
        path = Path(path)
        if path.exists():
            raise FileExistsError(path)
        con = sqlite3.connect(path)
        with con:
            for table, rows in self.rows.items():
                if not rows and table not in empty:
                    continue
                con.execute(f"CREATE TABLE {table} ({_DDL[table]})")
                if rows:
                    marks = ",".join("?" * len(rows[0]))
                    con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        con.close()
        return path
