"""``specscope demo``: analyse, compare and report the bundled example exports."""

from __future__ import annotations

from pathlib import Path

import click

from specscope.cli import Command
from specscope.cli.options import report_out_option, say, warn


@click.command("demo", cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@report_out_option
@click.option("--examples", type=click.Path(path_type=Path), default=None,
              help="Folder of the example data (default: the repository's examples/).")  # fmt: skip
def demo_cmd(out: Path, examples: Path | None) -> None:
    """Analyse, compare and report the bundled H200 example exports (no GPU, no nsys needed).

    The examples are the bs 1 cell of campaigns/eagle.toml recorded on an H200 in node mode:
    ordinary, kpool_fused and draft_alias, 30 steps each (first dropped). Prints the comparison
    table and the path of report.html.

    Example: specscope demo --out reports
    """
    from specscope.analysis.targets import check_output_dir
    from specscope.campaign.demo import run_demo
    from specscope.reports.markdown import render

    check_output_dir(out, "--out")
    result = run_demo(out, examples)
    if result.fallback:
        warn("examples/ holds no exports; using the test fixtures under tests/data/")
    say("inputs: " + ", ".join(str(p) for p in result.sources))
    click.echo(render(result.comparisons))
    click.echo(str(result.report_html))


COMMANDS = (demo_cmd,)
