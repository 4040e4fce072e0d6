"""The only module that touches nsys tables (with :mod:`.opsread`, its pandas-free read of the
GPU operations and CUDA API calls): opens an export read-only and normalises it.

Every other analysis reads the frames returned here, never the raw tables. The loader

- opens the file with a ``file:...?mode=ro`` URI: it is never written, locked for writing or
  given indexes (SQLite's automatic indexes for a join live in temporary memory);
- resolves ``StringIds`` once, strips the ``_v…`` version suffix of CUDA API names;
- reads ``META_DATA_EXPORT`` (nsys and schema version) and which tables exist: an absent table
  means zero rows, never an error;
- detects the CUDA-graph capture mode (:class:`CaptureMode`);
- decodes ``globalPid``/``globalTid`` as NVIDIA's scripts do: ``pid = (g >> 24) & 0xFFFFFF``,
  ``tid = g & 0xFFFFFF``; correlation ids are matched within one process.

Frames and their columns (times in ns, as in the export):

``ops`` (GPU operations)
    ``start_ns, end_ns, device_id, stream_id, pid, correlation_id, name, full_name, kind
    (kernel|memcpy|memset|graph), in_graph, copy_kind (htod|dtoh|dtod|other, memcpy only),
    bytes``. ``name`` is the kernel's short name, ``full_name`` the demangled one (what ``nsys
    stats`` groups by). ``bytes`` is a sparse column (pandas' ``SparseArray``, fill value 0:
    only copies and memsets have bytes; :func:`.memory.dense_rows` reads a chunk of it). The
    start and thread of the CUDA API call that launched each one (the call with the same
    correlation id in the same process) are not columns: 12 bytes per op (0.23 GB at 20 M)
    that only the projection onto steps reads for every op, a chunk at a time;
    :meth:`Trace.launches` (any rows' pid and correlation id) and :func:`op_launches` (a
    frame's) look them up. From 1 M ops on, a column of one value (device, pid) is a
    read-only view of that value, correlation ids and bytes are int32 and stream ids int16
    where every value fits (:mod:`.memory`).
``nvtx`` (closed ranges, push/pop and start/end)
    ``start_ns, end_ns, name, domain, pid, tid, event_type``; name = ``text`` or
    ``StringIds[textId]``; domain resolved per process from the domain-create events.
``api`` (CUDA API calls, optionally only some names)
    ``start_ns, end_ns, pid, tid, correlation_id, name``.
"""

from __future__ import annotations

import enum
import mmap
import re
import sqlite3
import struct
import sys
import weakref
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from specscope.analysis import opsread, opsscan, opsums, progress
from specscope.analysis.compressed import XZ_MAGIC, remove_quietly, xz_copy
from specscope.analysis.launches import exec_ids, group_launches, launches_of_ops
from specscope.analysis.memory import (
    CHUNK_ROWS,
    dense,
    few_distinct,
    give_back,
    increasing,
    narrow_ids,
    one_valued,
)
from specscope.analysis.opsread import (
    KINDS,
    NVTX_DOMAIN_CREATE,
    NVTX_TYPES,
    RUNTIME,
    adapt,
    nvtx_sql,
    nvtx_text,
    read_nvtx,
    read_ops,
    read_runtime,
    runtime_sql,
)
from specscope.analysis.opsread import PID_MASK as _PID_MASK
from specscope.analysis.opsums import DeviceScatter, distinct_counts, present_values
from specscope.analysis.parallel import beside
from specscope.analysis.sqlread import (
    SQLITE_MAGIC,
    call_ends,
    columnar_connection,
    int_columns,
    int_columns_many,
    read_threads,
    readonly_uri,
    rowid_ranges,
)
from specscope.analysis.timeshift import export_time_shift, unshift
from specscope.analysis.validate import as_text, readable_strings
from specscope.errors import TraceError

# memcpy directions (``copy_kind``); ``unified``: unified-memory page migrations (copyKind 11-13,
# "Unified Host-to-Device" ...), which the driver starts on a page fault or prefetch: no API call
# of the program launched them, so they are never a step's eager copies.
COPY_KINDS = ["htod", "dtoh", "dtod", "other", "unified"]
EAGER_COPY_KINDS = COPY_KINDS[:4]
_NODE_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY")
"""The tables whose rows with a ``graphNodeId`` make an export's capture mode NODE."""
_NODE_KINDS = ("kernel", "memcpy")  # (the ops of :data:`_NODE_TABLES`)
_CUDA_TABLES = (
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
)
# CUDA API names carry a version suffix (``cudaGraphLaunch_v10000``) and, for the per-thread
# default stream variants, ``_ptsz``/``_ptds`` before it (``cudaMemcpyAsync_ptsz_v7000``): both
# are stripped, so a call is known by its function's name.
_VERSION_SUFFIX = re.compile(r"(?:_pt(?:sz|ds))?(?:_v\d+)?$")


class CaptureMode(str, enum.Enum):
    """How CUDA work (and CUDA graphs) were traced."""

    NODE = "node"  # --cuda-graph-trace=node: graph kernels are kernel rows with graphNodeId
    GRAPH = "graph"  # --cuda-graph-trace=graph: replays are GRAPH_TRACE rows, insides invisible
    NO_GRAPHS = "no-graphs"  # CUDA traced, no graph replay seen
    NO_CUDA = "no-cuda"  # no CUDA tables: recorded on a CPU machine or without -t cuda


@contextmanager
def _sql_errors(path: Path) -> Iterator[None]:
    """Turn SQLite failures in the middle of a read into one-line TraceErrors."""
    try:
        yield
    except (sqlite3.DatabaseError, UnicodeDecodeError) as e:  # (the latter: a damaged schema)
        raise TraceError(
            f"{path}: SQLite error while reading ({e}); the export is corrupt or truncated, "
            "export it again with `nsys export --type sqlite`"
        ) from None


def open_readonly(path: str | Path) -> sqlite3.Connection:
    """Open ``path`` read-only after checking it is a whole SQLite file; TraceError if not."""
    path = Path(path)
    hint = "give the .sqlite written by `nsys export --type sqlite REPORT.nsys-rep`"
    if not path.exists():
        raise TraceError(f"{path}: no such file; {hint}")
    if not path.is_file():
        raise TraceError(f"{path}: not a file; {hint}")
    try:
        with path.open("rb") as f:
            header = f.read(100)
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror}); check its permissions") from None
    if not header.startswith(SQLITE_MAGIC):
        if header.startswith(XZ_MAGIC):
            hint = f"xz-compressed: run `xz -dk {path}` and give the .sqlite"
        elif path.suffix in (".nsys-rep", ".qdrep", ".qdstrm"):
            hint = f"export it first: `nsys export --type sqlite {path}`"
        raise TraceError(f"{path}: not a SQLite file; {hint}")
    if len(header) == 100:
        page_size, n_pages = struct.unpack(">H", header[16:18])[0], header[28:32]
        page_size = 65536 if page_size == 1 else page_size
        expected = page_size * struct.unpack(">I", n_pages)[0]
        if expected and path.stat().st_size < expected:
            raise TraceError(
                f"{path}: truncated SQLite file ({path.stat().st_size} of {expected} bytes); "
                "copy or export it again"
            )
    con = sqlite3.connect(readonly_uri(path), uri=True)
    with _sql_errors(path):
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return con


@dataclass
class Trace:
    """One nsys export, opened read-only; frames are loaded on first use and kept."""

    path: Path
    con: sqlite3.Connection = field(repr=False)
    tables: frozenset[str]
    meta: dict[str, str]
    # the SQLite file read: ``path``, or for an xz-compressed export its decompressed copy (a
    # temporary file deleted with the Trace)
    sqlite_file: Path | None = field(default=None, repr=False)
    # read the graph ops' exec ids with the ops (.opsread.op_queries), so that graph_launches
    # comes from that read (.launches): for analyses that will want the launches
    graph_execs: bool = field(default=False, repr=False)
    # node mode, exec ids read: the graph launches grouped from the ops read (.launches), on a
    # second thread while the ops frame is built (a future of launches_of_ops' rows)
    _ops_launches: Future | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def nsys_version(self) -> str:
        return self.meta.get("EXPORT_PRODUCT_VERSION", "unknown")

    @property
    def schema_version(self) -> str:
        return self.meta.get("EXPORT_SCHEMA_VERSION", "unknown")

    @cached_property
    def time_shift(self) -> int:
        """What ``nsys export --ts-normalize``/``--ts-shift`` added to every time (ns; 0 for
        a plain export), taken off every time read (:meth:`_session_times`)."""
        return export_time_shift(self.meta)

    def _session_times(self, *times: np.ndarray) -> list[np.ndarray]:
        """``times`` (int64 ns arrays, as read) on the session's clock: :attr:`time_shift`
        taken off (:func:`.timeshift.unshift`)."""
        return [unshift(t, self.time_shift) for t in times]

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> set[str]:
        with _sql_errors(self.path):  # (a damaged schema's names may not decode)
            return {r[1] for r in self.con.execute(f"PRAGMA table_info({table})")}

    def query(self, sql: str, params: Iterable = ()) -> list[tuple]:
        with _sql_errors(self.path):
            return self.con.execute(sql, tuple(params)).fetchall()

    @cached_property
    def strings(self) -> dict[int, str]:
        """StringIds, resolved once; every value a string (a damaged export's NULL or blob
        values are made readable: :func:`specscope.analysis.validate.readable_strings`)."""
        if not self.has("StringIds"):
            return {}
        return readable_strings(dict(self.query("SELECT id, value FROM StringIds")))

    def api_pieces(
        self,
        name_ids: Iterable[int] | None = None,
        rows: int | None = CHUNK_ROWS,
        thread: tuple[int, int] | None = None,
    ) -> Iterator[list[np.ndarray]]:
        """The CUDA API calls as arrays (start, end, globalTid, correlation id, name id), of
        :meth:`api_chunks`'s pieces (at least one; none without a RUNTIME table): only those
        whose name id is among ``name_ids`` (StringIds ids, :meth:`api_name_ids`) when given,
        and of ``thread`` (pid, tid) when given. Views where nothing is left out."""
        if not self.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
            return
        if name_ids is not None:
            wanted = np.fromiter(name_ids, dtype=np.int64)
        # (a thread's calls: among its process' stretch where each process' are together)
        own = None if thread is None else self._call_stretch(thread[0])
        first, stop = (0, len(self._runtime[0])) if own is None else (own.start, own.stop)
        step = rows or max(stop - first, 1)
        for lo in range(first, max(stop, first + 1), step):
            piece = [c[lo : min(lo + step, stop)] for c in self._runtime]
            piece[1] = call_ends(piece[0], piece[1])  # (durations read: the ends)
            if thread is not None:  # (first: the names of the thread's calls only)
                mine = (piece[2] & _THREAD_BITS) == (thread[0] << 24 | thread[1])
                if not mine.all():  # (one thread's calls, the usual export: no copy)
                    piece = [c[mine] for c in piece]
            if name_ids is not None:
                named = np.isin(piece[4], wanted)
                if not named.all():
                    piece = [c[named] for c in piece]
            yield piece

    def _process_stretches(self) -> dict[int, slice] | None:
        """:func:`process_stretches` of the CUDA API calls, worked out once for the calls as
        they are (:func:`.validate.clean` may replace them)."""
        gtid = self._runtime[2]
        kept = self.__dict__.get("_call_stretches")
        if kept is None or kept[0] is not gtid:
            kept = (gtid, process_stretches(gtid))
            self.__dict__["_call_stretches"] = kept
        return kept[1]

    def _call_stretch(self, pid: int) -> slice | None:
        """The rows of process ``pid``'s CUDA API calls in :attr:`_runtime` (none where it
        made none), or None where each process' calls are not one stretch."""
        stretches = self._process_stretches()
        return None if stretches is None else stretches.get(pid, slice(0, 0))

    def thread_calls_end(self, pid: int, tid: int) -> int | None:
        """The latest end (ns) of the CUDA API calls of thread (``pid``, ``tid``); None when it
        made none (a pass over the calls' threads and ends: no frame of them)."""
        ends = [p[1].max() for p in self.api_pieces(thread=(pid, tid)) if len(p[1])]
        return int(max(ends)) if ends else None

    @cached_property
    def capture_mode(self) -> CaptureMode:
        """How CUDA graphs were recorded: GRAPH (a row per graph launch in GRAPH_TRACE), NODE
        (kernels or copies with a ``graphNodeId``), NO_GRAPHS, or NO_CUDA (no CUDA table).
        Once the ops are read, :meth:`_mode_of_read` answers the same from them."""
        if (mode := self._mode_before_nodes()) is not None:
            return mode
        for table in _NODE_TABLES:
            if self.has(table) and "graphNodeId" in self.columns(table):
                if self.query(f"SELECT 1 FROM {table} WHERE graphNodeId IS NOT NULL LIMIT 1"):
                    return CaptureMode.NODE
        return CaptureMode.NO_GRAPHS

    def _mode_before_nodes(self) -> CaptureMode | None:
        """NO_CUDA or GRAPH where the tables say so, else None (NODE or NO_GRAPHS)."""
        if not any(self.has(t) for t in _CUDA_TABLES):
            return CaptureMode.NO_CUDA
        if self.has("CUPTI_ACTIVITY_KIND_GRAPH_TRACE") and self.query(
            "SELECT 1 FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE LIMIT 1"
        ):
            return CaptureMode.GRAPH
        return None

    def _mode_of_read(self, flags: np.ndarray) -> CaptureMode:
        """:attr:`capture_mode` from the read ops' packed flags (:func:`_unpack_op_flags`:
        in_graph, ``graphNodeId IS NOT NULL``, and the kind), which hold every row of the node
        tables: without the SQL's search for a node, which reads every row of KERNEL and
        MEMCPY when there is none (an export without graphs: 0.13-0.19 s at 2 M ops). A chunk
        at a time, to the first node (no temporary of every op's)."""
        if (mode := self._mode_before_nodes()) is not None:
            return mode
        node_kinds = [KINDS.index(k) for k in _NODE_KINDS]
        for lo in range(0, len(flags), CHUNK_ROWS):
            chunk = flags[lo : lo + CHUNK_ROWS]
            nodes = chunk[(chunk & _IN_GRAPH_BIT) != 0]
            if len(nodes) and np.isin((nodes >> 12) & 15, node_kinds).any():
                return CaptureMode.NODE
        return CaptureMode.NO_GRAPHS

    @cached_property
    def memcpy_names(self) -> dict[int, str]:
        """copyKind -> memcpy op name as ``nsys stats`` of the export's version names it:
        ``[CUDA memcpy LABEL]`` from the export's ``ENUM_CUDA_MEMCPY_OPER``
        (``[CUDA memcpy Host-to-Device]``), else :data:`LEGACY_MEMCPY_NAMES`
        (``[CUDA memcpy HtoD]``)."""
        if not self.has("ENUM_CUDA_MEMCPY_OPER"):
            return LEGACY_MEMCPY_NAMES
        if not {"id", "label"} <= self.columns("ENUM_CUDA_MEMCPY_OPER"):
            return LEGACY_MEMCPY_NAMES
        rows = self.query("SELECT id, label FROM ENUM_CUDA_MEMCPY_OPER")
        labels = {int(i): f"[CUDA memcpy {as_text(v)}]" for i, v in rows if i is not None and v}
        return {**LEGACY_MEMCPY_NAMES, **labels}

    @cached_property
    def gpu_names(self) -> dict[int, str]:
        """Device id -> GPU name, from TARGET_INFO_GPU (older exports: TARGET_INFO_CUDA_GPU);
        empty when neither table has ``id`` and ``name`` columns."""
        for table in ("TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"):
            if self.has(table) and {"id", "name"} <= self.columns(table):
                rows = self.query(f"SELECT id, name FROM {table}")
                return {i: str(n) for i, n in rows if isinstance(i, int) and n is not None}
        return {}

    # ---------------------------------------------------------------- NVTX
    @cached_property
    def _nvtx_all(self) -> tuple[pd.DataFrame, int]:
        cols = ["start_ns", "end_ns", "name", "domain", "pid", "tid", "event_type"]
        if not self.has("NVTX_EVENTS"):
            return pd.DataFrame(columns=cols), 0
        have = self.columns("NVTX_EVENTS")
        read = opsread.take(self.sqlite_file or self.path, "nvtx")  # read ahead, or now
        if read is None:
            file = self.sqlite_file or self.path
            read = self._read(lambda: read_nvtx(self.con, self._columnar, nvtx_sql(have), file))
        start, end, is_open, code, gtid, domain_id, etype, has_text, rowid = read
        start, end = self._session_times(start, end)
        progress.report("NVTX ranges", 1, 1)
        # Names are codes: StringIds ids, or -2 - i for the i-th distinct explicit ``text``.
        text = nvtx_text(have)
        rows = self.query(
            f"SELECT rowid, {text} FROM NVTX_EVENTS WHERE {text} IS NOT NULL AND {NVTX_TYPES}"
        )
        texts = {r: as_text(v) for r, v in rows}  # a damaged export's blob as text too
        distinct = sorted(set(texts.values()))
        if distinct:
            text_code = {t: -2 - i for i, t in enumerate(distinct)}
            idx = np.flatnonzero(has_text)
            code[idx] = [text_code[texts[int(r)]] for r in rowid[idx]]
        strings = self.strings

        def label(c: int) -> str:
            if c <= -2 and -2 - c < len(distinct):
                return distinct[-2 - c]
            return strings.get(c, "")  # a damaged negative textId: no name

        pid, tid = (gtid >> 24) & _PID_MASK, gtid & _PID_MASK
        is_domain = etype == NVTX_DOMAIN_CREATE
        domains = {
            (int(pid[i]) << 32) | int(domain_id[i]): label(int(code[i]))
            for i in np.flatnonzero(is_domain)
        }
        is_range = ~is_domain
        closed = is_range & (is_open == 0)
        unclosed = int(is_range.sum() - closed.sum())
        keep = np.flatnonzero(closed)
        domain_key = (pid[keep] << 32) | domain_id[keep]
        out = pd.DataFrame(
            {
                "start_ns": start[keep],
                "end_ns": end[keep],
                "name": _labelled(code[keep], label),
                "domain": _labelled(domain_key, lambda k: domains.get(k, "")),
                # (ids of 24 bits and event types: int32 and int8, 0.9 M events: 13 MB less)
                "pid": pid[keep].astype(np.int32),
                "tid": tid[keep].astype(np.int32),
                "event_type": etype[keep].astype(np.int8),
            }
        )
        return out, unclosed

    @property
    def nvtx(self) -> pd.DataFrame:
        """Closed NVTX ranges (push/pop and start/end)."""
        return self._nvtx_all[0]

    @property
    def unclosed_ranges(self) -> int:
        """Ranges whose end was never recorded (ignored by every analysis)."""
        return self._nvtx_all[1]

    # ---------------------------------------------------------------- CUDA API
    @cached_property
    def api_names(self) -> dict[int, str]:
        """StringIds id -> the CUDA API function it names, without any ``_v…`` or per-thread
        stream suffix (every string, as a call's name id may be any of them)."""
        return {i: _VERSION_SUFFIX.sub("", v) for i, v in self.strings.items()}

    def api_name_ids(self, names: Iterable[str]) -> dict[int, str]:
        """StringIds ids of the CUDA API functions ``names`` (any ``_v…`` suffix)."""
        wanted = set(names)
        return {i: name for i, name in self.api_names.items() if name in wanted}

    def os_calls(self, pid: int, tid: int) -> pd.DataFrame:
        """``name, start_ns, end_ns`` of the OS runtime calls of thread (``pid``, ``tid``) that
        nsys traced (``-t osrt``: the ``OSRT_API`` table; by default only calls of 1 µs or
        more), in start order; zero rows without the table. A small table (thousands of rows):
        read by SQL when asked."""
        cols = ["name", "start_ns", "end_ns"]
        needed = {"start", "end", "globalTid", "nameId"}
        if not self.has("OSRT_API") or not needed <= self.columns("OSRT_API"):
            return pd.DataFrame(columns=cols)
        rows = self.query(  # (a damaged row's time that is no integer: left out)
            "SELECT start, end, nameId FROM OSRT_API"
            f" WHERE globalTid & {_THREAD_BITS} = ? AND typeof(start) = 'integer'"
            " AND typeof(end) = 'integer' AND end >= start ORDER BY start",
            (pid << 24 | tid,),
        )
        start, end = self._session_times(
            *(np.array([r[i] for r in rows], dtype=np.int64) for i in (0, 1))
        )
        strings = self.strings
        names = [strings.get(r[2], f"<string {r[2]}>") for r in rows]
        return pd.DataFrame({"name": names, "start_ns": start, "end_ns": end}, columns=cols)

    def api(self, names: Iterable[str] | None = None) -> pd.DataFrame:
        """CUDA API calls (runtime and driver), only ``names`` when given."""
        return next(self.api_chunks(names, rows=None))

    def api_chunks(
        self,
        names: Iterable[str] | None = None,
        rows: int | None = CHUNK_ROWS,
        thread: tuple[int, int] | None = None,
    ) -> Iterator[pd.DataFrame]:
        """:meth:`api` in pieces: the calls among each ``rows`` rows of the table in turn (at
        least one piece; ``rows`` None: one), so that a pass over millions of calls holds no
        frame of them all (20 M GPU ops came with 4 M calls: 0.2 GB). ``thread``: only the
        calls of this (pid, tid) (one rank's of an export of several: no frame of the
        others')."""
        cols = _API_COLUMNS
        if not self.has("CUPTI_ACTIVITY_KIND_RUNTIME"):  # zero calls, with the usual dtypes
            empty = np.zeros(0, dtype=np.int64)
            name = pd.Categorical([], categories=pd.Index([], dtype=object))
            yield pd.DataFrame(dict.fromkeys(cols[:-1], empty) | {"name": name}, columns=cols)
            return
        if names is None:
            ids = self.api_names
        else:
            ids = self.api_name_ids(names)
        for piece in self.api_pieces(None if names is None else list(ids), rows, thread):
            yield _api_frame(piece, ids)

    def thread_api(self, pid: int, tid: int, keep) -> pd.DataFrame:
        """:meth:`api` of thread (``pid``, ``tid``), only the calls ``keep(start, end,
        correlation id)`` (arrays of a piece of the calls) marks True: the rows of the frame
        :meth:`api` gives, in its order, without a frame (and names) of every call first (an
        eager export's timeline wants a step's few of its 4 M calls)."""
        if not self.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
            return next(self.api_chunks(rows=None))
        kept = []
        for piece in self.api_pieces(thread=(pid, tid)):  # (one at least)
            mask = keep(piece[0], piece[1], piece[3])
            kept.append([c[mask] for c in piece])
        return _api_frame([np.concatenate([p[k] for p in kept]) for k in range(5)], self.api_names)

    @cached_property
    def _runtime(self) -> list[np.ndarray]:
        """start, end, globalTid, correlationId, nameId of every CUDA API call (one scan; read
        ahead by :func:`.opsread.prefetch` where it was), each process' calls together
        (:func:`calls_by_process`). The ends may be each call's duration
        (uint32: :data:`.sqlread.DURATION32`): :func:`.sqlread.call_ends` gives them as ends,
        as :meth:`api_pieces` does."""
        read = opsread.take(self.sqlite_file or self.path, "runtime")
        if read is None:
            sql = runtime_sql(self.columns(RUNTIME))
            file = self.sqlite_file or self.path
            read = self._read(lambda: read_runtime(self.con, self._columnar, sql, file))
        if read[1].dtype == np.uint32:  # durations: the same on any clock
            calls = [*self._session_times(read[0]), *read[1:]]
        else:
            calls = [*self._session_times(read[0], read[1]), *read[2:]]
        stretches = process_stretches(calls[2])
        if stretches is None:  # (several processes' calls interleaved: each one's together)
            calls = calls_by_process(calls)
            stretches = process_stretches(calls[2])
        self.__dict__["_call_stretches"] = (calls[2], stretches)  # (:meth:`_process_stretches`)
        return calls

    @cached_property
    def _calls_in_id_order(self) -> bool:
        """Whether the CUDA API calls are one process' with their correlation ids increasing
        (:func:`_in_id_order`), worked out once for every lookup of their launch calls (the
        ops' and the graph launches' or a step marker's: one pass over the ids, not one each)."""
        _, _, gtid, corr, _ = self._runtime
        stretches = self._process_stretches()  # (several processes' calls: not one's)
        if stretches is not None and len(stretches) > 1:
            return False
        return _in_id_order(_call_pids(gtid), corr)

    @cached_property
    def _columnar(self):
        return columnar_connection(self.sqlite_file or self.path)

    def int_columns(self, sql: str, ncols: int) -> list[np.ndarray]:
        """The integer columns of ``sql`` as int64 arrays (see :mod:`.sqlread`)."""
        return self._read(lambda: int_columns(self.con, self._columnar, sql, ncols))

    def _read(self, read):
        with _sql_errors(self.path):
            try:
                return read()
            except sqlite3.DatabaseError:
                raise
            except Exception as e:  # ADBC reports SQLite errors with its own classes
                raise sqlite3.DatabaseError(str(e).splitlines()[0]) from None

    @cached_property
    def ops(self) -> pd.DataFrame:
        """Every GPU operation, with the start and thread of the API call that launched it."""
        columns, execs = self._read_ops()
        columns[0], columns[1] = self._session_times(columns[0], columns[1])
        if "capture_mode" not in self.__dict__:  # (the cached property, from this read)
            self.__dict__["capture_mode"] = self._mode_of_read(columns[8])
        execs = exec_ids(columns[8]) if execs and self.capture_mode is CaptureMode.NODE else None
        # the names' categoricals on a second thread (large exports: .parallel) while the flags
        # are unpacked here; each read column that is only an input is dropped once used (20 M
        # ops: 80 MB each), the names' before the launch matching allocates
        labels = (self.strings, self.memcpy_names)  # (cached here, not on the thread)
        columns[4] = narrow_ids(columns[4])  # stream ids: int16 where every id fits
        ids = [columns[5], columns[6]]  # (emptied by _names as it goes: each freed when done)
        columns[5] = columns[6] = None
        named = beside(len(columns[0]), _names, ids, *labels)
        del ids
        copy, in_graph, kind = _unpack_op_flags(columns[8])
        columns[8] = None
        # (device and pid one value, correlation ids and bytes int32, as the read left them)
        start, end, corr, device, stream, pid, nbytes = (columns[i] for i in (0, 1, 2, 3, 4, 7, 9))
        del columns
        names = named.result()
        del named
        # (the categories kept, the categoricals not: by_device gives up the codes it moves)
        categories = {name: values.categories for name, values in names.items()}
        names = {name: values.codes for name, values in names.items()}
        grouped = in_device_order(device)  # (else each device's rows are put together below)
        if execs is not None and grouped:  # graph launches from this read, beside the matching
            group = (start, end, corr, device, pid, kind, in_graph, execs)
            self._ops_launches = beside(len(start), launches_of_ops, *group)
            del execs, group
        # codes of COPY_KINDS; -1 (missing) for everything that is not a memcpy (int8 all along:
        # no temporary of 8 bytes per op)
        copy_code = _COPY_CODE[copy.view(np.uint8)]
        copy_code[kind != KINDS.index("memcpy")] = -1
        del copy
        give_back(len(start))  # the read's freed chunks
        columns = {
            "start_ns": start,
            "end_ns": end,
            "device_id": device,
            "stream_id": stream,
            "pid": pid,
            "correlation_id": corr,
            **names,
            "kind": kind,
            "in_graph": in_graph,
            "copy_kind": copy_code,
            "bytes": nbytes,
        }
        del start, end, device, stream, pid, corr, kind, in_graph, copy_code, nbytes, names
        if not grouped:
            if execs is not None:
                columns["exec"] = execs
                del execs
            columns["bytes"] = FewRows.of(columns["bytes"])  # (the read's column given up)
            columns = by_device(columns)
            columns["bytes"] = columns["bytes"].dense()
            if "exec" in columns:  # the launches from the rows of each device together: the
                # nodes of a launch in a run again, as in a process' own rows (interleaved
                # processes broke them into runs of one: a sort of every graph op)
                group = [columns[c] for c in ("start_ns", "end_ns", "correlation_id")]
                group += [columns[c] for c in ("device_id", "pid", "kind", "in_graph")]
                group.append(columns.pop("exec"))
                self._ops_launches = beside(len(group[0]), launches_of_ops, *group)
                del group
        # bytes: of copies and memsets only (a few % of the ops of a step): sparse, 8 bytes per
        # copy instead of 4 per op (20 M ops: 76 MB less)
        columns["bytes"] = pd.arrays.SparseArray(columns["bytes"], fill_value=0)
        categories |= {"kind": KINDS, "copy_kind": COPY_KINDS}
        for name, labels in categories.items():
            codes = columns[name]
            columns[name] = pd.Categorical.from_codes(codes, pd.Index(labels, dtype=object))
        # (fresh arrays: no copy, no consolidation into 2-D blocks)
        return pd.DataFrame(columns, copy=False)

    def _read_ops(self) -> tuple[list[np.ndarray], bool]:
        """The columns of :func:`.opsread.read_ops` and whether they carry exec ids: prefetched
        (:func:`.opsread.take`) or read now (exec ids as :attr:`graph_execs` says), the CUDA
        API calls (`_runtime`) beside them on one more thread when a page scan or the ADBC
        connection reads them (not the sqlite3 module, whose connection stays in its thread:
        a scan that falls back to it fails there, and `_runtime` is read again here)."""
        file = self.sqlite_file or self.path
        if (ahead := opsread.take(file, "ops")) is not None:
            return ahead
        threads, runtime = read_threads(), None
        if self.has(RUNTIME) and "_runtime" not in self.__dict__:
            if threads > 1 and (opsscan.wanted() or self._columnar is not None):
                runtime = ThreadPoolExecutor(1)
                runtime.submit(lambda: self._runtime)
        try:
            execs = self.graph_execs
            return self._read(lambda: read_ops(self.con, file, self.tables, threads, execs)), execs
        finally:
            if runtime is not None:
                runtime.shutdown()  # waits; a failure is raised again by _launches

    def launches(
        self, pid: np.ndarray, corr: np.ndarray, rows=None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Start (ns, float; NaN if none) and thread (int32; -1) of the CUDA API call of each
        (pid, correlation id): the call that launched a GPU operation (module doc). ``rows``:
        :meth:`launch_rows`, built once for many chunks of operations; without it, a few pairs
        (under 1/16 of the calls) are found without a table of every call."""
        start = np.full(len(pid), np.nan)
        tid = np.full(len(pid), -1, dtype=np.int32)  # tids are 24-bit
        if not self.has("CUPTI_ACTIVITY_KIND_RUNTIME") or not len(pid):
            return start, tid
        a_start, _, a_gtid, a_corr, _ = self._runtime
        if rows is None and len(pid) * _FEW_CALLS < len(a_corr):  # (a step's, say)
            row = self._few_call_rows(pid, corr)
            hit = row >= 0
            start[hit], tid[hit] = a_start[row[hit]], a_gtid[row[hit]] & _PID_MASK
            return start, tid
        rows = self.launch_rows() if rows is None else rows
        if isinstance(rows, IdTables):  # (one C loop: opsums.py; what follows, the reference)
            if opsums.launch_lookup(pid, corr, rows, a_start, a_gtid, start, tid):
                return start, tid
        if isinstance(rows, SortedIds):  # (the same, an eager export's sparse ids)
            if opsums.sorted_lookup(pid, corr, rows, a_start, a_gtid, start, tid):
                return start, tid
        for lo in range(0, len(pid), CHUNK_ROWS):  # small temporaries, reused chunk to chunk
            chunk = slice(lo, lo + CHUNK_ROWS)
            row = rows(pid[chunk], corr[chunk])
            hit = row >= 0
            row = row[hit]
            start[chunk][hit] = a_start[row]
            tid[chunk][hit] = a_gtid[row] & _PID_MASK
        return start, tid

    def launches_in_chunks(
        self, pid: np.ndarray, corr: np.ndarray, rows: np.ndarray | None = None
    ) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """:meth:`launches` of the pairs (``pid``, ``corr``), or of those at ``rows``,
        :data:`CHUNK_ROWS` pairs at a time with one lookup (:meth:`launch_rows`) for all:
        (the chunk's first position, start, thread) per chunk; none without CUDA API calls.
        Where every operation's call is wanted (operations carry no launch times: module doc),
        in bounded temporaries."""
        lookup = self.launch_rows()
        n = len(pid) if rows is None else len(rows)
        for lo in range(0, n if lookup is not None else 0, CHUNK_ROWS):
            at = slice(lo, lo + CHUNK_ROWS) if rows is None else rows[lo : lo + CHUNK_ROWS]
            yield (lo, *self.launches(pid[at], corr[at], lookup))

    def launch_rows(self):
        """The lookup of :meth:`launches`: ``rows(pid, corr)``, the row of each pair's CUDA API
        call, or None without API calls. One process' calls in id order (as nsys writes them):
        a search among the ids as they are (:class:`SortedIds`, in C from the last one's
        place), no table of every id (:func:`_call_rows` builds one for dense ids: 80 MB of
        temporaries at 4 M calls, for a lookup 20 % faster); else :func:`_call_rows`, whose
        tables (:class:`IdTables`: several processes' dense ids) are kept for the next."""
        if not self.has("CUPTI_ACTIVITY_KIND_RUNTIME"):
            return None
        _, _, a_gtid, a_corr, _ = self._runtime
        if self._calls_in_id_order:
            return SortedIds(int(_call_pids(a_gtid)[0]), a_corr)
        kept = self.__dict__.get("_launch_tables")  # (each process' analysis asks again)
        if kept is not None and kept[0] is a_corr:
            return kept[1]
        rows = _call_rows(_call_pids(a_gtid), a_corr, False, self._process_stretches())
        if isinstance(rows, IdTables):  # (a table of the ids' span: kept; a sort is not)
            self.__dict__["_launch_tables"] = (a_corr, rows)
        return rows

    def _few_call_rows(self, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """:func:`_rows_of_few` of the calls: among the calls of the pairs' process alone
        where they are all of one whose calls are one stretch (:meth:`_call_stretch`: one
        rank's step marker, say, in an export of several), else among every call."""
        _, _, a_gtid, a_corr, _ = self._runtime
        own = self._call_stretch(int(pid[0])) if one_valued(pid) else None
        if own is None or own == slice(0, len(a_corr)):
            return _rows_of_few(a_gtid, a_corr, pid, corr, self._calls_in_id_order)
        row = _rows_of_few(a_gtid[own], a_corr[own], pid, corr)
        row[row >= 0] += own.start
        return row

    # ---------------------------------------------------------------- CUDA graphs
    def launch_calls(
        self, pid: np.ndarray, corr: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Start and end (ns; NaN if none) and thread (-1) of the CUDA API call of each
        (pid, correlation id)."""
        start, end = np.full(len(pid), np.nan), np.full(len(pid), np.nan)
        tid = np.full(len(pid), -1, dtype=np.int64)
        if not self.has("CUPTI_ACTIVITY_KIND_RUNTIME") or not len(pid):
            return start, end, tid
        a_start, a_end, a_gtid, a_corr, _ = self._runtime
        if len(pid) * _FEW_CALLS < len(a_corr):  # (a step marker's launches, say)
            row = self._few_call_rows(pid, corr)
        else:
            row = _call_rows(_call_pids(a_gtid), a_corr, self._calls_in_id_order)(pid, corr)
        hit = row >= 0
        start[hit], end[hit] = a_start[row[hit]], call_ends(a_start, a_end, row[hit])
        tid[hit] = a_gtid[row[hit]] & _PID_MASK
        return start, end, tid

    @cached_property
    def graph_launches(self) -> pd.DataFrame:
        """One row per CUDA graph launch that ran on a GPU (no graphs: zero rows).

        Columns ``pid, tid, correlation_id, device_id, start_ns, end_ns`` (GPU side: the replay
        in graph mode; first start / last end of its nodes in node mode), ``api_start_ns,
        api_end_ns`` (the launching call, ``tid`` its thread), ``graph_id, exec_id`` and
        ``kernels`` (kernel nodes per launch; -1 in graph mode, where they are invisible).

        ``graph_id`` is the export's ``graphId`` in graph mode. In node mode a kernel's
        ``graphNodeId`` is ``exec_id << 32 | node``: the executable graph's id in the high
        half; its nodes' creation events (``CUDA_GRAPH_NODE_EVENTS``, or the 2023 schema's
        ``CUDA_GRAPH_EVENTS`` with node columns) hold ``originalGraphNodeId``, whose high half
        is the graph it was instantiated from. That graph is the ``graph_id`` (the same
        number graph mode reports for a run of the same program: ids count up per process in
        creation order); the exec id where no creation event is kept.
        """
        graph_table = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
        if self.capture_mode is CaptureMode.GRAPH:
            exec_id = "graphExecId" if "graphExecId" in self.columns(graph_table) else "-1"
            cols = self.int_columns(
                adapt(
                    f"SELECT start, end, coalesce(deviceId, 0), coalesce(globalPid, 0),"
                    f" coalesce(correlationId, 0), graphId, coalesce({exec_id}, -1), -1"
                    f" FROM {graph_table}",
                    self.columns(graph_table),
                ),
                8,
            )
            cols[0], cols[1] = self._session_times(cols[0], cols[1])
        elif self.capture_mode is CaptureMode.NODE:
            cols = self._launches_from_ops() or self._node_launches()
        else:
            cols = [np.zeros(0, dtype=np.int64)] * 8
        start, end, device, gpid, corr, graph_id, exec_id, kernels = cols
        pid = (gpid >> 24) & _PID_MASK
        if self.capture_mode is CaptureMode.NODE:
            graph_id = _mapped(self._graph_origins(), pid, exec_id)
        api_start, api_end, tid = self.launch_calls(pid, corr)
        return pd.DataFrame(
            {
                "pid": pid,
                "tid": tid,
                "correlation_id": corr,
                "device_id": device,
                "start_ns": start,
                "end_ns": end,
                "api_start_ns": api_start,
                "api_end_ns": api_end,
                "graph_id": graph_id,
                "exec_id": exec_id,
                "kernels": kernels,
            }
        )

    def _launches_from_ops(self) -> list[np.ndarray] | None:
        """Node mode: the rows of :meth:`_node_launches` grouped from the GPU operations'
        read (:func:`.launches.launches_of_ops`) when the operations are read or being read
        anyway (not worth a read of every operation otherwise); None where they are not, were
        read without exec ids (:attr:`graph_execs`), or an exec id did not fit the read. Grouped
        from every operation read, before validation drops any: the rows SQL's gives."""
        if "ops" not in self.__dict__ and not opsread.pending(self.sqlite_file or self.path):
            return None
        self.ops  # noqa: B018  (reads them, and starts the grouping)
        return None if self._ops_launches is None else self._ops_launches.result()

    def _node_launches(self) -> list[np.ndarray]:
        """Node mode: the graph rows of kernels, memcpys and memsets grouped by launch (gpid,
        corr, exec) as one ``GROUP BY`` over all of them gives, in key order: start (min), end
        (max), device (min), gpid, corr, -1, exec, kernels (count); times taken back
        (:mod:`.timeshift`).

        Each table (the KERNEL table in rowid ranges) is grouped by its own query, on parallel
        threads, and groups split between queries are merged here
        (:func:`.launches.group_launches`): SQLite's sort for the ``GROUP BY`` costs more than
        the scan, and sorts on one core. :meth:`_launches_from_ops` avoids it where it can."""
        threads, parts = read_threads(), []
        for table in _CUDA_TABLES[1:4]:
            if self.has(table) and "graphNodeId" in self.columns(table):
                is_kernel = int(table.endswith("KERNEL"))
                select = adapt(
                    f"SELECT min(start), max(end), min(coalesce(deviceId, 0)),"
                    f" coalesce(globalPid, 0) AS gpid, coalesce(correlationId, 0) AS corr,"
                    f" graphNodeId >> 32 AS exec, sum({is_kernel}) FROM {table}",
                    self.columns(table),
                )
                with _sql_errors(self.path):
                    ranges = rowid_ranges(self.con, table, 2 * threads if is_kernel else 1)
                parts += [
                    (f"{select}{where or ' WHERE 1'} AND graphNodeId IS NOT NULL"
                     " GROUP BY gpid, corr, exec", bound)
                    for where, bound in ranges
                ]  # fmt: skip
        file = self.sqlite_file or self.path
        cols = self._read(
            lambda: int_columns_many(
                self.con, lambda: columnar_connection(file), parts, 7, threads=threads
            )
        )
        start, end, *rest = group_launches(*cols)
        return [*self._session_times(start, end), *rest]

    def _graph_event_tables(self) -> tuple[str | None, str | None]:
        """(graph events table, node events table), picked by column: 2023 exports keep node
        events in ``CUDA_GRAPH_EVENTS``, 2025 ones in ``CUDA_GRAPH_NODE_EVENTS``. A table
        without the columns read from it is left out (graph ids and capture order are extras:
        without them, node-mode ids are the executables' and roles follow launch order)."""
        graphs = nodes = None
        for table in ("CUDA_GRAPH_EVENTS", "CUDA_GRAPH_NODE_EVENTS"):
            if not self.has(table):
                continue
            have = self.columns(table)
            if not {"start", "globalTid"} <= have:
                continue
            if "graphId" in have:
                graphs = table
            if {"originalGraphNodeId", "graphNodeId"} <= have:
                nodes = table
        return graphs, nodes

    def _graph_origins(self) -> dict[tuple[int, int], int]:
        """(pid, exec id) -> the graph it was instantiated from (node-mode ``graph_id``)."""
        nodes = self._graph_event_tables()[1]
        if nodes is None:
            return {}
        rows = self.query(
            f"SELECT (coalesce(globalTid, 0) >> 24) & {_PID_MASK}, graphNodeId >> 32,"
            f" originalGraphNodeId >> 32, count(*) AS n FROM {nodes}"
            " WHERE originalGraphNodeId IS NOT NULL GROUP BY 1, 2, 3 ORDER BY n"
        )
        return {(int(p), int(e)): int(g) for p, e, g, _ in rows}  # most nodes win (last)

    @cached_property
    def graph_creations(self) -> pd.DataFrame:
        """``pid, graph_id, created_ns``: when each CUDA graph was created (its first creation
        event, or its first node's; exports keep them even outside the capture range, so
        times may be negative). Zero rows without graph events."""
        graphs, nodes = self._graph_event_tables()
        selects = []
        pid = f"(coalesce(globalTid, 0) >> 24) & {_PID_MASK}"
        if graphs is not None:
            selects.append(
                f"SELECT {pid} AS p, graphId AS g, start AS t FROM {graphs} WHERE graphId NOT NULL"
            )
        if nodes is not None:
            selects.append(f"SELECT {pid} AS p, graphNodeId >> 32 AS g, start AS t FROM {nodes}")
        rows = []
        if selects:
            rows = self.query(
                f"SELECT p, g, min(t) FROM ({' UNION ALL '.join(selects)}) GROUP BY p, g"
            )
        out = pd.DataFrame(rows, columns=["pid", "graph_id", "created_ns"], dtype="int64")
        out["created_ns"] = self._session_times(out["created_ns"].to_numpy())[0]
        return out


def _mapped(table: dict[tuple[int, int], int], pid: np.ndarray, key: np.ndarray) -> np.ndarray:
    """``table.get((pid, key), key)`` for each pair, as int64, without a Python step per pair
    (20 M ops: 340 k graph launches): one binary search per process of ``table``."""
    out = np.asarray(key, dtype=np.int64).copy()
    if not table or not len(out):
        return out
    pairs = np.array(list(table), dtype=np.int64).reshape(-1, 2)
    values = np.fromiter(table.values(), dtype=np.int64, count=len(table))
    pid = np.asarray(pid, dtype=np.int64)
    for p in np.unique(pairs[:, 0]):
        mine = pairs[:, 0] == p
        order = np.argsort(pairs[mine, 1])
        keys, vals = pairs[mine, 1][order], values[mine][order]
        rows = np.flatnonzero(pid == p)
        j = np.minimum(np.searchsorted(keys, out[rows]), len(keys) - 1)
        hit = keys[j] == out[rows]
        out[rows[hit]] = vals[j[hit]]
    return out


_FEW_CALLS = 16
"""Launch calls looked up for fewer than 1/16 of the calls are found by :func:`_rows_of_few`."""


def _rows_of_few(
    a_gtid: np.ndarray,
    a_corr: np.ndarray,
    pid: np.ndarray,
    corr: np.ndarray,
    in_id_order: bool | None = None,
) -> np.ndarray:
    """:func:`_call_rows` ``(pid(a_gtid), a_corr)(pid, corr)`` for a few pairs: the calls
    whose correlation id is one asked for, found in one pass (``np.isin``), then the pairs
    among those; a search each where one process' ids are in order (``in_id_order``:
    :func:`_in_id_order`, worked out when None). No table or sort of every call (an eager
    export's step marker: 11 k of its 4 M calls). The same rows: every call of an asked pair
    is among those, in their order."""
    a_pid = _call_pids(a_gtid)
    if _in_id_order(a_pid, a_corr) if in_id_order is None else in_id_order:  # (a search each)
        return SortedIds(int(a_pid[0]), a_corr)(pid, corr)
    found = np.flatnonzero(np.isin(a_corr, corr[corr > 0]))
    rows = _call_rows(a_pid[found], a_corr[found])(pid, corr)
    hit = rows >= 0
    rows[hit] = found[rows[hit]]
    return rows


def _call_rows(
    a_pid: np.ndarray,
    a_corr: np.ndarray,
    in_id_order: bool | None = None,
    stretches: dict[int, slice] | None = None,
):
    """Return ``rows(pid, corr)``: for each (pid, corr > 0), the first row of the API calls
    (a_pid, a_corr) with the same pair, -1 if none. Pairs are compared as ``pid << 38 | corr``.
    ``in_id_order``: :func:`_in_id_order` of the calls, worked out when None; ``stretches``:
    each process' rows where its calls are one stretch (:func:`process_stretches`).

    Each process' correlation ids dense and none twice: a table indexed by process and id, one
    stretch per process, no sort, no search (:func:`_id_tables`). One process' ids in order but
    sparse (an eager PyTorch export): a search among them as they are
    (:class:`SortedIds`). Else the pairs are searched among the calls sorted by pair (by
    process alone where that sorts them: :func:`_key_order`)."""
    if not len(a_pid):
        return lambda pid, corr: np.full(len(pid), -1, dtype=np.int64)
    by_table = _id_tables(a_pid, a_corr, stretches=stretches)
    if by_table is not None:
        return by_table
    if _in_id_order(a_pid, a_corr) if in_id_order is None else in_id_order:
        return SortedIds(int(a_pid[0]), a_corr)
    a_keys = (a_pid << _CORR_BITS) | a_corr
    order = _key_order(a_pid, a_keys)
    sorted_keys = a_keys if order is None else a_keys[order]

    def by_search(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        keys = (pid.astype(np.int64) << _CORR_BITS) | corr
        i = np.clip(np.searchsorted(sorted_keys, keys), 0, len(sorted_keys) - 1)
        hit = (corr > 0) & (sorted_keys[i] == keys)
        return np.where(hit, i if order is None else order[i], -1)

    return by_search


def _call_pids(a_gtid: np.ndarray) -> np.ndarray:
    """The process of each CUDA API call, from its globalTid; one element repeated (a view)
    where the calls are all of one thread (:func:`.memory.one_value_view`: a shift of the
    view would make an array of every call's, 8 bytes each)."""
    if a_gtid.strides == (0,) and len(a_gtid):
        return np.broadcast_to((a_gtid[:1] >> 24) & _PID_MASK, a_gtid.shape)
    pids = a_gtid >> 24
    pids &= _PID_MASK  # (in place: one array of every call's, not two)
    return pids


def calls_by_process(calls: list[np.ndarray]) -> list[np.ndarray]:
    """The CUDA API calls (the columns of :attr:`Trace._runtime`) with each process' calls
    together, the processes in pid order, each one's calls in the order they had (a stable
    sort by process); as they are where one process made them all, where each one's come
    together already, or where more than 64 processes made them.

    An export of tensor-parallel ranks holds their calls interleaved in time. Each rank's
    analysis reads its own process' calls several times (its API call counts, its thread's
    last call, the calls of its steps' views): a mask of every call, then a copy of its
    own, each time (4 ranks of 2 M GPU operations: 0.1 s of 1.3 s of analyses). Grouped,
    they are one stretch of the columns (:func:`process_stretches`), read in place; the
    reordering is :func:`grouped_rows`, one pass per column."""
    gtid = calls[2]
    if process_stretches(gtid) is not None:  # (one process, or each one's together already)
        return calls
    pids = _call_pids(gtid)
    lo, hi = int(pids.min()), int(pids.max())
    if hi - lo < 1 << 16:  # (pids near one another, as a server's ranks are: counted, and
        pids -= lo  # each one's place looked up in a table of their range: no sort, and no
        present = np.flatnonzero(np.bincount(pids))  # temporary of every call's but these)
        if not 1 < len(present) <= 64:
            return calls
        place = np.zeros(hi - lo + 1, dtype=np.uint8)
        place[present] = np.arange(len(present), dtype=np.uint8)
        index = place[pids]
    else:
        found = sorted(few_distinct(pids, 64) or [])
        if not 1 < len(found) <= 64:
            return calls
        index = np.searchsorted(np.array(found, dtype=pids.dtype), pids).astype(np.uint8)
    del pids
    grouped = grouped_rows({"process": index} | {str(k): c for k, c in enumerate(calls)}, "process")
    return [grouped[str(k)] for k in range(len(calls))]


_MOST_RUNS = 4096
"""More runs of one process' calls than this: :func:`process_stretches` looks no further."""


def process_stretches(gtid: np.ndarray) -> dict[int, slice] | None:
    """The rows of each process' CUDA API calls where each one's are together
    (:func:`calls_by_process`; one process: all of them), from the calls' globalTids
    ``gtid``; None where a process' calls are not one stretch. A chunk at a time (no array
    of every call's process: 320 MB at 40 M calls)."""
    n = len(gtid)
    if n == 0:
        return {}
    if gtid.strides == (0,):
        return {(int(gtid[0]) >> 24) & _PID_MASK: slice(0, n)}
    runs: list[list[int]] = []  # [pid, first row] of each run of one process' calls
    for lo in range(0, n, CHUNK_ROWS):
        pid = _call_pids(gtid[lo : lo + CHUNK_ROWS])
        if not runs or int(pid[0]) != runs[-1][0]:
            runs.append([int(pid[0]), lo])
        breaks = np.flatnonzero(pid[1:] != pid[:-1]) + 1
        if len(runs) + len(breaks) > _MOST_RUNS:
            return None  # (interleaved: no pass per run)
        runs += [[int(pid[at]), lo + at] for at in breaks.tolist()]
    if len({pid for pid, _ in runs}) < len(runs):
        return None  # (a process' calls in several runs: not grouped)
    ends = [first for _, first in runs[1:]] + [n]
    return {pid: slice(first, end) for (pid, first), end in zip(runs, ends, strict=True)}


def _in_id_order(a_pid: np.ndarray, a_corr: np.ndarray) -> bool:
    """Whether the calls are of one process, their correlation ids increasing (as nsys writes
    one process' calls): each id once, looked up as they are (:class:`SortedIds`)."""
    return bool(len(a_pid)) and one_valued(a_pid) and increasing(a_corr)


@dataclass(frozen=True, eq=False)
class SortedIds:
    """:func:`_call_rows`'s lookup where every call is of process ``pid`` and their correlation
    ``ids`` increase (as nsys writes one process' calls), but sparsely (CUPTI gives ids to the
    driver calls it does not record: 6.5 ids per recorded call in an eager PyTorch export): a
    search among the ids as they are, without sorting them. Called as ``rows(pid, corr)`` (a
    search per pair, the reference); :func:`.opsums.sorted_lookup` finds each id from the
    last one's place in C."""

    pid: int
    ids: np.ndarray

    def __call__(self, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        a_corr = self.ids
        i = np.minimum(np.searchsorted(a_corr, corr), len(a_corr) - 1)
        hit = (corr > 0) & (pid == self.pid) & (a_corr[i] == corr)
        return np.where(hit, i, -1)


def _key_order(a_pid: np.ndarray, a_keys: np.ndarray) -> np.ndarray | None:
    """The stable order of the calls by key (``pid << 38 | corr``): None where they are in it
    already; by process alone where that sorts them (a few processes' calls interleaved, each
    in id order: a radix sort of their process' index), else by key."""
    if increasing(a_keys):
        return None
    pids = few_distinct(a_pid)
    if pids is not None:
        index = np.zeros(len(a_pid), dtype=np.uint8)  # each call's process, by pid order
        for k, p in enumerate(sorted(pids)):
            index[a_pid == p] = k
        order = np.argsort(index, kind="stable")
        if increasing(a_keys[order]):
            return order
    return np.argsort(a_keys, kind="stable")


def _id_tables(
    a_pid: np.ndarray,
    a_corr: np.ndarray,
    most: int = 64,
    stretches: dict[int, slice] | None = None,
):
    """:func:`_call_rows`'s lookup by tables: per process (up to ``most``), the call rows
    indexed by correlation id from its lowest, one stretch of a table after another; None where
    a process' ids are not dense (:func:`.memory.dense`), out of range, or one is there twice.
    One process (the usual export) looks up without a search for its stretch; several (the
    ranks of a tensor-parallel server) find it by a search among their few pids.
    ``stretches``: each process' rows where its calls are one stretch
    (:func:`process_stretches`), found without a pass per process."""
    if stretches is not None:
        pids = list(stretches)
    else:
        pids = [int(a_pid[0])] if one_valued(a_pid) else few_distinct(a_pid, most)
    if not pids or not (0 <= int(a_corr.min()) and int(a_corr.max()) < 2**_CORR_BITS):
        return None
    pids = np.sort(np.array(pids, dtype=np.int64))
    row_type = np.int32 if len(a_corr) < np.iinfo(np.int32).max else np.int64  # (half the
    # table: its pages are written once, then read at random)
    lows, spans, rows = [], [], []
    for p in pids:
        # (one process: every call, no copy of their ids, and its rows made only once the ids
        # are found dense: sparse ones, an eager export's, need no row of each call)
        if stretches is not None:
            mine = stretches[int(p)]
        else:
            mine = None if len(pids) == 1 else np.flatnonzero(a_pid == p)
        ids = a_corr if mine is None else a_corr[mine]
        lo, hi = int(ids.min()), int(ids.max())
        if not dense(hi - lo + 1, len(ids)):
            return None
        lows.append(lo)
        spans.append(hi - lo + 1)
        rows.append((mine, ids))
    bases = np.concatenate([[0], np.cumsum(spans)[:-1]]).astype(np.int64)
    table = np.full(int(sum(spans)), -1, dtype=row_type)
    for base, lo, (mine, ids) in zip(bases, lows, rows, strict=True):
        if mine is None:
            mine = np.arange(len(a_corr), dtype=row_type)
        elif isinstance(mine, slice):
            mine = np.arange(mine.start, mine.stop, dtype=row_type)
        table[np.subtract(ids, lo - int(base), dtype=np.int64)] = mine
    if np.count_nonzero(table >= 0) != len(a_corr):  # an id twice: not exact
        return None
    return IdTables(pids, np.array(lows, dtype=np.int64), np.array(spans, dtype=np.int64),
                    bases, table)  # fmt: skip


@dataclass(frozen=True, eq=False)
class IdTables:
    """:func:`_id_tables`' lookup: per process (``pids``, sorted) a stretch of ``table`` from
    ``bases[k]`` holding the call row of each correlation id from ``lows[k]`` on (``spans[k]``
    ids; -1: no call). Called as ``rows(pid, corr)``; :func:`.opsums.launch_lookup` reads the
    same tables in C."""

    pids: np.ndarray
    lows: np.ndarray
    spans: np.ndarray
    bases: np.ndarray
    table: np.ndarray

    def __call__(self, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        pids = self.pids
        if len(pids) == 1:  # (one process: its stretch without a search)
            k, known = 0, pid == pids[0]
        else:
            k = np.minimum(np.searchsorted(pids, pid), len(pids) - 1)
            known = pids[k] == pid
        offset = corr - self.lows[k]
        ok = known & (offset >= 0) & (offset < self.spans[k]) & (corr > 0)
        offset += self.bases[k]
        offset[~ok] = 0
        row = self.table[offset]
        row[~ok] = -1
        return row


_THREAD_BITS = (_PID_MASK << 24) | _PID_MASK  # the pid and tid of a globalTid
_CORR_BITS = 38  # (pid, correlation id) pairs are matched as pid << 38 | correlationId
# code in COPY_KINDS of each copyKind byte: 1 htod, 2 dtoh, 8 dtod, 11-13 unified, else other
_COPY_CODE = np.full(256, COPY_KINDS.index("other"), dtype=np.int8)
_COPY_CODE[[1, 2, 8]] = [COPY_KINDS.index(k) for k in ("htod", "dtoh", "dtod")]
_COPY_CODE[[11, 12, 13]] = COPY_KINDS.index("unified")
# Memcpy names of exports without ``ENUM_CUDA_MEMCPY_OPER`` (nsys before 2021.2): those of that
# era's ``nsys stats`` (its ``MemcpyOperStrs``), so ``--totals`` names copies as it did.
LEGACY_MEMCPY_NAMES = {
    0: "[CUDA memcpy Unknown]",
    1: "[CUDA memcpy HtoD]",
    2: "[CUDA memcpy DtoH]",
    3: "[CUDA memcpy HtoA]",
    4: "[CUDA memcpy AtoH]",
    5: "[CUDA memcpy AtoA]",
    6: "[CUDA memcpy AtoD]",
    7: "[CUDA memcpy DtoA]",
    8: "[CUDA memcpy DtoD]",
    9: "[CUDA memcpy HtoH]",
    10: "[CUDA memcpy PtoP]",
    11: "[CUDA Unified Memory memcpy HtoD]",
    12: "[CUDA Unified Memory memcpy DtoH]",
    13: "[CUDA Unified Memory memcpy DtoD]",
}


def by_device(columns: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """:func:`grouped_rows` of the operations' ``columns`` by device."""
    return grouped_rows(columns, "device_id")


def grouped_rows(columns: dict[str, np.ndarray], key: str) -> dict[str, np.ndarray]:
    """``columns`` with the rows of each value of column ``key`` (small integers: the
    operations' devices, or in :func:`calls_by_process` each call's process) together, in the
    order of those values (each one's rows in the order they had), so that each device's
    operations are a stretch of :attr:`Trace.ops` (:func:`.steps.find_steps` takes them
    without a copy); ``columns`` as they are when they are so already (one device: the usual
    case).

    An export of tensor-parallel ranks holds one process per GPU, their operations
    interleaved in time; each rank's analysis reads its device's operations. Copying those
    out per rank held every operation twice (8 M operations of 4 ranks: 0.4 GB more) and
    read every column once per rank; the reordering is one gather per column, each column
    given up once gathered, the columns shared out by width between two threads
    (:func:`_shares`, :func:`.parallel.beside`: the moves let go of the GIL). Columns of one
    value (:func:`.memory.one_value_view`) stay so; a :class:`FewRows` column is moved by the
    places of its rows."""
    device = columns[key]
    if in_device_order(device):
        return columns
    lo, hi = int(device.min()), int(device.max())
    near = hi - lo < 1 << 16  # (device ids: small numbers, counted without a sort)
    if near and (ids := present_values(device, lo, hi)) is not None:
        scatter = DeviceScatter(device, ids)  # (the C loops: opsums.py; its counts)
    else:
        ids, counts = distinct_counts(device)
        scatter = DeviceScatter(device, ids, counts)
    names = list(columns)  # (their order)
    grouped = {key: np.repeat(ids.astype(_narrowest(ids, device.dtype)), scatter.counts)}
    for name in [name for name, values in columns.items() if isinstance(values, FewRows)]:
        few = columns.pop(name)  # (their places, in the order of the places)
        places = scatter.places(few.rows)
        by_place = np.argsort(places, kind="stable")
        grouped[name] = FewRows(places[by_place], few.values[by_place], few.n)
    # each column moved in C (the order of the rows never made), else the reference: each
    # column gathered in the order of the rows
    order = scatter if scatter.fn is not None else scatter.rows
    del columns[key], device
    mine, theirs = _shares(columns)
    del columns  # (each column held by one share alone: given up once gathered)
    other = beside(len(grouped[key]), _gathered, theirs, order)
    del theirs  # (the thread's now)
    grouped |= _gathered(mine, order)
    grouped |= other.result()
    return {name: grouped[name] for name in names}


@dataclass(frozen=True)
class FewRows:
    """A column of ``n`` rows that are 0 but at ``rows`` (increasing), which hold ``values``:
    the bytes of the operations (copies and memsets only, a few in a hundred) while
    :func:`grouped_rows` moves the others, which moves these by their places alone (8 ranks
    of 2.5 M GPU operations: 76 MB of int32 given up before the regrouping)."""

    rows: np.ndarray
    values: np.ndarray
    n: int

    @classmethod
    def of(cls, column: np.ndarray) -> FewRows:
        rows = np.flatnonzero(column)
        return cls(rows, column[rows], len(column))

    def dense(self) -> np.ndarray:
        """The column, every row (zeros from ``np.zeros``: pages never written stay unmapped)."""
        out = np.zeros(self.n, dtype=self.values.dtype)
        out[self.rows] = self.values
        return out


def _narrowest(ids: np.ndarray, dtype: np.dtype) -> np.dtype:
    """The narrowest of int8, int16 and ``dtype`` (an integer type) that holds ``ids``: the
    grouped column of :func:`grouped_rows`, made again from them (the operations' devices:
    int8, 60 MB less at 20 M operations), as :func:`.memory.narrow_ids` narrows stream ids."""
    for small in (np.int8, np.int16):
        if np.dtype(small).itemsize >= np.dtype(dtype).itemsize:
            break
        info = np.iinfo(small)
        if not len(ids) or (info.min <= ids.min() and ids.max() <= info.max):
            return np.dtype(small)
    return np.dtype(dtype)


def _shares(columns: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """``columns`` (popped) in two shares for :func:`_gathered` on two threads: the columns of
    one width (bytes a row) all in one share, the widest first, each width to the share with
    fewer bytes so far. A moved column's memory is then written again by the next column of
    its share (of its width), where alternate columns on each thread left a column of every
    width spare on both to the end (20 M GPU operations of 8 ranks: 0.6 GB,
    ``bench/README.md``, twentieth session)."""
    widths: dict[int, list[str]] = {}
    for name, values in columns.items():
        widths.setdefault(0 if values.strides == (0,) else values.itemsize, []).append(name)
    shares: tuple[dict, dict] = ({}, {})
    load = [0, 0]
    for width in sorted(widths, reverse=True):
        k = 0 if load[0] <= load[1] else 1
        for name in widths[width]:
            shares[k][name] = columns.pop(name)
            load[k] += shares[k][name].nbytes if width else 0
    return shares


def in_device_order(device: np.ndarray) -> bool:
    """Whether the device ids come in order (:func:`by_device` leaves them as they are)."""
    return len(device) < 2 or device.strides == (0,) or not (device[1:] < device[:-1]).any()


def _gathered(
    columns: dict[str, np.ndarray], order: np.ndarray | DeviceScatter
) -> dict[str, np.ndarray]:
    """Each of ``columns`` in ``order`` (one-value columns as they are), each column given up
    (popped) once gathered; by :class:`.opsums.DeviceScatter` where it is given and takes the
    column."""
    out = {}
    spare: dict[int, np.ndarray] = {}  # bytes -> a moved column's memory, free to write again
    for name in list(columns):
        values = columns.pop(name)
        if values.strides == (0,):
            out[name] = values
        elif isinstance(order, DeviceScatter):
            moved = order.column(values, spare.pop(values.nbytes, None))
            out[name] = moved if moved is not None else values[order.rows]
            later = any(v.strides != (0,) and v.nbytes == values.nbytes for v in columns.values())
            if moved is not None and later and _only_here(values):
                spare[values.nbytes] = values  # (else given up now: no column left to take it)
        else:
            out[name] = values[order]
        del values
    return out


def _only_here(values: np.ndarray) -> bool:
    """Whether nothing but the caller holds ``values`` and its memory (a column of the read,
    moved and dropped), so that another column may be written over it: numpy's own memory,
    or a mapping (:mod:`.forkread`'s) through views that only this array holds."""
    if not (values.flags.writeable and values.flags.c_contiguous):
        return False
    if sys.getrefcount(values) > 3:  # (the caller's name, this argument, getrefcount's)
        return False
    base = values.base
    while isinstance(base, np.ndarray):  # (each view held by the one above it alone)
        if sys.getrefcount(base) > 3:  # (the view's base, this name, getrefcount's)
            return False
        base = base.base
    if isinstance(base, memoryview):
        if sys.getrefcount(base) > 3:
            return False
        base = base.obj
    return base is None or (isinstance(base, mmap.mmap) and sys.getrefcount(base) <= 3)


def op_launches(trace: Trace, ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """:meth:`Trace.launches` of each operation of ``ops`` (rows of ``trace.ops``): the start
    (NaN: none) and thread (-1) of the CUDA API call that launched it."""
    return trace.launches(ops["pid"].to_numpy(), ops["correlation_id"].to_numpy())


def per_ops_frame(trace: Trace, name: str, compute):
    """``compute(trace.ops)``, kept on ``trace`` as ``name`` until its operations frame is
    another (:func:`.validate.validated` drops rows by replacing it): what every process of
    an export asks of the same frame is worked out once, not once per process."""
    ops = trace.ops
    kept = trace.__dict__.get(name)
    if kept is None or kept[0]() is not ops:
        kept = (weakref.ref(ops), compute(ops))
        trace.__dict__[name] = kept
    return kept[1]


def process_devices(trace: Trace) -> dict[int, list[int]]:
    """Each process with GPU operations -> the devices they ran on (sorted), in one pass over
    the operations, not one per process (8 ranks of 1 M operations each: 8 passes over all
    8 M); worked out again only for another operations frame (:func:`.validate.validated`
    drops rows by replacing it)."""
    stretches = device_stretches(trace)
    return per_ops_frame(trace, "_process_devices", lambda ops: _by_process(ops, stretches))


def _by_process(ops: pd.DataFrame, stretches: dict[int, slice] | None) -> dict[int, list[int]]:
    """:func:`process_devices` of ``ops``: from the pids of each device's stretch where the
    devices come in order (:func:`device_stretches`; most often one pid each), else from the
    distinct (pid, device) pairs."""
    pid, device = ops["pid"].to_numpy(), ops["device_id"].to_numpy()
    found: dict[int, list[int]] = {}
    if stretches is not None:
        for d, rows in stretches.items():
            pids = pid[rows]
            for p in [pids[0]] if one_valued(pids) else pd.unique(pids):
                found.setdefault(int(p), []).append(d)
    else:
        pairs = pd.unique((pid.astype(np.int64) << 32) | (device.astype(np.int64) & 0xFFFFFFFF))
        for pair in pairs.tolist():
            found.setdefault(pair >> 32, []).append(
                int(np.uint32(pair & 0xFFFFFFFF).astype(np.int32))
            )
    return {p: sorted(found[p]) for p in sorted(found)}


def device_rows(trace: Trace, device_id: int) -> slice | np.ndarray:
    """The rows of ``trace.ops`` on ``device_id``: a slice where each device's rows are one
    stretch (:func:`by_device`; the stretches found once per frame), else their positions."""
    stretches = device_stretches(trace)
    if stretches is not None:
        return stretches.get(device_id, slice(0, 0))
    return np.flatnonzero(trace.ops["device_id"].to_numpy() == device_id)


def device_stretches(trace: Trace) -> dict[int, slice] | None:
    """Device -> its stretch of ``trace.ops`` where the devices come in order (one device, or
    :func:`by_device`), else None; found once per frame."""
    return per_ops_frame(trace, "_device_stretches", _stretches)


def _stretches(ops: pd.DataFrame) -> dict[int, slice] | None:
    devices = ops["device_id"].to_numpy()
    if len(devices) and devices.strides == (0,):  # (one device, a view: no pass over it)
        return {int(devices[0]): slice(0, len(devices))}
    if not in_device_order(devices):
        return None
    edges = np.flatnonzero(devices[1:] != devices[:-1]) + 1
    starts, ends = np.r_[0, edges], np.r_[edges, len(devices)]
    return {
        int(devices[a]): slice(int(a), int(b)) for a, b in zip(starts, ends, strict=True) if b > a
    }


def _op_label(i: int, strings: dict[int, str], memcpy_names: dict[int, str]) -> str:
    """Name of an op from its name code (see :attr:`Trace.ops`); memcpys as ``nsys stats``
    names them (:attr:`Trace.memcpy_names`)."""
    if i >= 0:
        return strings.get(i, f"<string {i}>")
    if i == -2:
        return "[CUDA memset]"
    if i == -3:
        return "[unnamed kernel]"
    if i <= -1000:
        return f"[CUDA graph {-1000 - i}]"
    kind = -10 - i
    return memcpy_names.get(kind, f"[CUDA memcpy kind {kind}]")


def _labelled(codes: np.ndarray, label) -> pd.Categorical:
    """A categorical of the strings ``label(code)`` (object categories: cheap to compare and
    convert); each distinct code is labelled once."""
    uniq, inverse = _unique_inverse(codes)
    labels = [label(int(c)) for c in uniq]
    if len(set(labels)) < len(labels):  # two codes with one label (one NVTX domain in each
        # of several processes): each code's label's place, no string of every row hashed
        categories = sorted(set(labels))
        place = {name: k for k, name in enumerate(categories)}
        codes_of = np.array([place[name] for name in labels], dtype=_index_dtype(len(place)))
        return pd.Categorical.from_codes(
            codes_of[inverse], categories=pd.Index(categories, dtype=object)
        )
    categories = pd.Index(labels, dtype=object)
    return pd.Categorical.from_codes(inverse, categories=categories)


def _unique_inverse(codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, return_inverse=True)``, the inverse in the smallest signed integer
    dtype that holds it (op names: int8 for up to 127 distinct names, so 20 M ops need 20 MB);
    without the sort when the codes span a range no wider than their count (op names:
    StringIds ids and small negative codes), in chunks of :data:`CHUNK_ROWS` (no temporary of
    the codes' size)."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8)
    lo, hi = int(codes.min()), int(codes.max())
    if hi - lo > max(len(codes), 1 << 16):
        uniq, inverse = np.unique(codes, return_inverse=True)
        return uniq, inverse.reshape(-1).astype(_index_dtype(len(uniq)))
    if (fast := opsums.dense_inverse(codes, lo, hi, _index_dtype)) is not None:
        return fast  # (two C passes: opsums.py; what follows is their reference)
    base = codes.dtype.type(lo)  # codes - base fits the codes' dtype: 0 <= it <= hi - lo
    present = np.zeros(hi - lo + 1, dtype=bool)
    for i in range(0, len(codes), CHUNK_ROWS):
        present[codes[i : i + CHUNK_ROWS] - base] = True
    uniq = np.flatnonzero(present) + lo
    dtype = _index_dtype(len(uniq))
    position = (np.cumsum(present, dtype=np.int64) - 1).astype(dtype)  # among uniq
    inverse = np.empty(len(codes), dtype=dtype)
    for i in range(0, len(codes), CHUNK_ROWS):
        inverse[i : i + CHUNK_ROWS] = position[codes[i : i + CHUNK_ROWS] - base]
    return uniq, inverse


def _index_dtype(n: int) -> np.dtype:
    """The smallest signed integer dtype holding 0..n-1 (what pandas keeps as the codes of a
    categorical of ``n`` categories)."""
    return next(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)
                if n <= np.iinfo(t).max)  # fmt: skip


_IN_GRAPH_BIT = 1 << 8  # of the packed flags (:func:`_unpack_op_flags`)


def _unpack_op_flags(low: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The low int32 half of `ops`' packed flags column -> (copyKind as int8, in_graph as bool,
    kind as int8 codes of KINDS): bits 0-7 copyKind, bit 8 in_graph, bits 12-15 kind.
    Shifts `low` in place."""
    copy = low.astype(np.int8)  # bits 0-7
    low >>= 8
    flags = low.astype(np.uint8)  # bits 8-15: kind << 4 | in_graph
    in_graph = (flags & 1).view(bool)
    flags >>= 4
    kind = flags.view(np.int8)
    return copy, in_graph, kind


def _names(
    ids: list[np.ndarray], strings: dict[int, str], memcpy_names: dict[int, str]
) -> dict[str, pd.Categorical]:
    """The ``name`` and ``full_name`` columns of :attr:`Trace.ops` from their name codes,
    ``ids`` (short, full): taken out of the list one at a time, so that each is freed once
    its categorical is made (20 M ops: 80 MB each) where the caller holds no other
    reference."""
    out = {}
    for name in ("name", "full_name"):
        out[name] = _categorical(ids.pop(0), strings, memcpy_names)
    return out


_API_COLUMNS = ["start_ns", "end_ns", "pid", "tid", "correlation_id", "name"]


def _api_frame(piece: list[np.ndarray], ids: dict[int, str]) -> pd.DataFrame:
    """The frame of :meth:`Trace.api` of the calls ``piece`` (start, end, globalTid,
    correlation id, name id; ``ids``: name id -> name)."""
    start, end, gtid, corr, name_id = piece
    return pd.DataFrame(
        {
            "start_ns": start,
            "end_ns": end,
            "pid": (gtid >> 24) & _PID_MASK,
            "tid": gtid & _PID_MASK,
            "correlation_id": corr,
            "name": _categorical(name_id, ids),
        },
        columns=_API_COLUMNS,
    )


def _categorical(
    ids: np.ndarray, strings: dict[int, str], memcpy_names: dict[int, str] | None = None
) -> pd.Categorical:
    """Op names from their name codes (see :func:`_op_label`)."""
    names = LEGACY_MEMCPY_NAMES if memcpy_names is None else memcpy_names
    return _labelled(ids, lambda i: _op_label(i, strings, names))


def load(path: str | Path) -> Trace:
    """Open an nsys SQLite export read-only; raise TraceError naming the problem and the fix.
    An xz-compressed export (``FILE.sqlite.xz``) is read from a decompressed temporary copy;
    the file given is never written."""
    path = Path(path)
    plain = xz_copy(path)
    try:
        trace = _load(path, plain or path)
    except BaseException:
        if plain is not None:
            plain.unlink()
        raise
    if plain is not None:
        trace.sqlite_file = plain
        weakref.finalize(trace, remove_quietly, plain)
    return trace


def _load(path: Path, plain: Path) -> Trace:
    """:func:`load` of the SQLite file ``plain`` (``path`` itself unless decompressed);
    errors name ``path``."""
    try:
        con = open_readonly(plain)
    except TraceError as e:
        if plain == path:
            raise
        raise TraceError(str(e).replace(str(plain), f"{path} (decompressed)")) from None
    with _sql_errors(path):
        tables = frozenset(
            r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        )
    markers = {"StringIds", "META_DATA_EXPORT", "NVTX_EVENTS", *_CUDA_TABLES}
    if not tables & markers:
        con.close()
        raise TraceError(
            f"{path}: SQLite file but not an nsys export (no StringIds, NVTX_EVENTS or CUPTI "
            "tables); give the file written by `nsys export --type sqlite`"
        )
    with _sql_errors(path):
        meta = _export_meta(con, tables)
    return Trace(path=path, con=con, tables=tables, meta=meta)


def _export_meta(con: sqlite3.Connection, tables: frozenset[str]) -> dict[str, str]:
    """Export metadata (name -> value): ``META_DATA_EXPORT`` (nsys 2023.3 and later) or
    ``EXPORT_META_DATA`` (the same rows in exports of nsys 2023.2 and earlier); a table with
    other column names is read by its first two columns."""
    meta: dict[str, str] = {}
    for table in ("EXPORT_META_DATA", "META_DATA_EXPORT"):  # the newer one wins a conflict
        if table not in tables:
            continue
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        if len(cols) < 2:
            continue
        key, value = ("name", "value") if {"name", "value"} <= set(cols) else cols[:2]
        rows = con.execute(f'SELECT "{key}", "{value}" FROM {table}')
        meta |= {str(k): str(v) for k, v in rows if k is not None and v is not None}
    return meta
