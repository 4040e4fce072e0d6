"""Node mode's graph launches grouped from the GPU operations' read (:mod:`.launches`) are the
rows of the SQL ``GROUP BY`` they replace, whatever the order, chunking or exec ids."""

from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pandas as pd
import pytest
from damage import shuffled_copy
from testdata import DATA

from specscope.analysis import launches, parallel
from specscope.analysis.graphlaunches import launches_from_ops, node_launches
from specscope.analysis.loader import load

NODE_EXPORTS = [
    DATA / "graphs" / "cycle_node_nonvtx.sqlite",
    DATA / "graphs" / "run_node_nonvtx.sqlite",
    DATA / "eagle_node_before.sqlite",
]


def _pids(cols: list[np.ndarray]) -> list[np.ndarray]:
    """The rows with gpid as its pid (the read keeps the pid's 24 bits only)."""
    cols = [np.asarray(c, dtype=np.int64) for c in cols]
    cols[3] = (cols[3] >> 24) & 0xFFFFFF
    return cols


@pytest.mark.parametrize("threshold", [0, 1 << 60], ids=["thread", "inline"])
@pytest.mark.parametrize("path", NODE_EXPORTS, ids=lambda p: p.stem)
def test_launches_of_the_ops_read_are_the_group_by(path, threshold, monkeypatch):
    monkeypatch.setattr(launches, "CHUNK_ROWS", 7)  # launches split between chunks, merged
    monkeypatch.setattr(parallel, "BESIDE_MIN_ROWS", threshold)  # grouped on a second thread
    trace = load(path)
    trace.graph_execs = True
    of_ops = launches_from_ops(trace)  # the ops not read yet: None, then read
    assert of_ops is None
    trace.ops  # noqa: B018
    of_ops = launches_from_ops(trace)
    by_sql = node_launches(trace)
    assert len(of_ops[0]) > 1
    for a, b in zip(_pids(of_ops), _pids(by_sql), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("chunk", [7, 1 << 18])
def test_launches_of_ops_in_no_order_are_the_group_by(tmp_path, monkeypatch, chunk):
    """Rows in no order (nsys 2025.6 promises none): each chunk's graph operations are put
    together by launch before their runs are taken (:func:`.launches._by_launch`), and the
    launches are the SQL ``GROUP BY``'s, with fewer runs than graph operations."""
    monkeypatch.setattr(launches, "CHUNK_ROWS", chunk)
    sorted_chunks, runs = [], []
    by_launch, group = launches._by_launch, launches.group_launches

    def spy(*args):
        order = by_launch(*args)
        sorted_chunks.append(order is not None)
        return order

    def count(*cols):
        runs.append(len(cols[0]))
        return group(*cols)

    monkeypatch.setattr(launches, "_by_launch", spy)
    monkeypatch.setattr(launches, "group_launches", count)
    path = shuffled_copy(DATA / "eagle_node_before.sqlite", tmp_path / "shuffled.sqlite", 3)
    trace = load(path)
    trace.graph_execs = True
    trace.ops  # noqa: B018
    of_ops = launches_from_ops(trace)
    for a, b in zip(_pids(of_ops), _pids(node_launches(trace)), strict=True):
        np.testing.assert_array_equal(a, b)
    assert any(sorted_chunks)
    if chunk > 7:  # (7 rows of a shuffled export: each of another launch, whatever the sort)
        assert runs[0] < int(trace.ops["in_graph"].sum()) / 4


@pytest.mark.parametrize("path", NODE_EXPORTS, ids=lambda p: p.stem)
def test_graph_launches_the_same_with_or_without_the_ops_read(path):
    by_sql = load(path).graph_launches  # the ops not read: the GROUP BY
    trace = load(path)
    trace.graph_execs = True
    trace.ops  # noqa: B018
    pd.testing.assert_frame_equal(trace.graph_launches, by_sql)


@pytest.mark.parametrize("exec_id", [40000, -5])
def test_exec_ids_the_read_cannot_hold_fall_back_to_sql(tmp_path, exec_id):
    path = tmp_path / "big_exec.sqlite"
    shutil.copy(DATA / "graphs" / "run_node_nonvtx.sqlite", path)
    with sqlite3.connect(path) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
        for kind in ("KERNEL", "MEMCPY", "MEMSET"):
            if f"CUPTI_ACTIVITY_KIND_{kind}" not in tables:
                continue
            con.execute(
                f"UPDATE CUPTI_ACTIVITY_KIND_{kind} SET graphNodeId ="
                " (? << 32) | (graphNodeId & 65535) WHERE graphNodeId IS NOT NULL",
                (exec_id,),
            )
    trace = load(path)
    trace.graph_execs = True
    trace.ops  # noqa: B018
    assert launches_from_ops(trace) is None
    got = trace.graph_launches
    assert len(got) and (got["exec_id"] == exec_id).all()
    pd.testing.assert_frame_equal(got, load(path).graph_launches)


def test_ops_dropped_as_invalid_still_count_in_their_launches(tmp_path):
    """Where validation drops operations (impossible times), the launches are still the
    ``GROUP BY``'s, as for an export whose operations were never read: they are grouped from
    every operation read, before validation."""
    from specscope.analysis.validate import validated

    path = tmp_path / "damaged.sqlite"
    shutil.copy(DATA / "graphs" / "run_node_nonvtx.sqlite", path)
    with sqlite3.connect(path) as con:
        con.execute(
            "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 1000 WHERE rowid = (SELECT"
            " min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId IS NOT NULL)"
        )
    trace = load(path)
    trace.graph_execs = True
    assert validated(trace)  # a note: the operation dropped
    by_sql = node_launches(trace)
    for a, b in zip(_pids(launches_from_ops(trace)), _pids(by_sql), strict=True):
        np.testing.assert_array_equal(a, b)
    pd.testing.assert_frame_equal(trace.graph_launches, load(path).graph_launches)


def test_without_graph_execs_the_read_leaves_the_launches_to_sql():
    path = NODE_EXPORTS[0]
    trace = load(path)  # graph_execs False: the ops query reads no exec ids
    trace.ops  # noqa: B018
    assert launches_from_ops(trace) is None
    pd.testing.assert_frame_equal(trace.graph_launches, load(path).graph_launches)


@pytest.mark.parametrize(
    ("step", "anchors", "needs"),
    [
        ("step", (), False),
        ("step", ("draft=kernel:fused",), False),
        ("step", ("draft=graph:8",), True),
        ("step", ("draft=graph-role:1",), True),
        ("graph:8|9", (), True),
        ("kernel:fused", (), False),
    ],
)
def test_which_specs_read_exec_ids(step, anchors, needs):
    from specscope.analysis.spec import CYCLE, StepSpec

    assert StepSpec(step=step, anchors=anchors).needs_graph_launches is needs
    assert StepSpec(step=CYCLE, anchors=("a=graph:1",)).needs_graph_launches


@pytest.mark.parametrize(
    ("name", "carries"), [("eagle_node_before", True), ("eagle_graph_before", False)]
)
def test_exec_ids_are_read_in_node_mode_only(name, carries):
    """Graph mode keeps a row per launch (GRAPH_TRACE): the ops query reads no exec ids there,
    asked or not (they would cost SQLite ~40 ns per op for nothing)."""
    from specscope.analysis import opsread

    con = sqlite3.connect(f"file:{DATA / f'{name}.sqlite'}?mode=ro", uri=True)
    tables = frozenset(r[0] for r in con.execute("SELECT name FROM sqlite_master"))
    sql = " ".join(q for q, _ in opsread.op_queries(con, tables, 1, execs=True))
    assert ("graphNodeId >> 32" in sql) is carries
    assert "graphNodeId >> 32" not in " ".join(q for q, _ in opsread.op_queries(con, tables, 1))
    con.close()


def test_graph_ids_mapped_as_the_dict_maps_them():
    """Node mode's graph ids (graphlaunches.mapped): ``origins.get((pid, exec), exec)`` per launch,
    vectorised; the same on random tables, keys missing, negative, and pids not in the table."""
    from specscope.analysis.graphlaunches import mapped

    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(0, 50))
        pids, keys = rng.integers(1, 4, n), rng.integers(-3, 10, n)
        table = {
            (int(rng.integers(0, 5)), int(rng.integers(-3, 10))): int(rng.integers(0, 100))
            for _ in range(int(rng.integers(0, 12)))
        }
        want = [table.get((int(p), int(e)), int(e)) for p, e in zip(pids, keys, strict=True)]
        np.testing.assert_array_equal(mapped(table, pids, keys), np.array(want, dtype=np.int64))


def test_two_processes_sharing_correlation_and_exec_ids(tmp_path, monkeypatch):
    """Several processes in one export (node mode), their launches interleaved row by row and
    sharing correlation ids and exec ids: a launch is told apart by its process too, as the
    ``GROUP BY`` tells it."""
    from specscope.analysis.synthetic import SyntheticExport, global_tid

    monkeypatch.setattr(launches, "CHUNK_ROWS", 5)
    x = SyntheticExport()
    name = x.string("cudaGraphLaunch_v10000")
    t = 1_000_000
    for i in range(6):
        corr = x.api("cudaGraphLaunch", t, t + 500, pid=100)
        row = (t, t + 500, 1, global_tid(200, 200), corr, name, 0)  # pid 200: the same id
        x.rows["CUPTI_ACTIVITY_KIND_RUNTIME"].append(row)
        exec_id = 1 + i % 2
        for node in range(3):  # the two processes' nodes alternate row by row
            for pid, shift in ((100, 0), (200, 7)):
                start = t + 1000 + 100 * node + shift
                node_id = exec_id << 32 | node
                x.kernel(f"k{node}", start, start + 50, corr, pid=pid, graph_node=node_id)
        x.memcpy("htod", 64, t + 1400, t + 1450, corr, pid=200, graph_node=exec_id << 32 | 9)
        t += 10_000
    path = x.write(tmp_path / "two_proc_node.sqlite")
    trace = load(path)
    trace.graph_execs = True
    trace.ops  # noqa: B018
    of_ops = launches_from_ops(trace)
    assert len(of_ops[0]) == 12  # 6 launches of each process
    for a, b in zip(_pids(of_ops), _pids(node_launches(trace)), strict=True):
        np.testing.assert_array_equal(a, b)
    pd.testing.assert_frame_equal(trace.graph_launches, load(path).graph_launches)
