"""``specscope graphs`` and :mod:`specscope.analysis.graphs` on the H200 graph fixtures."""

from __future__ import annotations

import json
import random

import pandas as pd
import pytest
import testdata
from click.testing import CliRunner

from specscope.analysis.graphs import (
    Cycle,
    Role,
    find_cycles,
    graph_roles,
    thread_graphs,
    with_lone_buckets,
)
from specscope.analysis.loader import load
from specscope.cli import cli

DATA = testdata.DATA / "graphs"


@pytest.mark.parametrize(
    ("seq", "expected"),
    [
        ([1, 4, 7] * 3, [((1, 4, 7), 3)]),
        ([19, 7, 31] * 2 + [22, 10, 34] * 3, [((19, 7, 31), 2), ((22, 10, 34), 3)]),
        ([5] + [1, 2] * 4, [((1, 2), 4)]),  # a launch in no repeating run is left out
        ([1, 1, 1], [((1,), 3)]),
        ([1, 2, 3], []),
        ([1, 2, 1, 2, 1, 3] * 2, [((1, 2), 2), ((1, 2), 2)]),  # greedy from the front
        # vLLM's piecewise graphs: one graph per layer group, dozens per step
        (
            list(range(40)) * 3 + [99] + list(range(50, 90)) * 2,
            [(tuple(range(40)), 3), (tuple(range(50, 90)), 2)],
        ),
    ],
)
def test_find_cycles(seq, expected):
    assert [(c.ids, c.repetitions) for c in find_cycles(seq)] == expected


def test_find_cycles_equals_trying_every_period():
    """The one-candidate-period search finds what trying every period finds."""
    rng = random.Random(7)

    def every_period(seq, max_period=16):
        out, i = [], 0
        while i < len(seq):
            best = (0, 0)
            for p in range(1, min(max_period, (len(seq) - i) // 2) + 1):
                if len(set(seq[i : i + p])) == p:
                    r = 1
                    while seq[i + r * p : i + (r + 1) * p] == seq[i : i + p]:
                        r += 1
                    if r >= 2 and r * p > best[0]:
                        best = (r * p, p)
            if not best[0]:
                i += 1
                continue
            out.append((tuple(seq[i : i + best[1]]), best[0] // best[1], i))
            i += best[0]
        return out

    for _ in range(500):
        seq = []
        while len(seq) < 50:
            if rng.random() < 0.3:
                seq.append(rng.randrange(12))
            else:
                seq += rng.sample(range(8), rng.randrange(1, 6)) * rng.randrange(1, 4)
        found = [(c.ids, c.repetitions, c.first) for c in find_cycles(seq, max_period=16)]
        assert found == every_period(seq), seq


def test_roles_line_up_by_capture_order_across_buckets():
    # verify graphs (7, 10) created first, then draft (19, 22), then draft-extend (31, 34)
    created = {7: 0, 10: 1, 19: 2, 22: 3, 31: 4, 34: 5}
    # the second bucket's run begins at another rotation: still the same roles
    cycles = [Cycle((19, 7, 31), 6, 0), Cycle((10, 34, 22), 6, 18)]
    roles = {r.number: (r.position, r.graph_ids) for r in graph_roles(cycles, created)}
    assert roles == {1: (1, (7, 10)), 2: (0, (19, 22)), 3: (2, (31, 34))}


def test_a_bucket_launched_once_joins_a_one_graph_role():
    """:func:`with_lone_buckets`: batch size 2 (graph 13) visited once between two others is in
    no cycle; as a step's one replay, at the GPU time of the others, it joins their role."""
    role = [Role(1, 0, (7, 10, 4))]
    seq = [7, 7, 10, 10, 13, 4, 4, 4]
    gpu = pd.Series({7: 25.0, 10: 24.0, 4: 26.0, 13: 24.5})
    assert with_lone_buckets(role, seq, gpu) == [Role(1, 0, (7, 10, 4, 13))]
    first = with_lone_buckets(role, [13, 7, 7, 10, 10], gpu)[0].graph_ids
    assert first == (7, 10, 4, 13)  # (the role's own first, as they were)
    # another kind of graph: a GPU time over twice the role's longest, or under half its shortest
    for other in (53.0, 11.0):
        assert with_lone_buckets(role, seq, pd.Series({**gpu, 13: other})) == role
    # lone graphs side by side, alike: both join; one beside another kind of graph: not
    both = pd.Series({**gpu, 16: 25.0})
    assert with_lone_buckets(role, [7, 7, 13, 16, 4, 4], both)[0].graph_ids == (7, 10, 4, 13, 16)
    odd = pd.Series({**gpu, 99: 2.0})
    assert with_lone_buckets(role, [7, 7, 13, 99, 4, 4], odd) == role
    # a main cycle of several graphs: a lone graph is no whole cycle
    two = [Role(1, 0, (7,)), Role(2, 1, (10,))]
    assert with_lone_buckets(two, [7, 10, 7, 10, 13], gpu) == two


def test_a_lone_cycle_of_buckets_joins_the_roles_position_by_position():
    """EAGLE's three graphs per step (draft, verify, draft-extend in launch order), their
    buckets visited once: a whole cycle of them between whole cycles joins the roles."""
    roles = [Role(2, 0, (19,)), Role(1, 1, (7,)), Role(3, 2, (31,))]
    gpu = pd.Series({19: 10.0, 7: 30.0, 31: 5.0, 22: 11.0, 10: 31.0, 34: 5.5})
    seq = [19, 7, 31] * 3 + [22, 10, 34] + [19, 7, 31] * 2
    got = {r.number: r.graph_ids for r in with_lone_buckets(roles, seq, gpu)}
    assert got == {2: (19, 22), 1: (7, 10), 3: (31, 34)}
    # not between whole cycles, not a whole cycle, or a time of another position: no role
    assert with_lone_buckets(roles, [19, 7, 31, 19, 22, 10, 34, 7, 31], gpu) == roles
    assert with_lone_buckets(roles, [19, 7, 31, 22, 10, 19, 7, 31], gpu) == roles
    swapped = pd.Series({**gpu, 10: 5.0, 34: 31.0})
    assert with_lone_buckets(roles, seq, swapped) == roles
    # a graph launched in two runs, one of which is no whole cycle: not taken
    twice = seq + [22, 10]
    assert with_lone_buckets(roles, twice, gpu) == roles


def test_a_real_export_of_changing_buckets():
    """``scripts/real/bucket_graphs.py``: 60 decode steps, a graph per batch-size bucket, the
    batch size a random walk; size 2 (graph 13) is visited once. Every replay is a step."""
    from specscope.analysis.auto import analyze_processes

    (t,) = thread_graphs(load(DATA.parent / "real/bucket_graphs.sqlite"))
    assert [r.graph_ids for r in t.roles] == [(7, 10, 4, 1, 13)]
    (p,) = analyze_processes(DATA.parent / "real/bucket_graphs.sqlite").processes
    f = p.analysis.frame
    assert len(f) == 60 and (f["graph_launches"] == 1).all()


def test_a_real_export_of_changing_buckets_of_three_roles():
    """``scripts/real/bucket_roles.py``: EAGLE's draft, verify and draft-extend graphs per
    batch-size bucket, 60 steps; the bucket of size 8 (graphs 25, 10, 40) is visited three
    times, each alone. Its three graphs join the three roles: every step replays three."""
    from specscope.analysis.auto import analyze_processes

    path = DATA.parent / "real/bucket_roles.sqlite"
    (t,) = thread_graphs(load(path))
    assert {r.number: r.graph_ids[-1] for r in t.roles} == {2: 25, 1: 10, 3: 40}
    (p,) = analyze_processes(path).processes
    f = p.analysis.frame
    assert len(f) == 60 and (f["graph_launches"] == 3).all()


@pytest.mark.parametrize("name", ["cycle_graph_nonvtx", "cycle_node_nonvtx", "cycle_graph_nvtx"])
def test_bucket_change_cycles_and_roles(name):
    (t,) = thread_graphs(load(DATA / f"{name}.sqlite"))
    assert [(c.ids, c.repetitions) for c in t.cycles] == [((19, 7, 31), 6), ((22, 10, 34), 6)]
    assert {r.number: r.graph_ids for r in t.roles} == {1: (7, 10), 2: (19, 22), 3: (31, 34)}
    assert t.anchors == "role2=graph:19|22,role1=graph:7|10,role3=graph:31|34"
    assert t.graphs["launches"].tolist() == [6] * 6


def test_node_mode_ids_equal_graph_mode_ids():
    """The derived node-mode id (the graph an executable was instantiated from) is graph mode's
    graphId for another run of the same program."""
    graph = thread_graphs(load(DATA / "run_graph_nonvtx.sqlite"))[0]
    node = thread_graphs(load(DATA / "run_node_nonvtx.sqlite"))[0]
    assert graph.graphs.index.tolist() == node.graphs.index.tolist() == [1, 4, 7]
    assert [str(c) for c in node.cycles] == ["[1, 4, 7] \u00d7 10"]
    assert graph.graphs["kernels_per_launch"].isna().all()  # invisible in graph mode
    assert node.graphs["kernels_per_launch"].tolist() == [492, 461, 132]


def test_node_mode_kernels_add_up_to_nsys_stats():
    """Node mode: kernels per launch x launches + eager kernels = nsys stats' kernel count."""
    import csv

    trace = load(DATA / "cycle_node_nonvtx.sqlite")
    (t,) = thread_graphs(trace)
    in_graphs = int((t.graphs["kernels_per_launch"] * t.graphs["launches"]).sum())
    eager = int(((trace.ops["kind"] == "kernel") & ~trace.ops["in_graph"]).sum())
    with open(DATA / "cycle_node_nonvtx_cuda_gpu_kern_sum.csv") as f:
        total = sum(int(r["Instances"]) for r in csv.DictReader(f))
    assert in_graphs + eager == total


def test_two_processes_reported_separately():
    threads = thread_graphs(load(DATA / "two_proc_graph.sqlite"))
    assert len({t.pid for t in threads}) == 2
    for t in threads:
        assert [str(c) for c in t.cycles] == ["[19, 7, 31] \u00d7 6", "[22, 10, 34] \u00d7 6"]


def test_cli_table_and_json():
    runner = CliRunner()
    out = runner.invoke(cli, ["graphs", str(DATA / "cycle_graph_nonvtx.sqlite")])
    assert out.exit_code == 0, out.output
    assert "[19, 7, 31] \u00d7 6, [22, 10, 34] \u00d7 6" in out.output
    assert "--anchors 'role2=graph:19|22,role1=graph:7|10,role3=graph:31|34'" in out.output
    out = runner.invoke(cli, ["graphs", str(DATA / "run_node_nonvtx.sqlite"), "--format", "json"])
    data = json.loads(out.output)
    assert data["mode"] == "node"
    (thread,) = data["threads"]
    assert thread["cycles"] == [{"ids": [1, 4, 7], "repetitions": 10, "first_launch": 0}]
    assert [g["kernels_per_launch"] for g in thread["graphs"]] == [492, 461, 132]


def test_cli_groups_node_launches_from_the_operations_read(monkeypatch):
    """Node mode: ``graphs`` reads the graph operations' exec ids with the operations and
    groups the launches from that read, as a zero-config analysis does; no SQL ``GROUP BY``
    over every node (20 M operations: 33 s against 7 s), the same table."""
    from specscope.analysis import graphlaunches

    want = CliRunner().invoke(cli, ["graphs", str(DATA / "run_node_nonvtx.sqlite")]).output

    def refused(trace):
        raise AssertionError("the launches grouped by SQL")

    monkeypatch.setattr(graphlaunches, "node_launches", refused)
    out = CliRunner().invoke(cli, ["graphs", str(DATA / "run_node_nonvtx.sqlite")])
    assert out.exit_code == 0, out.output
    assert out.output == want


def test_cli_without_graphs_and_not_an_export(tmp_path):
    runner = CliRunner()
    out = runner.invoke(cli, ["graphs", str(DATA / "eager_nonvtx.sqlite")])
    assert out.exit_code == 0
    assert out.output.strip().endswith("no CUDA graph launches (GPU work is eager only)")
    bad = tmp_path / "x.sqlite"
    bad.write_text("not sqlite")
    out = runner.invoke(cli, ["graphs", str(bad)])
    assert out.exit_code == 2
    assert out.output.startswith("Error:") and len(out.output.strip().splitlines()) == 1


def test_graph_events_without_times_leave_roles_to_launch_order(tmp_path):
    """A CUDA_GRAPH_EVENTS table without the columns read from it (a damaged or other-schema
    export) is left out: the cycles stay, roles follow launch order, nothing fails."""
    import shutil
    import sqlite3

    path = tmp_path / "no_event_times.sqlite"
    shutil.copy(DATA / "cycle_graph_nonvtx.sqlite", path)
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE e AS SELECT graphId, globalTid FROM CUDA_GRAPH_EVENTS")
        con.execute("DROP TABLE CUDA_GRAPH_EVENTS")
        con.execute("ALTER TABLE e RENAME TO CUDA_GRAPH_EVENTS")
    (t,) = thread_graphs(load(path))
    assert [(c.ids, c.repetitions) for c in t.cycles] == [((19, 7, 31), 6), ((22, 10, 34), 6)]
    assert t.graphs["created_ns"].isna().all()
    assert [r.graph_ids for r in sorted(t.roles, key=lambda r: r.number)] == [
        (19, 22),
        (7, 10),
        (31, 34),
    ]
