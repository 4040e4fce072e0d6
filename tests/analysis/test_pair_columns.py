"""``pairs.first_per_step`` / ``pair_columns`` against the pandas group-by they replace."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from specscope.analysis.pairs import first_per_step, pair_columns


def _reference(steps, step, label, values) -> dict:
    """pandas: the first non-NaN value per (step, label), labels as columns in order of first
    occurrence, reindexed to the kept steps."""
    rows = pd.DataFrame({"step": step, "label": label, "value": values})
    rows = rows[rows["step"] >= 0]
    table = rows.groupby(["step", "label"], sort=False)["value"].first().unstack()
    return {col: table[col].reindex(steps.kept).to_numpy() for col in table.columns}


def _random_steps(rng, n_anchors: int, n_names: int):
    """Anchor instances with names among ``n_names``, steps in order (some -1: outside any
    step), some steps skipped; values with NaNs."""
    n_steps = max(1, n_anchors // 3)
    step = np.sort(rng.integers(-1, n_steps, n_anchors))
    step[rng.random(n_anchors) < 0.1] = -1
    names = np.array([f"a{i}.replay" for i in range(n_names)], dtype=object)
    anchors = pd.DataFrame({"name": names[rng.integers(0, n_names, n_anchors)], "step": step})
    kept = np.flatnonzero(rng.random(n_steps) < 0.8)
    steps = SimpleNamespace(
        anchors=anchors, kept=kept, all_steps=pd.DataFrame({"step": np.arange(n_steps)})
    )
    values = rng.normal(size=n_anchors) * 100
    values[rng.random(n_anchors) < 0.2] = np.nan
    return steps, values


@pytest.mark.parametrize("seed", range(40))
def test_first_per_step_equals_the_pandas_group_by(seed: int) -> None:
    rng = np.random.default_rng(seed)
    steps, values = _random_steps(rng, int(rng.integers(1, 300)), int(rng.integers(1, 5)))
    step = steps.anchors["step"].to_numpy()
    label = rng.integers(0, 6, len(step))
    labels, table = first_per_step(steps, step, label, values)
    expected = _reference(steps, step, label, values)
    assert list(labels) == list(expected)
    for i, lab in enumerate(labels):
        np.testing.assert_array_equal(table[i], expected[lab])


@pytest.mark.parametrize("seed", range(40))
def test_pair_columns_equal_the_pandas_group_by_of_pair_names(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    steps, values = _random_steps(rng, int(rng.integers(2, 300)), int(rng.integers(1, 5)))
    a = steps.anchors
    names = a["name"].to_numpy(dtype=object)
    pairs = [f"gap_us:{p}->{c}" for p, c in zip(names[:-1], names[1:], strict=True)]
    expected = _reference(steps, a["step"].to_numpy()[1:], pairs, values[1:])
    got = pair_columns(steps, values[1:], "gap_us:")
    assert list(got) == list(expected)
    for col, v in got.items():
        np.testing.assert_array_equal(v, expected[col])
