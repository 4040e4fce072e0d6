"""``specscope compare`` and ``specscope check``: parse flags, call the library, print.

Both commands are plain click commands (registered on the main group in :mod:`specscope.cli`);
they turn expected failures into one ``Error:`` line with exit code 2 themselves, so they also
work standalone.

Input references (RUN, for both commands) are resolved by
:func:`specscope.analysis.inputs.resolve`:

- ``trace.sqlite`` — an nsys export, analysed on the fly with the step spec options;
- ``results.sqlite`` — a results database written by ``specscope analyze --db`` (recognised by
  its ``runs`` table): its latest run;
- ``results.sqlite:7`` — run 7 of that database;
- a run folder of ``specscope profile`` — its export.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import click

from specscope.cli_common import one_line_errors, spec_from_options, spec_options, warn


def _load(refs, preset, step_name, anchors, domain, skip, count_kernels, pid, device) -> list:
    from specscope.analysis.inputs import resolve
    from specscope.analysis.run import AnalyzeOptions

    spec = spec_from_options(preset, step_name, anchors, domain)
    options = AnalyzeOptions(skip, pid, device, tuple(count_kernels))
    return [resolve(ref, spec, options).analysis for ref in refs]


def _num(x):
    if isinstance(x, float) and math.isnan(x):
        return None
    if hasattr(x, "item"):
        x = x.item()
    if isinstance(x, float) and math.isinf(x):
        return None
    return x.value if hasattr(x, "value") else x


# ---------------------------------------------------------------------------- compare


def _signed(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{round(x, 1) + 0.0:+.1f}"


def _side_text(label: str, runs) -> str:
    sources = ", ".join(f"{r.source} ({r.n_steps} steps)" for r in runs)
    return f"{label}: {sources}"


def _metrics_table(c) -> str:
    import pandas as pd

    m = c.metrics
    multi = (m["before_runs"].max() > 1) or (m["after_runs"].max() > 1)

    def value(p50, p10, p90, n) -> str:
        if not n:
            return "n/a"
        return f"{p50:.1f} [{p10:.1f}, {p90:.1f}] n={n:.0f}"

    table = pd.DataFrame(
        {
            "unit": m["unit"],
            c.labels[0]: [
                value(*r) for r in m[["before_p50", "before_p10", "before_p90", "before_n"]].values
            ],
            c.labels[1]: [
                value(*r) for r in m[["after_p50", "after_p10", "after_p90", "after_n"]].values
            ],
            "change": m["abs_change"].map(_signed),
            "change %": m["rel_change_pct"].map(_signed),
            "95% CI": [
                f"[{_signed(lo)}, {_signed(hi)}]" if not math.isnan(lo) else "n/a"
                for lo, hi in m[["ci_low", "ci_high"]].values
            ],
            "verdict": m["verdict"].map(lambda v: v.value),
        },
        index=m.index,
    )
    if multi:
        table.insert(3, "spread", m["before_spread"].map(lambda x: f"{x:.1f}"))
        table.insert(5, "spread ", m["after_spread"].map(lambda x: f"{x:.1f}"))
    return table.to_string()


def _kernels_table(c) -> str:
    import pandas as pd

    k = c.kernels
    if k is None:
        return "per-kernel diff: unavailable for results-database runs (they keep no operations)"
    table = pd.DataFrame(
        {
            "kind": k["kind"],
            f"{c.labels[0]} /step": k["before_per_step"].map(lambda x: f"{x:.2f}"),
            f"{c.labels[1]} /step": k["after_per_step"].map(lambda x: f"{x:.2f}"),
            f"{c.labels[0]} us/step": k["before_us_per_step"].map(lambda x: f"{x:.1f}"),
            f"{c.labels[1]} us/step": k["after_us_per_step"].map(lambda x: f"{x:.1f}"),
            "delta us/step": k["delta_us_per_step"].map(_signed),
            "change": k["change"].map(lambda v: v.value),
        },
        index=k.index,
    )
    return "operations per step, by name\n" + table.to_string()


def _run_json(r) -> dict:
    return {
        "source": r.source,
        "steps": r.n_steps,
        "gpu": r.gpu,
        "nsys_version": r.nsys_version,
        "capture_mode": r.capture_mode,
        "commit": r.commit,
        "batch_size": r.batch_size,
        "notes": r.notes,
    }


def _comparison_json(c) -> dict:
    metrics = {
        metric: {col: _num(row[col]) for col in c.metrics.columns}
        for metric, row in c.metrics.iterrows()
    }
    kernels = None
    if c.kernels is not None:
        kernels = [
            {"name": name, **{col: _num(row[col]) for col in c.kernels.columns}}
            for name, row in c.kernels.iterrows()
        ]
    return {
        "labels": list(c.labels),
        "before": [_run_json(r) for r in c.before],
        "after": [_run_json(r) for r in c.after],
        "checks": [
            {"name": k.name, "level": k.level.value, "message": k.message} for k in c.checks
        ],
        "metrics": metrics,
        "kernels": kernels,
    }


@click.command("compare")
@click.argument("inputs", nargs=-1, metavar="[BEFORE AFTER [MORE...]]")
@click.option("--before", "before_refs", multiple=True, metavar="RUN",
              help="A run of the before side (repeat to pool repeated runs).")  # fmt: skip
@click.option("--after", "after_refs", multiple=True, metavar="RUN",
              help="A run of the after side (repeat to pool repeated runs).")  # fmt: skip
@click.option(
    "--labels",
    default=None,
    help="Comma-separated side labels (default: Before,After or After 1, ...).",
)
@spec_options
@click.option("--format", "fmt", type=click.Choice(["table", "markdown", "json"]),
              default="table", show_default=True)  # fmt: skip
@click.option("--metrics", "metric_list", default=None,
              help="Markdown rows, comma-separated metric names, or 'all' (default: the PR "
                   "table: gaps, GPU idle, copy kernels, eager memcpys).")  # fmt: skip
@click.option("--noise-floor", default=2.0, show_default=True, type=click.FloatRange(min=0),
              help="Relative change (%) below which a metric is 'no change'.")  # fmt: skip
@click.option("--min-steps", default=20, show_default=True, type=click.IntRange(min=1),
              help="Fewer steps on a side make a metric 'inconclusive'.")  # fmt: skip
@click.option(
    "--confidence",
    default=0.95,
    show_default=True,
    type=click.FloatRange(0.5, 1.0, max_open=True),
    help="Level of the bootstrap CI.",
)
@click.option("--bootstrap", "n_boot", default=2000, show_default=True,
              type=click.IntRange(min=100), help="Bootstrap resamples.")  # fmt: skip
@click.option("--seed", default=0, show_default=True, type=int, help="Bootstrap seed.")
@one_line_errors
def compare_cmd(
    inputs: tuple[str, ...],
    before_refs: tuple[str, ...],
    after_refs: tuple[str, ...],
    labels: str | None,
    preset: str | None,
    step_name: str | None,
    anchors: str | None,
    domain: str | None,
    skip: int,
    count_kernels: tuple[str, ...],
    pid: int | None,
    device: int | None,
    fmt: str,
    metric_list: str | None,
    noise_floor: float,
    min_steps: int,
    confidence: float,
    n_boot: int,
    seed: int,
) -> None:
    """Compare per-step metrics before/after: medians, p10/p90, bootstrap CI, verdict.

    Give BEFORE AFTER [MORE...] (each later input is compared against the first), or pool
    repeated runs per side with --before RUN --before RUN --after RUN --after RUN. Inputs: an
    nsys export (analysed on the fly with --preset/--step/--anchors and --skip), a results
    database of `specscope analyze --db` (its latest run), or DB:RUN_ID (one run of it).

    Verdicts: improved / regressed (by the metric's direction: lower is better for idle, gaps,
    memcpys, copy kernels and host time; higher for occupancy_pct), changed (neutral counts),
    no change (the CI contains 0, |change| < --noise-floor, or within run-to-run spread),
    inconclusive (< --min-steps steps), unavailable. Node-mode against graph-mode captures is
    refused (exit 2); other mismatches (spec, GPU, nsys major version, batch size) are warnings.

    Example: specscope compare before.sqlite after.sqlite --skip 1 --format markdown
    """
    from specscope.analysis.compare import Level, compare_runs

    if inputs and (before_refs or after_refs):
        raise click.UsageError("give inputs either as BEFORE AFTER... or with --before/--after")
    if before_refs or after_refs:
        if not (before_refs and after_refs):
            raise click.UsageError("--before and --after must both be given (each repeatable)")
        groups = [list(before_refs), list(after_refs)]
    else:
        if len(inputs) < 2:
            raise click.UsageError("give at least two inputs: BEFORE AFTER [MORE...]")
        groups = [[ref] for ref in inputs]
    if labels is not None:
        names = [x.strip() for x in labels.split(",")]
        if len(names) != len(groups) or not all(names):
            raise click.UsageError(f"--labels needs {len(groups)} non-empty names, one per side")
    elif len(groups) == 2:
        names = ["Before", "After"]
    else:
        names = ["Before"] + [f"After {i}" for i in range(1, len(groups))]

    spec_args = (preset, step_name, anchors, domain, skip, count_kernels, pid, device)
    sides = [_load(refs, *spec_args) for refs in groups]
    stats_kw = {
        "noise_floor_pct": noise_floor,
        "min_steps": min_steps,
        "confidence": confidence,
        "n_boot": n_boot,
        "seed": seed,
    }
    comparisons = [
        compare_runs(sides[0], side, labels=(names[0], names[i]), **stats_kw)
        for i, side in enumerate(sides[1:], 1)
    ]
    warned = set()
    for c in comparisons:
        for check in c.checks:
            if check.level is Level.WARNING and check.message not in warned:
                warned.add(check.message)
                warn(check.message)
    inconclusive = sum(
        (c.metrics["verdict"].map(lambda v: v.value) == "inconclusive").sum() for c in comparisons
    )
    if inconclusive:
        warn(
            f"{inconclusive} metric(s) inconclusive: fewer than {min_steps} steps on a side; "
            "capture more steps, pool repeated runs, or lower --min-steps"
        )

    if fmt == "markdown":
        from specscope.reports.markdown import render

        rows = None
        if metric_list == "all":
            rows = list(comparisons[0].metrics.index)
        elif metric_list:
            rows = [x.strip() for x in metric_list.split(",") if x.strip()]
            known = set().union(*(c.metrics.index for c in comparisons))
            unknown = [r for r in rows if r not in known]
            if unknown:
                raise click.UsageError(f"--metrics: unknown metric(s) {', '.join(unknown)}")
        click.echo(render(comparisons, rows), nl=False)
        return
    if fmt == "json":
        data = {
            "settings": dict(stats_kw),
            "comparisons": [_comparison_json(c) for c in comparisons],
        }
        click.echo(json.dumps(data, indent=1))
        return
    for i, c in enumerate(comparisons):
        if i:
            click.echo()
        click.echo(_side_text(c.labels[0], c.before))
        click.echo(_side_text(c.labels[1], c.after))
        for check in c.checks:
            click.echo(f"  {check.level.value:<8}{check.message}")
        click.echo(_metrics_table(c))
        click.echo()
        click.echo(_kernels_table(c))


# ---------------------------------------------------------------------------- check


@click.command("check")
@click.argument("runs", nargs=-1, required=True, metavar="RUN_OR_TRACE...")
@click.option("--thresholds", "thresholds_path", required=True, metavar="FILE",
              help="TOML rules ([[rule]] tables); 'eagle' is the shipped example.")  # fmt: skip
@click.option(
    "--baseline",
    "baseline_refs",
    multiple=True,
    metavar="RUN",
    help="Run(s) that max_change_pct/min_change_pct are relative to (repeatable).",
)
@click.option("--junit", "junit_path", type=click.Path(path_type=Path), default=None,
              help="Also write the results as JUnit XML to this new file.")  # fmt: skip
@click.option("--force", is_flag=True, help="Overwrite an existing --junit file.")
@spec_options
@one_line_errors
def check_cmd(
    runs: tuple[str, ...],
    thresholds_path: str,
    baseline_refs: tuple[str, ...],
    junit_path: Path | None,
    force: bool,
    preset: str | None,
    step_name: str | None,
    anchors: str | None,
    domain: str | None,
    skip: int,
    count_kernels: tuple[str, ...],
    pid: int | None,
    device: int | None,
) -> None:
    """Check a run against regression thresholds; exit 0 (pass), 1 (a rule failed), 2 (bad input).

    RUN_OR_TRACE: an nsys export, a results database of `specscope analyze --db` (its latest
    run) or DB:RUN_ID; several are pooled. Every limit of every rule is printed with the
    measured value, the limit and pass/fail/warn/skipped. Rules of severity "warn" never fail
    the check; change limits are skipped without --baseline. --junit never overwrites an
    existing file unless --force. Rule format and CI wiring: docs/ci.md.

    Example: specscope check after.sqlite --thresholds eagle --baseline before.sqlite --skip 1
    --junit specscope.xml
    """
    from specscope.analysis.compare import Level, comparability, require_comparable
    from specscope.analysis.thresholds import (
        describe,
        evaluate,
        exit_code,
        junit_xml,
        load_rules,
        pooled_summary,
    )

    if junit_path is not None and junit_path.exists() and not force:
        raise click.UsageError(f"{junit_path} exists; remove it or pass --force to overwrite it")
    if junit_path is not None and not junit_path.parent.is_dir():
        raise click.UsageError(f"{junit_path.parent}: no such directory for --junit")
    rules = load_rules(thresholds_path)
    spec_args = (preset, step_name, anchors, domain, skip, count_kernels, pid, device)
    measured = _load(runs, *spec_args)
    baseline = _load(baseline_refs, *spec_args) if baseline_refs else None
    if baseline is not None:
        checks = comparability(baseline, measured)
        require_comparable(checks)
        for c in checks:
            if c.level is Level.WARNING:
                warn(c.message)
    summary = pooled_summary([r.frame for r in measured])
    base_summary = pooled_summary([r.frame for r in baseline]) if baseline else None
    results = evaluate(rules, summary, base_summary)

    steps = sum(r.n_steps for r in measured)
    click.echo(f"{', '.join(r.source for r in measured)}: {steps} steps, {len(rules)} rule(s)")
    for r in results:
        click.echo(f"{r.status.value.upper():<8}{describe(r)}")
    code = exit_code(results)
    failed = sum(r.status.value == "fail" for r in results)
    click.echo(f"{'FAILED' if code else 'PASSED'}: {failed} of {len(results)} limit(s) failed")
    if junit_path is not None:
        junit_path.write_text(junit_xml(results))
    if code:
        click.get_current_context().exit(code)
