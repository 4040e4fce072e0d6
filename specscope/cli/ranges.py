"""``specscope ranges``: the NVTX range names of an export, with counts."""

from __future__ import annotations

from pathlib import Path

import click

from specscope.cli import Command
from specscope.cli.options import emit, format_option, warn


@click.command(cls=Command)
@click.argument("trace", type=click.Path(path_type=Path))
@format_option("table", "csv", "json")
def ranges(trace: Path, fmt: str) -> None:
    """List the NVTX range names of an export with counts (what to put in a step spec).

    Example: specscope ranges trace.sqlite
    """
    from specscope.analysis.loader import load
    from specscope.analysis.summary import nvtx_ranges

    t = load(trace)
    table = nvtx_ranges(t)
    if t.unclosed_ranges:
        warn(f"{t.unclosed_ranges} NVTX range(s) never closed were ignored")
    if table.empty:
        warn(f"{trace}: the export has no NVTX ranges (was it recorded with -t nvtx?)")
    emit(table.set_index("name"), fmt)


COMMANDS = (ranges,)
