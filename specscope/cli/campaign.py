"""``specscope campaign``: parse flags, call :mod:`specscope.campaign`, print."""

from __future__ import annotations

from pathlib import Path

import click

from specscope.cli import Command
from specscope.cli.options import say

STAGES = ("all", "record", "analyze")


@click.command("campaign", cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("matrix", type=click.Path(path_type=Path))
@click.option("--out", "out", type=click.Path(path_type=Path), required=True,
              help="Campaign folder: exports, results database, reports, overview.")  # fmt: skip
@click.option("--stage", type=click.Choice(STAGES), default="all", show_default=True,
              help="record: run the plan; analyze: analyse, compare and report what the "
                   "folder holds; all: both.")  # fmt: skip
@click.option("--only", multiple=True, metavar="PATTERN",
              help="Record only runs whose id matches (shell pattern, repeatable), e.g. "
                   "'bs1-*' or 'bs8-ctx8192-kp4/node/*'.")  # fmt: skip
@click.option("--budget-s", type=click.FloatRange(min=1), default=None,
              help="Start no run that would likely end after this many seconds.")  # fmt: skip
@click.option("--timeout-s", type=click.FloatRange(min=1), default=300.0, show_default=True,
              help="Time limit of one unprofiled run.")  # fmt: skip
@click.option("--nsys", "nsys_path", default=None, metavar="PATH", help="nsys to record with.")
@click.option("--dry-run", is_flag=True, help="Print the plan (run ids and commands) and stop.")
def campaign_cmd(
    matrix: Path,
    out: Path,
    stage: str,
    only: tuple[str, ...],
    budget_s: float | None,
    timeout_s: float,
    nsys_path: str | None,
    dry_run: bool,
) -> None:
    """Run a campaign: cells x variants x trace modes x repetitions, then analyse and report.

    Each profiled run is `specscope profile --cuda-graph-trace MODE -- specscope run ...`, each
    unprofiled run `specscope run` alone; a run that fails is logged and the rest go on, and
    recording again into the same folder resumes. The analysis appends every export to
    DIR/results.sqlite, compares every variant with the first one (repetitions pooled), writes
    one report per cell and trace mode under DIR/reports/ and the overview table DIR/overview.md.
    Record on the GPU host (--stage record) and analyse anywhere (--stage analyze).

    Example: specscope campaign campaigns/eagle.toml --out campaign-h200 --budget-s 480
    """
    from specscope.analysis.targets import check_output_dir
    from specscope.campaign.matrix import load_campaign, plan, select

    c = load_campaign(matrix)
    runs = select(plan(c), only)
    check_output_dir(out, "--out", [matrix])
    if dry_run:
        for r in runs:
            click.echo(f"{r.id}\tspecscope run {' '.join(r.run_args)}")
        click.echo(f"{len(runs)} run(s)", err=True)
        return
    if stage in ("all", "record"):
        from specscope.campaign.record import record

        entries = record(
            c, runs, out, budget_s=budget_s, nsys=nsys_path, timeout_s=timeout_s, say=say
        )
        counts: dict[str, int] = {}
        for e in entries:
            counts[e["status"]] = counts.get(e["status"], 0) + 1
        say(f"recorded into {out}: " + (", ".join(f"{n} {s}" for s, n in counts.items()) or "-"))
    if stage in ("all", "analyze"):
        from specscope.campaign.reports import write_campaign_reports
        from specscope.campaign.results import analyze_folder

        results = analyze_folder(c, out, say=say)
        written = write_campaign_reports(results, say=say)
        click.echo(written.overview_md.read_text())
        click.echo(f"results database {written.db}")
        for path in written.reports:
            click.echo(f"report {path}")


COMMANDS = (campaign_cmd,)
