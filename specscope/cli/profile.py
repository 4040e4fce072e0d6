"""``specscope profile``: a thin click command over :func:`specscope.profiler.profile.profile`."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import click

from specscope.cli import Command
from specscope.cli.options import say, warn
from specscope.profiler.flags import CAPTURE_RANGES, GRAPH_TRACE_MODES, ProfileFlags, parse_trace


def _echoer():
    """Echo nsys' and the command's output as it comes (multi-byte characters kept whole)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def echo(chunk: bytes) -> None:
        click.echo(decoder.decode(chunk), nl=False)

    return echo


@click.command(cls=Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--label", default=None, help="Name of the run (default: the program's name).")
@click.option("--out", "out", type=click.Path(path_type=Path), default=Path("runs"),
              show_default=True,
              help="Folder that receives the run folder <time>-<label>/.")  # fmt: skip
@click.option("--nsys", "nsys_path", default=None, metavar="PATH",
              help="nsys to use (default: $SPECSCOPE_NSYS, PATH, the usual install "
              "folders).")  # fmt: skip
@click.option("--trace", default="cuda,nvtx", show_default=True,
              help="nsys -t value; cuda is dropped on a machine without a GPU.")  # fmt: skip
@click.option("--graph-trace", type=click.Choice(GRAPH_TRACE_MODES), default="graph",
              show_default=True,
              help="--cuda-graph-trace mode: graph for gaps and idle; node only to see graph "
              "internals.")  # fmt: skip
@click.option("--trace-fork-before-exec", "fork_before_exec", type=bool, default=True,
              show_default=True,
              help="Also record the processes COMMAND starts (a server's TP ranks), into one "
              "export.")  # fmt: skip
@click.option("--capture-range", type=click.Choice(CAPTURE_RANGES),
              default="cudaProfilerApi", show_default=True,
              help="Record only between cudaProfilerStart/Stop, or all.")  # fmt: skip
@click.option("--analyze", "preset", default=None, metavar="PRESET",
              help="Analyse the export with this step preset (e.g. eagle) and store "
              "the results.")  # fmt: skip
@click.option("--db", type=click.Path(path_type=Path), default=None,
              help="Results database for --analyze (default: RUN/results.sqlite).")  # fmt: skip
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def profile(
    label: str | None,
    out: Path,
    nsys_path: str | None,
    trace: str,
    graph_trace: str,
    fork_before_exec: bool,
    capture_range: str,
    preset: str | None,
    db: Path | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND under nsys profile, export SQLite and write a manifest into a new run folder.

    Standard flags: -t cuda,nvtx -s none --cpuctxsw=none --cuda-graph-trace=graph
    --trace-fork-before-exec=true --capture-range=cudaProfilerApi --capture-range-end=stop.
    A command that fails keeps its exit status; Ctrl-C leaves a usable folder.

    Example: specscope profile --label base --analyze eagle -- python3 loop.py --steps 30
    """
    from specscope.analysis.targets import check_db_target, check_output_dir
    from specscope.profiler.profile import profile as run_profile

    check_output_dir(out, "--out")
    if db is not None:
        check_db_target(db)
    flags = ProfileFlags(
        trace=parse_trace(trace),
        graph_trace=graph_trace,
        capture_range=capture_range,
        fork_before_exec=fork_before_exec,
    )
    result = run_profile(
        list(command),
        label=label,
        out=out,
        nsys_path=nsys_path,
        flags=flags,
        analyze_preset=preset,
        db=db,
        echo=_echoer(),
        warn=warn,
    )
    m = result.manifest
    t = m["timings_s"]
    say(
        f"run folder {result.run_dir}  (mode {m['mode']}, nsys {m['nsys']['version']}, "
        f"record {t.get('record')} s, import {t.get('import')} s, export {t.get('export')} s)"
    )
    if result.export is not None:
        click.echo(str(result.export))
    if "analysis" in m:
        a = m["analysis"]
        analysis = json.loads((result.run_dir / a["json"]).read_text())
        say(
            f"analysed {a['steps']} steps with preset {a['preset']}; run {a['run_id']} in {a['db']}"
        )
        for metric, row in analysis["summary"].items():
            if row.get("p50") is not None:
                say(f"  {metric:<36} p50 {row['p50']:>12.1f} {row['unit']}")


COMMANDS = (profile,)
