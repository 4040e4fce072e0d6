"""``explain`` (:mod:`specscope.analysis.explain`, ``specscope explain``): the words and data
for a gap's median step and for a change, on a synthetic step drawn below, the graph-mode
kpool_fused -> draft_alias pair of tests/data/graphs and the bundled node-mode examples."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import testdata
from click.testing import CliRunner

from specscope.analysis.explain import Item, busy_within, explain_change, explain_gap
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import StepSpec, load_preset
from specscope.analysis.synthetic import SyntheticExport
from specscope.cli import cli

GRAPHS = testdata.DATA / "graphs"
KPOOL, ALIAS = GRAPHS / "run_graph_kpool_nvtx.sqlite", GRAPHS / "run_graph_alias_nvtx.sqlite"
GAP = "gap_us:draft_extend.replay->draft.replay"
COPY = "_fused_metadata_copy_kernel"


def prep_step() -> SyntheticExport:
    """One step; times in ns::

    CPU  |A 100-400|   |-- prep 2100-2900 --|      |B 2950-3100|
          launch@200     memcpy@2200-2250          launch@3000
                         launch@2500-2520
    GPU         [a_k 1000-2000] [htod 2300-2400] [copy_k 2600-2650]  [b_k 3200-4000]
    """
    x = SyntheticExport()
    x.range("step", 0, 9000)
    x.range("A", 100, 400)
    x.kernel("a_k", 1000, 2000, x.api("cudaLaunchKernel", 200, 250))
    x.range("prep", 2100, 2900)
    x.memcpy("htod", 64, 2300, 2400, x.api("cudaMemcpyAsync", 2200, 2250))
    x.kernel("copy_k", 2600, 2650, x.api("cudaLaunchKernel", 2500, 2520))
    x.range("B", 2950, 3100)
    x.kernel("b_k", 3200, 4000, x.api("cudaLaunchKernel", 3000, 3030))
    return x


def test_host_bound_step(write_export):
    a = analyze(write_export(prep_step()), StepSpec("step", ("A", "B")))
    s = explain_gap(a, "A->B")
    assert s.step == 0 and s.launch_call == "cudaLaunchKernel"
    assert s.numbers["gap_us"] == pytest.approx(1.2)
    assert s.numbers["gap_busy_us"] == pytest.approx(0.15)
    assert s.numbers["host_lag_us"] == pytest.approx(1.0)
    assert s.numbers["launch_latency_us"] == pytest.approx(0.2)
    assert s.work == [Item("memcpy HtoD", 1, pytest.approx(0.1)), Item("copy_k", 1, 0.05)]
    assert s.phases == [Item("prep", 1, pytest.approx(0.8)), Item("B", 1, pytest.approx(0.05))]
    assert {i.name: i.count for i in s.api_calls} == {"cudaMemcpyAsync": 1, "cudaLaunchKernel": 1}
    text = s.to_json()["text"]
    assert "A → B 1.2 µs" in text and "GPU idle 1.1 µs" in text
    assert "host-bound: B was launched 1.0 µs after A's GPU work ended" in text
    assert "the host was in prep 0.8 µs" in text and "cudaMemcpyAsync ×1" in text
    assert s.to_json()["bound"] == "host"


def test_work_bound_step(write_export):
    """B is launched 0.3 µs after A ends, but a copy issued before it runs on for 1.2 µs
    after that: B queues behind the copy (1.2 µs) longer than the GPU idled before the call
    (0.1 µs) or after it (0.05 µs)::

        CPU  |A|  launch@200    copy@2050-2080  |B 2290-2400| launch@2300
        GPU      [a_k 1000-2000]  [htod 2100-3500]             [b_k 3550-4000]
    """
    x = SyntheticExport()
    x.range("step", 0, 9000)
    x.range("A", 100, 400)
    x.kernel("a_k", 1000, 2000, x.api("cudaLaunchKernel", 200, 250))
    x.memcpy("htod", 1 << 20, 2100, 3500, x.api("cudaMemcpyAsync", 2050, 2080))
    x.range("B", 2290, 2400)
    x.kernel("b_k", 3550, 4000, x.api("cudaLaunchKernel", 2300, 2330))
    s = explain_gap(analyze(write_export(x), StepSpec("step", ("A", "B"))), "A->B")
    assert s.numbers["host_lag_us"] == pytest.approx(0.3)
    assert s.numbers["gap_busy_us"] == pytest.approx(1.4)
    assert s.numbers["launch_latency_us"] == pytest.approx(1.25)
    assert s.queued_us == pytest.approx(1.2)
    data = s.to_json()
    assert data["bound"] == "work" and data["queued_us"] == pytest.approx(1.2)
    assert "work-bound: B was launched 0.3 µs after A's GPU work ended" in data["text"]
    assert "then queued 1.2 µs behind GPU work issued before it" in data["text"]
    # the copy ends at 2500 instead: 0.2 µs queued, 1.05 µs of launch latency with the GPU
    # idle (B would have waited as long without the copy): not work-bound
    s.queued_us, s.numbers["gap_busy_us"] = 0.2, 0.4
    assert s.to_json()["bound"] == "host"


def _with_os_calls(path, calls: list[tuple[str, int, int, int]]) -> None:
    """Add an ``OSRT_API`` table (nsys ``-t osrt``) of ``calls``: (name, start, end, tid
    offset from the launching thread's), as nsys 2025 writes it."""
    import sqlite3

    with sqlite3.connect(path) as con:
        gtid = con.execute("SELECT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()[0]
        con.execute(
            "CREATE TABLE OSRT_API (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass"
            " INTEGER NOT NULL, globalTid INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER"
            " NOT NULL, nestingLevel INTEGER, callchainId INTEGER NOT NULL)"
        )
        base = con.execute("SELECT max(id) FROM StringIds").fetchone()[0] + 1
        names = sorted({c[0] for c in calls})
        con.executemany(
            "INSERT INTO StringIds (id, value) VALUES (?, ?)",
            [(base + i, n) for i, n in enumerate(names)],
        )
        con.executemany(
            "INSERT INTO OSRT_API VALUES (?, ?, 27, ?, ?, 0, 0, 0)",
            [(s, e, gtid + dt, base + names.index(n)) for n, s, e, dt in calls],
        )


def test_os_runtime_calls_during_the_lag(write_export):
    # the launching thread blocks in poll across the lag's start (2000) and in a mutex inside
    # it; another thread's poll and a read after B's launch (3000) are not the lag's
    path = write_export(prep_step())
    spec = StepSpec("step", ("A", "B"))
    before = explain_gap(analyze(path, spec), "A->B")
    assert not before.os_traced and before.os_calls == []
    _with_os_calls(
        path,
        [
            ("poll", 1800, 2300, 0),
            ("pthread_mutex_lock", 2600, 2700, 0),
            ("poll", 2000, 2900, 1),
            ("read", 3100, 3200, 0),
            ("select", "soon", 2500, 0),  # a damaged row: left out, no error
        ],
    )
    s = explain_gap(analyze(path, spec), "A->B")
    assert s.os_traced
    assert s.os_calls == [
        Item("poll", 1, pytest.approx(0.3)),
        Item("pthread_mutex_lock", 1, pytest.approx(0.1)),
    ]
    text = s.to_json()["text"]
    assert "in OS runtime calls 0.4 µs of it: poll ×1 0.3 µs, pthread_mutex_lock ×1 0.1 µs" in text
    assert s.numbers == before.numbers and s.api_calls == before.api_calls
    assert "no OS runtime call traced" not in before.to_json()["text"]  # (no table: no word)


def test_no_os_runtime_call_during_the_lag(write_export):
    # the table is there, but the launching thread made no traced call in the lag: it ran
    path = write_export(prep_step())
    _with_os_calls(path, [("poll", 3100, 3200, 0), ("poll", 2000, 2900, 1)])
    s = explain_gap(analyze(path, StepSpec("step", ("A", "B"))), "A->B")
    assert s.os_traced and s.os_calls == []
    assert "no OS runtime call traced on that thread meanwhile" in s.to_json()["text"]


def test_os_runtime_calls_before_and_after(write_export):
    # before: the launching thread waits in poll during the lag; after: no traced call. The
    # change lists poll going away; a pair without the table says nothing of OS calls
    spec = StepSpec("step", ("A", "B"))
    before, after = write_export(prep_step()), write_export(prep_step())
    plain = explain_change(analyze(before, spec), analyze(after, spec), "A->B")
    assert "OS calls" not in plain.to_json()["text"] and plain.to_json()["os_calls"] == []
    _with_os_calls(before, [("poll", 2000, 2600, 0)])
    _with_os_calls(after, [("poll", 3100, 3200, 0)])
    c = explain_change(analyze(before, spec), analyze(after, spec), "A->B")
    data = c.to_json()
    assert data["os_calls"] == [
        {"name": "poll", "before_count": 1, "after_count": 0, "before_us": 0.6, "after_us": 0.0}
    ]
    assert "; OS calls: poll ×1 → ×0 (0.6 → 0.0 µs)." in data["text"]


def test_os_runtime_calls_of_an_nsys_2023_export():
    # nsys 2023.4 writes OSRT_API with the same columns: every row of a thread, in start order
    from specscope.analysis.loader import load

    trace = load(testdata.DATA / "cpu_eagle_2023.sqlite")
    gtid, n = trace.query(
        "SELECT globalTid, count(*) AS n FROM OSRT_API GROUP BY globalTid ORDER BY n DESC"
    )[0]
    calls = trace.os_calls((gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF)
    assert len(calls) == n and calls["start_ns"].is_monotonic_increasing
    assert (calls["end_ns"] >= calls["start_ns"]).all()
    assert "pthread_cond_signal" in set(calls["name"])


def test_os_runtime_calls_of_a_real_worker_thread():
    """``overlap_thread.sqlite`` was recorded with ``-t cuda,osrt``: in the median step's lag
    the worker waited for its next step on a condition (Python's ``queue.get``)."""
    from specscope.analysis.auto import analyze_processes

    (p,) = analyze_processes(testdata.DATA / "real/overlap_thread.sqlite").processes
    s = explain_gap(p.analysis, "role1->role1")
    assert s.os_traced and s.numbers["host_lag_us"] > 0
    assert "pthread_cond_timedwait" in {i.name for i in s.os_calls}
    assert "in OS runtime calls" in s.to_json()["text"]
    assert any("CUDA API and OS runtime calls are told" in c for c in s.caveats)


def test_gpu_bound_pair_on_real_export():
    """draft -> verify in graph mode: verify is launched long before draft ends."""
    a = analyze(KPOOL, load_preset("eagle"), AnalyzeOptions(skip=1))
    s = explain_gap(a, "draft.replay->verify.replay")
    assert s.numbers["host_lag_us"] < 0 and s.phases == [] and s.api_calls == []
    assert s.numbers["gap_us"] == pytest.approx(
        s.numbers["host_lag_us"] + s.numbers["launch_latency_us"]
    )
    text = s.to_json()["text"]
    assert "GPU-bound: verify.replay was launched" in text and "the host was ahead" in text
    assert any(c.startswith("graph mode:") for c in s.caveats)


def test_kpool_to_alias_change():
    spec, o = load_preset("eagle"), AnalyzeOptions(skip=1)
    before, after = analyze(KPOOL, spec, o), analyze(ALIAS, spec, o)
    c = explain_change(before, after, GAP, ("kpool_fused", "draft_alias"))
    b = {i.name: i for i in c.before.work}
    assert b[COPY].count == 4 and COPY not in {i.name for i in c.after.work}
    # the numbers of each story are the metrics of its median step
    for story, run in ((c.before, before), (c.after, after)):
        row = run.metrics.frame.loc[story.step]
        assert story.numbers["gap_us"] == row[GAP]
        assert story.numbers["gap_idle_us"] == row[GAP.replace("gap_us", "gap_idle_us")]
        assert story.medians["gap_us"] == run.summary.loc[GAP, "p50"]
        assert sum(i.us for i in story.work) >= story.numbers["gap_busy_us"] - 1e-6
        assert "draft.prepare" in {i.name for i in story.phases}
    data = c.to_json()
    (copy,) = [w for w in data["work"] if w["name"] == COPY]
    assert (copy["before_count"], copy["after_count"]) == (4, 0)
    assert data["medians"]["gap_us"]["change"] < 0
    assert f"{COPY} 4 → 0" in data["text"]


def test_cli_text_and_json():
    runner = CliRunner()
    args = ["explain", str(KPOOL), str(ALIAS), "--skip", "1"]
    r = runner.invoke(cli, args)
    assert r.exit_code == 0, r.output
    assert r.output.startswith(
        "draft_extend.replay → draft.replay, run_graph_kpool_nvtx → run_graph_alias_nvtx"
    )
    r = runner.invoke(cli, [*args, "--format", "json", "--gap", "draft.replay->verify.replay"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["gap"] == "gap_us:draft.replay->verify.replay"
    assert data["before"]["bound"] == "gpu" and set(data["medians"]) >= {"host_lag_us"}
    r = runner.invoke(cli, ["explain", str(KPOOL), "--format", "json"])
    assert r.exit_code == 0 and json.loads(r.output)["gap"] == GAP


def test_cli_graph_anchors_without_nvtx():
    anchors = "draft.replay=graph:1,verify.replay=graph:4,draft_extend.replay=graph:7"
    path = GRAPHS / "run_graph_nonvtx.sqlite"
    r = CliRunner().invoke(cli, ["explain", str(path), "--anchors", anchors, "--skip", "1"])
    assert r.exit_code == 0, r.output
    assert "host-bound: draft.replay was launched" in r.output
    assert "no NVTX ranges on the launching thread" in r.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--gap", "nope"], "is not a gap metric"),
        (["--gap", "a->b"], "no value of 'gap_us:a->b'"),
        ([str(ALIAS), str(ALIAS)], "one input (TRACE) or two"),
        (["--anchors", "x", "--step", "step"], "anchor range(s) 'x' not found"),
    ],
)
def test_cli_bad_input(args, message):
    r = CliRunner().invoke(cli, ["explain", str(KPOOL), *args])
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output


def test_cli_export_without_cuda():
    """NVTX ranges recorded without CUDA activity: no gap between GPU work, said so."""
    cpu = testdata.DATA / "cpu_eagle_2023.sqlite"
    r = CliRunner().invoke(cli, ["explain", str(cpu)])
    assert r.exit_code == 2 and "Traceback" not in r.output
    assert f"{cpu}: no GPU work in the export" in r.output and "record with -t cuda" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_bundled_examples(tmp_path):
    """The bundled node-mode examples (xz, decompressed as the demo does)."""
    from specscope.campaign.demo import _plain

    folder = testdata.ROOT / "examples" / "exports"
    paths = [folder / f"bs1-node-{v}.sqlite.xz" for v in ("kpool_fused", "draft_alias")]
    if not all(p.is_file() for p in paths):
        pytest.skip("bundled examples not in this checkout")
    plain = [_plain(p, tmp_path) for p in paths]
    r = CliRunner().invoke(cli, ["explain", *map(str, plain), "--skip", "1"])
    assert r.exit_code == 0, r.output
    assert f"{COPY} 4 → 0" in r.output
    assert "cannot tell: node-mode capture" in r.output


def test_cli_of_two_inputs_holds_one_exports_operations_at_a_time(monkeypatch):
    """BEFORE AFTER: the first input's story is made and the input shed before the second is
    read (its trace freed), and the output is the one of both analyses held."""
    import gc
    import weakref

    from specscope.cli.options import SpecArgs

    pair = [str(testdata.DATA / f"eagle_node_{side}.sqlite") for side in ("before", "after")]
    args = ["explain", *pair, "--preset", "eagle", "--format", "json"]
    want = CliRunner().invoke(cli, args)
    traces, analyses = [], SpecArgs.analyses

    def recorded(self, refs, shed=False, gaps=False):
        gc.collect()
        held = [t() is not None for t in traces]
        out = analyses(self, refs, shed, gaps)
        traces.extend(weakref.ref(a.trace) for a in out)
        recorded.held.append(held)
        return out

    recorded.held = []
    monkeypatch.setattr(SpecArgs, "analyses", recorded)
    got = CliRunner().invoke(cli, args)
    assert got.exit_code == 0, got.output
    assert recorded.held == [[], [False]]  # (the first's trace gone when the second is read)
    assert got.output == want.output


def test_busy_within_counts_overlapping_work_once():
    ops = pd.DataFrame({"start_ns": [20, 0, 5, 40], "end_ns": [30, 10, 15, 50]})
    assert busy_within(ops, 2, 25) == 13 + 5  # [2, 15] and [20, 25]
    assert busy_within(ops, 31, 39) == 0 and busy_within(ops, 25, 25) == 0
