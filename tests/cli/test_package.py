"""The shape of ``specscope/cli/``: a package of one module per command that only parses and
prints, and the library functions it calls for what it used to compute itself."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import click
from click.testing import CliRunner

from specscope.analysis.compare import side_labels
from specscope.cli import COMMAND_MODULES, Command, cli
from specscope.cli.options import SpecArgs, given_options, spec_options
from specscope.reports.reproduce import command_line, reproduce_commands
from specscope.reports.text import signed, unit_text, with_minus

PACKAGE = Path(__file__).resolve().parents[2] / "specscope"


def test_one_module_per_command_and_no_top_level_cli_modules():
    assert not list(PACKAGE.glob("cli_*.py")) and not (PACKAGE / "cli.py").exists()
    assert sorted(cli.commands) == sorted(COMMAND_MODULES)
    for name in COMMAND_MODULES:
        assert (PACKAGE / "cli" / f"{name}.py").is_file()
        assert isinstance(cli.commands[name], Command)


def test_no_cli_function_over_80_lines():
    for path in (PACKAGE / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                assert node.end_lineno - node.lineno < 80, f"{path.name}::{node.name}"


def test_spec_options_give_a_spec_and_options():
    seen = {}

    @click.command(cls=Command)
    @spec_options
    def cmd(spec_args: SpecArgs) -> None:
        seen["spec"], seen["options"] = spec_args.spec, spec_args.options

    args = ["--step", "s", "--anchors", "a, b", "--skip", "2", "--count-kernels", "x", "--pid", "7"]
    result = CliRunner().invoke(cmd, args)
    assert result.exit_code == 0, result.output
    assert (seen["spec"].step, seen["spec"].anchors) == ("s", ("a", "b"))
    o = seen["options"]
    assert (o.skip, o.count_kernels, o.pid, o.device) == (2, ("x",), 7, None)
    bad = CliRunner().invoke(cmd, ["--preset", "eagle", "--step", "s"])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines()[-1].startswith("Error: give either --preset")


def test_given_options_are_only_those_typed():
    @click.command()
    @click.option("--a", default=1, type=int)
    @click.option("--b", default="x")
    @click.option("--many", multiple=True)
    @click.pass_context
    def cmd(ctx, a, b, many):
        click.echo(repr(given_options(ctx)))

    assert CliRunner().invoke(cmd, []).output.strip() == "[]"
    out = CliRunner().invoke(cmd, ["--many", "p", "--a", "1"]).output.strip()
    assert out == "[('--a', 1), ('--many', ('p',))]"  # declaration order; typed defaults kept


def test_reproduce_commands():
    assert command_line(["x"], [("--f", True), ("--n", None), ("--k", ("a b", "c"))]) == (
        "x --f --k 'a b' --k c"
    )
    given = [("--out", "r"), ("--skip", 1), ("--lead", 10.0)]
    report, compare = reproduce_commands(["b.sqlite", "a.sqlite"], ["B", "A"], given,
                                         ["--skip"], [])  # fmt: skip
    assert report == "specscope report b.sqlite a.sqlite --labels B,A --skip 1 --lead 10.0 --out r"
    assert compare == (
        "specscope compare b.sqlite a.sqlite --labels B,A --skip 1 --format markdown --metrics all"
    )


def test_display_helpers_have_one_home():
    assert signed(-3.25) == "\u22123.2" and signed(-3.25, minus="-") == "-3.2"
    assert signed(-0.01) == "+0.0" and signed(math.nan) == "n/a" and signed(None) == "n/a"
    assert with_minus("-4") == "\u22124" and with_minus("4") == "4"
    assert unit_text("count") == ("", "count", "count per step")
    assert unit_text("ms") == ("ms", "ms", "ms")
    assert side_labels(2) == ["Before", "After"]
    assert side_labels(3) == ["Before", "After 1", "After 2"]


def test_library_functions_the_cli_calls():
    from specscope.analysis import ranks
    from specscope.analysis.compare import Verdict, compare_runs
    from specscope.analysis.loader import load
    from specscope.analysis.projection import nvtx_ranges
    from specscope.analysis.run import analyze
    from specscope.analysis.spec import load_preset

    data = PACKAGE.parent / "tests" / "data"
    table = nvtx_ranges(load(data / "eagle_node_before.sqlite"))
    assert list(table.columns)[:5] == ["name", "domain", "count", "mean_us", "threads"]
    assert table["count"].is_monotonic_decreasing
    eagle = load_preset("eagle")
    before = analyze(data / "eagle_node_before.sqlite", eagle)
    after = analyze(data / "eagle_node_after.sqlite", eagle)
    c = compare_runs([before], [after], min_steps=1000)
    assert c.inconclusive == (c.metrics["verdict"] == Verdict.INCONCLUSIVE).sum() > 0
    assert c.to_json()["metrics"]["idle_us"]["verdict"] in ("inconclusive", "unavailable")
    assert ranks.to_json(None, ["a"]) is None
    view = ranks.cross_rank({"a": before.metrics.frame, "b": after.metrics.frame})
    data_json = ranks.to_json(view, ["a", "b"])
    assert data_json["labels"] == ["a", "b"] and data_json["steps"] == len(view)


def test_readme_install_pins_the_nvtx_that_old_nsys_records():
    """An unpinned install pulled nvtx 0.2.17, from which Debian's nsys 2023.4.4 records no
    ranges (doctor failed); the README's install command pins what .ci/run pins."""
    from testdata import ROOT

    install = [
        line for line in (ROOT / "README.md").read_text().splitlines() if "pip install -e" in line
    ][0]
    assert '"nvtx==0.2.11"' in install
    assert '"nvtx==0.2.11"' in (ROOT / ".ci" / "run").read_text()
