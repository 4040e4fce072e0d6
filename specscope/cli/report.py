"""``specscope report``: parse flags, call :func:`specscope.reports.report.write_report`, print
where the report went."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import click

from specscope.cli import Command
from specscope.cli.options import (
    SpecArgs,
    given_options,
    min_steps_option,
    noise_floor_option,
    parse_labels,
    report_out_option,
    seed_option,
    spec_options,
    tell,
    warn,
    warn_if_chosen_differently,
    warn_lost_work,
)
from specscope.errors import SpecscopeError


def _labels(text: str | None, n: int) -> list[str]:
    if n < 2:
        raise click.UsageError("give at least two inputs: BASELINE OTHER [MORE...]")
    names = parse_labels(text, n, "input")
    if len(set(names)) != len(names):
        raise click.UsageError("--labels must be distinct")
    return names


def _gap_and_highlight(spec, gap: str | None, highlight: str | None) -> tuple[str, str | None]:
    """``--gap``/``--highlight``, else the spec's report defaults; the gap checked."""
    from specscope.analysis.composition import parse_gap

    gap = spec.report.gap if gap is None else gap
    if gap is None:
        raise click.UsageError(
            "give --gap A->B: the steps have no anchors to take a default from (a report lines "
            "each input's median step up at a gap between two anchors: add them with --anchors "
            "NAME=kernel:REGEX,... or NAME=graph:ID,...)"
        )
    parse_gap(gap)
    return gap, spec.report.highlight if highlight is None else highlight


def _views(
    resolved,
    gap: str,
    lead_us: float,
    highlight: str | None,
    span_us: float | None,
    early: dict[int, tuple] | None = None,
) -> list:
    """The median-step view of each input (None for a results-database run and for an export
    without CUDA activity: :attr:`.Analysis.without_cuda`), with warnings;
    ``early``: the views :func:`_resolve_shedding` made (a view, or the error to raise here)."""
    from specscope.analysis.composition import median_step_view
    from specscope.analysis.validate import LOST_WORK_SAID

    views = []
    for i, r in enumerate(resolved):
        a = r.analysis
        if early is not None and i in early:
            view = early[i][0]
            if isinstance(view, Exception):
                raise view
            views.append(view)
            continue
        views.append(
            None
            if a.detached or a.without_cuda
            else median_step_view(
                a, gap, lead_us=lead_us, highlight=highlight or None, span_us=span_us
            )
        )
    for r in resolved:
        for note in r.analysis.notes:
            if LOST_WORK_SAID not in note:  # (said once the inputs were read: _analysed)
                tell(note, f"{r.ref}: ")
        if r.analysis.from_database:
            warn(f"{r.ref}: a results-database run; no timeline or composition for it")
        elif r.analysis.without_cuda:
            warn(f"{r.ref}: no GPU work in the export (recorded without -t cuda?); no timeline "
                 "or composition for it")  # fmt: skip
    return views


def _resolve_shedding(sides_of, inputs, spec_args: SpecArgs, gap, highlight, lead_us, span_us):
    """The inputs resolved one after the other (``sides_of(ref)``: rank label -> resolved
    input; one entry without ``--per-rank``), each (once the report's gap is known) with the
    median-step view and gap story of every rank made at once and then shed
    (:meth:`~specscope.analysis.run.Analysis.shed`): one export's operations held at a time,
    not every input's (two of 20 M GPU ops: 3.2 GiB). The gap is known from the first analysis
    with a step spec (:meth:`SpecArgs.defaults_spec` takes the first), or the given spec; while
    it is not, or where it is no gap, the inputs stay whole and everything is made after them,
    as before. Returns the sides and ``{(gap, highlight): {(input, rank label): (view or error,
    story or error)}}``, for the gap they were made for. The heap of each shed analysis is
    given back. (The inputs are not read ahead in a child: beside the drawing helper's
    imports, that was 1 s slower for two exports of 20 M operations.)"""
    from specscope.analysis.memory import give_back
    from specscope.analysis.spec import spec_from_dict

    sides, made, known = [], {}, None
    for ref in inputs:
        sides.append(sides_of(ref))
        if known is None:
            analyses = [r.analysis for side in sides for r in side.values()]
            first = (
                spec_args.spec
                if spec_args.spec_given
                else next((s for a in analyses if (s := spec_from_dict(a.spec)) is not None), None)
            )
            del analyses
            try:
                known = None if first is None else _gap_and_highlight(first, gap, highlight)
            except (click.UsageError, SpecscopeError):
                known = None  # (the same error is raised after every input, as before)
        if known is None:
            continue
        for k, side in enumerate(sides):
            for label in side:
                if (k, label) not in made and not side[label].analysis.detached:
                    made[k, label] = _live_parts(side[label].analysis, *known, lead_us, span_us)
                    rows = len(side[label].analysis.trace.ops)  # (every rank's)
                    shed = side[label].analysis.shed()  # (no name left holding the whole one)
                    side[label] = dataclasses.replace(side[label], analysis=shed)
                    give_back(rows)
    return sides, ({known: made} if known is not None else {})


def _analysed(sides_of, inputs, spec_args: SpecArgs, view_args: tuple, stats: dict):
    """The inputs' sides (:func:`_resolve_shedding`; ``view_args``: the ``--gap``,
    ``--highlight``, ``--lead`` and ``--span`` given), the report's settings (gap and highlight
    defaults from the analyses, as before) and the views and stories made while shedding, for
    that gap (None: none were)."""
    gap, highlight, lead_us, span_us = view_args
    sides, early = _resolve_shedding(sides_of, inputs, spec_args, gap, highlight, lead_us, span_us)
    analyses = [r.analysis for side in sides for r in side.values()]
    warn_if_chosen_differently(analyses, spec_args.spec_given)
    for r in (r for side in sides for r in side.values()):  # (before a view can fail)
        warn_lost_work(r.ref, r.analysis)
    gap, highlight = _gap_and_highlight(spec_args.defaults_spec(analyses), gap, highlight)
    return sides, _Settings(gap, lead_us, span_us, highlight, stats), early.get((gap, highlight))


def _early_of(made: dict | None, labels: list[str]) -> dict[int, tuple] | None:
    """Of :func:`_resolve_shedding`'s views and stories, those of rank ``labels[k]`` of each
    input ``k``, by input."""
    if made is None:
        return None
    return {k: made[k, label] for k, label in enumerate(labels) if (k, label) in made}


def _live_parts(a, gap: str, highlight, lead_us: float, span_us) -> tuple:
    """What a report reads of ``a``'s operations: its median-step view and its gap's story,
    each the error making it raised (raised or noted later, where it would have been)."""
    from specscope.analysis.composition import median_step_view
    from specscope.analysis.explain import explain_gap

    try:
        view = None if a.without_cuda else median_step_view(
            a, gap, lead_us=lead_us, highlight=highlight or None, span_us=span_us
        )  # fmt: skip
    except Exception as e:  # noqa: BLE001 (raised again by _views)
        view = e.with_traceback(None)  # (its frames would hold the operations)
    try:
        story = explain_gap(a, gap)
    except SpecscopeError as e:
        story = e.with_traceback(None)
    return view, story


@click.command("report", cls=Command)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--labels", default=None,
              help="Comma-separated labels, one per input (default: Before,After or "
                   "Before,After 1,...).")  # fmt: skip
@report_out_option
@spec_options
@click.option("--gap", default=None,
              help="Gap metric that picks the median steps and aligns the timeline (default: "
                   "the spec's [report] gap, else last anchor->first anchor).")  # fmt: skip
@click.option("--lead", "lead_us", default=40.0, show_default=True,
              type=click.FloatRange(min=0),
              help="µs of timeline shown before the end of the gap's opening anchor.")  # fmt: skip
@click.option("--span", "span_us", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Show the same fixed window of this many µs for every input, starting "
                   "--lead µs before the end of the gap's opening anchor (default: to the end "
                   "of each median step).")  # fmt: skip
@click.option("--highlight", default=None,
              help="Regex of kernel names to mark on the timeline ('' for none; default: the "
                   "spec's [report] highlight, else its counted kernels).")  # fmt: skip
@noise_floor_option
@min_steps_option
@click.option("--per-rank", is_flag=True,
              help="Exports of several processes (TP ranks): one report per rank i (rank i of "
                   "each input, ranks in pid order) in rankI/ subfolders, with index.html and "
                   "summary.md over all of them.")  # fmt: skip
@seed_option
@click.pass_context
def report_cmd(ctx: click.Context, inputs: tuple[str, ...], labels: str | None, out: Path,
               spec_args: SpecArgs, gap: str | None, lead_us: float, span_us: float | None,
               highlight: str | None,
               noise_floor: float, min_steps: int, per_rank: bool,
               seed: int) -> None:  # fmt: skip
    """Write an HTML/PNG/Markdown report comparing runs into a new folder under --out.

    INPUT: an nsys export, a run folder of `specscope profile` (its export and manifest), a
    results database of `specscope analyze --db` (its latest run) or DB:RUN_ID. The first input
    is the baseline; each later one is compared against it. The folder gets timeline.png (each
    input's median step by --gap, aligned at the end of the gap's opening anchor, with the
    launching thread's NVTX phases and CUDA API calls under the GPU streams),
    distributions.png, steps.png, composition.png, summary.md (the PR table and provenance) and
    report.html (self-contained; figures beside it). Results-database runs keep no operations:
    their timeline and composition are left empty.

    An export of several processes (every TP rank of a server) is read as one process (--pid,
    or the one with most steps); --per-rank reports every rank: rank i of each input against
    rank i of the first, one full report per rank, and index.html linking them.

    Example: specscope report before.sqlite after.sqlite --skip 1 --labels main,fused --span 400
    --lead 40 --out reports
    """
    from specscope.analysis.sqlread import prefer_light_reader

    prefer_light_reader(inputs)  # small exports: no pyarrow import (before pandas is imported)
    from specscope.reports.drawing import drawing_helper

    names = _labels(labels, len(inputs))  # imports pandas
    # a helper forked now imports matplotlib while this process analyses
    with drawing_helper(enabled=not per_rank) as helper:
        from specscope.analysis.inputs import pair_ranks, resolve, resolve_ranks
        from specscope.analysis.spec import check_regexes
        from specscope.analysis.targets import check_output_dir
        from specscope.reports.report import report_folder, write_rank_reports, write_report

        check_regexes({"--highlight": highlight})
        check_output_dir(out, "--out", inputs)
        spec = spec_args.given_spec  # None: each export's steps chosen as `analyze` does
        if spec is not None:
            _gap_and_highlight(spec, gap, highlight)  # a wrong --gap fails before the analysis
        given = given_options(ctx, skip=("labels",))
        stats = {"noise_floor_pct": noise_floor, "min_steps": min_steps, "seed": seed}
        if not per_rank:
            sides, settings, made = _analysed(
                lambda ref: {"": resolve(ref, spec, spec_args.gap_options)},
                inputs, spec_args, (gap, highlight, lead_us, span_us), stats,
            )  # fmt: skip
            resolved = [side[""] for side in sides]
            made = _early_of(made, [""] * len(resolved))
            one = _prepare(inputs, resolved, names, given, settings, names, made)
            with report_folder(out) as out_dir:
                write_report(out_dir, **one, helper=helper)
            click.echo(str(out_dir / "report.html"))
            return
    sides, settings, made = _analysed(
        lambda ref: resolve_ranks(ref, spec, spec_args.gap_options),
        inputs, spec_args, (gap, highlight, lead_us, span_us), stats,
    )  # fmt: skip
    ranks = []
    for group in pair_ranks(sides):
        rank_names = [f"{n}[{label}]" for n, (label, _) in zip(names, group, strict=True)]
        resolved = [r for _, r in group]
        mine = _early_of(made, [label for label, _ in group])
        ranks.append(_prepare(inputs, resolved, rank_names, given, settings, names, mine))
    with report_folder(out) as out_dir:
        write_rank_reports(out_dir, ranks)
    click.echo(str(out_dir / "index.html"))


@dataclass(frozen=True)
class _Settings:
    """The report options every rank's report shares."""

    gap: str
    lead_us: float
    span_us: float | None
    highlight: str | None
    stats: dict


def _prepare(
    inputs, resolved, names: list[str], given, s: _Settings, labels: list[str], early=None
) -> dict:
    """Compare and explain one report's inputs (one rank's, or the only ones): the keyword
    arguments of :func:`specscope.reports.report.write_report` but its folder. ``names``: the
    inputs' names on the page; ``labels``: the ``--labels`` of the reproduce commands;
    ``early``: the views and stories :func:`_resolve_shedding` made of shed inputs."""
    from specscope.analysis.compare import compare_runs
    from specscope.analysis.explain import report_explanations
    from specscope.cli.compare import compare_cmd
    from specscope.reports.reproduce import reproduce_commands

    comparisons = [
        compare_runs([resolved[0].analysis], [r.analysis], labels=(names[0], names[i]), **s.stats)
        for i, r in enumerate(resolved[1:], 1)
    ]
    views = _views(resolved, s.gap, s.lead_us, s.highlight, s.span_us, early)
    compare_flags = [o for p in compare_cmd.params for o in p.opts]
    commands = reproduce_commands(inputs, labels, given, compare_flags, resolved)
    stories = None if early is None else {i: story for i, (_, story) in early.items()}
    texts, notes = report_explanations([r.analysis for r in resolved], names, s.gap, stories)
    for note in notes:
        warn(note)
    return {"inputs": resolved, "labels": names, "comparisons": comparisons, "views": views,
            "gap": s.gap, "highlight": s.highlight or None, "commands": commands,
            "explanations": texts}  # fmt: skip


COMMANDS = (report_cmd,)
