"""Node mode's CUDA graph launches, grouped from their graph operations.

In node mode (``--cuda-graph-trace=node``) an export has no row per graph launch: each kernel,
memcpy and memset node of a replay is a row of its own, with the launch's ``correlationId`` and
``graphNodeId = exec << 32 | node``. :attr:`.loader.Trace.graph_launches` needs one row per
launch, which is SQL's::

    SELECT min(start), max(end), min(deviceId), globalPid AS gpid, correlationId AS corr,
           -1, graphNodeId >> 32 AS exec, sum(<1 for a kernel, else 0>)
    FROM <KERNEL, MEMCPY and MEMSET> WHERE graphNodeId IS NOT NULL GROUP BY gpid, corr, exec

That ``GROUP BY`` is a second pass over every operation, and SQLite sorts for it on one core
(2 M ops: 0.7 s). Where the operations have been read anyway (:attr:`.loader.Trace.ops`: their
query carries the exec id where the analysis will want launches, :mod:`.opsread`),
:func:`launches_of_ops` groups them from that read instead, to the same rows, on a second
thread while the ops frame is built (2 M ops: 0.02 s); the ``GROUP BY`` runs only where the
operations are not read (or an exec id does not fit the field the read packs it in).
"""

from __future__ import annotations

import numpy as np

from specscope.analysis.memory import CHUNK_ROWS
from specscope.analysis.opsread import EXEC_SATURATED, KINDS
from specscope.analysis.sqlread import NULL_INT


def group_launches(start, end, device, gpid, corr, exec_id, kernel) -> list[np.ndarray]:
    """Rows (graph ops, or groups of them) grouped by launch, (gpid, corr, exec), and sorted
    by it: what the module doc's ``GROUP BY`` gives, columns ``start (min), end (max), device
    (min), gpid, corr, -1, exec, kernels (sum of kernel)`` (a NULL start or device,
    :data:`.sqlread.NULL_INT`, only where every row of the group has one).

    First the runs of equal keys in row order (cheap, and most of the merging when the rows
    of one launch are consecutive), then those rows sorted and merged."""
    keys = [gpid, corr, exec_id]
    values = [start, end, device, kernel]
    for sort in (False, True):
        if sort:
            order = np.lexsort(keys[::-1])
            keys, values = [k[order] for k in keys], [v[order] for v in values]
        same = np.zeros(len(keys[0]), dtype=bool)  # same key as the row before
        same[1:] = True
        for k in keys:
            same[1:] &= k[1:] == k[:-1]
        heads = np.flatnonzero(~same)
        if not len(heads):
            break
        first, last, dev, count = values
        values = [_least(first, heads), np.maximum.reduceat(last, heads), _least(dev, heads)]
        values.append(np.add.reduceat(count, heads))
        keys = [k[heads] for k in keys]
    first, last, dev, count = values
    return [first, last, dev, keys[0], keys[1], np.full(len(first), -1), keys[2], count]


def _least(values: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """Per group (starting at ``heads``), the least of ``values`` that is not NULL_INT (SQL's
    ``min``), NULL_INT where all are."""
    top = np.iinfo(np.int64).max
    low = np.minimum.reduceat(np.where(values == NULL_INT, top, values), heads)
    low[low == top] = NULL_INT
    return low


def _by_launch(
    graph: np.ndarray, pid: np.ndarray, corr: np.ndarray, execs: np.ndarray
) -> np.ndarray | None:
    """The positions of a chunk's graph operations (``graph``) sorted by launch (pid,
    correlation id, exec id) where consecutive ones are mostly of different launches; else
    None (the runs as they are). nsys writes a replay's nodes one after another; nsys 2025.6 no
    longer promises any order of the rows, and a 2 M operations' export with its rows shuffled
    made a run of every graph operation: 7 columns of each, 300 MiB more at once."""
    rows = np.flatnonzero(graph)
    ids = corr[rows]
    if np.count_nonzero(ids[1:] != ids[:-1]) <= len(rows) // 4:
        return None
    return rows[np.lexsort((execs[rows], ids, pid[rows]))]


def exec_ids(misc_low: np.ndarray) -> np.ndarray:
    """Each read op's exec id field (bits 16-30 of misc's low half, :mod:`.opsread`) as int16:
    what :func:`launches_of_ops` needs besides the ops frame (2 bytes per op)."""
    return (misc_low >> 16).astype(np.int16)


def launches_of_ops(
    start, end, corr, device, pid, kind, in_graph, exec_id
) -> list[np.ndarray] | None:
    """:func:`group_launches` of the graph operations among the read ones (the columns of
    :attr:`.loader.Trace.ops` as arrays: ``kind`` its codes of :data:`.opsread.KINDS`; with
    ``exec_id`` of :func:`exec_ids`; gpid returned as ``pid << 24``: the read keeps the pid's
    24 bits only); None when a graph op's exec id did not fit its field
    (:data:`.opsread.EXEC_SATURATED`): the caller groups by SQL then.

    Chunk by chunk (:data:`CHUNK_ROWS`): the runs of consecutive rows of one launch in each
    chunk, reduced in place (no copy of the graph ops), then those runs of all chunks merged
    by :func:`group_launches` (a launch split between chunks or runs is one row again)."""
    graph_kind, kernel_kind = KINDS.index("graph"), KINDS.index("kernel")
    pieces = []
    for lo in range(0, len(start), CHUNK_ROWS):
        chunk = slice(lo, lo + CHUNK_ROWS)
        graph = in_graph[chunk] & (kind[chunk] != graph_kind)
        if not graph.any():
            continue
        execs = exec_id[chunk]
        if (execs[graph] == EXEC_SATURATED).any():
            return None
        cols = [c[chunk] for c in (start, end, device, pid, corr)] + [execs, kind[chunk]]
        if (order := _by_launch(graph, cols[3], cols[4], execs)) is not None:
            cols = [c[order] for c in cols]  # (the chunk's graph ops, each launch's together)
            graph = np.ones(len(order), dtype=bool)
        c_start, c_end, c_device, c_pid, c_corr, c_exec, c_kind = cols
        same = np.zeros(len(graph), dtype=bool)  # same launch (or not a graph op) as before
        same[1:] = graph[1:] == graph[:-1]
        for key in (c_corr, c_exec, c_pid):
            same[1:] &= key[1:] == key[:-1]
        heads = np.flatnonzero(~same)
        runs = graph[heads]  # the runs of graph ops (the others: runs of eager ops)
        kernels = np.add.reduceat((c_kind == kernel_kind).astype(np.int64), heads)
        pieces.append(
            [
                _least(c_start, heads)[runs],
                np.maximum.reduceat(c_end, heads)[runs],
                _least(c_device.astype(np.int64), heads)[runs],
                c_pid[heads[runs]].astype(np.int64) << 24,
                c_corr[heads[runs]].astype(np.int64),
                c_exec[heads[runs]].astype(np.int64),
                kernels[runs],
            ]
        )
    if not pieces:
        return [np.zeros(0, dtype=np.int64) for _ in range(8)]
    return group_launches(*(np.concatenate([p[i] for p in pieces]) for i in range(7)))
