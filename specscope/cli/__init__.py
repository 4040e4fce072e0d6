"""The ``specscope`` command line: parses flags, calls the library, prints results.

One module per command (``specscope/cli/<command>.py``); the options several commands share,
the warning line and the one output path of ``--format`` live in :mod:`specscope.cli.options`.
Expected failures (:class:`~specscope.errors.SpecscopeError`: bad input, a spec that does not
match) are one ``Error:`` line on stderr with the error's exit code (2 for bad input), never a
traceback; :class:`Command` does that for every command, on the group or invoked alone.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from importlib import import_module
from typing import NoReturn

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


QUICK_EXIT_COMMANDS = frozenset({"analyze", "compare", "check", "report", "graphs", "explain",
                                 "ranges"})  # fmt: skip
"""The commands that only read exports and write results: the process ends without the
interpreter's teardown after them (:func:`end`). Not those that run a workload (``run``,
``profile``, ``campaign``, ``demo``, ``doctor``): a profiler injected into the process (nsys
records NVTX and CUDA activity so) writes its data from C ``atexit`` handlers, which
``os._exit`` skips."""
_INJECTED = ("LD_PRELOAD", "NVTX_INJECTION64_PATH", "CUDA_INJECTION64_PATH")
"""Variables that load a profiler or a sanitizer into the process: the usual exit with any."""


BLAS_THREADS = "OPENBLAS_NUM_THREADS"
"""Set to 1 for :data:`QUICK_EXIT_COMMANDS` where it is unset: numpy's OpenBLAS starts a thread
per core when numpy is imported, and they spin a while (0.06 CPU-s of ``import numpy`` on our
2-core machines, 0.15 CPU-s of the analysis of 2 M GPU ops, taken from the read ahead), for
an analysis that multiplies no matrices. A value the user set is kept."""

GC_THRESHOLDS = (50_000, 20, 100)
"""The cyclic collector's thresholds (:func:`gc.set_threshold`) for :data:`QUICK_EXIT_COMMANDS`;
Python's are (700, 10, 10). Importing pandas and numpy makes ~10^5 objects that live as long as
the process, and at Python's thresholds the collector walks them again and again while they are
made: 0.05-0.08 s of a 0.3 s ``import pandas``, 3-4 % of the CPU samples (``perf``) of an
analysis of 2 M GPU operations. The arrays of an analysis are freed by their reference counts,
not by the collector: the peak RSS of 20 M GPU operations is the same (964 MiB, and the same
output; ``python -c`` running ``main`` after ``gc.set_threshold``, 2026-12-02). Cycles are
still collected, after 50 000 allocations instead of 700."""

MALLOC_ARENAS = 1
"""glibc's malloc arenas for :data:`QUICK_EXIT_COMMANDS` (``mallopt(M_ARENA_MAX)``) where the
user set no ``MALLOC_ARENA_MAX``: glibc gives each thread that allocates an arena of its own
(up to 8 per core), and memory freed in one is kept for that thread. The analyses of a
tensor-parallel export's ranks run on two threads (:mod:`.analysis.eachprocess`), each
freeing its temporaries into its own arena: during the analyses of 8 ranks of 2.5 M GPU
operations the RSS rose to 1167-1250 MiB (1012 MiB one after the other), in one arena to
1110-1125 MiB, where the next analysis takes that memory again; ``ranks4`` peaked at 620
against 548 MiB. Alternating runs (``ops2m``, ``ops2m_el``: eight each; ``ranks4``: four)
took the same time both ways (``bench/README.md``, twentieth session)."""
_M_ARENA_MAX = -8  # (glibc's malloc.h)


def _limit_malloc_arenas(arenas: int) -> bool:
    """``mallopt(M_ARENA_MAX, arenas)`` where the C library is glibc and the environment does
    not set it already; whether it was set."""
    if sys.platform != "linux" or "MALLOC_ARENA_MAX" in os.environ:
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None)  # (the process' own C library)
        libc.gnu_get_libc_version  # noqa: B018 (glibc's: musl has no M_ARENA_MAX)
        return libc.mallopt(_M_ARENA_MAX, arenas) == 1
    except (OSError, AttributeError):
        return False


def main() -> None:
    """Console-script entry point: the command, then the end of the process (:func:`end`)."""
    # the command: the first word that is not an option (the group's take no values)
    command = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    if command in QUICK_EXIT_COMMANDS:
        os.environ.setdefault(BLAS_THREADS, "1")  # (before numpy is imported)
        gc.set_threshold(*GC_THRESHOLDS)  # (before pandas is imported)
        _limit_malloc_arenas(MALLOC_ARENAS)  # (before any thread allocates)
    try:
        cli(prog_name="specscope")
        code = 0
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        code = 130
    except SystemExit as e:  # (click ends every command so, its exit code in it)
        code = e.code
    if command not in QUICK_EXIT_COMMANDS | {None} or any(map(os.environ.get, _INJECTED)):
        sys.exit(code)
    end(code)


def end(code: int | str | None) -> NoReturn:
    """Exit with ``code`` (as :func:`sys.exit` takes it) once the command is done, without the
    interpreter's teardown: freeing every module and object of pandas and numpy took
    0.05-0.12 s on our 2-core machines, a quarter of a small export's analysis.

    Everything the teardown would have done for the program is done first: standard output
    and error flushed, the ``atexit`` functions run (the removal of temporary files among
    them: ``weakref.finalize``, ``tempfile``). Every file the commands of
    :data:`QUICK_EXIT_COMMANDS` write is closed before they return (results are written
    whole: a temporary, then a rename). Where the flush fails (a closed pipe), the usual exit
    reports it as it always did. Threads still reading ahead (a command that failed before it
    used the read) are not waited for. What is skipped besides: C ``atexit`` handlers and
    the destructors of shared libraries, which is why workloads keep the usual exit."""
    if code is None or isinstance(code, int):
        status = int(code or 0)
    else:  # a message: printed, status 1 (what sys.exit does with it)
        print(code, file=sys.stderr)
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(status)
    atexit._run_exitfuncs()  # (what the teardown runs first)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        sys.exit(status)
    os._exit(status)


if __name__ == "__main__":  # pragma: no cover
    main()
