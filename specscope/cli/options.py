"""What the commands share: the step-spec options (declared once), warnings, ``--format`` output.

- :func:`spec_options` adds ``--preset/--step/--anchors/--domain`` (the step spec) and the
  :class:`~specscope.analysis.run.AnalyzeOptions` flags (``--skip/--count-kernels/--pid/
  --device``) to a command, and hands it one :class:`SpecArgs`: ``.spec`` is the
  :class:`~specscope.analysis.spec.StepSpec`, ``.options`` the ``AnalyzeOptions``. A new
  analysis option is one ``AnalyzeOptions`` field plus one entry in :data:`ANALYZE_OPTIONS`
  whose parameter name is the field's name.
- :func:`warn`: the ``warning:`` line on stderr; :func:`note` the ``note:`` line (information);
  :func:`tell` picks one for an analysis note.
- :func:`emit`: the one output path of ``--format table|csv|json`` for a frame.
- :func:`given_options`: the options the user typed (click's parameter sources), for the
  commands a report prints to reproduce itself.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

if TYPE_CHECKING:  # pandas and the analysis are imported when a command runs, not for --help
    import pandas as pd

    from specscope.analysis.run import Analysis, AnalyzeOptions
    from specscope.analysis.spec import StepSpec


def warn(message: str) -> None:
    """``warning: message`` on stderr: something the user may need to act on."""
    click.echo(f"warning: {message}", err=True)


def note(message: str) -> None:
    """``note: message`` on stderr: information (what was skipped, where results went)."""
    click.echo(f"note: {message}", err=True)


def tell(message: str, prefix: str = "") -> None:
    """An analysis note: :func:`note` for an :class:`~specscope.errors.Info`, else :func:`warn`."""
    from specscope.errors import Info

    (note if isinstance(message, Info) else warn)(prefix + message)


def say(message: str) -> None:
    """A progress or status line on stderr (stdout keeps the results)."""
    click.echo(message, err=True)


def format_option(*choices: str):
    """``--format`` (parameter ``fmt``) with these choices, the first one the default."""
    return click.option("--format", "fmt", type=click.Choice(list(choices)),
                        default=choices[0], show_default=True)  # fmt: skip


def table_text(frame: pd.DataFrame) -> str:
    """``frame`` as a terminal table: one decimal, ``n/a`` for missing values."""
    return frame.to_string(float_format=lambda x: f"{x:.1f}", na_rep="n/a")


def emit(frame: pd.DataFrame, fmt: str) -> None:
    """Print ``frame`` as ``fmt``: ``table`` (:func:`table_text`), ``csv`` (index included) or
    ``json`` (a list of records, the index as the first field)."""
    if fmt == "json":
        click.echo(json.dumps(frame.reset_index().to_dict("records"), indent=1))
    elif fmt == "csv":
        click.echo(frame.to_csv(), nl=False)
    else:
        click.echo(table_text(frame))


# the statistics options of compare and report
noise_floor_option = click.option(
    "--noise-floor", default=2.0, show_default=True, type=click.FloatRange(min=0),
    help="Relative change (%) below which a metric is 'no change'.")  # fmt: skip
min_steps_option = click.option(
    "--min-steps", default=20, show_default=True, type=click.IntRange(min=1),
    help="Fewer steps on a side make a metric 'inconclusive'.")  # fmt: skip
seed_option = click.option("--seed", default=0, show_default=True, type=int,
                           help="Bootstrap seed.")  # fmt: skip
# the folder of report and demo
report_out_option = click.option(
    "--out", "out", type=click.Path(path_type=Path), default=Path("specscope-reports"),
    show_default=True,
    help="Folder that gets a new <time>-report subfolder (never reused).")  # fmt: skip

SPEC_OPTIONS = [
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
]
# one per AnalyzeOptions field, the parameter named as the field
ANALYZE_OPTIONS = [
    click.option(
        "--skip",
        default=0,
        show_default=True,
        type=click.IntRange(min=0),
        help="Warm-up steps to drop (from each export).",
    ),
    click.option(
        "--count-kernels",
        multiple=True,
        metavar="REGEX",
        help="Count kernels matching REGEX per step (repeatable).",
    ),
    click.option("--pid", type=int, default=None, help="Process whose steps to use."),
    click.option("--device", type=int, default=None, help="GPU whose work to measure."),
]
_SPEC_NAMES = ("preset", "step_name", "anchors", "domain")
_ANALYZE_NAMES = ("skip", "count_kernels", "pid", "device")


@dataclass(frozen=True)
class SpecArgs:
    """The values of :func:`spec_options`; ``spec`` and ``options`` are built when first read
    (so a command checks its own arguments before a bad preset is reported)."""

    values: dict

    @functools.cached_property
    def spec(self) -> StepSpec:
        """The StepSpec the options describe (the ``eagle`` preset by default); every regex
        among them compiled first (one error line naming the option)."""
        from specscope.analysis.spec import check_regexes, spec_from_cli

        v = self.values
        check_regexes(
            {
                "--count-kernels": v["count_kernels"],
                "--step": v["step_name"],
                "--anchors": [a.partition("=")[2] for a in (v["anchors"] or "").split(",")],
            }
        )
        return spec_from_cli(*(v[k] for k in _SPEC_NAMES))

    @property
    def given_spec(self) -> StepSpec | None:
        """:attr:`spec` when the command line describes the steps, else None: each export's
        steps are then chosen as ``analyze`` chooses them (zero-config)."""
        return self.spec if self.spec_given else None

    def defaults_spec(self, analyses: Iterable[Analysis]) -> StepSpec:
        """The spec whose report defaults (``--gap``, ``--highlight``) apply: the given one, else
        the one the first of ``analyses`` was made with (zero-config's choice), else the
        default preset's."""
        from specscope.analysis.spec import DEFAULT_PRESET, load_preset, spec_from_dict

        if self.spec_given:
            return self.spec
        for a in analyses:
            if (spec := spec_from_dict(a.spec)) is not None:
                return spec
        return load_preset(DEFAULT_PRESET)

    @property
    def spec_given(self) -> bool:
        """Whether the command line describes the steps (--preset, --step, --anchors or
        --domain); without any, ``analyze`` chooses them itself (zero-config)."""
        return any(self.values[k] is not None for k in _SPEC_NAMES)

    @functools.cached_property
    def options(self) -> AnalyzeOptions:
        """The AnalyzeOptions the options describe."""
        from specscope.analysis.run import AnalyzeOptions
        from specscope.analysis.spec import check_regexes

        check_regexes({"--count-kernels": self.values["count_kernels"]})
        names = {f.name for f in dataclasses.fields(AnalyzeOptions)}
        given = {k: v for k, v in self.values.items() if k in names}
        # a spec's anchor missing from the export is a misspelling: one error naming it
        return AnalyzeOptions(**given, require_anchors=True)

    @property
    def gap_options(self) -> AnalyzeOptions:
        """:attr:`options` for a command that tells a gap (``explain``, ``report``): steps that
        zero-config finds without anchors get each step as their anchor (``self_anchors``)."""
        return dataclasses.replace(self.options, self_anchors=True)

    def analyses(
        self, refs: Iterable[str], shed: bool = False, gaps: bool = False
    ) -> list[Analysis]:
        """Each input reference resolved (:func:`specscope.analysis.inputs.resolve`; zero-config
        without a spec given: how each export's steps were chosen is a `note:` line, and the
        caller warns when they differ, :func:`warn_if_chosen_differently`); for an
        export of several processes (or threads) with steps, which one was taken is said (one
        `warning:` line: pick another with --pid). ``shed``: each kept as
        :meth:`Analysis.shed` leaves it, and the heap the whole one left given back, before the
        next is read. (The next inputs are not read ahead in a child as the command's first is:
        without imports to overlap, that cost 0.15-1.3 s for 0-25 MiB less once the heap was
        given back.) ``gaps``: with :attr:`gap_options`, for a command that tells a gap."""
        from specscope.analysis.inputs import resolve
        from specscope.analysis.memory import give_back

        options = self.gap_options if gaps else self.options
        out = []
        for ref in refs:
            a = resolve(ref, self.given_spec, options).analysis
            if shed and not a.detached:
                rows = len(a.trace.ops)  # (the export's: every rank's)
                a = a.shed()
                give_back(rows)  # (the heap the whole one left: 85 MiB at 20 M operations)
            for text in a.notes:  # (which process was taken)
                if "--pid" in text:
                    warn(f"{ref}: {text}")
            warn_lost_work(ref, a)
            tell_choices(ref, a)
            out.append(a)
        return out


def warn_lost_work(ref: str, a: Analysis) -> None:
    """The `warning:` lines of a capture that lost GPU work (:func:`.validate.lost_work_notes`),
    said as soon as input ``ref`` is read: a command that compares it reads its idle next."""
    from specscope.analysis.validate import LOST_WORK_SAID

    for text in a.notes:
        if LOST_WORK_SAID in text:
            warn(f"{ref}: {text}")


def tell_choices(ref: str, a: Analysis) -> None:
    """The `note:` lines saying how zero-config chose the steps of ``a`` (input ``ref``)."""
    from specscope.analysis.inputs import is_choice_note

    for text in a.notes:
        if is_choice_note(text):
            tell(text, f"{ref}: ")


def warn_if_chosen_differently(analyses: list[Analysis], spec_given: bool) -> None:
    """One `warning:` line when zero-config chose different step specs for the inputs of one
    command (their metrics then differ, or mean different things)."""
    specs = {json.dumps(a.spec, sort_keys=True) for a in analyses
             if not a.from_database}  # fmt: skip
    if not spec_given and len(specs) > 1:
        warn(
            "the inputs' steps were chosen differently (see the notes above): give the same "
            "--anchors, --step or --preset to compare like with like"
        )


def spec_options(f):
    """Add the step-spec and analysis options; the command receives ``spec_args``."""
    names = (*_SPEC_NAMES, *_ANALYZE_NAMES)

    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        values = {name: kwargs.pop(name) for name in names}
        return f(*args, spec_args=SpecArgs(values), **kwargs)

    for option in reversed(SPEC_OPTIONS + ANALYZE_OPTIONS):
        wrapper = option(wrapper)
    return wrapper


def parse_labels(text: str | None, n: int, per: str) -> list[str]:
    """``--labels a,b,...``: ``n`` non-empty names (one per ``per``: side, input); the default
    labels (:func:`specscope.analysis.compare.side_labels`) without ``text``."""
    from specscope.analysis.compare import side_labels

    if text is None:
        return side_labels(n)
    names = [x.strip() for x in text.split(",")]
    if len(names) != n or not all(names):
        raise click.UsageError(f"--labels needs {n} non-empty names, one per {per}")
    return names


def given_options(ctx: click.Context, skip: Iterable[str] = ()) -> list[tuple[str, object]]:
    """``(--flag, value)`` of every option of ``ctx``'s command that the user gave (on the
    command line or through the environment, not a default), in declaration order; the
    parameters named in ``skip`` left out."""
    given = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)
    return [
        (max(p.opts, key=len), ctx.params[p.name])
        for p in ctx.command.params
        if isinstance(p, click.Option)
        and p.name not in skip
        and ctx.get_parameter_source(p.name) in given
    ]
