"""The only module that touches nsys tables (with :mod:`.opsread`, its pandas-free read of the
GPU operations and CUDA API calls, and :mod:`.graphlaunches`, the CUDA graph launches' queries
through :class:`Trace`): opens an export read-only and normalises it. Beside it: the CUDA API
calls and each GPU operation's launching call (:mod:`.apicalls`, a base of :class:`Trace`; the
lookups in :mod:`.callrows`), each device's operations put together (:mod:`.devices`), the
names' categoricals (:mod:`.opnames`).

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
    :meth:`Trace.launches` (any rows' pid and correlation id) and :func:`.callrows.op_launches` (a
    frame's) look them up. From 1 M ops on, a column of one value (device, pid) is a
    read-only view of that value, correlation ids and bytes are int32 and stream ids int16
    where every value fits (:mod:`.memory`).
``nvtx`` (closed ranges, push/pop and start/end)
    ``start_ns, end_ns, name, domain, pid, tid, event_type``; name = ``text`` or
    ``StringIds[textId]``; domain resolved per process from the domain-create events.
``api`` (CUDA API calls, optionally only some names: :mod:`.apicalls`)
    ``start_ns, end_ns, pid, tid, correlation_id, name``.
"""

from __future__ import annotations

import enum
import sqlite3
import struct
import weakref
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from specscope.analysis import opsread, opsscan, progress
from specscope.analysis.apicalls import THREAD_BITS, ApiCalls
from specscope.analysis.compressed import XZ_MAGIC, remove_quietly, xz_copy
from specscope.analysis.devices import FewRows, by_device, in_device_order
from specscope.analysis.launches import exec_ids, launches_of_ops
from specscope.analysis.memory import (
    CHUNK_ROWS,
    give_back,
    narrow_ids,
)
from specscope.analysis.opnames import LEGACY_MEMCPY_NAMES, labelled, op_names
from specscope.analysis.opsread import (
    KINDS,
    NVTX_DOMAIN_CREATE,
    NVTX_TYPES,
    RUNTIME,
    nvtx_sql,
    nvtx_text,
    read_nvtx,
    read_ops,
)
from specscope.analysis.opsread import PID_MASK as _PID_MASK
from specscope.analysis.pagerelease import only_here, read_once
from specscope.analysis.parallel import beside
from specscope.analysis.rangenames import range_name
from specscope.analysis.readcols import ends_given_back
from specscope.analysis.sqlread import (
    SQLITE_MAGIC,
    columnar_connection,
    int_columns,
    read_threads,
    readonly_uri,
)
from specscope.analysis.timeshift import FAR_NS, export_time_shift, unshift
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
CUDA_TABLES = (
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
)


class CaptureMode(str, enum.Enum):
    """How CUDA work (and CUDA graphs) were traced."""

    NODE = "node"  # --cuda-graph-trace=node: graph kernels are kernel rows with graphNodeId
    GRAPH = "graph"  # --cuda-graph-trace=graph: replays are GRAPH_TRACE rows, insides invisible
    NO_GRAPHS = "no-graphs"  # CUDA traced, no graph replay seen
    NO_CUDA = "no-cuda"  # no CUDA tables: recorded on a CPU machine or without -t cuda


@contextmanager
def sql_errors(path: Path) -> Iterator[None]:
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
    with sql_errors(path):
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return con


@dataclass
class Trace(ApiCalls):
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
    def capture_end(self) -> int | None:
        """When the capture stopped (ns on the session's clock: ``ANALYSIS_DETAILS.duration``,
        the longest where there are several), or None where the export does not say (no
        such table, a damaged one, a value no capture has)."""
        if not self.has("ANALYSIS_DETAILS"):
            return None
        try:
            rows = self.query("SELECT max(duration) FROM ANALYSIS_DETAILS")
        except Exception:  # (a damaged table: as if there were none)
            return None
        duration = rows[0][0] if rows else None
        return duration if isinstance(duration, int) and 0 < duration < FAR_NS else None

    @cached_property
    def time_shift(self) -> int:
        """What ``nsys export --ts-normalize``/``--ts-shift`` added to every time (ns; 0 for
        a plain export), taken off every time read (:meth:`session_times`)."""
        return export_time_shift(self.meta)

    def session_times(self, *times: np.ndarray) -> list[np.ndarray]:
        """``times`` (int64 ns arrays, as read) on the session's clock: :attr:`time_shift`
        taken off (:func:`.timeshift.unshift`)."""
        return [unshift(t, self.time_shift) for t in times]

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> set[str]:
        with sql_errors(self.path):  # (a damaged schema's names may not decode)
            return {r[1] for r in self.con.execute(f"PRAGMA table_info({table})")}

    def query(self, sql: str, params: Iterable = ()) -> list[tuple]:
        with sql_errors(self.path):
            return self.con.execute(sql, tuple(params)).fetchall()

    @cached_property
    def strings(self) -> dict[int, str]:
        """StringIds, resolved once; every value a string (a damaged export's NULL or blob
        values are made readable: :func:`specscope.analysis.validate.readable_strings`)."""
        if not self.has("StringIds"):
            return {}
        return readable_strings(dict(self.query("SELECT id, value FROM StringIds")))

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
        if not any(self.has(t) for t in CUDA_TABLES):
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
            sql = nvtx_sql(have)
            read = self.read_guarded(lambda: read_nvtx(self.con, self._columnar, sql, file))
        # each column dropped once used (a read ahead's are mapped each on its own: given
        # back as they go), the frame's columns made of the kept rows alone: 0.9 M events took
        # 105 MiB over the operations' (the 8-rank 20 M export's peak), the frame 25 MiB
        start, end, is_open, code, gtid, domain_id, etype, has_text, rowid = read
        if isinstance(read, list):
            read.clear()
        del read
        progress.report("NVTX ranges", 1, 1)
        # Names are codes: StringIds ids, or -2 - i for the i-th distinct explicit ``text``
        # once named (:func:`.rangenames.range_name`: PyTorch's emit_nvtx gives each range a
        # text of its own, a million distinct texts in a long capture, eight names)
        text = nvtx_text(have)
        rows = self.query(
            f"SELECT rowid, {text} FROM NVTX_EVENTS WHERE {text} IS NOT NULL AND {NVTX_TYPES}"
            " ORDER BY rowid"
        )  # (a damaged export's blob read as text too)
        names = np.array([range_name(as_text(v)) for _, v in rows], dtype=object)
        named, distinct = pd.factorize(names, sort=True)
        if len(distinct):  # (each read row with a text: its row among those, by rowid)
            idx = np.flatnonzero(has_text)
            ids = np.fromiter((r for r, _ in rows), dtype=np.int64, count=len(rows))
            at = np.minimum(np.searchsorted(ids, rowid[idx]), len(ids) - 1)
            found = ids[at] == rowid[idx]
            code = code if code.flags.writeable else code.copy()
            code[idx[found]] = -2 - named[at[found]]
        distinct = list(distinct)
        del has_text, rowid, rows, names, named
        strings = self.strings

        def label(c: int) -> str:
            if c <= -2 and -2 - c < len(distinct):
                return distinct[-2 - c]
            return strings.get(c, "")  # a damaged negative textId: no name

        is_domain = etype == NVTX_DOMAIN_CREATE
        at = np.flatnonzero(is_domain)
        domains = {
            (int((gtid[i] >> 24) & _PID_MASK) << 32) | int(domain_id[i]): label(int(code[i]))
            for i in at
        }
        closed = ~is_domain & (is_open == 0)
        if (stop := self.capture_end) is not None:  # (closed by nsys, not by the program)
            closed &= end != stop + self.time_shift
        unclosed = int(len(closed) - len(at) - closed.sum())  # (ranges, not domains)
        del is_open, is_domain, at
        keep = np.flatnonzero(closed)
        del closed
        kept_gtid = gtid[keep]
        del gtid
        pid = ((kept_gtid >> 24) & _PID_MASK).astype(np.int32)
        tid = (kept_gtid & _PID_MASK).astype(np.int32)
        del kept_gtid
        domain_key = (pid.astype(np.int64) << 32) | domain_id[keep]
        del domain_id
        name = labelled(code[keep], lambda c: range_name(label(c)))  # (emit_nvtx's suffixes)
        del code
        domain = labelled(domain_key, lambda k: domains.get(k, ""))
        del domain_key
        event_type = etype[keep].astype(np.int8)
        del etype
        (start,) = self.session_times(start[keep])  # (a copy: the rows read given back)
        (end,) = self.session_times(end[keep])
        out = pd.DataFrame(
            {
                "start_ns": start,
                "end_ns": end,
                "name": name,
                "domain": domain,
                # (ids of 24 bits and event types: int32 and int8, 0.9 M events: 13 MB less)
                "pid": pid,
                "tid": tid,
                "event_type": event_type,
            }
        )
        return out, unclosed

    @property
    def nvtx(self) -> pd.DataFrame:
        """Closed NVTX ranges (push/pop and start/end)."""
        return self._nvtx_all[0]

    @property
    def unclosed_ranges(self) -> int:
        """Ranges the program never closed inside the capture (ignored by every analysis):
        their end was never recorded (NULL), or nsys closed them itself when the capture
        stopped, with an end at :attr:`capture_end` to the nanosecond (nsys 2023.4 after
        ``--duration``, 2025.3 after ``cudaProfilerStop``: ``tests/data/cpu_capture_end_2023``,
        ``tests/data/real/partial_capture``). Such a range is a step cut short: kept, it would
        be a short step with the stop's own wait in it."""
        return self._nvtx_all[1]

    # ---------------------------------------------------------------- OS runtime calls
    def os_calls(
        self, pid: int, tid: int, window: tuple[float, float] | None = None
    ) -> pd.DataFrame:
        """``name, start_ns, end_ns`` of the OS runtime calls of thread (``pid``, ``tid``) that
        nsys traced (``-t osrt``: the ``OSRT_API`` table; by default only calls of 1 µs or
        more), in start order; zero rows without the table. Only those open during ``window``
        (``(start, end)`` ns on the session's clock: ``end_ns > start`` and ``start_ns <
        end``) when given: read by SQL when asked, that window's alone (a server's thread of
        a million polls and reads took 1 s and 145 MiB to read whole)."""
        cols = ["name", "start_ns", "end_ns"]
        needed = {"start", "end", "globalTid", "nameId"}
        if not self.has("OSRT_API") or not needed <= self.columns("OSRT_API"):
            return pd.DataFrame(columns=cols)
        inside, params = "", [pid << 24 | tid]
        if window is not None:  # (the export's own clock: the session's plus its shift)
            inside = " AND end > ? AND start < ?"
            params += [window[0] + self.time_shift, window[1] + self.time_shift]
        rows = self.query(  # (a damaged row's time that is no integer: left out)
            "SELECT start, end, nameId FROM OSRT_API"
            f" WHERE globalTid & {THREAD_BITS} = ? AND typeof(start) = 'integer'"
            f" AND typeof(end) = 'integer' AND end >= start{inside} ORDER BY start",
            params,
        )
        start, end = self.session_times(
            *(np.array([r[i] for r in rows], dtype=np.int64) for i in (0, 1))
        )
        strings = self.strings
        names = [strings.get(r[2], f"<string {r[2]}>") for r in rows]
        return pd.DataFrame({"name": names, "start_ns": start, "end_ns": end}, columns=cols)

    @cached_property
    def _columnar(self):
        columnar = columnar_connection(self.sqlite_file or self.path)
        if columnar is not None:  # (closed with the trace: the driver keeps its files open
            weakref.finalize(self, columnar.close)  # until then, two per export)
        return columnar

    def int_columns(self, sql: str, ncols: int) -> list[np.ndarray]:
        """The integer columns of ``sql`` as int64 arrays (see :mod:`.sqlread`)."""
        return self.read_guarded(lambda: int_columns(self.con, self._columnar, sql, ncols))

    def read_guarded(self, read):
        """``read()``, a read of this export, its SQLite errors (ADBC's classes too) raised as
        one-line TraceErrors (:func:`sql_errors`)."""
        with sql_errors(self.path):
            try:
                return read()
            except sqlite3.DatabaseError:
                raise
            except Exception as e:  # ADBC reports SQLite errors with its own classes
                raise sqlite3.DatabaseError(str(e).splitlines()[0]) from None

    @cached_property
    def ops(self) -> pd.DataFrame:
        """Every GPU operation, with the start and thread of the API call that launched it."""
        columns, carried = self._read_ops()  # (whether the flags carry exec ids)
        if opsread.pending(self.sqlite_file or self.path, "nvtx"):
            # the NVTX events' frame made now from the read ahead's columns, which it gives up:
            # mapped with the operations' (counted from the start), they were held to the
            # analyses, the peak of 20 M GPU operations of 8 ranks (54 MiB of int64 columns
            # for a frame of 24, ``bench/README.md``, twenty-second session)
            with suppress(TraceError):  # (a damaged NVTX table: the error is the
                self._nvtx_all  # noqa: B018  (reader's that needs the ranges, as before)
        if columns[1].dtype == np.uint32:  # durations: the same on any clock
            columns[0] = self.session_times(columns[0])[0]
        else:
            columns[0], columns[1] = self.session_times(columns[0], columns[1])
        if "capture_mode" not in self.__dict__:  # (the cached property, from this read)
            self.__dict__["capture_mode"] = self._mode_of_read(columns[8])
        wanted = carried and self.capture_mode is CaptureMode.NODE  # (the exec ids unpacked)
        # the names' categoricals on a second thread (large exports: .parallel) while the flags
        # are unpacked here; each read column that is only an input is dropped once used (20 M
        # ops: 80 MB each), the names' before the launch matching allocates
        labels = (self.strings, self.memcpy_names)  # (cached here, not on the thread)
        columns[4] = narrow_ids(columns[4])  # stream ids: int16 where every id fits
        ids = [columns[5], columns[6]]  # (emptied by op_names as it goes: each freed when done)
        columns[5] = columns[6] = None
        named = beside(len(columns[0]), op_names, ids, *labels)
        del ids
        copy, in_graph, kind, execs = _unpack_op_flags(columns, 8, wanted)
        grouped = in_device_order(columns[3])  # (else each device's rows are put together below)
        if grouped:  # the ends now (the launches are grouped from them below); else once the
            ends_given_back(columns[0], columns, 1)  # regrouping moved the durations (4 bytes)
        # (device and pid one value, correlation ids and bytes int32, as the read left them)
        start, end, corr, device, stream, pid, nbytes = (columns[i] for i in (0, 1, 2, 3, 4, 7, 9))
        del columns
        names = named.result()
        del named
        # (the categories kept apart from the codes: by_device gives up the codes it moves)
        categories = {name: labels for name, (_, labels) in names.items()}
        names = {name: codes for name, (codes, _) in names.items()}
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
            ends_given_back(columns["start_ns"], columns, "end_ns")
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
            read = self.read_guarded(lambda: read_ops(self.con, file, self.tables, threads, execs))
            return read, execs
        finally:
            if runtime is not None:
                runtime.shutdown()  # waits; a failure is raised again by _launches

    # ---------------------------------------------------------------- CUDA graphs
    def launches_of_read(self) -> list[np.ndarray] | None:
        """Node mode's graph launches grouped from the operations' read, once that is done
        (:func:`.launches.launches_of_ops`, started by :attr:`ops`); None where it was not
        (graph mode, a read without exec ids, an exec id that did not fit, or grouped
        devices' rows)."""
        return None if self._ops_launches is None else self._ops_launches.result()

    @cached_property
    def graph_launches(self) -> pd.DataFrame:
        """One row per CUDA graph launch that ran on a GPU (no graphs: zero rows): its GPU
        side, its launching call, its graph (:func:`.graphlaunches.graph_launches`)."""
        from specscope.analysis.graphlaunches import graph_launches  # (which imports this)

        return graph_launches(self)

    @cached_property
    def graph_creations(self) -> pd.DataFrame:
        """``pid, graph_id, created_ns``: when each CUDA graph was created
        (:func:`.graphlaunches.graph_creations`)."""
        from specscope.analysis.graphlaunches import graph_creations

        return graph_creations(self)


# code in COPY_KINDS of each copyKind byte: 1 htod, 2 dtoh, 8 dtod, 11-13 unified, else other
_COPY_CODE = np.full(256, COPY_KINDS.index("other"), dtype=np.int8)
_COPY_CODE[[1, 2, 8]] = [COPY_KINDS.index(k) for k in ("htod", "dtoh", "dtod")]
_COPY_CODE[[11, 12, 13]] = COPY_KINDS.index("unified")
_IN_GRAPH_BIT = 1 << 8  # of the packed flags (:func:`_unpack_op_flags`)


def _unpack_op_flags(columns: list, i: int, execs: bool) -> tuple[np.ndarray, ...]:
    """The low half of `ops`' packed flags, ``columns[i]`` (int16, or int32 with exec ids in
    bits 16-30; set to None here) -> (copyKind as int8, in_graph as bool, kind as int8 codes
    of KINDS, and where ``execs`` the exec ids as int16 (:func:`.launches.exec_ids`), else
    None): bits 0-7 copyKind, bit 8 in_graph, bits 12-15 kind. Unpacked a chunk at a time,
    each chunk's pages of the read given back once unpacked where nothing else holds them
    (:func:`.pagerelease.read_once`): at 20 M GPU operations the new columns (57-95 MiB) came on
    top of every column of the read, the analysis' peak (``bench/README.md``, twenty-second
    session)."""
    low, columns[i] = columns[i], None
    n = len(low)
    copy, kind = np.empty(n, dtype=np.int8), np.empty(n, dtype=np.int8)
    in_graph = np.empty(n, dtype=bool)
    ids = np.empty(n, dtype=np.int16) if execs else None
    alone = only_here(low)  # (before the call: its arguments hold the column too)
    for part in read_once(low, CHUNK_ROWS, alone):
        np.copyto(copy[part], low[part], casting="unsafe")  # bits 0-7
        flags = (low[part] >> 8).astype(np.uint8)  # bits 8-15: kind << 4 | in_graph
        np.bitwise_and(flags, 1, out=in_graph[part].view(np.uint8))
        np.right_shift(flags, 4, out=kind[part].view(np.uint8))
        if ids is not None:
            ids[part] = exec_ids(low[part])
    return copy, in_graph, kind, ids


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
    with sql_errors(path):
        tables = frozenset(
            r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        )
    markers = {"StringIds", "META_DATA_EXPORT", "NVTX_EVENTS", *CUDA_TABLES}
    if not tables & markers:
        con.close()
        raise TraceError(
            f"{path}: SQLite file but not an nsys export (no StringIds, NVTX_EVENTS or CUPTI "
            "tables); give the file written by `nsys export --type sqlite`"
        )
    with sql_errors(path):
        meta = _export_meta(con, tables)
    return Trace(path=path, con=con, tables=_without_empty(con, tables), meta=meta)


_ROW_TABLES = (*CUDA_TABLES, "NVTX_EVENTS", "OSRT_API")
"""The tables whose absence the analyses read as "none of these" (no CUDA activity, no CUDA
API calls, no NVTX ranges, no OS runtime calls): each is left out of :attr:`Trace.tables` where
it holds no row, so that an empty one reads as an absent one (``nsys export --lazy=false``
writes every table, empty or not: NVTX ranges recorded on a CPU read as a CUDA capture in which
no step launched anything)."""


def _without_empty(con: sqlite3.Connection, tables: frozenset[str]) -> frozenset[str]:
    """``tables`` without those of :data:`_ROW_TABLES` that hold no row (a table that cannot be
    read is kept: its reader says what is wrong with it)."""
    empty = set()
    for table in _ROW_TABLES:
        if table in tables:
            try:
                if con.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is None:
                    empty.add(table)
            except sqlite3.DatabaseError:
                continue
    return tables - empty


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
