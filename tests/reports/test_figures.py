"""The steps figure: each step a dot, joined by a line only while the steps are few enough to
be told apart (``figures.LINE_MAX_STEPS``); every step is drawn either way."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specscope.reports import figures


def _drawn_series(monkeypatch, tmp_path, steps: int) -> list:
    """The data lines of the steps figure of two inputs of ``steps`` steps each."""
    drawn = []
    monkeypatch.setattr(figures, "save_png", lambda fig, path: drawn.append(fig))
    rng = np.random.default_rng(0)
    frames = [
        pd.DataFrame(
            {"idle_us": rng.gamma(2.0, 50.0, steps), "gap_us:a->b": rng.gamma(2.0, 5.0, steps)},
            index=pd.Index(np.arange(steps) + 3, name="step"),
        )
        for _ in range(2)
    ]
    figures.steps_figure(frames, ["before", "after"], tmp_path / "steps.png")
    (fig,) = drawn
    return [line for ax in fig.axes for line in ax.get_lines() if len(line.get_xdata()) == steps]


@pytest.mark.parametrize(
    "steps, width", [(50, 1.5), (figures.LINE_MAX_STEPS, 1.5), (figures.LINE_MAX_STEPS + 1, 0)]
)
def test_steps_are_dots_joined_by_a_line_only_while_few(monkeypatch, tmp_path, steps, width):
    series = _drawn_series(monkeypatch, tmp_path, steps)
    assert len(series) == 4  # two metrics, two inputs: every step of each
    for line in series:
        assert line.get_marker() == "o"
        assert line.get_linewidth() == width
        assert list(line.get_xdata()) == list(range(3, steps + 3))
