"""``specscope analyze``: per-step metrics of one export, or of several with the cross-rank view.

Adding an analysis option: a field of :class:`~specscope.analysis.run.AnalyzeOptions` and its
flag in :data:`specscope.cli.options.ANALYZE_OPTIONS` (every command with the spec options gets
it); an option of ``analyze`` alone: one ``@click.option`` here and one parameter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from specscope.cli import Command
from specscope.cli.options import (
    SpecArgs,
    format_option,
    note,
    spec_options,
    table_text,
    tell,
    warn,
)
from specscope.errors import SpecError, SpecscopeError

PRESET_CHOICE = "NVTX ranges of preset"  # how analysis.auto names choice (a)


def _header(a) -> str:
    """One line of provenance above an analysis' summary table."""
    return (
        f"{a.source}  nsys {a.nsys_version}  capture mode {a.capture_mode}  "
        f"GPU {a.gpu or 'n/a'}  steps {a.n_steps} (pid {a.pid} tid {a.tid}, "
        f"skipped {a.skipped})"
    )


def _print_ranks(view, labels: list[str]) -> None:
    from specscope.analysis import ranks

    click.echo(f"cross-rank view: {len(labels)} ranks, {len(view)} steps in common")
    click.echo(table_text(ranks.straggler_table(view, labels)))
    if view["last_to_arrive"].isna().all():
        click.echo("last_to_arrive: n/a (no export has a collective kernel in these steps)")
    click.echo("\nspread across ranks per step (max - min, us)")
    click.echo(table_text(ranks.spread_summary(view)))


def _analyze_several(traces, spec_args: SpecArgs, fmt: str, db, jobs, dask_scheduler,
                     collective: str) -> None:  # fmt: skip
    """``analyze`` of several exports (the analyze command's multi-export half)."""
    from specscope.analysis import many, ranks
    from specscope.analysis.inputs import expand
    from specscope.analysis.progress import count_bar

    paths = expand(traces)
    options = spec_args.options.counting(collective)  # the collective's kernel_us: metric
    with count_bar("exports analysed", len(paths)) as advance:

        def done(r: many.ExportResult) -> None:
            advance()
            if not r.ok:
                click.echo(f"error: {r.error}", err=True)

        if dask_scheduler is not None:
            results = many.analyze_on_dask(
                dask_scheduler, paths, spec_args.given_spec, options, on_result=done
            )
        else:
            results = many.analyze_many(
                paths, spec_args.given_spec, options, jobs=jobs, on_result=done
            )
    labels = many.rank_labels(paths)
    ok = {label: r.analysis for label, r in zip(labels, results, strict=True) if r.ok}
    if mixed := ranks.mixed_modes({label: a.capture_mode for label, a in ok.items()}):
        warn(mixed)
    for label, a in ok.items():
        for message in a.metrics.notes:
            tell(message, f"{label}: ")
    if db is not None and (ids := many.store_results(db, results)):
        note(f"appended runs {', '.join(map(str, ids))} to {db}")
    view = None
    if len(ok) >= 2:
        frames = {k: a.metrics.frame for k, a in ok.items()}
        view = ranks.cross_rank(frames, collective=collective or None)
    if fmt == "json":
        from specscope.analysis.jsonpieces import pieces

        data = {
            "exports": [a.json_value(rank=k) for k, a in ok.items()],
            "failed": [{"trace": str(r.path), "error": r.error} for r in results if not r.ok],
            "ranks": ranks.json_value(view, list(ok)),
        }
        _echo_pieces(pieces(data))
    elif fmt == "csv":
        if view is not None:
            click.echo(view.to_csv(), nl=False)
        else:
            warn("no cross-rank view: it needs at least two analysed exports")
    else:
        for label, a in ok.items():
            click.echo(f"[{label}] {_header(a)}")
            click.echo(table_text(a.summary) + "\n")
        if view is not None:
            _print_ranks(view, list(ok))
    if failed := [r for r in results if not r.ok]:
        raise SpecscopeError(
            f"{len(failed)} of {len(results)} export(s) failed: "
            + ", ".join(str(r.path) for r in failed)
        )


def _echo_pieces(pieces) -> None:
    """JSON text given in pieces, written in pieces of at most 1 M characters, and a newline:
    no copy of the whole text (hundreds of MB for 100 000 steps), per-step rows last in each
    analysis (:meth:`~specscope.analysis.run.Analysis.json_pieces`).

    Written to standard output's text stream itself, not through ``click.echo``: that strips
    ANSI escapes from every piece when the output is not a terminal (a regular expression over
    all the text), which JSON cannot hold anyway (its encoders write ESC as ``\\u001b``), and
    flushes after each piece. The 18 MB of 2 M GPU operations' JSON took 10-60 ms through it,
    5 ms written so (2026-12-02). ``sys.stdout`` as it is when called (click's test runner
    swaps it; ``click.get_text_stream``, which click 8.5 deprecates, gave the same stream)."""
    out = sys.stdout
    for piece in pieces:
        for i in range(0, len(piece), 1 << 20):
            out.write(piece[i : i + (1 << 20)])
    out.write("\n")
    out.flush()


def _analyze_export(path: Path, spec_args: SpecArgs, collective: str, fmt: str, totals: bool,
                    timeline: bool):  # fmt: skip
    """Every (process, device) of one export (``analysis.auto``: zero-config without a spec);
    None when no steps were found but ``--totals`` could still be printed (with a warning).
    The operations of each analysis are kept for ``--timeline`` alone (the rest reads the
    metrics)."""
    from specscope.analysis.spec import reads_graph_launches

    spec = spec_args.given_spec
    launches = reads_graph_launches(spec)
    from specscope.analysis.auto import analyze_processes
    from specscope.analysis.devices import process_devices
    from specscope.analysis.loader import load

    trace = load(path)
    trace.graph_execs = launches
    options = spec_args.options
    if collective and options.pid is None and len(process_devices(trace)) > 1:
        options = options.counting(collective)  # several processes: the straggler's metric
    try:
        return analyze_processes(
            trace, spec, options, collective=collective or None, ops_kept=timeline
        )
    except SpecError as e:
        if not totals:
            raise
        warn(f"no steps ({e}); printing the whole-capture totals only")
        _print_totals_only(trace, fmt)
        return None


def _totals_json(trace) -> dict:
    """The whole-capture totals (``nsys stats``'s kernel and memory tables) as JSON records."""
    from specscope.analysis.summary import totals as capture_totals

    return {k: v.reset_index().to_dict("records") for k, v in capture_totals(trace).items()}


def _print_totals_only(trace, fmt: str) -> None:
    """``--totals`` of an export whose steps could not be found."""
    from specscope.analysis.summary import totals as capture_totals

    if fmt == "json":
        data = {"trace": str(trace.path), "nsys_version": trace.nsys_version,
                "capture_mode": trace.capture_mode.value, "steps": 0,
                "totals": _totals_json(trace)}  # fmt: skip
        click.echo(json.dumps(data))
        return
    for name, frame in capture_totals(trace).items():
        click.echo(f"{name} (whole capture)\n{table_text(_short_names(frame))}\n")


def _short_names(frame):
    """Demangled template names run to thousands of characters: shortened for reading."""
    return frame.rename(index=lambda n: n if len(n) <= 90 else n[:87] + "...")


def _warn_about(process, spec_given: bool, label: str = "") -> None:
    """The notes of one analysis, its unavailable metrics, and (zero-config) how its steps were
    chosen and how to refine them."""
    from specscope.analysis.summary import unavailable_by_reason

    prefix = f"{label}: " if label else ""
    if not spec_given and not process.choice.startswith(PRESET_CHOICE):
        # the default preset's ranges are what `analyze TRACE` always used: said only otherwise
        note(f"{prefix}steps: {process.choice}")
        if process.hint:
            note(f"{prefix}refine with: {process.hint}")
    for message in process.analysis.metrics.notes:
        tell(message, prefix)
    for why, metrics in unavailable_by_reason(process.analysis.metrics).items():
        kind = "CUDA API" if all(m.startswith("api_calls:") for m in metrics) else "GPU"
        warn(f"{prefix}{len(metrics)} {kind} metric(s) unavailable: {why}")


def _print_processes(export, fmt: str, db, totals: bool) -> None:
    """``analyze`` of one export holding several processes (or devices): the shape of several
    exports, one entry per (process, device), then the cross-rank view."""

    for p in export.processes:
        _warn_about(p, True, p.rank)
    for where, why in export.skipped.items():
        warn(f"{where} not analysed: {why}")
    if db is not None:
        from specscope.analysis.store import append_run

        ids = [append_run(db, p.analysis) for p in export.processes]
        note(f"appended runs {', '.join(map(str, ids))} to {db}")
    trace = export.processes[0].analysis.trace
    if fmt == "json":
        extra = {"trace": str(export.path), "failed": []}
        if totals:
            extra["totals"] = _totals_json(trace)
        _echo_pieces(export.json_pieces(**extra))
    elif fmt == "csv":
        click.echo(export.cross_rank.to_csv(), nl=False)
    else:
        for p in export.processes:
            click.echo(f"[{p.rank}] {_header(p.analysis)}  ({p.choice})")
            click.echo(table_text(p.analysis.summary) + "\n")
        _print_ranks(export.cross_rank, export.labels)
        if totals:
            _print_totals_only(trace, fmt)


def _print_one(result, fmt: str, totals: bool, timeline: bool, median_by: str,
               extra: dict | None = None, top_kernels=None) -> None:  # fmt: skip
    """The output of ``analyze`` of one export (one process)."""
    from specscope.analysis.summary import kernel_timeline, median_step
    from specscope.analysis.summary import totals as capture_totals

    extra = dict(extra or {})
    if fmt == "json":
        if top_kernels is not None:
            extra["top_kernels"] = top_kernels.reset_index().to_dict("records")
        if totals:
            extra["totals"] = _totals_json(result.trace)
        _echo_pieces(result.json_pieces(**extra))
        return
    if fmt == "csv":
        click.echo(result.metrics.frame.to_csv(), nl=False)
        return
    click.echo(_header(result))
    click.echo(table_text(result.summary))
    if top_kernels is not None:
        click.echo(f"\ntop kernels (device time)\n{table_text(_short_names(top_kernels))}")
    if totals:
        for name, frame in capture_totals(result.trace).items():
            click.echo(f"\n{name} (whole capture)\n{table_text(_short_names(frame))}")
    if timeline:
        if result.metrics.window_start_ns is None:
            warn("no kernel timeline: the steps have no GPU work")
            return
        step = median_step(result.metrics, median_by)
        click.echo(f"\nkernel timeline of step {step} (median {median_by})")
        click.echo(table_text(kernel_timeline(result.steps, result.metrics, step)))


@click.command(cls=Command)
@click.argument("traces", metavar="TRACE...", nargs=-1, required=True,
                type=click.Path(path_type=Path))  # fmt: skip
@spec_options
@format_option("table", "csv", "json")
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
def analyze(traces: tuple[Path, ...], spec_args: SpecArgs, fmt: str, db: Path | None,
            totals: bool, timeline: bool, median_by: str, jobs: int | None,
            dask_scheduler: str | None, collective: str) -> None:  # fmt: skip
    """Per-step metrics of nsys SQLite exports: gaps, GPU idle, eager memcpys, kernels.

    Several exports (or a folder of them; one per rank) are analysed in parallel processes
    (--jobs) or on a Dask cluster (--dask-scheduler), followed by the cross-rank view: slowest
    rank per step, the rank that arrives last at the collective (--collective), and the spread
    of idle time, gaps and collective time across ranks. A failed export is one
    error line; the others complete and the exit code is 2.

    Example: specscope analyze trace.sqlite --preset eagle --skip 2 --format json

    Example: specscope analyze rank0.sqlite rank1.sqlite --skip 2 --format csv
    """
    from specscope.analysis.opsread import prefetch
    from specscope.analysis.spec import reads_graph_launches
    from specscope.analysis.sqlread import prefer_light_reader

    if len(traces) == 1 and dask_scheduler is None:
        # a large export's GPU ops, API calls and NVTX events are read while pandas and the
        # rest are imported (page scans: no pyarrow needed)
        prefetch(traces[0], reads_graph_launches(spec_args.given_spec))
    prefer_light_reader(traces)  # plain SQLite exports: no pyarrow import (before pandas)
    from specscope.analysis.progress import progress_bar
    from specscope.analysis.spec import check_regexes
    from specscope.analysis.targets import check_db_target

    check_regexes({"--collective": collective})
    if db is not None:
        check_db_target(db, traces)
    if len(traces) > 1 or traces[0].is_dir() or dask_scheduler is not None:
        if totals or timeline:
            raise SpecError("--totals and --timeline need a single export; analyse it alone")
        _analyze_several(traces, spec_args, fmt, db, jobs, dask_scheduler, collective)
        return
    with progress_bar(traces[0].name):
        export = _analyze_export(traces[0], spec_args, collective, fmt, totals, timeline)
    if export is None:
        return  # no steps: the whole-capture totals were printed
    if len(export.processes) > 1:
        if timeline:
            raise SpecError("--timeline needs one process: pick it with --pid")
        _print_processes(export, fmt, db, totals)
        return
    (process,) = export.processes
    result = process.analysis
    if median_by not in result.metrics.frame:
        raise SpecError(
            f"--median-by {median_by!r} is not a metric of this run; pick one of the "
            "per-step metrics (`--format csv` shows their names)"
        )
    _warn_about(process, spec_args.spec_given)
    if db is not None:
        from specscope.analysis.store import append_run

        note(f"appended run {append_run(db, result)} to {db}")
    extra = {} if spec_args.spec_given else {"choice": process.choice, "hint": process.hint}
    _print_one(result, fmt, totals, timeline, median_by, extra, process.top_kernels)


COMMANDS = (analyze,)
