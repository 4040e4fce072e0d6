"""The four PNGs of a report, drawn from one :class:`FigureJob`; draws only.

A job holds exactly what the figures are drawn from, and nothing of the analysis behind it, so
that it pickles small: a helper process started before the analysis
(:mod:`specscope.reports.prestart`) draws it while this process writes the pages. Importing this
module does not import matplotlib (:func:`draw_figures` and :func:`warm_up` do): the helper of
:func:`drawing_helper` imports it while this process analyses, and this process imports it only
to draw the figures itself, when there is no helper.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from specscope.reports import parallel
from specscope.reports.prestart import Helper, prestarted

if TYPE_CHECKING:
    import pandas as pd

    from specscope.analysis.composition import MedianStep
    from specscope.reports.style import Stamp

PNGS = ("timeline.png", "distributions.png", "steps.png", "composition.png")


@dataclass(frozen=True)
class FigureJob:
    """What the four figures of one report are drawn from.

    ``paths``: file of each name in :data:`PNGS`; ``frames``: each input's per-step metrics
    (:attr:`specscope.analysis.run.Analysis.frame`); ``labels``: the inputs' names; ``views``:
    each input's median step (None: a results-database run, or an export without CUDA
    activity where ``no_cuda`` says so); ``highlight``: the regex of the kernels marked on the
    timeline; ``stamp``: what every figure is stamped with."""

    paths: dict[str, Path]
    frames: Sequence[pd.DataFrame]
    labels: Sequence[str]
    views: Sequence[MedianStep | None]
    highlight: str | None
    stamp: Stamp
    no_cuda: Sequence[bool] = ()


def draw_figures(job: FigureJob, *, warm: bool = False) -> None:
    """Draw :data:`PNGS`, two of them in a forked child where that is possible
    (:func:`parallel.run_split`; ``warm``: drawn by a helper after :func:`warm_up`)."""
    parallel.run_split(*_halves(job), warm=warm)


def draw_all(jobs: Sequence[FigureJob]) -> None:
    """:func:`draw_figures` of each of ``jobs`` (a per-rank report's ranks) with one split for
    all of them, after :func:`warm_up` here: one child, forked with what it draws with
    imported, where a child per job was forked only on a machine with a CPU idle, and each
    paid its own start."""
    warm_up()
    here: list[parallel.Job] = []
    there: list[parallel.Job] = []
    for job in jobs:
        mine, theirs = _halves(job)
        here += mine
        there += theirs
    parallel.run_split(here, there, warm=True, long=len(jobs) > 1)


def _halves(job: FigureJob) -> tuple[list[parallel.Job], list[parallel.Job]]:
    """The four figures of ``job`` as two lists of jobs, about equal halves of the drawing time
    (timeline ~40 %, composition ~10 %)."""
    from specscope.reports import figures, timeline

    views, labels, s = job.views, job.labels, job.stamp
    order = timeline.anchor_order(views)  # one colour per anchor in every figure

    def timeline_png() -> None:
        timeline.timeline_figure(
            views, labels, job.paths["timeline.png"], highlight=job.highlight, stamp_=s,
            no_cuda=job.no_cuda,
        )  # fmt: skip

    def composition_png() -> None:
        figures.composition_figure(
            [v.composition if v else None for v in views],
            labels,
            job.paths["composition.png"],
            steps=[v.step if v else None for v in views],
            stamp_=s,
            no_cuda=job.no_cuda,
        )

    def distributions_png() -> None:
        figures.distributions_figure(
            job.frames, labels, job.paths["distributions.png"], stamp_=s, anchors=order
        )

    def steps_png() -> None:
        figures.steps_figure(job.frames, labels, job.paths["steps.png"], stamp_=s, anchors=order)

    return [timeline_png, composition_png], [distributions_png, steps_png]


def warm_up() -> None:
    """Import what :func:`draw_figures` needs and load the figures' font, ahead of the job: a
    prestarted helper's warm-up, in the helper only. It also sets the helper's backend to Agg
    (every figure has its own Agg canvas anyway): left to be resolved, the default backend is
    resolved when the boxplots read the settings, which imports ``matplotlib.pyplot``."""
    import matplotlib
    from matplotlib import figure, font_manager  # noqa: F401 - the figures' class
    from matplotlib.backends import backend_agg  # noqa: F401 - the canvas of every figure

    from specscope.reports import figures, timeline  # noqa: F401

    matplotlib.use("agg")
    font_manager.get_font(font_manager.findfont(font_manager.FontProperties()))


def drawing_helper(*, enabled: bool = True) -> contextlib.AbstractContextManager[Helper | None]:
    """A helper process that imports the drawing modules now (:func:`warm_up`), while the caller
    analyses, and draws the :class:`FigureJob` handed to it
    (:func:`specscope.reports.prestart.prestarted`); None when not ``enabled``, or where forking
    is not possible or not useful (then the figures are drawn by :func:`draw_figures` here)."""
    return prestarted(warm_up) if enabled else contextlib.nullcontext()
