"""The PR-ready Markdown table of ``specscope compare --format markdown``, cell by cell."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from testdata import DATA

from specscope.analysis.compare import compare_runs
from specscope.analysis.metrics import StepMetrics
from specscope.analysis.run import Analysis
from specscope.analysis.spec import load_preset
from specscope.cli.compare import compare_cmd
from specscope.reports.markdown import (
    DEFAULT_ROWS,
    display_name,
    format_change,
    format_value,
    markdown_table,
    provenance,
    render,
)

GAP_DE = "gap_us:draft_extend.replay->draft.replay"
GAP_DV = "gap_us:draft.replay->verify.replay"


def cells(line: str) -> list[str]:
    assert line.startswith("| ") and line.endswith(" |"), line
    return [c.strip() for c in line[2:-2].split(" | ")]


def side(source: str, commit: str | None, **medians: float) -> Analysis:
    """31 steps whose median of each metric is exactly ``medians[metric]``."""
    offsets = np.linspace(-3, 3, 31)  # symmetric: the median offset is 0
    frame = pd.DataFrame(
        {m: v + offsets if "_us" in m else np.full(31, v) for m, v in medians.items()}
    )
    return Analysis(
        source=source,
        metrics=StepMetrics(frame),
        capture_mode="node",
        gpu="NVIDIA H200",
        nsys_version="2025.3.2.0",
        spec=load_preset("eagle").to_dict(),  # its [report] rows are the default rows
        skipped=2,
        commit=commit,
    )


COPIES = "kernels:fused_metadata_copy"
SEED_BEFORE = {GAP_DE: 884.0, GAP_DV: 80.0, "idle_us": 400.0, COPIES: 4.0, "eager_memcpy": 19.0,
               "busy_us": 150.0}  # fmt: skip
SEED_AFTER = {GAP_DE: 619.0, GAP_DV: 48.0, "idle_us": 280.0, COPIES: 0.0, "eager_memcpy": 7.0,
              "busy_us": 150.0}  # fmt: skip


@pytest.fixture(scope="module")
def seed_case():
    before = side("before.sqlite", "1a2b3c4d5e6f7a8b", **SEED_BEFORE)
    after = side("after.sqlite", "5d6e7f8a9b0c1d2e", **SEED_AFTER)
    return compare_runs([before], [after])


def test_seed_case_cell_by_cell(seed_case) -> None:
    lines = markdown_table([seed_case]).splitlines()
    assert [cells(x) for x in lines] == [
        ["Metric", "Before", "After", "change"],
        ["---", "---:", "---:", "---:"],
        ["Gap: draft-extend → draft [node]", "884 µs", "619 µs", "−30.0 %"],
        ["Gap: draft → verify [node]", "80.0 µs", "48.0 µs", "−40.0 %"],
        ["GPU idle per step [node]", "400 µs", "280 µs", "−30.0 %"],
        ["fused_metadata_copy_kernel per step [node]", "4", "0", "−100.0 %"],
        ["Eager memcpys per step", "19", "7", "−63.2 %"],  # the same in both modes
    ]


def test_provenance_line(seed_case) -> None:
    assert provenance([seed_case]) == (
        "GPU NVIDIA H200 · nsys 2025.3.2.0 · capture mode node · "
        "commits 1a2b3c4d5e6f → 5d6e7f8a9b0c · "
        "steps counted: Before 31, After 31 (after 2 warm-up skipped) · medians per step"
    )
    text = render([seed_case])
    table, prov = text.split("\n\n")
    assert table == markdown_table([seed_case]) and prov == provenance([seed_case]) + "\n"


def test_chosen_rows_labels_and_fallback_names() -> None:
    before = side("b", None, **SEED_BEFORE)
    after = side("a", None, **SEED_AFTER)
    c = compare_runs([before], [after], labels=("main", "PR 42"))
    lines = markdown_table([c], ["busy_us", "api_calls:cudaGraphLaunch", "idle_us"]).splitlines()
    assert cells(lines[0]) == ["Metric", "main", "PR 42", "change"]
    assert cells(lines[2]) == ["GPU busy per step [node]", "150 µs", "150 µs", "0.0 %"]
    assert cells(lines[3]) == ["api_calls:cudaGraphLaunch", "n/a", "n/a", "n/a"]  # not measured
    assert cells(lines[4])[0] == "GPU idle per step [node]"
    assert "commits" not in provenance([c])  # unknown commits are left out


def test_several_after_sides() -> None:
    before = side("b", "aaa", **SEED_BEFORE)
    a1 = side("a1", "bbb", **SEED_AFTER)
    a2 = side("a2", None, **{**SEED_AFTER, "idle_us": 440.0})
    comps = [
        compare_runs([before], [a1], labels=("Before", "After 1")),
        compare_runs([before], [a2], labels=("Before", "After 2")),
    ]
    lines = markdown_table(comps, ["idle_us"]).splitlines()
    assert cells(lines[0]) == ["Metric", "Before", "After 1", "change", "After 2", "change"]
    assert cells(lines[1]) == ["---"] + ["---:"] * 5
    assert cells(lines[2]) == [
        "GPU idle per step [node]",
        "400 µs",
        "280 µs",
        "−30.0 %",
        "440 µs",
        "+10.0 %",
    ]
    assert "commits aaa → bbb → unknown" in provenance(comps)


@pytest.mark.parametrize(
    "value, unit, text",
    [
        (884.4, "us", "884 µs"),
        (99.95, "us", "100.0 µs"),
        (24.24, "us", "24.2 µs"),
        (-3.25, "us", "−3.2 µs"),
        (4.0, "count", "4"),
        (2.5, "count", "2.5"),
        (42.37, "%", "42.4 %"),
        (147457.0, "B", "147457 B"),
        (float("nan"), "us", "n/a"),
    ],
)
def test_format_value(value: float, unit: str, text: str) -> None:
    assert format_value(value, unit) == text


@pytest.mark.parametrize(
    "rel, before, after, text",
    [
        (-29.977, 884, 619, "−30.0 %"),
        (5.04, 100, 105.04, "+5.0 %"),
        (0.01, 100, 100.01, "0.0 %"),
        (float("nan"), 0, 3, "new"),
        (0.0, 0, 0, "0.0 %"),
        (float("nan"), float("nan"), 3, "n/a"),
    ],
)
def test_format_change(rel: float, before: float, after: float, text: str) -> None:
    assert format_change(rel, before, after) == text


def test_display_names() -> None:
    assert [display_name(m) for m in DEFAULT_ROWS] == [
        "Gap: draft-extend → draft",
        "Gap: draft → verify",
        "GPU idle per step",
        "fused_metadata_copy_kernel per step",
        "Eager memcpys per step",
    ]
    assert display_name("cpu_us:accept") == "cpu_us:accept"


def test_cli_markdown_on_real_exports() -> None:
    before, after = DATA / "eagle_node_before.sqlite", DATA / "eagle_node_after.sqlite"
    r = CliRunner().invoke(
        compare_cmd, [str(before), str(after), "--skip", "1", "--format", "markdown"]
    )
    assert r.exit_code == 0, r.output
    table, prov = r.stdout.split("\n\n")
    assert [cells(x) for x in table.splitlines()[2:]] == [
        ["Gap: draft-extend → draft [node]", "208 µs", "60.0 µs", "−71.2 %"],
        ["Gap: draft → verify [node]", "77.8 µs", "24.2 µs", "−68.9 %"],
        ["GPU idle per step [node]", "440 µs", "201 µs", "−54.3 %"],
        ["fused_metadata_copy_kernel per step [node]", "4", "0", "−100.0 %"],
        ["Eager memcpys per step", "19", "7", "−63.2 %"],
    ]
    assert prov.strip() == (
        "GPU NVIDIA H200 · nsys 2025.3.2.0 · capture mode node · steps counted: Before 11, "
        "After 11 (after 1 warm-up skipped) · medians per step"
    )
    assert "warning:" in r.stderr  # inconclusive note goes to stderr, not into the table
    r = CliRunner().invoke(
        compare_cmd,
        [str(before), str(after), "--skip", "1", "--format", "markdown", "--metrics", "nope"],
    )
    assert r.exit_code == 2 and "unknown metric(s) nope" in r.stderr


@pytest.mark.parametrize(
    "mode, tag", [("graph", " [graph]"), ("node", " [node]"), ("no-graphs", "")]
)
def test_rows_whose_value_depends_on_the_capture_mode_are_tagged(mode, tag) -> None:
    before = dataclasses.replace(side("b", None, **SEED_BEFORE), capture_mode=mode)
    after = dataclasses.replace(side("a", None, **SEED_AFTER), capture_mode=mode)
    rows = [GAP_DE, "idle_us", "busy_us", COPIES, "eager_memcpy"]
    lines = markdown_table([compare_runs([before], [after])], rows).splitlines()[2:]
    assert [cells(x)[0] for x in lines] == [
        f"Gap: draft-extend → draft{tag}",
        f"GPU idle per step{tag}",
        f"GPU busy per step{tag}",
        f"fused_metadata_copy_kernel per step{tag}",
        "Eager memcpys per step",  # eager work is traced the same in both modes
    ]


def test_pipes_in_names_and_labels_are_escaped() -> None:
    medians = {**SEED_BEFORE, "kernels:copy|fill": 3.0}
    c = compare_runs([side("b", None, **medians)], [side("a", None, **medians)],
                     labels=("main|old", "PR"))  # fmt: skip
    lines = markdown_table([c], ["kernels:copy|fill"]).splitlines()
    assert lines[0].startswith("| Metric | main\\|old | PR |")
    assert lines[2].startswith("| kernels:copy\\|fill [node] | 3 | 3 |")
    assert lines[2].count(" | ") == 3  # four cells: the escaped pipe splits none


def test_verdict_and_ci_columns() -> None:
    c = compare_runs([side("b", None, **SEED_BEFORE)], [side("a", None, **SEED_AFTER)])
    lines = markdown_table([c], ["idle_us"], columns=["ci", "verdict"]).splitlines()
    assert cells(lines[0]) == ["Metric", "Before", "After", "change", "verdict", "95% CI"]
    row = cells(lines[2])
    assert row[:5] == ["GPU idle per step [node]", "400 µs", "280 µs", "−30.0 %", "improved"]
    low, high = c.metrics.loc["idle_us", ["ci_low", "ci_high"]]
    assert row[5] == f"[{format_value(low, 'us')[:-3]}, {format_value(high, 'us')[:-3]}] µs"
    with pytest.raises(ValueError, match="unknown column"):
        markdown_table([c], columns=["p10"])


def _compare(*args: str):
    before, after = DATA / "eagle_node_before.sqlite", DATA / "eagle_node_after.sqlite"
    files = {"B": str(before), "A": str(after)}
    return CliRunner().invoke(compare_cmd, [files.get(a, a) for a in args])


def test_cli_chain_compares_each_input_against_the_previous_one() -> None:
    options = ["--skip", "1", "--format", "markdown", "--labels", "v0,v1,v2"]
    r = _compare("B", "A", "B", "--chain", *options, "--metrics", "eager_memcpy",
                 "--columns", "verdict")  # fmt: skip
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert cells(lines[0]) == [
        "Metric", "v0", "v1", "change", "verdict", "v2", "change vs v1", "verdict"
    ]  # fmt: skip
    assert cells(lines[2])[1:] == ["19", "7", "−63.2 %", "inconclusive", "19", "+171.4 %",
                                   "inconclusive"]  # fmt: skip
    unchained = _compare("B", "A", "B", "--skip", "1", "--format", "markdown",
                         "--metrics", "eager_memcpy")  # fmt: skip
    assert cells(unchained.stdout.splitlines()[2])[-1] == "0.0 %"  # v2 against v0
    bad = _compare("B", "A", "--format", "markdown", "--columns", "verdict,p10")
    assert bad.exit_code == 2 and "unknown column(s) p10" in bad.stderr


def test_cli_table_format_honours_metrics() -> None:
    """``--metrics`` chose the rows of the Markdown table only; the table format ignored it."""
    r = _compare("B", "A", "--skip", "1", "--metrics", "gap_us:foo")
    assert r.exit_code == 2 and "unknown metric(s) gap_us:foo" in r.stderr
    r = _compare("B", "A", "--skip", "1", "--metrics", "idle_us,eager_memcpy")
    assert r.exit_code == 0, r.output
    table = r.stdout.split("operations per step")[0].split("\nmetric ")[1].splitlines()[1:]
    assert [line.split()[0] for line in table if line.strip()] == ["idle_us", "eager_memcpy"]
