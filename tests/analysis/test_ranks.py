"""The cross-rank view: hand-built per-step frames pin each rule; synthetic per-rank exports
(different pids, a straggler rank) check the whole path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from eagle_exports import EAGLE_SPEC, build_eagle
from testdata import DATA

from specscope.analysis.many import analyze_many
from specscope.analysis.ranks import cross_rank, spread_summary, straggler_table
from specscope.analysis.run import AnalyzeOptions


def _frame(steps, **cols) -> pd.DataFrame:
    return pd.DataFrame(cols, index=pd.Index(steps, name="step"))


def test_slowest_rank_min_max_spread_per_step() -> None:
    frames = {
        "r0": _frame([0, 1, 2], window_us=[510.0, 500, 505], idle_us=[40.0, 30, 35]),
        "r1": _frame([0, 1, 2], window_us=[630.0, 490, 505], idle_us=[160.0, 20, 36]),
    }
    view = cross_rank(frames)
    assert list(view["slowest_rank"]) == ["r1", "r0", "r0"]  # tie (step 2): the first rank
    assert list(view["window_us:spread"]) == [120.0, 10.0, 0.0]
    assert list(view["idle_us:min"]) == [40.0, 20.0, 35.0]
    assert list(view["idle_us:max"]) == [160.0, 30.0, 36.0]
    assert list(view["idle_us:argmax"]) == ["r1", "r0", "r1"]
    assert "busy_us:spread" not in view  # only metrics every rank has
    assert frames["r0"].columns.tolist() == ["window_us", "idle_us"]  # inputs untouched


def test_only_common_steps_nan_values_and_cpu_fallback() -> None:
    frames = {
        "a": _frame([0, 1, 2], cpu_step_us=[9.0, 9, 9], idle_us=[1.0, np.nan, 3]),
        "b": _frame([1, 2, 3], cpu_step_us=[8.0, 12, 9], idle_us=[np.nan, 1.0, 1]),
    }
    view = cross_rank(frames)
    assert view.index.tolist() == [1, 2]
    assert list(view["slowest_rank"]) == ["a", "b"]  # no window_us: host step time decides
    assert np.isnan(view.loc[1, "idle_us:spread"]) and pd.isna(view.loc[1, "idle_us:argmax"])
    assert view.loc[2, "idle_us:spread"] == 2.0


def test_gap_metrics_and_summaries() -> None:
    frames = {
        f"r{i}": _frame([0, 1], window_us=[10.0 + i, 10], **{"gap_us:a->b": [1.0, 2.0 + 3 * i]})
        for i in range(3)
    }
    view = cross_rank(frames)
    assert list(view["gap_us:a->b:spread"]) == [0.0, 6.0]
    table = straggler_table(view, list(frames))
    assert table["slowest_steps"].tolist() == [1, 0, 1]
    assert table["slowest_pct"].tolist() == [50.0, 0.0, 50.0]
    spread = spread_summary(view)
    assert spread.loc["gap_us:a->b", "spread_max"] == 6.0
    assert spread.loc["window_us", "n"] == 2
    with pytest.raises(ValueError, match="two exports"):
        cross_rank({"only": frames["r0"]})


def test_straggler_rank_from_synthetic_exports(write_export) -> None:
    """Rank 1 (pid 201) runs every step 2 µs longer: it is the slowest in every step."""
    paths = [
        write_export(build_eagle(6, pid=200 + r, tid=300 + r, period=10_000 + 2_000 * r), f"r{r}")
        for r in range(3)
    ]
    results = analyze_many(paths, EAGLE_SPEC, AnalyzeOptions(skip=1), jobs=1)
    assert all(r.ok for r in results)
    assert [r.analysis.pid for r in results] == [200, 201, 202]
    view = cross_rank({f"r{i}": r.analysis.metrics.frame for i, r in enumerate(results)})
    # the last step's window ends at its own work: all but it are full periods
    assert list(view["slowest_rank"])[:-1] == ["r2"] * 4
    assert view["window_us:spread"].iloc[0] == pytest.approx(4.0)
    assert view["idle_us:spread"].iloc[0] == pytest.approx(4.0)  # busy time is the same
    assert view["gap_us:draft_extend.replay->draft.replay:spread"].iloc[1] == pytest.approx(4.0)


TWO_RANK = DATA / "two_rank"


def test_real_two_rank_trace_names_the_late_rank() -> None:
    """Two H200s, one NCCL all-reduce per step, rank 1 sleeping 300 µs on the host before it
    (scripts/two_rank_program.py under nsys 2025.3.1; recipe in tests/data/two_rank/README.md).

    The steps end together, so the slowest step is either rank; the collective says who was
    late: rank 0's all-reduce waits for rank 1 (~600 µs), rank 1's is short (~30 µs)."""
    paths = [TWO_RANK / "rank0.sqlite", TWO_RANK / "rank1.sqlite"]
    results = analyze_many(
        paths, EAGLE_SPEC, AnalyzeOptions(skip=2, count_kernels=("nccl",)), jobs=1
    )
    assert all(r.ok for r in results), [r.error for r in results]
    frames = {f"rank{i}": r.analysis.metrics.frame for i, r in enumerate(results)}
    assert all((f["kernels:nccl"] == 1).all() for f in frames.values())
    view = cross_rank(frames)
    assert len(view) == 38  # 40 captured steps, 2 skipped, all in both ranks
    assert (view["last_to_arrive"] == "rank1").mean() > 0.9
    table = straggler_table(view, list(frames))
    assert table.loc["rank1", "last_to_arrive_pct"] > 90
    assert set(table.columns) >= {"slowest_steps", "slowest_pct"}
    wait = view["kernel_us:nccl:spread"]
    assert wait.median() > 300  # rank 0 waits at least the injected host delay
    assert (frames["rank1"]["kernel_us:nccl"].median()) < 100


def test_cli_reports_the_late_rank(tmp_path) -> None:
    from click.testing import CliRunner

    from specscope.cli import cli

    paths = [str(TWO_RANK / "rank0.sqlite"), str(TWO_RANK / "rank1.sqlite")]
    r = CliRunner().invoke(cli, ["analyze", *paths, "--preset", "eagle", "--skip", "2", "-j", "1"])
    assert r.exit_code == 0, r.output
    assert "last_to_arrive_pct" in r.output and "kernel_us:nccl" in r.output
    off = CliRunner().invoke(
        cli, ["analyze", *paths, "--skip", "2", "-j", "1", "--collective", "", "--format", "csv"]
    )
    assert off.exit_code == 0, off.output
    assert "kernel_us:nccl" not in off.output


def test_no_collective_kernel_names_no_last_to_arrive_rank() -> None:
    """``kernel_us:nccl`` is 0 on every rank: argmin named the first rank; now None (n/a)."""
    frames = {
        r: _frame([0, 1], window_us=[10.0, 11.0], **{"kernel_us:nccl": [0.0, 0.0]})
        for r in ("r0", "r1")
    }
    view = cross_rank(frames)
    assert view["last_to_arrive"].isna().all()
    assert "last_to_arrive_steps" not in straggler_table(view, ["r0", "r1"])
    frames["r1"] = frames["r1"].assign(**{"kernel_us:nccl": [0.0, 5.0]})
    late = cross_rank(frames)["last_to_arrive"]
    assert pd.isna(late[0]) and late[1] == "r0"  # only the step in which a collective ran


def test_cli_warns_about_mixed_capture_modes_and_says_na(tmp_path) -> None:
    """A CPU-only, a graph-mode and a node-mode export were compared as ranks silently."""
    from click.testing import CliRunner

    from specscope.cli import cli

    names = ["cpu_eagle_2023.sqlite", "eagle_graph_before.sqlite", "eagle_node_before.sqlite"]
    folder = tmp_path / "ranks"
    folder.mkdir()
    for i, name in enumerate(names):
        (folder / f"rank{i}.sqlite").write_bytes((DATA / name).read_bytes())
    r = CliRunner().invoke(cli, ["analyze", str(folder), "--skip", "1", "-j", "1"])
    assert r.exit_code == 0, r.output
    warning = [line for line in r.stderr.splitlines() if "mix capture modes" in line]
    assert len(warning) == 1 and warning[0].startswith("warning: ")
    assert "no-cuda: rank0" in warning[0] and "graph: rank1" in warning[0]
    assert "node: rank2" in warning[0]
    assert "last_to_arrive: n/a" in r.stdout and "last_to_arrive_pct" not in r.stdout
