"""``specscope graphs``: the CUDA graphs an export launched, their cycles and roles."""

from __future__ import annotations

import json
from pathlib import Path

import click

from specscope.cli import Command
from specscope.cli.options import format_option, table_text, warn
from specscope.errors import TraceError


@click.command("graphs", cls=Command)
@click.argument("trace", type=click.Path(path_type=Path))
@format_option("table", "json")
def graphs_cmd(trace: Path, fmt: str) -> None:
    """Per process and thread: every CUDA graph launched (id, launches, GPU us per launch,
    kernels per launch in node mode, creation time), the repeating launch cycles, the graph
    roles across batch-size buckets and an --anchors line that makes one step of each cycle.

    Example: specscope graphs trace.sqlite --format json
    """
    from specscope.analysis.opsread import prefetch
    from specscope.analysis.sqlread import prefer_light_reader

    # a large export's GPU operations read while pandas is imported, with the graph operations'
    # exec ids: the launches grouped from that read, not by SQL's GROUP BY over every node
    prefetch(trace, execs=True)
    prefer_light_reader([trace])  # small exports: no pyarrow import (before pandas is imported)
    from specscope.analysis.graphs import thread_graphs
    from specscope.analysis.loader import CaptureMode, load
    from specscope.analysis.validate import validated

    t = load(trace)
    t.graph_execs = True  # (read without the read ahead: the same)
    for note in validated(t):
        warn(note)
    threads = thread_graphs(t)
    if not threads:
        if t.capture_mode is CaptureMode.NO_CUDA or t.ops.empty:
            raise TraceError(f"{trace}: no GPU work in the export (recorded with -t cuda?)")
        if fmt == "json":
            click.echo(json.dumps({"trace": str(trace), "mode": t.capture_mode.value,
                                   "threads": []}))  # fmt: skip
        else:
            click.echo(f"{trace}: no CUDA graph launches (GPU work is eager only)")
        return
    if fmt == "json":
        data = {
            "trace": str(trace),
            "mode": t.capture_mode.value,
            "threads": [g.to_json() for g in threads],
        }
        click.echo(json.dumps(data))
        return
    click.echo(f"{trace}  capture mode {t.capture_mode.value}")
    for g in threads:
        click.echo(f"\npid {g.pid} tid {g.tid}: {len(g.graphs)} graph(s)")
        table = g.graphs.drop(columns="kernels_per_launch") if t.capture_mode.value == "graph" \
            else g.graphs  # fmt: skip
        click.echo(table_text(table))
        cycles = ", ".join(map(str, g.cycles)) or "none (no graph sequence repeats)"
        click.echo(f"cycles: {cycles}")
        for r in g.roles:
            ids = ", ".join(map(str, r.graph_ids))
            click.echo(f"role {r.number} (capture order; launch position {r.position}): {ids}")
        if g.anchors:
            click.echo(f"suggested: --anchors '{g.anchors}'")


COMMANDS = (graphs_cmd,)
