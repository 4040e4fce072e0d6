"""Shared fixtures: write tiny synthetic nsys exports and analyse them.

``write_export(x)`` writes a :class:`SyntheticExport` to a fresh file in the test's tmp dir;
``eagle_export(...)`` writes the EAGLE-shaped loop of ``eagle_exports.build_eagle`` (its
module docstring draws one step with every time the tests compute by hand);
``analyze_x(x, ...)`` writes and analyses an export.

The folders under tests/ mirror the package (analysis/, reports/, profiler/, campaign/,
kernels/; cli/ for the commands, bench/ for the bench scripts); test file names are unique
across folders. Modules here import from every folder: ``eagle_exports`` (the EAGLE-shaped
synthetic export) and ``testdata`` (the repository root and the committed exports).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
from eagle_exports import EAGLE_SPEC, build_eagle  # noqa: F401  (re-exported for fixtures)

from specscope.analysis.run import Analysis, AnalyzeOptions, analyze
from specscope.analysis.spec import StepSpec
from specscope.analysis.synthetic import SyntheticExport


@pytest.fixture
def write_export(tmp_path: Path):
    """``write_export(x, name="export", empty=())`` -> path of a new SQLite file in tmp_path."""
    counter = itertools.count()

    def write(x: SyntheticExport, name: str = "export", **kw) -> Path:
        return x.write(tmp_path / f"{name}_{next(counter)}.sqlite", **kw)

    return write


@pytest.fixture
def eagle_export(write_export):
    """``eagle_export(n_steps=3, mode="node", ...)`` -> path of an EAGLE-shaped export."""

    def make(n_steps: int = 3, **kw) -> Path:
        return write_export(build_eagle(n_steps, **kw), name="eagle")

    return make


@pytest.fixture
def analyze_x(write_export):
    """``analyze_x(x, spec=EAGLE_SPEC, skip=0, ...)`` -> Analysis of the written export."""

    def run(x: SyntheticExport, spec: StepSpec = EAGLE_SPEC, **kw) -> Analysis:
        return analyze(write_export(x), spec, AnalyzeOptions(**kw))

    return run


@pytest.fixture(scope="module")
def native_cache(tmp_path_factory):
    """A cache of compiled C fast paths of the test module's own (``SPECSCOPE_CACHE``, set
    for the module's tests, then as it was): each module builds them as a first use does."""
    cache = tmp_path_factory.mktemp("native-cache")
    old = os.environ.get("SPECSCOPE_CACHE")
    os.environ["SPECSCOPE_CACHE"] = str(cache)
    try:
        yield cache
    finally:
        if old is None:
            del os.environ["SPECSCOPE_CACHE"]
        else:
            os.environ["SPECSCOPE_CACHE"] = old
