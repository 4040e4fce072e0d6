"""``specscope campaign`` and ``specscope demo``: parse flags, call specscope.campaign, print.

Both are plain click commands (registered on the main group in :mod:`specscope.cli`); they turn
expected failures into one ``Error:`` line with exit code 2 themselves, so they also work
standalone.
"""

from __future__ import annotations

from pathlib import Path

import click

from specscope.cli_common import one_line_errors

STAGES = ("all", "record", "analyze")


def _say(message: str) -> None:
    click.echo(message, err=True)


@click.command("campaign", context_settings={"help_option_names": ["-h", "--help"]})
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
@one_line_errors
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
    from specscope.campaign.matrix import load_campaign, plan, select

    c = load_campaign(matrix)
    runs = select(plan(c), only)
    if dry_run:
        for r in runs:
            click.echo(f"{r.id}\tspecscope run {' '.join(r.run_args)}")
        click.echo(f"{len(runs)} run(s)", err=True)
        return
    if stage in ("all", "record"):
        from specscope.campaign.record import record

        entries = record(
            c, runs, out, budget_s=budget_s, nsys=nsys_path, timeout_s=timeout_s, say=_say
        )
        counts: dict[str, int] = {}
        for e in entries:
            counts[e["status"]] = counts.get(e["status"], 0) + 1
        _say(f"recorded into {out}: " + (", ".join(f"{n} {s}" for s, n in counts.items()) or "-"))
    if stage in ("all", "analyze"):
        from specscope.campaign.reports import write_campaign_reports
        from specscope.campaign.results import analyze_folder

        results = analyze_folder(c, out, say=_say)
        written = write_campaign_reports(results, say=_say)
        click.echo(written.overview_md.read_text())
        click.echo(f"results database {written.db}")
        for path in written.reports:
            click.echo(f"report {path}")


@click.command("demo", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--out", "out", type=click.Path(path_type=Path), default=Path("specscope-reports"),
              show_default=True,
              help="Folder that gets a new <time>-report subfolder (never reused).")  # fmt: skip
@click.option("--examples", type=click.Path(path_type=Path), default=None,
              help="Folder of the example data (default: the repository's examples/).")  # fmt: skip
@one_line_errors
def demo_cmd(out: Path, examples: Path | None) -> None:
    """Analyse, compare and report the bundled H200 example exports (no GPU, no nsys needed).

    The examples are the bs 1 cell of campaigns/eagle.toml recorded on an H200 in node mode:
    ordinary, kpool_fused and draft_alias, 30 steps each (first dropped). Prints the comparison
    table and the path of report.html.

    Example: specscope demo --out reports
    """
    from specscope.campaign.demo import run_demo
    from specscope.reports.markdown import render

    result = run_demo(out, examples)
    if result.fallback:
        _say("warning: examples/ holds no exports; using the test fixtures under tests/data/")
    _say("inputs: " + ", ".join(str(p) for p in result.sources))
    click.echo(render(result.comparisons))
    click.echo(str(result.report_html))


if __name__ == "__main__":  # pragma: no cover - `python -m specscope.cli_campaign` on GPU hosts
    campaign_cmd()
