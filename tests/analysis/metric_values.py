"""Shared by the analysis tests: a spec with one step range and no anchors, and checks on
the per-step metrics frame of an :class:`~specscope.analysis.run.Analysis`."""

from __future__ import annotations

import pytest

from specscope.analysis.spec import StepSpec

PLAIN = StepSpec("step")


def col(a, metric: str) -> list[float]:
    """The per-step values of `metric` in analysis `a`, in step order (NaN where none)."""
    return a.metrics.frame[metric].tolist()


def assert_values(a, expected: dict[str, list[float]]) -> None:
    """Each metric of `expected` has exactly these per-step values (NaN matches NaN)."""
    for metric, values in expected.items():
        assert col(a, metric) == pytest.approx(values, nan_ok=True, abs=1e-9), metric
