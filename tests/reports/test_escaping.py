"""Markdown and HTML outputs escape what they print: names with ``|``, ``<`` and backticks."""

from __future__ import annotations

from pathlib import Path

from test_markdown import SEED_AFTER, SEED_BEFORE, cells, side
from testdata import AFTER, BEFORE

from specscope.analysis.compare import compare_runs
from specscope.analysis.inputs import resolve
from specscope.analysis.run import AnalyzeOptions
from specscope.analysis.spec import load_preset
from specscope.reports.markdown import markdown_table, md_code, md_text, render
from specscope.reports.overview import _table
from specscope.reports.report import summary_markdown, write_report

HOSTILE = "main | <b>x</b> `y`"


def test_md_text_and_code() -> None:
    assert md_text("copy|memset") == "copy\\|memset"
    assert md_text("<script>") == "&lt;script&gt;"
    assert md_text("a`b\nc") == "a\\`b c"
    assert md_code("a`b") == "``a`b``" and md_code("`x") == "`` `x ``"


def test_pr_table_keeps_its_columns() -> None:
    metric = "kernels:copy|memset"
    before = side("b", None, **SEED_BEFORE, **{metric: 3.0})
    after = side("a", None, **SEED_AFTER, **{metric: 1.0})
    c = compare_runs([before], [after], labels=(HOSTILE, "PR | 42"))
    text = render([c], [metric, "idle_us"])
    lines = markdown_table([c], [metric, "idle_us"]).splitlines()
    assert all(len(cells(line)) == 4 for line in lines)
    assert cells(lines[2])[0] == "kernels:copy\\|memset [node]"  # a mode-dependent count
    assert "<b>" not in text and "&lt;b&gt;" in text


def test_overview_table_escapes() -> None:
    line = _table(["a", "b"], [["x|y", "<i>"]]).splitlines()[2]
    assert line == "| x\\|y | &lt;i&gt; |"


def test_report_with_hostile_labels(tmp_path: Path) -> None:
    spec, options = load_preset("eagle"), AnalyzeOptions(skip=1)
    inputs = [resolve(p, spec, options) for p in (BEFORE, AFTER)]
    labels = [HOSTILE, "<img src=x onerror=alert(1)>"]
    c = compare_runs([inputs[0].analysis], [inputs[1].analysis], labels=tuple(labels))
    md = summary_markdown([c], inputs, labels, [None, None])
    assert "<b>" not in md and "<img" not in md and "### main \\| &lt;b&gt;" in md
    gap = "gap_us:draft_extend.replay->draft.replay"
    paths = write_report(tmp_path, inputs, labels, [c], [None, None], gap=gap)
    page = paths["report.html"].read_text()
    assert "<img src=x" not in page and "&lt;img src=x" in page and "<b>x</b>" not in page
