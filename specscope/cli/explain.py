"""``specscope explain``: a gap in plain words (:mod:`specscope.analysis.explain`), for one
input's median step or for the change between two inputs."""

from __future__ import annotations

import json
from pathlib import Path

import click

from specscope.cli import Command
from specscope.cli.options import (
    SpecArgs,
    format_option,
    spec_options,
    warn,
    warn_if_chosen_differently,
)
from specscope.errors import SpecscopeError


def _labels(text: str | None, sources: list[str]) -> tuple[str, ...]:
    """``--labels a,b``, else the inputs' file names without their suffix."""
    if text is None:
        return tuple(Path(s).name.removesuffix(".sqlite") for s in sources)
    names = tuple(x.strip() for x in text.split(","))
    if len(names) != len(sources) or not all(names):
        raise click.UsageError(f"--labels needs {len(sources)} non-empty names, one per input")
    return names


@click.command("explain", cls=Command)
@click.argument("inputs", nargs=-1, required=True, metavar="TRACE | BEFORE AFTER")
@click.option(
    "--gap",
    default=None,
    metavar="A->B",
    help="The gap to explain (A->B or gap_us:A->B; default: the spec's report gap).",
)
@click.option(
    "--labels",
    default=None,
    help="Comma-separated names of the two inputs (default: their file names).",
)
@spec_options
@format_option("text", "json")
def explain_cmd(inputs: tuple[str, ...], gap: str | None, labels: str | None,
                spec_args: SpecArgs, fmt: str) -> None:  # fmt: skip
    """Explain a gap between anchors in plain words: for the median step by the gap, the GPU
    idle and the work inside the gap (by kernel name and memcpy kind), whether the GPU waited
    for the host (host lag: where the host was, its NVTX phases and CUDA API calls, and its OS
    runtime calls where recorded with -t osrt) or the host was ahead (launch latency), and
    what the numbers cannot tell. Given BEFORE AFTER, the
    change between them too. Inputs: nsys exports or `specscope profile` run folders.

    Example: specscope explain before.sqlite after.sqlite --gap 'draft_extend.replay->draft.replay' --skip 1
    """  # noqa: E501
    from specscope.analysis.opsread import prefetch
    from specscope.analysis.sqlread import prefer_light_reader

    # the first input's GPU operations read while pandas is imported, as `analyze` reads its
    # export (exec ids where zero-config may look for launch cycles)
    prefetch(inputs[0], execs=not spec_args.spec_given)
    prefer_light_reader(inputs)  # small exports: no pyarrow import (before pandas is imported)
    from specscope.analysis.explain import GapChange, explain_gap

    if len(inputs) > 2:
        raise click.UsageError("give one input (TRACE) or two (BEFORE AFTER)")
    names = _labels(labels, list(inputs))
    runs, stories = [], []
    for i, ref in enumerate(inputs):  # zero-config without a spec given: the runs' own spec
        runs += spec_args.analyses([ref], gaps=True)
        # each story made as soon as its input is analysed, and the input shed: one export's
        # operations held at a time (two of 20 M: 1.7 GiB); errors raised after both, in the
        # order they were before
        stories.append(_story(spec_args, runs, gap, final=i == len(inputs) - 1))
        if stories[-1] is not None and not runs[-1].detached:
            runs[-1] = runs[-1].shed()
    warn_if_chosen_differently(runs, spec_args.spec_given)
    metric = _gap(spec_args, runs, gap)
    if len(runs) == 2 and runs[0].capture_mode != runs[1].capture_mode:
        modes = f"{runs[0].capture_mode} vs {runs[1].capture_mode}"
        warn(f"capture modes differ ({modes}): node mode inflates launch calls, so gaps, "
             "lag and latency are not comparable")  # fmt: skip
    told = []
    for run, story in zip(runs, stories, strict=True):
        story = explain_gap(run, metric) if story is None else story
        if isinstance(story, Exception):
            raise story
        told.append(story)
    if len(told) == 1:
        data = told[0].to_json()
    else:
        data = GapChange(told[0], told[1], (names[0], names[1])).to_json()
    if fmt == "json":
        click.echo(json.dumps(data, indent=1, ensure_ascii=False))
    else:
        click.echo(data["text"])


def _gap(spec_args: SpecArgs, runs: list, gap: str | None) -> str:
    """``--gap`` (as ``gap_us:A->B``), else the report gap of the spec the first of ``runs``
    with one was made with (:meth:`SpecArgs.defaults_spec`): a UsageError where it has none,
    a SpecError for what is no gap."""
    from specscope.analysis.explain import normalise_gap

    if gap is None:
        gap = spec_args.defaults_spec(runs).report.gap
        if gap is None:
            raise click.UsageError("the step spec has no anchors: give --anchors and --gap A->B")
    return normalise_gap(gap)


def _story(spec_args: SpecArgs, runs: list, gap: str | None, final: bool):
    """The gap story of the last of ``runs`` (its SpecscopeError as a value), or None where it
    is made after every input: where the gap may come from a later input's spec (no run so far
    has one), or is no gap (its error then raised where it was)."""
    from specscope.analysis.explain import explain_gap
    from specscope.analysis.spec import spec_from_dict

    if not (final or gap is not None or spec_args.spec_given):
        if all(spec_from_dict(r.spec) is None for r in runs):
            return None
    try:
        metric = _gap(spec_args, runs, gap)
    except (click.UsageError, SpecscopeError):
        return None
    try:
        return explain_gap(runs[-1], metric)
    except SpecscopeError as e:
        return e.with_traceback(None)


COMMANDS = (explain_cmd,)
