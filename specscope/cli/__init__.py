"""The ``specscope`` command line: parses flags, calls the library, prints results.

One module per command (``specscope/cli/<command>.py``); the options several commands share,
the warning line and the one output path of ``--format`` live in :mod:`specscope.cli.options`.
Expected failures (:class:`~specscope.errors.SpecscopeError`: bad input, a spec that does not
match) are one ``Error:`` line on stderr with the error's exit code (2 for bad input), never a
traceback; :class:`Command` does that for every command, on the group or invoked alone.
"""

from __future__ import annotations

import sys
from importlib import import_module

import click
from click.exceptions import NoArgsIsHelpError

from specscope.errors import SpecscopeError


def _one_line(message: str, exit_code: int) -> click.ClickException:
    err = click.ClickException(message)
    err.exit_code = exit_code
    return err


class _OneLineErrors:
    """Turns SpecscopeError and click's usage errors (bad flags, missing arguments: click
    prints them as Usage / Try / blank / Error) into one ``Error:`` line with the error's exit
    code (2 for usage errors)."""

    def make_context(self, *args, **kwargs) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)  # type: ignore[misc]
        except NoArgsIsHelpError:  # a bare group: its help, as click prints it
            raise
        except click.UsageError as e:
            raise _one_line(e.format_message(), e.exit_code) from None

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except SpecscopeError as e:
            raise _one_line(str(e), e.exit_code) from None
        except click.UsageError as e:
            raise _one_line(e.format_message(), e.exit_code) from None


class Command(_OneLineErrors, click.Command):
    """A specscope command (``@click.command(cls=Command)``): one-line errors."""


class Group(_OneLineErrors, click.Group):
    """The ``specscope`` group: one-line errors; its commands are :class:`Command`."""

    command_class = Command


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="specscope")
def cli() -> None:
    """specscope: per-step GPU timelines of speculative decoding, from Nsight Systems exports.

    Example: specscope analyze trace.sqlite --preset eagle
    """


# the modules under specscope/cli/ that define commands; each lists them in COMMANDS
COMMAND_MODULES = (
    "analyze",
    "ranges",
    "compare",
    "check",
    "report",
    "profile",
    "doctor",
    "run",
    "campaign",
    "demo",
    "graphs",
    "explain",
)


def _register() -> None:
    for name in COMMAND_MODULES:
        for command in import_module(f"specscope.cli.{name}").COMMANDS:
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
