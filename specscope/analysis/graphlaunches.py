"""One row per CUDA graph launch (:attr:`.loader.Trace.graph_launches`), and when each graph
was created (:attr:`.loader.Trace.graph_creations`).

In graph mode (``--cuda-graph-trace=graph``) each launch that ran is a row of
``CUPTI_ACTIVITY_KIND_GRAPH_TRACE``. In node mode each kernel, memcpy and memset node of a
replay is a row of its own, and the launches are grouped from them (:mod:`.launches`): from
the operations' read where it is made anyway (:func:`launches_from_ops`), else by SQL
(:func:`node_launches`). The launching CUDA API call of each comes from
:meth:`.loader.Trace.launch_calls`; a node-mode launch's graph from the creation events of
its nodes (:func:`graph_origins`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specscope.analysis import opsread
from specscope.analysis.launches import group_launches
from specscope.analysis.loader import CUDA_TABLES, CaptureMode, Trace, sql_errors
from specscope.analysis.opsread import PID_MASK as _PID_MASK
from specscope.analysis.opsread import adapt
from specscope.analysis.sqlread import (
    columnar_connection,
    int_columns_many,
    read_threads,
    rowid_ranges,
)


def graph_launches(trace: Trace) -> pd.DataFrame:
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
    if trace.capture_mode is CaptureMode.GRAPH:
        exec_id = "graphExecId" if "graphExecId" in trace.columns(graph_table) else "-1"
        cols = trace.int_columns(
            adapt(
                f"SELECT start, end, coalesce(deviceId, 0), coalesce(globalPid, 0),"
                f" coalesce(correlationId, 0), graphId, coalesce({exec_id}, -1), -1"
                f" FROM {graph_table}",
                trace.columns(graph_table),
            ),
            8,
        )
        cols[0], cols[1] = trace.session_times(cols[0], cols[1])
    elif trace.capture_mode is CaptureMode.NODE:
        cols = launches_from_ops(trace) or node_launches(trace)
    else:
        cols = [np.zeros(0, dtype=np.int64)] * 8
    start, end, device, gpid, corr, graph_id, exec_id, kernels = cols
    pid = (gpid >> 24) & _PID_MASK
    if trace.capture_mode is CaptureMode.NODE:
        graph_id = mapped(graph_origins(trace), pid, exec_id)
    api_start, api_end, tid = trace.launch_calls(pid, corr)
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


def launches_from_ops(trace: Trace) -> list[np.ndarray] | None:
    """Node mode: the rows of :func:`node_launches` grouped from the GPU operations' read
    (:func:`.launches.launches_of_ops`) when the operations are read or being read anyway (not worth
    a read of every operation otherwise); None where they are not, were read without exec ids
    (:attr:`.loader.Trace.graph_execs`), or an exec id did not fit the read. Grouped from every
    operation read, before validation drops any: the rows SQL's gives."""
    if "ops" not in trace.__dict__ and not opsread.pending(trace.sqlite_file or trace.path):
        return None
    trace.ops  # noqa: B018  (reads them, and starts the grouping)
    return trace.launches_of_read()


def node_launches(trace: Trace) -> list[np.ndarray]:
    """Node mode: the graph rows of kernels, memcpys and memsets grouped by launch (gpid,
    corr, exec) as one ``GROUP BY`` over all of them gives, in key order: start (min), end
    (max), device (min), gpid, corr, -1, exec, kernels (count); times taken back
    (:mod:`.timeshift`).

    Each table (the KERNEL table in rowid ranges) is grouped by its own query, on parallel
    threads, and groups split between queries are merged here
    (:func:`.launches.group_launches`): SQLite's sort for the ``GROUP BY`` costs more than
    the scan, and sorts on one core. :func:`launches_from_ops` avoids it where it can."""
    threads, parts = read_threads(), []
    for table in CUDA_TABLES[1:4]:
        if trace.has(table) and "graphNodeId" in trace.columns(table):
            is_kernel = int(table.endswith("KERNEL"))
            select = adapt(
                f"SELECT min(start), max(end), min(coalesce(deviceId, 0)),"
                f" coalesce(globalPid, 0) AS gpid, coalesce(correlationId, 0) AS corr,"
                f" graphNodeId >> 32 AS exec, sum({is_kernel}) FROM {table}",
                trace.columns(table),
            )
            with sql_errors(trace.path):
                ranges = rowid_ranges(trace.con, table, 2 * threads if is_kernel else 1)
            parts += [
                (f"{select}{where or ' WHERE 1'} AND graphNodeId IS NOT NULL"
                 " GROUP BY gpid, corr, exec", bound)
                for where, bound in ranges
            ]  # fmt: skip
    file = trace.sqlite_file or trace.path
    cols = trace.read_guarded(
        lambda: int_columns_many(
            trace.con, lambda: columnar_connection(file), parts, 7, threads=threads
        )
    )
    start, end, *rest = group_launches(*cols)
    return [*trace.session_times(start, end), *rest]


def graph_event_tables(trace: Trace) -> tuple[str | None, str | None]:
    """(graph events table, node events table), picked by column: 2023 exports keep node
    events in ``CUDA_GRAPH_EVENTS``, 2025 ones in ``CUDA_GRAPH_NODE_EVENTS``. A table
    without the columns read from it is left out (graph ids and capture order are extras:
    without them, node-mode ids are the executables' and roles follow launch order)."""
    graphs = nodes = None
    for table in ("CUDA_GRAPH_EVENTS", "CUDA_GRAPH_NODE_EVENTS"):
        if not trace.has(table):
            continue
        have = trace.columns(table)
        if not {"start", "globalTid"} <= have:
            continue
        if "graphId" in have:
            graphs = table
        if {"originalGraphNodeId", "graphNodeId"} <= have:
            nodes = table
    return graphs, nodes


def graph_origins(trace: Trace) -> dict[tuple[int, int], int]:
    """(pid, exec id) -> the graph it was instantiated from (node-mode ``graph_id``)."""
    nodes = graph_event_tables(trace)[1]
    if nodes is None:
        return {}
    rows = trace.query(
        f"SELECT (coalesce(globalTid, 0) >> 24) & {_PID_MASK}, graphNodeId >> 32,"
        f" originalGraphNodeId >> 32, count(*) AS n FROM {nodes}"
        " WHERE originalGraphNodeId IS NOT NULL GROUP BY 1, 2, 3 ORDER BY n"
    )
    return {(int(p), int(e)): int(g) for p, e, g, _ in rows}  # most nodes win (last)


def graph_creations(trace: Trace) -> pd.DataFrame:
    """``pid, graph_id, created_ns``: when each CUDA graph was created (its first creation
    event, or its first node's; exports keep them even outside the capture range, so
    times may be negative). Zero rows without graph events."""
    graphs, nodes = graph_event_tables(trace)
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
        rows = trace.query(
            f"SELECT p, g, min(t) FROM ({' UNION ALL '.join(selects)}) GROUP BY p, g"
        )
    out = pd.DataFrame(rows, columns=["pid", "graph_id", "created_ns"], dtype="int64")
    out["created_ns"] = trace.session_times(out["created_ns"].to_numpy())[0]
    return out


def mapped(table: dict[tuple[int, int], int], pid: np.ndarray, key: np.ndarray) -> np.ndarray:
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
