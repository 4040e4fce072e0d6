"""Before/after comparison: statistics and verdicts on synthetic per-step frames with known
shifts, comparability, per-kernel diff, input references, and ``specscope compare`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from testdata import AFTER, BEFORE, GRAPH

from specscope.analysis.compare import (
    Direction,
    IncomparableError,
    KernelChange,
    Level,
    Verdict,
    bootstrap_ci,
    bootstrap_medians,
    comparability,
    compare_frames,
    compare_runs,
    direction,
    kernel_diff,
    side_stats,
)
from specscope.analysis.inputs import resolve
from specscope.analysis.metrics import StepMetrics
from specscope.analysis.run import Analysis, AnalyzeOptions
from specscope.analysis.spec import StepSpec, load_preset
from specscope.analysis.store import append_run
from specscope.cli.compare import compare_cmd
from specscope.errors import SpecscopeError
from specscope.profiler.manifest import batch_and_commit, read_manifest

GAP_DE = "gap_us:draft_extend.replay->draft.replay"
GAP_DV = "gap_us:draft.replay->verify.replay"


def eagle_frame(n: int, seed: int, *, idle=440.0, gap_de=210.0, gap_dv=80.0, copies=4, memcpy=19):
    """Per-step metrics of ``n`` steps: times with ~5 % Gaussian noise, counts constant."""
    rng = np.random.default_rng(seed)

    def noisy(center: float) -> np.ndarray:
        return center * (1 + 0.05 * rng.standard_normal(n))

    return pd.DataFrame(
        {
            "idle_us": noisy(idle),
            GAP_DE: noisy(gap_de),
            GAP_DV: noisy(gap_dv),
            "kernels:fused_metadata_copy": np.full(n, float(copies)),
            "eager_memcpy": np.full(n, float(memcpy)),
            "api_calls:cudaGraphLaunch": np.full(n, 3.0),
        },
        index=pd.Index(range(n), name="step"),
    )


def run(frame: pd.DataFrame, source: str = "x.sqlite", **kw) -> Analysis:
    info = {
        "capture_mode": "node",
        "gpu": "NVIDIA H200",
        "nsys_version": "2025.3.2.0",
        "spec": {"step": "step", "anchors": ["a", "b"]},
    }
    return Analysis(source=source, metrics=StepMetrics(frame), **{**info, **kw})


# ---------------------------------------------------------------------------- verdicts


def test_known_improvement_is_improved() -> None:
    before = eagle_frame(200, 1)
    after = eagle_frame(200, 2, idle=440 * 0.7, gap_de=210 * 0.6, gap_dv=80 * 0.6, copies=0)
    out = compare_frames(before, after)
    for metric in ["idle_us", GAP_DE, GAP_DV, "kernels:fused_metadata_copy"]:
        assert out.loc[metric, "verdict"] is Verdict.IMPROVED, metric
    assert out.loc["idle_us", "rel_change_pct"] == pytest.approx(-30, abs=2)
    assert out.loc[GAP_DE, "rel_change_pct"] == pytest.approx(-40, abs=2)
    assert out.loc["kernels:fused_metadata_copy", "before_p50"] == 4
    assert out.loc["kernels:fused_metadata_copy", "after_p50"] == 0
    assert out.loc["kernels:fused_metadata_copy", "rel_change_pct"] == -100
    assert out.loc["eager_memcpy", "verdict"] is Verdict.NO_CHANGE  # 19 -> 19
    assert out.loc["api_calls:cudaGraphLaunch", "verdict"] is Verdict.NO_CHANGE
    lo, hi = out.loc["idle_us", ["ci_low", "ci_high"]]
    assert lo < out.loc["idle_us", "abs_change"] < hi < 0


def test_same_distribution_with_noise_is_no_change() -> None:
    out = compare_frames(eagle_frame(200, 3), eagle_frame(200, 4))
    assert set(out["verdict"]) == {Verdict.NO_CHANGE}


def test_regression_and_higher_is_better() -> None:
    before = eagle_frame(100, 5).assign(occupancy_pct=40.0)
    after = eagle_frame(100, 6, idle=440 * 1.3).assign(occupancy_pct=30.0)
    out = compare_frames(before, after)
    assert out.loc["idle_us", "verdict"] is Verdict.REGRESSED
    assert out.loc["occupancy_pct", "verdict"] is Verdict.REGRESSED
    improved = compare_frames(after, before)
    assert improved.loc["occupancy_pct", "verdict"] is Verdict.IMPROVED


def test_fewer_memcpy_api_calls_is_improved_like_fewer_eager_memcpys() -> None:
    before = eagle_frame(50, 7).assign(**{"api_calls:cudaMemcpyAsync": 19.0, "eager_memcpy": 19.0})
    after = before.assign(**{"api_calls:cudaMemcpyAsync": 7.0, "eager_memcpy": 7.0})
    out = compare_frames(before, after)
    assert out.loc["eager_memcpy", "verdict"] is Verdict.IMPROVED
    assert out.loc["api_calls:cudaMemcpyAsync", "verdict"] is Verdict.IMPROVED


def test_neutral_count_is_changed_not_judged() -> None:
    before = eagle_frame(50, 7)
    after = before.assign(**{"api_calls:cudaGraphLaunch": 4.0})
    out = compare_frames(before, after)
    assert out.loc["api_calls:cudaGraphLaunch", "verdict"] is Verdict.CHANGED
    assert out.loc["api_calls:cudaGraphLaunch", "direction"] == "neutral"


def test_small_samples_are_inconclusive() -> None:
    before = eagle_frame(10, 8)
    after = eagle_frame(10, 9, idle=440 * 0.7, copies=0)
    out = compare_frames(before, after)
    assert set(out["verdict"]) == {Verdict.INCONCLUSIVE}
    assert compare_frames(before, after, min_steps=5).loc["idle_us", "verdict"] is Verdict.IMPROVED


def test_below_noise_floor_is_no_change() -> None:
    before = pd.DataFrame({"idle_us": np.linspace(99, 101, 41)})
    after = before + 1.5  # +1.5 %: the CI excludes 0, but below the 2 % floor
    out = compare_frames(before, after)
    assert out.loc["idle_us", "ci_low"] > 0
    assert out.loc["idle_us", "verdict"] is Verdict.NO_CHANGE
    out = compare_frames(before, after, noise_floor_pct=1.0)
    assert out.loc["idle_us", "verdict"] is Verdict.REGRESSED


def test_unavailable_metric() -> None:
    before = pd.DataFrame({"graph_kernels": [np.nan] * 30, "idle_us": 1.0})
    out = compare_frames(before, before)
    assert out.loc["graph_kernels", "verdict"] is Verdict.UNAVAILABLE
    assert out.loc["graph_kernels", "before_n"] == 0


def test_zero_before_median_has_no_relative_change() -> None:
    before = pd.DataFrame({"eager_memset": [0.0] * 30})
    out = compare_frames(before, before + 2)
    assert np.isnan(out.loc["eager_memset", "rel_change_pct"])
    assert out.loc["eager_memset", "verdict"] is Verdict.REGRESSED


def test_side_stats_pool_runs_and_measure_spread() -> None:
    runs = [pd.DataFrame({"idle_us": [1.0, 2.0, 3.0]}), pd.DataFrame({"idle_us": [5.0, 6.0]})]
    s = side_stats(runs, "idle_us")
    assert s["n"] == 5 and s["runs"] == 2
    assert s["p50"] == 3.0 and s["p10"] == pytest.approx(1.4) and s["p90"] == pytest.approx(5.6)
    assert s["spread"] == 5.5 - 2.0
    assert np.isnan(side_stats(runs[:1], "idle_us")["spread"])


def test_change_within_run_to_run_spread_is_no_change() -> None:
    # Each side: two runs whose medians differ by 40 µs; the pooled medians differ by 10.
    a1, a2 = eagle_frame(100, 10, idle=400), eagle_frame(100, 11, idle=440)
    b1, b2 = eagle_frame(100, 12, idle=410), eagle_frame(100, 13, idle=450)
    out = compare_frames([a1, a2], [b1, b2])
    assert out.loc["idle_us", "before_runs"] == 2
    assert out.loc["idle_us", "before_spread"] == pytest.approx(40, abs=6)
    assert out.loc["idle_us", "verdict"] is Verdict.NO_CHANGE
    single = compare_frames(pd.concat([a1, a2]), pd.concat([b1, b2]))
    assert single.loc["idle_us", "verdict"] is Verdict.REGRESSED  # pooled as one run: no spread


def test_bootstrap_is_seeded_and_reproducible() -> None:
    rng = np.random.default_rng(0)
    b, a = rng.normal(100, 10, 60), rng.normal(80, 10, 60)
    assert bootstrap_ci(b, a, seed=3) == bootstrap_ci(b, a, seed=3)
    assert bootstrap_ci(b, a, seed=3) != bootstrap_ci(b, a, seed=4)
    lo, hi = bootstrap_ci(b, a)
    assert lo < np.median(a) - np.median(b) < hi
    narrow = bootstrap_ci(b, a, confidence=0.5)
    assert lo < narrow[0] < narrow[1] < hi
    assert bootstrap_ci(np.full(5, 4.0), np.full(5, 0.0)) == (-4.0, -4.0)
    f1, f2 = eagle_frame(40, 1), eagle_frame(40, 2)
    pd.testing.assert_frame_equal(compare_frames(f1, f2), compare_frames(f1, f2))
    # a metric's CI does not depend on the other metrics compared
    alone = compare_frames(f1[["idle_us"]], f2[["idle_us"]])
    assert alone.loc["idle_us", "ci_low"] == compare_frames(f1, f2).loc["idle_us", "ci_low"]


@pytest.mark.parametrize("n", [1, 2, 7, 8, 41])
def test_bootstrap_medians_have_the_resampled_distribution(n: int) -> None:
    """Medians drawn as order statistics are distributed as medians of real resamples."""
    rng = np.random.default_rng(n)
    x = np.round(rng.normal(0, 1, n), 1)  # rounded: ties, as in µs-rounded or count metrics
    direct = np.median(x[rng.integers(0, n, (40_000, n))], axis=1)
    drawn = bootstrap_medians(x, 40_000, np.random.default_rng(7))
    grid = np.union1d(direct, drawn)
    cdf = [np.searchsorted(np.sort(m), grid, side="right") / len(m) for m in (direct, drawn)]
    assert np.abs(cdf[0] - cdf[1]).max() < 0.015  # two-sample KS; 99.9 % critical value ~0.014


@pytest.mark.parametrize(
    "metric, expected",
    [
        ("idle_us", Direction.LOWER),
        ("window_us", Direction.LOWER),
        (GAP_DE, Direction.LOWER),
        ("cpu_gap_us:a->b", Direction.LOWER),
        ("cpu_us:draft.prepare", Direction.LOWER),
        ("cpu_step_us", Direction.LOWER),
        ("eager_memcpy", Direction.LOWER),
        ("eager_memcpy_htod", Direction.LOWER),
        ("eager_memcpy_bytes", Direction.LOWER),
        ("kernels:fused_metadata_copy", Direction.LOWER),
        ("occupancy_pct", Direction.HIGHER),
        ("busy_us", Direction.NEUTRAL),
        ("graph_launches", Direction.NEUTRAL),
        ("api_calls:cudaMemcpyAsync", Direction.LOWER),
        ("api_calls:cudaLaunchKernel", Direction.LOWER),
        ("api_calls:cudaGraphLaunch", Direction.NEUTRAL),
        ("something_new", Direction.NEUTRAL),
    ],
)
def test_direction(metric: str, expected: Direction) -> None:
    assert direction(metric) is expected


# ---------------------------------------------------------------------------- comparability


def test_capture_mode_mismatch_is_refused() -> None:
    f = eagle_frame(30, 1)
    with pytest.raises(IncomparableError, match="capture mode differs"):
        compare_runs([run(f, "a")], [run(f, "b", capture_mode="graph")])
    checks = {c.name: c for c in comparability([run(f)], [run(f, capture_mode="no-graphs")])}
    assert checks["capture mode"].level is Level.WARNING


def test_other_mismatches_are_warnings() -> None:
    f = eagle_frame(30, 1)
    before = run(f, "a", batch_size=8)
    after = run(
        f,
        "b",
        gpu="NVIDIA H100",
        nsys_version="2023.4.4",
        spec={"step": "step", "anchors": ["a"]},
        batch_size=16,
    )
    checks = {c.name: c for c in comparability([before], [after])}
    for name in ("GPU", "nsys major version", "step spec", "batch size"):
        assert checks[name].level is Level.WARNING, name
    assert "NVIDIA H100" in checks["GPU"].message
    assert checks["capture mode"].level is Level.OK
    same = comparability([before], [run(f, "c", nsys_version="2025.5.1", batch_size=8)])
    assert all(c.level is Level.OK for c in same)
    result = compare_runs([before], [after])  # warnings do not stop the comparison
    assert result.kernels is None and result.labels == ("Before", "After")


# ---------------------------------------------------------------------------- kernels


def test_kernel_diff() -> None:
    def ops(rows):
        return pd.DataFrame(rows, columns=["name", "kind", "dur_us"])

    before = ops(
        [("copy", "kernel", 1.0)] * 8
        + [("gemm", "kernel", 10.0)] * 4
        + [("old", "kernel", 2.0), ("x", "memcpy", 1.0)]
    )
    after = ops(
        [("gemm", "kernel", 9.0)] * 6 + [("new", "kernel", 3.0)] * 2 + [("x", "memcpy", 1.0)] * 2
    )
    k = kernel_diff([(before, 2)], [(after, 2)])
    expect = {
        "copy": ("removed", 4.0, 0.0, 4.0, 0.0),
        "gemm": ("more", 2.0, 3.0, 20.0, 27.0),
        "new": ("added", 0.0, 1.0, 0.0, 3.0),
        "old": ("removed", 0.5, 0.0, 1.0, 0.0),
        "x": ("more", 0.5, 1.0, 0.5, 1.0),
    }
    for name, (change, b, a, bus, aus) in expect.items():
        row = k.loc[name]
        assert KernelChange(row["change"]).value == change, name
        assert (row["before_per_step"], row["after_per_step"]) == (b, a), name
        assert (row["before_us_per_step"], row["after_us_per_step"]) == (bus, aus), name
    assert list(k.index[:2]) == ["gemm", "copy"]  # by |delta time per step|
    fewer = kernel_diff([(after, 2)], [(before, 4)])
    assert KernelChange(fewer.loc["gemm", "change"]) is KernelChange.FEWER
    same = kernel_diff([(after, 2)], [(after, 2), (after, 2)])  # pooled: per step unchanged
    assert set(same["change"].map(lambda c: KernelChange(c).value)) == {"same"}


# ---------------------------------------------------------------------------- inputs


@pytest.fixture(scope="module")
def real_runs() -> dict[str, Analysis]:
    spec = load_preset("eagle")
    options = AnalyzeOptions(skip=1)
    return {p.stem: resolve(p, spec, options).analysis for p in (BEFORE, AFTER, GRAPH)}


def test_real_exports_compare(real_runs) -> None:
    c = compare_runs([real_runs["eagle_node_before"]], [real_runs["eagle_node_after"]], min_steps=5)
    m = c.metrics
    assert m.loc["kernels:fused_metadata_copy", ["before_p50", "after_p50"]].tolist() == [4, 0]
    assert m.loc["eager_memcpy", ["before_p50", "after_p50"]].tolist() == [19, 7]
    for metric in ("idle_us", GAP_DE, GAP_DV, "eager_memcpy", "kernels:fused_metadata_copy"):
        assert m.loc[metric, "verdict"] is Verdict.IMPROVED, metric
    assert m.loc["graph_launches", "verdict"] is Verdict.NO_CHANGE
    k = c.kernels
    assert KernelChange(k.loc["fused_metadata_copy_kernel", "change"]) is KernelChange.REMOVED
    assert k.loc["fused_metadata_copy_kernel", "before_per_step"] == 4
    assert k.loc[
        "[CUDA memcpy Host-to-Device]", ["before_per_step", "after_per_step"]
    ].tolist() == [
        9,
        3,
    ]
    assert all(ch.level is Level.OK for ch in c.checks)
    with pytest.raises(IncomparableError):
        compare_runs([real_runs["eagle_node_before"]], [real_runs["eagle_graph_before"]])


def test_results_db_references(tmp_path: Path) -> None:
    from specscope.analysis.run import analyze

    spec = load_preset("eagle")
    db = tmp_path / "results.sqlite"
    for trace in (BEFORE, AFTER):
        a = analyze(trace, spec, AnalyzeOptions(skip=1))
        append_run(db, a)
    first, latest = resolve(f"{db}:1", spec).analysis, resolve(db, spec).analysis
    assert first.source == f"{db}:1" and latest.source == f"{db}:2"
    assert first.ops is None and first.capture_mode == "node" and first.gpu == "NVIDIA H200"
    assert first.spec["anchors"][0] == "draft.replay" and first.skipped == 1
    direct = analyze(BEFORE, spec, AnalyzeOptions(skip=1)).metrics.frame
    pd.testing.assert_frame_equal(
        first.frame, direct.astype("float64"), check_names=False, check_index_type=False
    )
    assert latest.frame["eager_memcpy"].tolist() == [7.0] * 11
    with pytest.raises(SpecscopeError, match="no run 9"):
        resolve(f"{db}:9", spec)
    with pytest.raises(SpecscopeError, match="not a results database"):
        resolve(f"{BEFORE}:1", spec)


def test_manifest_beside_export(tmp_path: Path) -> None:
    export = tmp_path / "trace.sqlite"
    export.write_bytes(b"")
    assert read_manifest(tmp_path) is None
    manifest = {
        "git": {"commit": "abc123", "dirty": True},
        "env": {"SPECSCOPE_BATCH_SIZE": "8"},
        "outputs": {"trace.sqlite": {"bytes": 0, "sha256": None}},
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert read_manifest(tmp_path) == manifest
    assert batch_and_commit(manifest, export) == (8, "abc123-dirty")
    other = tmp_path / "other.sqlite"
    assert batch_and_commit(manifest, other) == (None, None)  # it lists another export


# ---------------------------------------------------------------------------- CLI


def invoke(*args: str):
    return CliRunner().invoke(compare_cmd, [str(a) for a in args])


def test_cli_json_end_to_end() -> None:
    r = invoke(BEFORE, AFTER, "--skip", "1", "--min-steps", "5", "--format", "json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.stdout)
    (c,) = data["comparisons"]
    assert c["labels"] == ["Before", "After"]
    assert c["metrics"]["idle_us"]["verdict"] == "improved"
    assert c["metrics"]["kernels:fused_metadata_copy"]["after_p50"] == 0
    assert {k["name"]: k["change"] for k in c["kernels"]}["fused_metadata_copy_kernel"] == "removed"
    assert data["settings"]["min_steps"] == 5 and data["settings"]["seed"] == 0
    again = invoke(BEFORE, AFTER, "--skip", "1", "--min-steps", "5", "--format", "json")
    assert again.stdout == r.stdout  # seeded bootstrap: same output


def test_cli_table_and_default_min_steps() -> None:
    r = invoke(BEFORE, AFTER, "--skip", "1")
    assert r.exit_code == 0, r.output
    assert "inconclusive" in r.stdout and "fewer than 20 steps" in r.stderr
    assert "ok      capture mode: node" in r.stdout
    assert "operations per step, by name" in r.stdout and "removed" in r.stdout


def test_cli_table_of_operations_lists_the_largest_changes(monkeypatch) -> None:
    """Past ``KERNEL_ROWS`` names, the text table keeps the largest |Δ µs/step| and counts the
    rest, bounding their change; the JSON output keeps every name."""
    from specscope.cli import compare as compare_cli

    every = json.loads(invoke(BEFORE, AFTER, "--skip", "1", "--format", "json").stdout)
    kernels = every["comparisons"][0]["kernels"]
    monkeypatch.setattr(compare_cli, "KERNEL_ROWS", 3)
    r = invoke(BEFORE, AFTER, "--skip", "1")
    assert r.exit_code == 0, r.output
    table = r.stdout.split("operations per step, by name\n")[1].splitlines()
    shown = [line.split()[0] for line in table[2:5]]  # (after the header's two lines)
    assert shown == [k["name"].split()[0] for k in kernels[:3]]
    bound = abs(kernels[2]["delta_us_per_step"])
    assert table[5] == (f"... and {len(kernels) - 3} more names, each within ±{bound:.1f} "
                        "µs/step (`--format json` lists every one)")  # fmt: skip


def test_cli_refuses_node_against_graph() -> None:
    r = invoke(BEFORE, GRAPH, "--skip", "1")
    assert r.exit_code == 2
    assert "capture mode differs" in r.stderr and "Traceback" not in r.output
    assert len(r.stderr.strip().splitlines()) == 1


def test_cli_pooled_sides_and_more_inputs() -> None:
    r = invoke(
        "--before", BEFORE, "--before", BEFORE, "--after", AFTER,
        "--labels", "main,PR", "--skip", "1", "--format", "json",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    (c,) = json.loads(r.stdout)["comparisons"]
    assert c["labels"] == ["main", "PR"] and len(c["before"]) == 2
    idle = c["metrics"]["idle_us"]
    assert idle["before_n"] == 22 and idle["before_runs"] == 2 and idle["before_spread"] == 0
    assert idle["verdict"] == "inconclusive"  # 11 steps on the after side, fewer than 20
    r = invoke(BEFORE, AFTER, AFTER, "--skip", "1", "--format", "json")
    comps = json.loads(r.stdout)["comparisons"]
    assert [c["labels"] for c in comps] == [["Before", "After 1"], ["Before", "After 2"]]


@pytest.mark.parametrize(
    "args, message",
    [
        ([BEFORE], "at least two inputs"),
        ([BEFORE, AFTER, "--before", BEFORE], "either as BEFORE AFTER"),
        (["--before", BEFORE], "--before and --after must both"),
        ([BEFORE, AFTER, "--labels", "a,b,c"], "--labels needs 2"),
        ([BEFORE, "missing.sqlite"], "no such file"),
        ([BEFORE, AFTER, "--preset", "nope"], "unknown preset"),
    ],
)
def test_cli_usage_errors(args, message: str) -> None:
    r = invoke(*args)
    assert r.exit_code == 2, r.output
    assert message in r.stderr and "Traceback" not in r.output


def test_registered_on_a_group() -> None:
    @click.group()
    def group() -> None:
        pass

    group.add_command(compare_cmd)
    r = CliRunner().invoke(group, ["compare", "--help"])
    assert r.exit_code == 0 and "Example: specscope compare" in r.stdout


def test_shed_analyses_compare_as_the_live_ones() -> None:
    """``compare`` keeps each export's analysis shed (no trace, no operations, their totals
    per name and kind): the comparison is the one of the live analyses, kernels included."""
    from specscope.analysis.run import analyze

    spec = load_preset("eagle")
    live = [analyze(p, spec, AnalyzeOptions(skip=1)) for p in (BEFORE, AFTER)]
    shed = [a.shed() for a in live]
    for a, s in zip(live, shed, strict=True):
        assert s.trace is None and s.steps is None and s.ops is None
        assert s.detached and s.is_shed and not a.is_shed and not a.detach().is_shed
        pd.testing.assert_frame_equal(s.op_totals, a.op_totals)
        assert s.op_totals["count"].sum() == len(a.ops) > 0
    want = compare_runs([live[0]], [live[1]])
    got = compare_runs([shed[0]], [shed[1]])
    assert got.kernels is not None and len(got.kernels) > 0
    assert json.dumps(got.to_json(), default=str) == json.dumps(want.to_json(), default=str)


def test_chosen_steps_that_differ_are_said_for_shed_analyses_too(capsys) -> None:
    from specscope.analysis.run import analyze
    from specscope.cli.options import warn_if_chosen_differently

    a = analyze(AFTER, load_preset("eagle"), AnalyzeOptions()).shed()
    b = analyze(AFTER, StepSpec("step", ("draft.replay",)), AnalyzeOptions()).shed()
    warn_if_chosen_differently([a, a], spec_given=False)
    assert capsys.readouterr().err == ""
    warn_if_chosen_differently([a, b], spec_given=False)
    assert "chosen differently" in capsys.readouterr().err


def test_op_totals_of_categoricals_are_the_group_by_of_the_two_columns() -> None:
    """Grouped by the pair's codes: the counts, the (compensated, in-order) sums and the order
    of first occurrence of pandas' group-by of name and kind; a missing name or kind is no
    group."""
    from specscope.analysis.run import op_totals

    rng = np.random.default_rng(7)
    n = 5000
    names = rng.choice(["gemm", "copy", "nccl", None], n, p=[0.5, 0.3, 0.15, 0.05])
    kinds = rng.choice(["kernel", "memcpy", None], n, p=[0.7, 0.28, 0.02])
    dur = rng.random(n) * 10.0 ** rng.integers(-3, 4, n)  # magnitudes that round differently
    plain = pd.DataFrame({"name": names, "kind": kinds, "dur_us": dur})
    cats = plain.astype({"name": "category", "kind": "category"})
    got, want = op_totals(cats), op_totals(plain)
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert got["count"].sum() == int((plain["name"].notna() & plain["kind"].notna()).sum())
