"""``specscope check``: regression thresholds (:mod:`specscope.analysis.thresholds`) in CI."""

from __future__ import annotations

from pathlib import Path

import click

from specscope.cli import Command
from specscope.cli.options import SpecArgs, spec_options, warn, warn_if_chosen_differently


def _check_junit(junit_path: Path | None, force: bool, inputs) -> None:
    """``--junit``: a writable file that is no input; an existing one only with ``--force``."""
    from specscope.analysis.targets import check_output_file

    if junit_path is not None:
        check_output_file(junit_path, "--junit", inputs, overwrite=force)


@click.command("check", cls=Command)
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
def check_cmd(runs: tuple[str, ...], thresholds_path: str, baseline_refs: tuple[str, ...],
              junit_path: Path | None, force: bool, spec_args: SpecArgs) -> None:  # fmt: skip
    """Check a run against regression thresholds; exit 0 (pass), 1 (a rule failed), 2 (bad input).

    RUN_OR_TRACE: an nsys export, a results database of `specscope analyze --db` (its latest
    run) or DB:RUN_ID; several are pooled. Every limit of every rule is printed with the
    measured value, the limit and pass/fail/warn/skipped. Rules of severity "warn" never fail
    the check; change limits are skipped without --baseline. --junit never overwrites an
    existing file unless --force. Rule format and CI wiring: docs/ci.md.

    Example: specscope check after.sqlite --thresholds eagle --baseline before.sqlite --skip 1
    --junit specscope.xml
    """
    from specscope.analysis.sqlread import prefer_light_reader

    prefer_light_reader([*runs, *baseline_refs])  # small exports: no pyarrow (before pandas)
    from specscope.analysis.compare import Level, comparability, require_comparable
    from specscope.analysis.thresholds import (
        Status,
        describe,
        evaluate,
        exit_code,
        junit_xml,
        load_rules,
        pooled_summary,
    )

    _check_junit(junit_path, force, [*runs, *baseline_refs])
    rules = load_rules(thresholds_path)
    # each run kept as comparing it needs (its metrics): one export's operations at a time
    measured = spec_args.analyses(runs, shed=True)
    baseline = spec_args.analyses(baseline_refs, shed=True) if baseline_refs else None
    warn_if_chosen_differently([*measured, *(baseline or [])], spec_args.spec_given)
    if baseline is not None:
        checks = comparability(baseline, measured)
        require_comparable(checks)
        for c in checks:
            if c.level is Level.WARNING:
                warn(c.message)
    summary = pooled_summary([r.frame for r in measured])
    base_summary = pooled_summary([r.frame for r in baseline]) if baseline else None
    why = {m: reason for r in reversed(measured) for m, reason in r.unavailable.items()}
    results = evaluate(rules, summary, base_summary, why)

    steps = sum(r.n_steps for r in measured)
    click.echo(f"{', '.join(r.source for r in measured)}: {steps} steps, {len(rules)} rule(s)")
    for r in results:
        click.echo(f"{r.status.value.upper():<8}{describe(r)}")
    code = exit_code(results)
    failed = sum(r.status is Status.FAIL for r in results)
    click.echo(f"{'FAILED' if code else 'PASSED'}: {failed} of {len(results)} limit(s) failed")
    if junit_path is not None:
        junit_path.write_text(junit_xml(results))
    if code:
        click.get_current_context().exit(code)


COMMANDS = (check_cmd,)
