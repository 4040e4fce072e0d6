"""The metric catalog: every metric the analysis produces has one entry, the README's table is
the catalog's, and units and directions are those specscope has always reported."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from specscope.analysis.catalog import (
    CATALOG,
    COPY_DIRECTIONS,
    Direction,
    direction,
    find,
    gpu_metrics,
    info,
    unit,
)
from specscope.analysis.loader import EAGER_COPY_KINDS
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import load_preset

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def _metric_table_module():
    spec = importlib.util.spec_from_file_location(
        "metric_table", ROOT / "scripts" / "metric_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_table_is_the_catalogs() -> None:
    mt = _metric_table_module()
    readme = (ROOT / "README.md").read_text()
    assert readme == mt.with_table(readme), "run: python scripts/metric_table.py --write"
    assert readme.count(mt.START) == readme.count(mt.END) == 1
    for entry in CATALOG:
        assert f"`{entry.pattern}`" in readme


@pytest.mark.parametrize(
    "path",
    sorted(DATA.glob("*.sqlite")) + sorted((DATA / "two_rank").glob("*.sqlite")),
    ids=lambda p: p.name,
)
def test_every_metric_of_the_real_fixtures_has_an_entry(path: Path) -> None:
    a = analyze(path, load_preset("eagle"), AnalyzeOptions(skip=1, count_kernels=("nccl",)))
    columns = list(a.metrics.frame.columns)
    assert columns
    missing = [c for c in columns if find(c) is None]
    assert missing == []


@pytest.mark.parametrize(
    ("metric", "unit_", "way"),
    [
        ("idle_us", "us", Direction.LOWER),
        ("window_us", "us", Direction.LOWER),
        ("busy_us", "us", Direction.NEUTRAL),
        ("occupancy_pct", "%", Direction.HIGHER),
        ("gap_us:a.replay->b.replay", "us", Direction.LOWER),
        ("cpu_gap_us:a->b", "us", Direction.LOWER),
        ("cpu_us:x.prepare", "us", Direction.LOWER),
        ("cpu_step_us", "us", Direction.LOWER),
        ("eager_memcpy", "count", Direction.LOWER),
        ("eager_memcpy_dtoh", "count", Direction.LOWER),
        ("eager_memcpy_bytes", "B", Direction.LOWER),
        ("eager_memset", "count", Direction.LOWER),
        ("eager_kernels", "count", Direction.NEUTRAL),
        ("graph_kernels", "count", Direction.NEUTRAL),
        ("graph_launches", "count", Direction.NEUTRAL),
        ("kernels:copy|fill", "count", Direction.LOWER),
        ("kernel_us:nccl", "us", Direction.NEUTRAL),
        ("api_calls:cudaLaunchKernel", "count", Direction.LOWER),
        ("api_calls:cudaGraphLaunch", "count", Direction.NEUTRAL),
    ],
)
def test_units_and_directions_are_unchanged(metric: str, unit_: str, way: Direction) -> None:
    assert (unit(metric), direction(metric)) == (unit_, way)
    assert (info(metric).unit, info(metric).direction) == (unit_, way)


def test_names_outside_the_catalog() -> None:
    assert find("tok_per_s") is None and find("api_calls:cudaFree") is None
    with pytest.raises(KeyError):
        info("nope")
    # the rule by name, as before the catalog: *_us is µs, anything else a count, neutral
    assert (unit("foo_us"), unit("foo"), direction("foo")) == ("us", "count", Direction.NEUTRAL)


def test_no_cuda_list_and_copy_directions() -> None:
    assert list(COPY_DIRECTIONS) == list(EAGER_COPY_KINDS)  # unified migrations: not eager
    assert gpu_metrics() == [
        "window_us", "busy_us", "idle_us", "occupancy_pct", "eager_memcpy", "eager_memcpy_htod",
        "eager_memcpy_dtoh", "eager_memcpy_dtod", "eager_memcpy_other", "eager_memcpy_bytes",
        "eager_memset", "eager_kernels", "graph_kernels", "graph_launches",
    ]  # fmt: skip
    host = [e.pattern for e in CATALOG if not e.needs_cuda]
    assert host == ["cpu_step_us", "cpu_us:R", "cpu_gap_us:A->B"]


def test_each_name_matches_one_entry_only() -> None:
    names = ["kernels:x", "kernel_us:x", "gap_us:a->b", "cpu_gap_us:a->b", "eager_memcpy_bytes"]
    for name in names + gpu_metrics():
        assert sum(e.matches(name) for e in CATALOG) == 1, name
