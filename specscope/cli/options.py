"""What every command shares: one-line errors, warnings, and the step-spec options."""

from __future__ import annotations

import functools

import click

from specscope.errors import SpecError, SpecscopeError


def one_line_errors(f):
    """Turn SpecscopeError into click's one-line ``Error:`` with the error's exit code.

    The main group does this too; the decorator makes each command behave the same when it is
    invoked on its own (tests, ``python -c 'from specscope.cli_run import run; run()'``).
    """

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except SpecscopeError as e:
            err = click.ClickException(str(e))
            err.exit_code = e.exit_code
            raise err from None

    return wrapper


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def spec_options(f):
    """``--preset/--step/--anchors/--domain/--skip/--count-kernels/--pid/--device``."""
    options = [
        click.option("--preset", default=None, help="Step spec preset (default: eagle)."),
        click.option(
            "--step",
            "step_name",
            default=None,
            help="NVTX range around a step, or kernel:REGEX (each launch starts a step).",
        ),
        click.option(
            "--anchors",
            default=None,
            help="Comma-separated anchor ranges, in order; or NAME=graph:ID[|ID...] / "
            "NAME=kernel:REGEX launches (then a step is one cycle of them).",
        ),
        click.option("--domain", default=None, help="NVTX domain of the ranges ('' for any)."),
        click.option(
            "--skip",
            default=0,
            show_default=True,
            type=click.IntRange(min=0),
            help="Warm-up steps to drop (from each export).",
        ),  # fmt: skip
        click.option(
            "--count-kernels",
            multiple=True,
            metavar="REGEX",
            help="Count kernels matching REGEX per step (repeatable).",
        ),  # fmt: skip
        click.option("--pid", type=int, default=None, help="Process whose steps to use."),
        click.option("--device", type=int, default=None, help="GPU whose work to measure."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def spec_from_options(
    preset: str | None, step_name: str | None, anchors: str | None, domain: str | None
):
    """The StepSpec that ``spec_options`` describe (the ``eagle`` preset by default)."""
    from specscope.analysis.spec import CYCLE, StepSpec, load_preset

    if preset and step_name:
        raise SpecError("give either --preset or --step (with --anchors), not both")
    spec = load_preset(preset or "eagle") if step_name is None else StepSpec(step=step_name)
    if anchors is not None:
        spec = spec.with_overrides(anchors=tuple(a.strip() for a in anchors.split(",") if a))
        if step_name is None and any(spec.anchor_markers):  # graph/kernel anchors: cycles
            spec = spec.with_overrides(step=CYCLE)
    if domain is not None:
        spec = StepSpec(spec.step, spec.anchors, domain or None, spec.count_kernels)
    return spec
