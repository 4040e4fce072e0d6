"""The steps figure: each step a dot, joined by a line only while the steps are few enough to
be told apart (``figures.LINE_MAX_STEPS``); every step is drawn either way. A per-rank report's
figures drawn in one split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import testdata

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


def test_a_per_rank_report_draws_every_ranks_figures_with_one_split(tmp_path, monkeypatch):
    """``report --per-rank``: the four figures of every rank, drawn in one split (one child,
    forked warm), and each rank's files are there."""
    from click.testing import CliRunner

    from specscope.cli import cli
    from specscope.reports import parallel

    splits = []
    run_split = parallel.run_split

    def recorded(here, there, **kw):
        splits.append((len(here), len(there), kw.get("warm")))
        run_split(here, there, **kw)

    monkeypatch.setattr(parallel, "run_split", recorded)
    path = str(testdata.DATA / "graphs" / "two_proc_graph.sqlite")
    args = ["report", path, path, "--min-steps", "5", "--out", str(tmp_path)]
    r = CliRunner().invoke(cli, [*args, "--per-rank"])
    assert r.exit_code == 0, r.output
    assert splits == [(4, 4, True)]  # two ranks' halves, in one split
    top = Path(r.output.strip().splitlines()[-1]).parent
    for rank in ("rank0", "rank1"):
        for png in ("timeline.png", "distributions.png", "steps.png", "composition.png"):
            assert (top / rank / png).stat().st_size > 0


@pytest.mark.parametrize("steps, joined", [(50, True), (figures.LINE_MAX_STEPS + 1, False)])
def test_the_legend_draws_each_input_as_its_panels_do(monkeypatch, tmp_path, steps, joined):
    drawn = []
    monkeypatch.setattr(figures, "save_png", lambda fig, path: drawn.append(fig))
    frame = pd.DataFrame({"idle_us": np.linspace(1.0, 2.0, steps)})
    figures.steps_figure([frame], ["only"], tmp_path / "steps.png")
    (fig,) = drawn
    (handle,) = [h for h in fig.legends[0].legend_handles if h.get_label() == "only"]
    assert handle.get_marker() == "o"
    assert (handle.get_linewidth() > 0) == joined
