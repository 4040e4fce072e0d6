"""The standard ``nsys profile`` flags and how overrides and a GPU-less machine change them.

Standard (each overridable)::

    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --cuda-graph-trace=graph \\
        --trace-fork-before-exec=true --capture-range=cudaProfilerApi --capture-range-end=stop \\
        -o OUT COMMAND...

- ``-s none --cpuctxsw=none``: no CPU sampling (a 20-step program made a 2 GB ``.qdstrm`` with it);
- ``--cuda-graph-trace=graph``: one row per graph replay: the mode whose gaps and idle are right
  (``node`` makes every kernel of a replayed graph its own row, and inflates the host's
  ``cudaGraphLaunch`` 3-5x: use it only where the graph's insides are needed);
- ``--trace-fork-before-exec=true``: a server's worker processes (one per TP rank) are recorded
  too, into the same export;
- ``--capture-range=cudaProfilerApi``: record only between ``cudaProfilerStart``/``Stop``
  (``torch.cuda.profiler.start()``/``stop()``), keeping warm-up and graph capture out.

Without a GPU, ``cuda`` is dropped from ``-t``, and with it ``--cuda-graph-trace`` and the
``cudaProfilerApi`` capture range (nothing would ever open it); :func:`nsys_profile_args` says so
in its notes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

GRAPH_TRACE_MODES = ("node", "graph")
CAPTURE_RANGES = ("cudaProfilerApi", "none")


@dataclass(frozen=True)
class ProfileFlags:
    """What ``specscope profile`` asks nsys to record."""

    trace: tuple[str, ...] = ("cuda", "nvtx")
    graph_trace: str = "graph"
    capture_range: str = "cudaProfilerApi"
    fork_before_exec: bool = True
    sample: str = "none"
    cpuctxsw: str = "none"

    def for_machine(self, has_gpu: bool) -> tuple[ProfileFlags, list[str]]:
        """These flags as they apply on this machine, and a note for each thing dropped."""
        if has_gpu or "cuda" not in self.trace:
            return self, []
        trace = tuple(t for t in self.trace if t != "cuda") or ("nvtx",)
        notes = [f"no GPU found: tracing {','.join(trace)} only (dropped cuda from -t)"]
        flags = replace(self, trace=trace)
        if self.capture_range == "cudaProfilerApi":
            flags = replace(flags, capture_range="none")
            notes.append("no GPU found: recording the whole run (--capture-range=none)")
        return flags, notes

    @property
    def traces_cuda(self) -> bool:
        return "cuda" in self.trace

    @property
    def mode(self) -> str:
        """The CUDA-graph trace mode as recorded: node, graph, or no-cuda."""
        return self.graph_trace if self.traces_cuda else "no-cuda"


def parse_trace(value: str) -> tuple[str, ...]:
    """``"cuda, nvtx"`` -> ``("cuda", "nvtx")``."""
    return tuple(t.strip() for t in value.split(",") if t.strip())


def nsys_profile_args(flags: ProfileFlags, output: Path) -> list[str]:
    """The arguments after ``nsys``: ``profile ... -o OUTPUT`` (no command)."""
    args = [
        "profile",
        "-t",
        ",".join(flags.trace),
        "-s",
        flags.sample,
        f"--cpuctxsw={flags.cpuctxsw}",
    ]
    if flags.traces_cuda:
        args.append(f"--cuda-graph-trace={flags.graph_trace}")
    args.append(f"--trace-fork-before-exec={str(flags.fork_before_exec).lower()}")
    if flags.capture_range != "none":
        args += [f"--capture-range={flags.capture_range}", "--capture-range-end=stop"]
    args += ["--force-overwrite=false", "-o", str(output)]
    return args


def nsys_export_args(report: Path, output: Path) -> list[str]:
    """The arguments after ``nsys`` that export ``report`` to the SQLite file ``output``."""
    return ["export", "--type", "sqlite", "--force-overwrite=false", "-o", str(output), str(report)]
