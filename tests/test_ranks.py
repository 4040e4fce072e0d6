"""The cross-rank view: hand-built per-step frames pin each rule; synthetic per-rank exports
(different pids, a straggler rank) check the whole path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from eagle_exports import EAGLE_SPEC, build_eagle

from specscope.analysis.many import analyze_many
from specscope.analysis.ranks import cross_rank, spread_summary, straggler_table


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
    results = analyze_many(paths, EAGLE_SPEC, jobs=1, skip=1)
    assert all(r.ok for r in results)
    assert [r.analysis.steps.pid for r in results] == [200, 201, 202]
    view = cross_rank({f"r{i}": r.analysis.metrics.frame for i, r in enumerate(results)})
    # the last step's window ends at its own work: all but it are full periods
    assert list(view["slowest_rank"])[:-1] == ["r2"] * 4
    assert view["window_us:spread"].iloc[0] == pytest.approx(4.0)
    assert view["idle_us:spread"].iloc[0] == pytest.approx(4.0)  # busy time is the same
    assert view["gap_us:draft_extend.replay->draft.replay:spread"].iloc[1] == pytest.approx(4.0)
