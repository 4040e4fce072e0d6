"""Shared fixtures: write tiny synthetic nsys exports and analyse them.

``write_export(x)`` writes a :class:`SyntheticExport` to a fresh file in the test's tmp dir;
``eagle_export(...)`` builds the EAGLE-shaped loop of ``eagle_exports.py`` (copied here):

Step k of ``eagle_export`` (times in ns, T = k * period; every launch inside the step thread)::

    CPU  |-- step [T, T+9000] ------------------------------------------------------|
            memcpy   |- draft.replay -|    |- verify.replay -|   |- draft_extend.replay -|
            api@500  [1000, 2000]           [3000, 4000]          [5000, 6000]
                     launch@1100            launch@3100           launch@5100
    GPU        [700,800] htod 64 B
                           [1500,2500] draft_k  [3500,4500] verify_k  [5500,6500] extend_k
                           [2500,2600] fused_metadata_copy_kernel

Node mode: the anchor kernels are graph nodes (one graphNodeId each); graph mode: each replay is
one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row over the same extent (``[1500, 2600]`` for draft).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from eagle_exports import EAGLE_SPEC, build_eagle  # noqa: F401  (re-exported for fixtures)

from specscope.analysis.run import Analysis, analyze
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
        return analyze(write_export(x), spec, **kw)

    return run
