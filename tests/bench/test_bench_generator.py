"""bench/make_export.py writes a small export with the shape of our EAGLE decode loop."""

from __future__ import annotations

import importlib.util
import sqlite3
import sys
from pathlib import Path

import pytest
from testdata import ROOT

from specscope.analysis.synthetic import _DDL

_spec = importlib.util.spec_from_file_location("make_export", ROOT / "bench" / "make_export.py")
make_export = importlib.util.module_from_spec(_spec)
sys.modules["make_export"] = make_export  # dataclasses and multiprocessing look it up
_spec.loader.exec_module(make_export)

OPS = 2_000
CHILDREN = [
    "draft.prepare",
    "draft.replay",
    "verify.prepare",
    "verify.replay",
    "accept",
    "draft_extend.prepare",
    "draft_extend.replay",
]


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> tuple[Path, dict[str, int]]:
    path = tmp_path_factory.mktemp("bench") / "small.sqlite"
    return path, make_export.generate(path, OPS, seed=3)


def q(path: Path, sql: str) -> list[tuple]:
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def test_row_counts(export):
    path, counts = export
    tables = {r[0] for r in q(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == set(make_export.TABLES)
    for table in make_export.TABLES:
        assert q(path, f"SELECT count(*) FROM {table}")[0][0] == counts[table], table
    ops = sum(counts[t] for t in make_export.GPU_TABLES)
    per_step = 3 * make_export.DEFAULT_GRAPH_KERNELS + 3 * (3 + 1 + 3 + 1) + 2  # at most
    assert OPS <= ops < OPS + per_step  # whole steps, rounded up
    graph = q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId NOT NULL")
    assert graph[0][0] == counts["steps"] * 3 * make_export.DEFAULT_GRAPH_KERNELS
    assert 0.85 < graph[0][0] / ops < 0.95
    assert not list(path.parent.glob("*.partial"))


def test_graph_kernels_belong_to_a_graph_launch_of_the_same_process(export):
    path, _ = export
    rows = q(
        path,
        """SELECT s.value, (k.globalPid >> 24) & 16777215, (r.globalTid >> 24) & 16777215,
                  k.start >= r.end, count(*)
           FROM CUPTI_ACTIVITY_KIND_KERNEL k
           LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)
           LEFT JOIN StringIds s ON s.id = r.nameId
           WHERE k.graphNodeId NOT NULL GROUP BY 1, 2, 3, 4""",
    )
    pid = make_export.PID
    assert [r[:4] for r in rows] == [("cudaGraphLaunch_v10000", pid, pid, 1)]
    # one launch per replay range, each with K kernels on distinct nodes
    per_launch = q(
        path,
        """SELECT count(*), count(DISTINCT graphNodeId) FROM CUPTI_ACTIVITY_KIND_KERNEL
           WHERE graphNodeId NOT NULL GROUP BY correlationId""",
    )
    k = make_export.DEFAULT_GRAPH_KERNELS
    assert set(per_launch) == {(k, k)}


def test_eager_ops_come_from_their_api_calls(export):
    path, counts = export
    for table, api in [
        ("KERNEL", "cudaLaunchKernel_v7000"),
        ("MEMCPY", "cudaMemcpyAsync_v3020"),
        ("MEMSET", "cudaMemsetAsync_v3020"),
    ]:
        rows = q(
            path,
            f"""SELECT s.value, min(g.start - r.start) > 0, count(*)
                FROM CUPTI_ACTIVITY_KIND_{table} g
                JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)
                JOIN StringIds s ON s.id = r.nameId
                WHERE g.graphNodeId IS NULL GROUP BY 1""",
        )
        assert [r[:2] for r in rows] == [(api, 1)], table
    steps = counts["steps"]
    fused = q(
        path,
        """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.shortName
           WHERE s.value = 'fused_metadata_copy_kernel' AND k.graphNodeId IS NULL""",
    )
    assert fused[0][0] == 3 * steps
    kinds = dict(q(path, "SELECT copyKind, count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY GROUP BY 1"))
    assert set(kinds) == {1, 2, 8} and kinds[2] == steps and kinds[8] == 3 * steps


def test_nvtx_ranges(export):
    path, counts = export
    rows = q(
        path,
        """SELECT coalesce(n.text, s.value), n.eventType, count(*) FROM NVTX_EVENTS n
           LEFT JOIN StringIds s ON s.id = n.textId GROUP BY 1, 2""",
    )
    steps = counts["steps"]
    assert sorted(rows) == sorted(
        [("specscope", 75, 1), ("step", 59, steps)] + [(name, 59, steps) for name in CHILDREN]
    )
    # each step holds its seven children, in order, on the one thread
    ranges = q(
        path,
        """SELECT s.value, n.start, n.end, n.globalTid FROM NVTX_EVENTS n
           JOIN StringIds s ON s.id = n.textId ORDER BY n.start, n.end DESC""",
    )
    assert len({r[3] for r in ranges}) == 1
    for i in range(0, len(ranges), 8):
        step, children = ranges[i], ranges[i + 1 : i + 8]
        assert step[0] == "step"
        assert [c[0] for c in children] == CHILDREN
        assert all(step[1] <= c[1] < c[2] <= step[2] for c in children)
        assert all(a[2] <= b[1] for a, b in zip(children, children[1:], strict=False))


def test_streams_do_not_overlap_without_overlap_frac(tmp_path):
    path = tmp_path / "x.sqlite"
    make_export.generate(path, 1_000, overlap_frac=0.0, step_style="startend")
    rows = q(
        path,
        """WITH g AS (SELECT start, end, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL
                      UNION ALL SELECT start, end, streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY
                      UNION ALL SELECT start, end, streamId FROM CUPTI_ACTIVITY_KIND_MEMSET),
           o AS (SELECT streamId, start, lag(end) OVER (PARTITION BY streamId ORDER BY start) pe
                 FROM g)
           SELECT streamId, min(start - pe) FROM o GROUP BY 1""",
    )
    assert len(rows) == 2 and all(gap > 0 for _, gap in rows)
    step = q(
        path,
        """SELECT n.eventType, count(DISTINCT n.rangeId), count(*) FROM NVTX_EVENTS n
           JOIN StringIds s ON s.id = n.textId WHERE s.value = 'step' GROUP BY 1""",
    )
    assert len(step) == 1 and step[0][0] == 60 and step[0][1] == step[0][2]


def test_eager_launches_are_a_call_each_in_order(tmp_path):
    # --launches eager: no graph; each kernel its own cudaLaunchKernel (after a cuKernelGetName),
    # starting after that call returned and after the kernel before it on its stream ended;
    # the same kernels every step, so that zero-config finds the loop (a step per accept kernel)
    from specscope.analysis.auto import analyze_processes

    path = tmp_path / "eager.sqlite"
    counts = make_export.generate(path, 3_000, seed=4, launches="eager", overlap_frac=0.0)
    assert q(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE graphNodeId NOT NULL")[
        0
    ] == (0,)
    calls = q(
        path,
        """SELECT s.value, count(*), sum(k.start > r.end) FROM CUPTI_ACTIVITY_KIND_KERNEL k
           JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)
           JOIN StringIds s ON s.id = r.nameId GROUP BY 1""",
    )
    kernels = counts["CUPTI_ACTIVITY_KIND_KERNEL"]
    assert calls == [("cudaLaunchKernel_v7000", kernels, kernels)]
    names = q(
        path,
        """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId
           WHERE s.value = 'cuKernelGetName'""",
    )
    assert names == [(kernels,)]
    overlaps = q(
        path,
        """SELECT count(*) FROM (SELECT start, lag(end) OVER (PARTITION BY streamId
           ORDER BY start) pe FROM CUPTI_ACTIVITY_KIND_KERNEL) WHERE start < pe""",
    )
    assert overlaps == [(0,)]
    starts = [r[0] for r in q(path, "SELECT start FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY rowid")]
    assert starts == sorted(starts)
    con = sqlite3.connect(path)  # (without NVTX: the loop found from the kernels alone)
    with con:
        con.execute("DELETE FROM NVTX_EVENTS")
    con.close()
    (found,) = analyze_processes(path).processes
    assert found.choice.startswith("repeating eager kernel pattern")
    assert "'reduce_kernel'" in found.choice and f"{counts['steps']} times" in found.choice


def test_min_columns_match_the_schema_writer(tmp_path):
    path = tmp_path / "min.sqlite"
    make_export.generate(path, 500, columns="min")
    for table in make_export.TABLES:
        cols = [r[1] for r in q(path, f"PRAGMA table_info({table})")]
        assert cols == [c.split()[0] for c in _DDL[table].split(",")], table


def test_deterministic_for_a_seed(tmp_path):
    dumps = []
    for name in ("a.sqlite", "b.sqlite"):
        make_export.generate(tmp_path / name, 800, seed=7)
        con = sqlite3.connect(tmp_path / name)
        dumps.append(list(con.iterdump()))
        con.close()
    assert dumps[0] == dumps[1]


def test_refuses_to_overwrite(tmp_path, capsys):
    path = tmp_path / "exists.sqlite"
    path.write_bytes(b"keep me")
    with pytest.raises(FileExistsError):
        make_export.generate(path, 100)
    assert make_export.main([str(path), "--ops", "100"]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err
    assert path.read_bytes() == b"keep me"
