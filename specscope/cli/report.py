"""``specscope report``: parse flags, call the library, print where the report went.

A plain click command (registered on the main group in :mod:`specscope.cli`); it turns expected
failures into one ``Error:`` line with exit code 2 itself, so it also works standalone.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from specscope.cli_common import one_line_errors, spec_from_options, spec_options, warn


def _command_line(head: list[str], labels: list[str], options: dict) -> str:
    """``head`` with ``--labels`` and the options that were given (None: left out)."""
    args = [*head, "--labels", ",".join(labels)]
    for flag, value in options.items():
        if value is None or value == () or value is False:
            continue
        if isinstance(value, tuple):
            for v in value:
                args += [flag, str(v)]
        elif value is True:
            args.append(flag)
        else:
            args += [flag, str(value)]
    return shlex.join(args)


@click.command("report")
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--labels", default=None,
              help="Comma-separated labels, one per input (default: Before,After or "
                   "Before,After 1,...).")  # fmt: skip
@click.option("--out", "out", type=click.Path(path_type=Path), default=Path("specscope-reports"),
              show_default=True,
              help="Folder that gets a new <time>-report subfolder (never reused).")  # fmt: skip
@spec_options
@click.option("--gap", default=None,
              help="Gap metric that picks the median steps and aligns the timeline (default: "
                   "the spec's [report] gap, else last anchor->first anchor).")  # fmt: skip
@click.option("--lead", "lead_us", default=40.0, show_default=True,
              type=click.FloatRange(min=0),
              help="µs of timeline shown before the end of the gap's opening anchor.")  # fmt: skip
@click.option("--highlight", default=None,
              help="Regex of kernel names to mark on the timeline ('' for none; default: the "
                   "spec's [report] highlight, else its counted kernels).")  # fmt: skip
@click.option("--noise-floor", default=2.0, show_default=True, type=click.FloatRange(min=0),
              help="Relative change (%) below which a metric is 'no change'.")  # fmt: skip
@click.option("--min-steps", default=20, show_default=True, type=click.IntRange(min=1),
              help="Fewer steps on a side make a metric 'inconclusive'.")  # fmt: skip
@click.option("--seed", default=0, show_default=True, type=int, help="Bootstrap seed.")
@one_line_errors
def report_cmd(
    inputs: tuple[str, ...],
    labels: str | None,
    out: Path,
    preset: str | None,
    step_name: str | None,
    anchors: str | None,
    domain: str | None,
    skip: int,
    count_kernels: tuple[str, ...],
    pid: int | None,
    device: int | None,
    gap: str | None,
    lead_us: float,
    highlight: str | None,
    noise_floor: float,
    min_steps: int,
    seed: int,
) -> None:
    """Write an HTML/PNG/Markdown report comparing runs into a new folder under --out.

    INPUT: an nsys export, a run folder of `specscope profile` (its export and manifest), a
    results database of `specscope analyze --db` (its latest run) or DB:RUN_ID. The first input
    is the baseline; each later one is compared against it. The folder gets timeline.png (each
    input's median step by --gap, aligned at the end of the gap's opening anchor),
    distributions.png, steps.png, composition.png, summary.md (the PR table and provenance) and
    report.html (self-contained; figures beside it). Results-database runs keep no operations:
    their timeline and composition are left empty.

    Example: specscope report before.sqlite after.sqlite --skip 1 --labels main,fused --out
    reports
    """
    from specscope.analysis.compare import compare_runs
    from specscope.analysis.composition import median_step_view, parse_gap
    from specscope.analysis.inputs import resolve
    from specscope.analysis.run import AnalyzeOptions
    from specscope.reports.report import new_report_dir, write_report

    if len(inputs) < 2:
        raise click.UsageError("give at least two inputs: BASELINE OTHER [MORE...]")
    if labels is not None:
        names = [x.strip() for x in labels.split(",")]
        if len(names) != len(inputs) or not all(names):
            raise click.UsageError(f"--labels needs {len(inputs)} non-empty names, one per input")
        if len(set(names)) != len(names):
            raise click.UsageError("--labels must be distinct")
    elif len(inputs) == 2:
        names = ["Before", "After"]
    else:
        names = ["Before"] + [f"After {i}" for i in range(1, len(inputs))]
    spec = spec_from_options(preset, step_name, anchors, domain)
    defaults = spec.report
    gap_given, highlight_given = gap, highlight
    gap = defaults.gap if gap is None else gap
    if gap is None:
        raise click.UsageError("give --gap: the spec has no anchors to take a default from")
    highlight = defaults.highlight if highlight is None else highlight
    parse_gap(gap)
    options = AnalyzeOptions(skip, pid, device, tuple(count_kernels))

    resolved = [resolve(ref, spec, options) for ref in inputs]
    stats = {"noise_floor_pct": noise_floor, "min_steps": min_steps, "seed": seed}
    comparisons = [
        compare_runs([resolved[0].analysis], [r.analysis], labels=(names[0], names[i]), **stats)
        for i, r in enumerate(resolved[1:], 1)
    ]
    views = [
        None
        if r.analysis.detached
        else median_step_view(r.analysis, gap, lead_us=lead_us, highlight=highlight or None)
        for r in resolved
    ]
    for r in resolved:
        for note in r.analysis.notes:
            warn(f"{r.ref}: {note}")
        if r.analysis.detached:
            warn(f"{r.ref}: a results-database run; no timeline or composition for it")

    options = {
        "--preset": preset,
        "--step": step_name,
        "--anchors": anchors,
        "--domain": domain,
        "--skip": skip or None,
        "--count-kernels": count_kernels,
        "--pid": pid,
        "--device": device,
        "--gap": gap_given if gap_given != defaults.gap else None,
        "--lead": lead_us if lead_us != 40.0 else None,
        "--highlight": highlight_given if highlight_given != defaults.highlight else None,
        "--noise-floor": noise_floor if noise_floor != 2.0 else None,
        "--min-steps": min_steps if min_steps != 20 else None,
        "--seed": seed or None,
        "--out": str(out),
    }
    commands = [_command_line(["specscope", "report", *inputs], names, options)]
    compare_keys = [*list(options)[:8], "--noise-floor", "--min-steps", "--seed"]
    compare = _command_line(
        ["specscope", "compare", *inputs], names, {k: options[k] for k in compare_keys}
    )
    commands.append(compare + " --format markdown --metrics all")
    for r in resolved:
        if r.manifest and r.manifest.get("command"):
            cmd = r.manifest["command"]
            text = shlex.join(cmd) if isinstance(cmd, list) else str(cmd)
            commands.append(f"# profiled in {r.run_dir}: {text}")

    out_dir = new_report_dir(out)
    write_report(
        out_dir,
        resolved,
        names,
        comparisons,
        views,
        gap=gap,
        highlight=highlight or None,
        commands=commands,
    )
    click.echo(str(out_dir / "report.html"))
