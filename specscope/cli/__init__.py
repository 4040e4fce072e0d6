"""The ``specscope`` command line: parses flags, calls the library, prints results.

Expected failures (bad input, a spec that does not match) are one ``error:`` line on stderr and
exit code 2, never a traceback.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from specscope.cli_common import spec_from_options, spec_options, warn
from specscope.errors import SpecError, SpecscopeError

if TYPE_CHECKING:  # pandas is imported by the commands that need it, not for --help
    import pandas as pd


class _Group(click.Group):
    """Turns SpecscopeError into a one-line error with its exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except SpecscopeError as e:
            err = click.ClickException(str(e))
            err.exit_code = e.exit_code
            raise err from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="specscope")
def cli() -> None:
    """specscope: per-step GPU timelines of speculative decoding, from Nsight Systems exports.

    Example: specscope analyze trace.sqlite --preset eagle
    """


def _fmt(df: pd.DataFrame) -> str:
    return df.to_string(float_format=lambda x: f"{x:.1f}", na_rep="n/a")


def _header(a) -> str:
    """One line of provenance above an analysis' summary table."""
    return (
        f"{a.source}  nsys {a.nsys_version}  capture mode {a.capture_mode}  "
        f"GPU {a.gpu or 'n/a'}  steps {a.n_steps} (pid {a.pid} tid {a.tid}, "
        f"skipped {a.skipped})"
    )


def _analyze_several(
    traces: tuple[Path, ...],
    spec,
    options,
    *,
    fmt: str,
    db: Path | None,
    jobs: int | None,
    dask_scheduler: str | None,
    collective: str,
) -> None:
    """``analyze`` of several exports (the analyze command's multi-export half)."""
    from specscope.analysis import many, ranks
    from specscope.analysis.inputs import expand
    from specscope.analysis.progress import count_bar

    paths = expand(traces)
    labels = many.rank_labels(paths)
    options = options.counting(collective)  # the collective's kernel_us: metric
    with count_bar("exports analysed", len(paths)) as advance:

        def done(r: many.ExportResult) -> None:
            advance()
            if not r.ok:
                click.echo(f"error: {r.error}", err=True)

        if dask_scheduler is not None:
            results = many.analyze_on_dask(dask_scheduler, paths, spec, options, on_result=done)
        else:
            results = many.analyze_many(paths, spec, options, jobs=jobs, on_result=done)
    ok = {label: r.analysis for label, r in zip(labels, results, strict=True) if r.ok}
    for label, a in ok.items():
        for note in a.metrics.notes:
            warn(f"{label}: {note}")
    if db is not None:
        ids = many.store_results(db, results)
        if ids:
            warn(f"appended runs {', '.join(map(str, ids))} to {db}")
    view = None
    if len(ok) >= 2:
        frames = {k: a.metrics.frame for k, a in ok.items()}
        view = ranks.cross_rank(frames, collective=collective or None)
    if fmt == "json":
        data = {
            "exports": [a.to_json() | {"rank": k} for k, a in ok.items()],
            "failed": [{"trace": str(r.path), "error": r.error} for r in results if not r.ok],
            "ranks": None,
        }
        if view is not None:
            data["ranks"] = {
                "labels": list(ok),
                "steps": len(view),
                "stragglers": ranks.straggler_table(view, list(ok)).reset_index()
                .to_dict("records"),
                "spread": ranks.spread_summary(view).reset_index().to_dict("records"),
                "per_step": json.loads(view.reset_index().to_json(orient="records")),
            }  # fmt: skip
        click.echo(json.dumps(data))
    elif fmt == "csv":
        if view is not None:
            click.echo(view.to_csv(), nl=False)
        else:
            warn("no cross-rank view: it needs at least two analysed exports")
    else:
        for label, a in ok.items():
            click.echo(f"[{label}] {_header(a)}")
            click.echo(_fmt(a.summary) + "\n")
        if view is not None:
            click.echo(f"cross-rank view: {len(ok)} ranks, {len(view)} steps in common")
            click.echo(_fmt(ranks.straggler_table(view, list(ok))))
            click.echo("\nspread across ranks per step (max - min, us)")
            click.echo(_fmt(ranks.spread_summary(view)))
    failed = [r for r in results if not r.ok]
    if failed:
        raise SpecscopeError(
            f"{len(failed)} of {len(results)} export(s) failed: "
            + ", ".join(str(r.path) for r in failed)
        )


@cli.command()
@click.argument("traces", metavar="TRACE...", nargs=-1, required=True,
                type=click.Path(path_type=Path))  # fmt: skip
@spec_options
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True)  # fmt: skip
@click.option("--db", type=click.Path(path_type=Path), default=None,
              help="Append the run, its steps and summary to this results database.")  # fmt: skip
@click.option("--totals", is_flag=True, help="Also print kernel and memcpy totals (nsys stats).")
@click.option("--timeline", is_flag=True, help="Also print the kernel timeline of the median step.")
@click.option("--median-by", default="idle_us", show_default=True,
              help="Metric that picks the median step for --timeline.")  # fmt: skip
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Processes for several exports (default: one per CPU).")  # fmt: skip
@click.option("--dask-scheduler", metavar="ADDRESS", default=None,
              help="Analyse each export on this Dask cluster (tcp://host:8786).")  # fmt: skip
@click.option("--collective", metavar="REGEX", default="nccl", show_default=True,
              help="Kernels of the per-step collective; with several exports the rank whose "
              "collective is shortest arrived last (the straggler). '' turns it off.")  # fmt: skip
def analyze(
    traces: tuple[Path, ...],
    preset: str | None,
    step_name: str | None,
    anchors: str | None,
    domain: str | None,
    skip: int,
    count_kernels: tuple[str, ...],
    pid: int | None,
    device: int | None,
    fmt: str,
    db: Path | None,
    totals: bool,
    timeline: bool,
    median_by: str,
    jobs: int | None,
    dask_scheduler: str | None,
    collective: str,
) -> None:
    """Per-step metrics of nsys SQLite exports: gaps, GPU idle, eager memcpys, kernels.

    Several exports (or a folder of them; one per rank) are analysed in parallel processes
    (--jobs) or on a Dask cluster (--dask-scheduler), followed by the cross-rank view: slowest
    rank per step, the rank that arrives last at the collective (--collective), and the spread
    of idle time, gaps and collective time across ranks. A failed export is one
    error line; the others complete and the exit code is 2.

    Example: specscope analyze trace.sqlite --preset eagle --skip 2 --format json

    Example: specscope analyze rank0.sqlite rank1.sqlite --skip 2 --format csv
    """
    from specscope.analysis.progress import progress_bar
    from specscope.analysis.run import AnalyzeOptions
    from specscope.analysis.run import analyze as run_analysis
    from specscope.analysis.summary import kernel_timeline, median_step
    from specscope.analysis.summary import totals as capture_totals

    spec = spec_from_options(preset, step_name, anchors, domain)
    options = AnalyzeOptions(skip, pid, device, tuple(count_kernels))
    if len(traces) > 1 or traces[0].is_dir() or dask_scheduler is not None:
        if totals or timeline:
            raise SpecError("--totals and --timeline need a single export; analyse it alone")
        _analyze_several(
            traces, spec, options, fmt=fmt, db=db, jobs=jobs, dask_scheduler=dask_scheduler,
            collective=collective,
        )  # fmt: skip
        return
    trace = traces[0]
    with progress_bar(trace.name):
        result = run_analysis(trace, spec, options)
    if median_by not in result.metrics.frame:
        raise SpecError(
            f"--median-by {median_by!r} is not a metric of this run; pick one of the "
            "per-step metrics (`--format csv` shows their names)"
        )
    for note in result.metrics.notes:
        warn(note)
    reasons: dict[str, list[str]] = {}
    for metric, why in result.metrics.unavailable.items():
        reasons.setdefault(why, []).append(metric)
    for why, metrics in reasons.items():
        warn(f"{len(metrics)} GPU metric(s) unavailable: {why}")
    if db is not None:
        from specscope.analysis.store import append_run

        run_id = append_run(db, result)
        warn(f"appended run {run_id} to {db}")

    if fmt == "json":
        extra = {}
        if totals:
            t = capture_totals(result.trace)
            extra["totals"] = {k: v.reset_index().to_dict("records") for k, v in t.items()}
        click.echo(result.json_text(**extra))  # compact, per_step last
        return
    if fmt == "csv":
        click.echo(result.metrics.frame.to_csv(), nl=False)
        return
    t = result.trace
    click.echo(_header(result))
    click.echo(_fmt(result.summary))
    if totals:
        for name, frame in capture_totals(t).items():
            # demangled template names run to thousands of characters: shorten them for reading
            short = frame.rename(index=lambda n: n if len(n) <= 90 else n[:87] + "...")
            click.echo(f"\n{name} (whole capture)\n{_fmt(short)}")
    if timeline:
        if result.metrics.window_start_ns is None:
            warn("no kernel timeline: the steps have no GPU work")
            return
        step = median_step(result.metrics, median_by)
        click.echo(f"\nkernel timeline of step {step} (median {median_by})")
        click.echo(_fmt(kernel_timeline(result.steps, result.metrics, step)))


@cli.command()
@click.argument("trace", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table",
              show_default=True)  # fmt: skip
def ranges(trace: Path, fmt: str) -> None:
    """List the NVTX range names of an export with counts (what to put in a step spec).

    Example: specscope ranges trace.sqlite
    """
    from specscope.analysis.loader import load

    t = load(trace)
    nvtx = t.nvtx.assign(dur_us=(t.nvtx["end_ns"] - t.nvtx["start_ns"]) / 1e3)
    table = (
        nvtx.groupby(["name", "domain"], observed=True)
        .agg(count=("dur_us", "size"), mean_us=("dur_us", "mean"), threads=("tid", "nunique"))
        .reset_index()
        .sort_values(["count", "name"], ascending=[False, True], kind="stable")
    )
    if t.unclosed_ranges:
        warn(f"{t.unclosed_ranges} NVTX range(s) never closed were ignored")
    if table.empty:
        warn(f"{trace}: the export has no NVTX ranges (was it recorded with -t nvtx?)")
    if fmt == "json":
        click.echo(json.dumps(table.to_dict("records"), indent=1))
    elif fmt == "csv":
        click.echo(table.to_csv(index=False), nl=False)
    else:
        click.echo(_fmt(table.set_index("name")))


def _register() -> None:
    """Commands that live in their own modules."""
    from specscope.cli_campaign import campaign_cmd, demo_cmd
    from specscope.cli_compare import check_cmd, compare_cmd
    from specscope.cli_graphs import graphs_cmd
    from specscope.cli_profile import doctor, profile
    from specscope.cli_report import report_cmd
    from specscope.cli_run import run

    commands = (compare_cmd, check_cmd, profile, doctor, report_cmd, run, campaign_cmd, demo_cmd)
    cli.add_command(graphs_cmd)
    for command in commands:
        cli.add_command(command)


_register()


def main() -> None:
    """Console-script entry point."""
    try:
        cli(prog_name="specscope")
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
