"""The commands a report prints to reproduce itself (the "reproduce" block of report.html).

Given the options the user typed (``(--flag, value)`` pairs, from click's parameter sources;
defaults are left out, so the command stays short and follows later default changes):

- ``specscope report INPUT... --labels L1,L2 OPTIONS``;
- ``specscope compare INPUT... --labels L1,L2 OPTIONS-COMPARE-ALSO-HAS --format markdown
  --metrics all`` (every metric, as the page shows them);
- one ``# profiled in RUN_DIR: COMMAND`` line per input that is a run folder of
  ``specscope profile`` with the profiled command in its manifest.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence


def command_line(head: Sequence[str], options: Iterable[tuple[str, object]]) -> str:
    """``head`` followed by ``options``: a tuple value repeats its flag, True is the bare flag,
    None/False/() are left out; shell-quoted."""
    args = list(head)
    for flag, value in options:
        if value is None or value == () or value is False:
            continue
        if isinstance(value, tuple):
            for v in value:
                args += [flag, str(v)]
        elif value is True:
            args.append(flag)
        else:
            args += [flag, str(value)]
    return shlex.join(args)


def reproduce_commands(
    inputs: Sequence[str],
    labels: Sequence[str],
    given: Sequence[tuple[str, object]],
    compare_flags: Iterable[str],
    resolved: Sequence,
) -> list[str]:
    """The module doc's commands: ``given`` report options (``--out`` is moved last, to read
    like the commands of earlier versions); ``compare_flags`` the flags ``specscope compare``
    accepts too; ``resolved`` the inputs' :class:`~specscope.analysis.inputs.ResolvedInput`
    (their ``run_dir`` and ``manifest``)."""
    head = ["--labels", ",".join(labels)]
    given = sorted(given, key=lambda option: option[0] == "--out")  # stable
    shared = set(compare_flags)
    commands = [
        command_line(["specscope", "report", *inputs, *head], given),
        command_line(
            ["specscope", "compare", *inputs, *head], [(f, v) for f, v in given if f in shared]
        )
        + " --format markdown --metrics all",
    ]
    for r in resolved:
        if r.manifest and r.manifest.get("command"):
            cmd = r.manifest["command"]
            text = shlex.join(cmd) if isinstance(cmd, list) else str(cmd)
            commands.append(f"# profiled in {r.run_dir}: {text}")
    return commands
