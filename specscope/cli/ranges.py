"""``specscope ranges``: the NVTX range names of an export, with counts, nesting depth and the
GPU work projected onto them."""

from __future__ import annotations

from pathlib import Path

import click

from specscope.cli import Command
from specscope.cli.options import emit, format_option, warn


@click.command(cls=Command)
@click.argument("trace", type=click.Path(path_type=Path))
@format_option("table", "csv", "json")
def ranges(trace: Path, fmt: str) -> None:
    """List the NVTX range names of an export (what to put in a step spec): count, mean
    duration, threads, mean nesting depth, and the GPU operations and GPU µs projected onto each
    range (work launched from inside it, as nsys's nvtx_gpu_proj_sum): a step is usually a
    depth-0 range with GPU work.

    Example: specscope ranges trace.sqlite
    """
    from specscope.analysis.sqlread import prefer_light_reader

    prefer_light_reader([trace])  # small exports: no pyarrow import (before pandas is imported)
    from specscope.analysis.loader import load
    from specscope.analysis.projection import nvtx_ranges
    from specscope.analysis.validate import validated

    t = load(trace)
    for note in validated(t):
        warn(note)
    if t.unclosed_ranges:
        warn(f"{t.unclosed_ranges} NVTX range(s) never closed were ignored")
    table = nvtx_ranges(t)
    if table.empty:
        click.echo(
            f"{trace}: no NVTX ranges (recorded without -t nvtx, or an unmodified program): "
            "`specscope graphs TRACE` finds steps from CUDA graph launches"
        )
        return
    emit(table.set_index("name"), fmt)


COMMANDS = (ranges,)
