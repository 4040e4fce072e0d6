"""``specscope compare``: parse flags, call :func:`specscope.analysis.compare.compare_runs`, print.

Input references (RUN) are resolved by :func:`specscope.analysis.inputs.resolve`:

- ``trace.sqlite`` — an nsys export, analysed on the fly with the step spec options;
- ``results.sqlite`` — a results database written by ``specscope analyze --db`` (recognised by
  its ``runs`` table): its latest run;
- ``results.sqlite:7`` — run 7 of that database;
- a run folder of ``specscope profile`` — its export.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import click

from specscope.cli import Command
from specscope.cli.options import (
    SpecArgs,
    format_option,
    min_steps_option,
    noise_floor_option,
    parse_labels,
    seed_option,
    spec_options,
    tell_choices,
    warn,
    warn_if_chosen_differently,
)


def _signed(x: float) -> str:
    from specscope.reports.text import signed

    return signed(x, minus="-")


def _side_text(label: str, runs) -> str:
    sources = ", ".join(f"{r.source} ({r.n_steps} steps)" for r in runs)
    return f"{label}: {sources}"


def _metrics_table(c, rows: list[str] | None = None) -> str:
    import pandas as pd

    m = c.metrics if rows is None else c.metrics.loc[[r for r in rows if r in c.metrics.index]]
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


KERNEL_ROWS = 40
"""Names in the text table of operations per step (the largest |Δ µs/step| first, as the
report's table); the JSON output has every name (50 000 Triton kernels made 50 000 lines)."""


def _kernels_table(c) -> str:
    import pandas as pd

    k = c.kernels
    if k is None:
        return "per-kernel diff: unavailable for results-database runs (they keep no operations)"
    more = len(k) - KERNEL_ROWS
    k = k.head(KERNEL_ROWS)
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
    text = "operations per step, by name\n" + table.to_string()
    if more > 0:
        largest = abs(float(k["delta_us_per_step"].iloc[-1]))
        text += (f"\n... and {more} more names, each within ±{largest:.1f} µs/step (`--format "
                 "json` lists every one)")  # fmt: skip
    return text


def _groups(inputs, before_refs, after_refs) -> list[list[str]]:
    """The sides: BEFORE AFTER [MORE...] one input each, or the pooled --before/--after."""
    if inputs and (before_refs or after_refs):
        raise click.UsageError("give inputs either as BEFORE AFTER... or with --before/--after")
    if before_refs or after_refs:
        if not (before_refs and after_refs):
            raise click.UsageError("--before and --after must both be given (each repeatable)")
        return [list(before_refs), list(after_refs)]
    if len(inputs) < 2:
        raise click.UsageError("give at least two inputs: BEFORE AFTER [MORE...]")
    return [[ref] for ref in inputs]


def _selected_rows(comparisons, metric_list: str | None) -> list[str] | None:
    """``--metrics``: None (the format's default: the PR table in Markdown, every metric in the
    table format), every metric (``all``) or the names given (unknown names: a usage error)."""
    if metric_list == "all":
        return list(comparisons[0].metrics.index)
    if not metric_list:
        return None
    rows = [x.strip() for x in metric_list.split(",") if x.strip()]
    known = set().union(*(c.metrics.index for c in comparisons))
    if unknown := [r for r in rows if r not in known]:
        raise click.UsageError(f"--metrics: unknown metric(s) {', '.join(unknown)}")
    return rows


def _columns(text: str) -> list[str]:
    """``--columns``: the optional Markdown columns named (a usage error for others)."""
    from specscope.reports.markdown import EXTRA_COLUMNS

    columns = [x.strip() for x in text.split(",") if x.strip()]
    if unknown := [x for x in columns if x not in EXTRA_COLUMNS]:
        known = ", ".join(EXTRA_COLUMNS)
        raise click.UsageError(f"--columns: unknown column(s) {', '.join(unknown)} ({known})")
    return columns


def _print_tables(comparisons, rows: list[str] | None) -> None:
    for i, c in enumerate(comparisons):
        if i:
            click.echo()
        click.echo(_side_text(c.labels[0], c.before))
        click.echo(_side_text(c.labels[1], c.after))
        for check in c.checks:
            click.echo(f"  {check.level.value:<8}{check.message}")
        click.echo(_metrics_table(c, rows))
        click.echo()
        click.echo(_kernels_table(c))


@click.command("compare", cls=Command)
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
@format_option("table", "markdown", "json")
@click.option("--metrics", "metric_list", default=None,
              help="Rows of the markdown and table formats: comma-separated metric names, or "
                   "'all' (default: markdown the PR table (gaps, GPU idle, copy kernels, eager "
                   "memcpys), table every metric).")  # fmt: skip
@click.option(
    "--chain",
    is_flag=True,
    help="Compare each input against the one before it (default: against the first).",
)
@click.option("--columns", "extra_columns", default="", metavar="verdict,ci",
              help="Markdown: add the verdict and/or the CI of the change after each change "
                   "column (comma-separated).")  # fmt: skip
@noise_floor_option
@min_steps_option
@click.option(
    "--confidence",
    default=0.95,
    show_default=True,
    type=click.FloatRange(0.5, 1.0, max_open=True),
    help="Level of the bootstrap CI.",
)
@click.option("--bootstrap", "n_boot", default=2000, show_default=True,
              type=click.IntRange(min=100), help="Bootstrap resamples.")  # fmt: skip
@click.option("--per-rank", is_flag=True,
              help="Exports of several processes (TP ranks): compare rank i of each input with "
              "rank i of the others, one comparison per rank (ranks in pid order).")  # fmt: skip
@seed_option
def compare_cmd(inputs: tuple[str, ...], before_refs: tuple[str, ...],
                after_refs: tuple[str, ...], labels: str | None, spec_args: SpecArgs, fmt: str,
                metric_list: str | None, chain: bool, extra_columns: str, noise_floor: float,
                min_steps: int, confidence: float, n_boot: int, per_rank: bool,
                seed: int) -> None:  # fmt: skip
    """Compare per-step metrics before/after: medians, p10/p90, bootstrap CI, verdict.

    Give BEFORE AFTER [MORE...] (each later input is compared against the first, or with
    --chain against the one before it), or pool repeated runs per side with --before RUN
    --before RUN --after RUN --after RUN. Inputs: an
    nsys export (analysed on the fly with --preset/--step/--anchors and --skip), a results
    database of `specscope analyze --db` (its latest run), or DB:RUN_ID (one run of it).

    Verdicts: improved / regressed (by the metric's direction: lower is better for idle, gaps,
    memcpys, copy kernels, host time and memcpy/launch API calls; higher for occupancy_pct),
    changed (neutral counts), no change (the CI contains 0, |change| < --noise-floor, or within
    run-to-run spread), inconclusive (< --min-steps steps), unavailable. Node-mode against
    graph-mode captures is refused (exit 2); other mismatches (spec, GPU, nsys major version,
    batch size) are warnings.

    Markdown rows whose value depends on the capture mode (gaps, idle, window, busy,
    occupancy, graph-kernel counts) are tagged [graph] or [node]; --columns verdict,ci adds the
    verdict and the CI of each change.

    Example: specscope compare before.sqlite after.sqlite --skip 1 --format markdown
    """
    from specscope.analysis.opsread import prefetch
    from specscope.analysis.sqlread import prefer_light_reader

    groups = _groups(inputs, before_refs, after_refs)
    # the first input's GPU operations read during the imports (one only: a prefetched read
    # is held whole until analysed); exec ids where zero-config may look for launch cycles
    prefetch(groups[0][0], execs=not spec_args.spec_given)
    prefer_light_reader([ref for g in groups for ref in g])  # before pandas is imported
    from specscope.analysis.compare import compare_runs

    columns = _columns(extra_columns)
    names = parse_labels(labels, len(groups), "side")
    stats_kw = {"noise_floor_pct": noise_floor, "min_steps": min_steps,
                "confidence": confidence, "n_boot": n_boot, "seed": seed}  # fmt: skip
    if per_rank:
        _compare_per_rank(groups, names, spec_args, stats_kw, fmt, metric_list, columns)
        return
    sides = [spec_args.analyses(refs, shed=True) for refs in groups]  # (one trace at a time)
    warn_if_chosen_differently([a for side in sides for a in side], spec_args.spec_given)
    comparisons = [
        compare_runs(sides[base], sides[i], labels=(names[base], names[i]), **stats_kw)
        for i in range(1, len(sides))
        for base in [i - 1 if chain else 0]
    ]
    _emit(comparisons, fmt, metric_list, columns, stats_kw, confidence)


def _compare_per_rank(groups, names, spec_args: SpecArgs, stats_kw: dict, fmt: str,
                      metric_list: str | None, columns) -> None:  # fmt: skip
    """``--per-rank``: each input's processes (one export per side), rank i against rank i."""
    from specscope.analysis.compare import compare_runs
    from specscope.analysis.inputs import pair_ranks, resolve_ranks
    from specscope.analysis.memory import give_back

    if any(len(g) != 1 for g in groups) or len(groups) != 2:
        raise click.UsageError("--per-rank compares two inputs, BEFORE AFTER, one export each")
    sides = []
    for (ref,) in groups:  # every rank of one input shed before the next is read
        side = resolve_ranks(ref, spec_args.given_spec, spec_args.options)
        rows = max([len(r.analysis.trace.ops) for r in side.values() if r.analysis.trace] or [0])
        side = {label: r if r.analysis.detached else replace(r, analysis=r.analysis.shed())
                for label, r in side.items()}  # fmt: skip
        give_back(rows)  # (the heap the ranks' analyses left)
        sides.append(side)
    every = [r for side in sides for r in side.values()]
    for r in every:
        tell_choices(r.ref, r.analysis)
    warn_if_chosen_differently([r.analysis for r in every], spec_args.spec_given)
    comparisons = []
    for (b_rank, before), (a_rank, after) in pair_ranks(sides):
        labels = (f"{names[0]}[{b_rank}]", f"{names[1]}[{a_rank}]")
        comparisons.append(
            compare_runs([before.analysis], [after.analysis], labels=labels, **stats_kw)
        )
    if fmt == "markdown":
        for i, c in enumerate(comparisons):  # one PR table per rank (their baselines differ)
            click.echo(f"{chr(10) if i else ''}### {c.labels[0]} → {c.labels[1]}\n")
            _emit([c], fmt, metric_list, columns, stats_kw, stats_kw["confidence"])
        return
    _emit(comparisons, fmt, metric_list, columns, stats_kw, stats_kw["confidence"])


def _emit(comparisons, fmt: str, metric_list: str | None, columns, stats_kw: dict,
          confidence: float) -> None:  # fmt: skip
    """Warnings, then the comparisons in ``fmt``."""
    from specscope.analysis.compare import warnings

    for message in warnings(comparisons):
        warn(message)
    min_steps = stats_kw["min_steps"]
    if inconclusive := sum(c.inconclusive for c in comparisons):
        warn(
            f"{inconclusive} metric(s) inconclusive: fewer than {min_steps} steps on a side; "
            "capture more steps, pool repeated runs, or lower --min-steps"
        )
    rows = _selected_rows(comparisons, metric_list)
    if fmt == "markdown":
        from specscope.reports.markdown import render

        click.echo(render(comparisons, rows, columns, confidence), nl=False)
    elif fmt == "json":
        data = {"settings": stats_kw, "comparisons": [c.to_json() for c in comparisons]}
        click.echo(json.dumps(data, indent=1))
    else:
        _print_tables(comparisons, rows)


COMMANDS = (compare_cmd,)
