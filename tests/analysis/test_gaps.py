"""Gap attribution (:mod:`specscope.analysis.gaps`): each definition pinned on a tiny synthetic
export, and the four numbers of one real step checked against a hand computation from the
export's own tables (plain SQL over GRAPH_TRACE / KERNEL / MEMCPY / MEMSET / RUNTIME)."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest
import testdata
from eagle_exports import build_eagle

from specscope.analysis.catalog import Direction, direction, find, unit
from specscope.analysis.gaps import attribution_columns
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import StepSpec, load_preset
from specscope.analysis.synthetic import SyntheticExport

nan = math.nan
KPOOL = testdata.DATA / "graphs" / "run_graph_kpool_nvtx.sqlite"
NAMES = ("draft.replay", "verify.replay", "draft_extend.replay")
GRAPH_IDS = (1, 4, 7)  # draft, verify, draft-extend in run_graph_kpool_nvtx
GRAPH_SPEC = StepSpec("", tuple(f"{n}=graph:{g}" for n, g in zip(NAMES, GRAPH_IDS, strict=True)))


# ---------------------------------------------------------------- definitions, synthetic


def two_anchor_step(
    a_work: tuple[int, int],
    b_launch: int,
    b_work: tuple[int, int],
    extra: list[tuple] = (),
) -> SyntheticExport:
    """One step [0, 9000] with anchors A (range [100, 400], launch at 200) and B (range
    [b_launch - 50, b_launch + 100], launch at ``b_launch``); ``extra``: GPU ops
    ``(kind, start, end, stream, pid, device)`` launched at 600 (by ``pid``'s thread)."""
    x = SyntheticExport()
    x.range("step", 0, 9000)
    x.range("A", 100, 400)
    corr = x.api("cudaLaunchKernel", 200, 250)
    x.kernel("a_k", *a_work, corr)
    x.range("B", b_launch - 50, b_launch + 100)
    corr = x.api("cudaLaunchKernel", b_launch, b_launch + 30)
    x.kernel("b_k", *b_work, corr)
    for kind, start, end, stream, pid, device in extra:
        if kind == "memcpy":
            corr = x.api("cudaMemcpyAsync", 600, 610, pid=pid, tid=pid)
            x.memcpy("htod", 64, start, end, corr, stream=stream, pid=pid, device=device)
        else:
            corr = x.api("cudaLaunchKernel", 600, 610, pid=pid, tid=pid)
            x.kernel(kind, start, end, corr, stream=stream, pid=pid, device=device)
    return x


SPEC_AB = StepSpec("step", ("A", "B"))
ME = 100  # the step process
# (a_work, b_launch, b_work, extra) -> (gap, busy, idle, host_lag, launch_latency:B), µs
CASES = {
    # the GPU waits for the host: A ends at 2000, B is launched at 3000, starts at 3200;
    # in the gap an eager kernel [2500, 2600] and a copy [2550, 2700] on another stream
    # (overlap counted once: busy = 2500..2700)
    "host-bound": (
        (1000, 2000), 3000, (3200, 4000),
        [("copy_k", 2500, 2600, 7, ME, 0), ("memcpy", 2550, 2700, 9, ME, 0)],
        (1.2, 0.2, 1.0, 1.0, 0.2),
    ),
    # the host is ahead: B launched at 1200 while A runs; B starts 300 ns after A ends
    "host-ahead": ((1000, 2000), 1200, (2300, 3000), [], (0.3, 0.0, 0.3, -0.8, 1.1)),
    # overlap: B starts before A ends -> negative gap, busy and idle 0
    "overlap": ((1000, 2000), 1200, (1500, 3000), [], (-0.5, 0.0, 0.0, -0.8, 0.3)),
    # another process's kernel on the same device fills part of the gap (busy); one on
    # device 1 does not count; work sticking out of the gap counts only inside it
    "other-process": (
        (1000, 2000), 2900, (3000, 4000),
        [("p_k", 1900, 2400, 7, 200, 0), ("d1_k", 2000, 3000, 7, 300, 1)],
        (1.0, 0.4, 0.6, 0.9, 0.1),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_definitions(case, write_export):
    a_work, b_launch, b_work, extra, expected = CASES[case]
    path = write_export(two_anchor_step(a_work, b_launch, b_work, list(extra)))
    f = analyze(path, SPEC_AB, AnalyzeOptions(device=0)).metrics.frame
    got = [
        f.loc[0, m]
        for m in ("gap_us:A->B", "gap_busy_us:A->B", "gap_idle_us:A->B", "host_lag_us:A->B")
    ]
    got.append(f.loc[0, "launch_latency_us:B"])
    assert np.allclose(got, expected), (case, got)
    # gap = host lag + launch latency, always
    assert math.isclose(got[0], got[3] + got[4], abs_tol=1e-9)
    # the cross-step pair B->A has no predecessor in step 0
    assert math.isnan(f.loc[0, "gap_busy_us:B->A"]) and math.isnan(f.loc[0, "host_lag_us:B->A"])
    assert f.loc[0, "launch_latency_us:A"] == pytest.approx(0.8)  # launch 200 -> start 1000


def test_eagle_synthetic_values(write_export):
    """The EAGLE-shaped export (tests/eagle_exports.py): draft -> verify: draft ends at 2600,
    verify is launched at 3100 and starts at 3500 -> lag 0.5, latency 0.4, nothing in the
    gap; the cross-step extend (ends 6500) -> draft: the step-(k+1) memcpy [10700, 10800]
    lies in the gap, draft is launched at 11100, starts at 11500."""
    path = write_export(build_eagle(3, mode="graph"))
    f = analyze(path, load_preset("eagle")).metrics.frame
    dv, xd = "draft.replay->verify.replay", "draft_extend.replay->draft.replay"
    assert f[f"gap_busy_us:{dv}"].tolist() == [0.0] * 3
    assert f[f"gap_idle_us:{dv}"].tolist() == pytest.approx([0.9] * 3)
    assert f[f"host_lag_us:{dv}"].tolist() == pytest.approx([0.5] * 3)
    assert f["launch_latency_us:verify.replay"].tolist() == pytest.approx([0.4] * 3)
    assert f[f"gap_busy_us:{xd}"].tolist()[1:] == pytest.approx([0.1, 0.1])
    assert f[f"gap_idle_us:{xd}"].tolist()[1:] == pytest.approx([4.9, 4.9])
    assert f[f"host_lag_us:{xd}"].tolist()[1:] == pytest.approx([4.6, 4.6])
    assert f["launch_latency_us:draft.replay"].tolist() == pytest.approx([0.4] * 3)


def test_columns_and_catalog(write_export):
    cols = attribution_columns(("A", "B"))
    assert cols == [
        "gap_busy_us:B->A",
        "gap_busy_us:A->B",
        "gap_idle_us:B->A",
        "gap_idle_us:A->B",
        "host_lag_us:B->A",
        "host_lag_us:A->B",
        "launch_latency_us:A",
        "launch_latency_us:B",
    ]
    for c in cols:
        assert find(c) is not None and find(c).group == "gaps" and unit(c) == "us"
    assert direction("gap_busy_us:A->B") is Direction.NEUTRAL
    for c in ("gap_idle_us:A->B", "host_lag_us:A->B", "launch_latency_us:B"):
        assert direction(c) is Direction.LOWER
    # without CUDA data: present and unavailable
    x = SyntheticExport()
    x.range("step", 0, 100)
    x.range("A", 10, 20)
    path = write_export(x)
    m = analyze(path, SPEC_AB).metrics
    for c in cols:
        assert c in m.frame and m.frame[c].isna().all() and c in m.unavailable


# ---------------------------------------------------------------- a real step, by hand

_OPS = ("KERNEL", "MEMCPY", "MEMSET", "GRAPH_TRACE")


def _hand(con: sqlite3.Connection, a_graph: int, b_graph: int, nth: int) -> tuple[float, ...]:
    """The four numbers of the ``nth`` launch of graph ``b_graph`` and the replay of
    ``a_graph`` just before it, from the export's tables (µs)."""
    b_start, b_corr, b_pid, device = con.execute(
        "SELECT start, correlationId, globalPid, deviceId FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
        " WHERE graphId = ? ORDER BY start LIMIT 1 OFFSET ?",
        (b_graph, nth),
    ).fetchone()
    (a_end,) = con.execute(
        "SELECT end FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE WHERE graphId = ? AND start < ?"
        " ORDER BY start DESC LIMIT 1",
        (a_graph, b_start),
    ).fetchone()
    (launch,) = con.execute(
        "SELECT start FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE correlationId = ?"
        " AND (globalTid >> 24) & 16777215 = (? >> 24) & 16777215",
        (b_corr, b_pid),
    ).fetchone()
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    inside = []
    for t in _OPS:
        if f"CUPTI_ACTIVITY_KIND_{t}" in tables:
            inside += con.execute(
                f"SELECT max(start, ?), min(end, ?) FROM CUPTI_ACTIVITY_KIND_{t}"
                " WHERE deviceId = ? AND end > ? AND start < ?",
                (a_end, b_start, device, a_end, b_start),
            ).fetchall()
    busy, reach = 0, a_end  # union of the clipped intervals, in start order
    for s, e in sorted(inside):
        if e > reach:
            busy += e - max(s, reach)
            reach = e
    idle = max(b_start - a_end, 0) - busy
    return busy / 1e3, idle / 1e3, (launch - a_end) / 1e3, (b_start - launch) / 1e3


@pytest.mark.parametrize("spec", ["nvtx", "graph"])
def test_real_step_matches_hand_computation(spec):
    """Step 5 of run_graph_kpool_nvtx (graph mode; step k holds the k-th launch of each graph,
    the cross-step draft-extend -> draft pair the k-th draft launch): every pair, both with
    NVTX anchors and with graph anchors."""
    s = load_preset("eagle") if spec == "nvtx" else GRAPH_SPEC
    a = analyze(KPOOL, s, AnalyzeOptions(skip=1))
    k = 5
    con = sqlite3.connect(f"file:{KPOOL}?mode=ro", uri=True)
    try:
        ids = dict(zip(NAMES, GRAPH_IDS, strict=True))
        for prev, cur in zip(NAMES[-1:] + NAMES[:-1], NAMES, strict=True):
            busy, idle, lag, latency = _hand(con, ids[prev], ids[cur], k)
            pair = f"{prev}->{cur}"
            row = a.metrics.frame.loc[k]
            assert row[f"gap_busy_us:{pair}"] == pytest.approx(busy, abs=1e-6), pair
            assert row[f"gap_idle_us:{pair}"] == pytest.approx(idle, abs=1e-6), pair
            assert row[f"host_lag_us:{pair}"] == pytest.approx(lag, abs=1e-6), pair
            assert row[f"launch_latency_us:{cur}"] == pytest.approx(latency, abs=1e-6), pair
            assert busy > 0 and idle > 0  # copies in every gap, and idle too
    finally:
        con.close()
