"""The campaign matrix (a TOML file) and the ordered plan of runs it expands to.

A matrix names cells (batch size x context length x index_kpool), the variants of
``specscope run`` (the first is the baseline every other is compared against), the CUDA-graph
trace modes, repetitions, the ``specscope run`` flags of every run and the unprofiled runs::

    [campaign]
    name = "eagle"
    preset = "eagle"                    # step spec of the analysis
    variants = ["ordinary", "kpool_fused", "draft_alias"]
    modes = ["graph", "node"]           # --cuda-graph-trace of the profiled runs
    repetitions = 3
    skip = 1                            # steps dropped before analysis
    count_kernels = ["fused_metadata_copy"]

    [run]                               # `specscope run` flags (cells may override)
    steps = 30
    warmup = 10

    [unprofiled]                        # runs without nsys: step time, NVTX on vs off
    nvtx = ["on", "off"]
    repetitions = 1
    steps = 100

    [[cells]]
    bs = 1
    context = 8192
    index_kpool = 4

The plan is in priority order, cell by cell: a cell's unprofiled runs (they also warm the
Triton cache), then its profiled runs, repetition by repetition, each repetition every mode,
each mode every variant (so slow drift spreads over all variants alike). Run ids read
``CELL/MODE/VARIANT/rREP``, e.g. ``bs1-ctx8192-kp4/node/draft_alias/r2``; unprofiled runs use
the mode ``unprofiled-nvtx-on`` / ``unprofiled-nvtx-off``.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specscope.errors import SpecscopeError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MODES = ("node", "graph")
# `specscope run` flags a matrix may set ([run], [unprofiled] or a cell); value types checked.
RUN_FLAGS = {
    "bs": int,
    "context": int,
    "index_kpool": int,
    "steps": int,
    "warmup": int,
    "spec_steps": int,
    "accept_len": float,
    "accept_mode": str,
    "device": str,
    "hidden": int,
    "layers": int,
    "draft_layers": int,
    "vocab": int,
    "page_size": int,
    "index_topk": int,
    "seed": int,
    "max_new_tokens": int,
}
CELL_KEYS = ("bs", "context", "index_kpool")


class MatrixError(SpecscopeError):
    """The matrix file is missing, not TOML, or names something we cannot run."""


@dataclass(frozen=True)
class Cell:
    """One point of the matrix; ``flags`` are its ``specscope run`` flags beyond the [run] ones."""

    bs: int
    context: int
    index_kpool: int
    flags: tuple[tuple[str, object], ...] = ()

    @property
    def id(self) -> str:
        return f"bs{self.bs}-ctx{self.context}-kp{self.index_kpool}"


@dataclass(frozen=True)
class PlannedRun:
    """One run of the plan: profiled (``mode`` node/graph) or unprofiled."""

    cell: Cell
    variant: str
    mode: str  # node | graph | unprofiled-nvtx-on | unprofiled-nvtx-off
    rep: int
    run_args: tuple[str, ...]  # the `specscope run` arguments (no --json)

    @property
    def id(self) -> str:
        return f"{self.cell.id}/{self.mode}/{self.variant}/r{self.rep}"

    @property
    def profiled(self) -> bool:
        return self.mode in MODES

    @property
    def nvtx(self) -> bool:
        return self.mode != "unprofiled-nvtx-off"


@dataclass(frozen=True)
class Campaign:
    name: str
    preset: str
    variants: tuple[str, ...]
    modes: tuple[str, ...]
    repetitions: int
    skip: int
    count_kernels: tuple[str, ...]
    run: dict
    unprofiled: dict
    cells: tuple[Cell, ...]
    source: str = ""  # the TOML text, kept for provenance
    path: Path | None = field(default=None, compare=False)

    @property
    def baseline(self) -> str:
        return self.variants[0]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _check_flags(table: dict, where: str, allowed: Sequence[str] | None = None) -> dict:
    out = {}
    for key, value in table.items():
        if key not in RUN_FLAGS or (allowed is not None and key not in allowed):
            known = ", ".join(allowed if allowed is not None else RUN_FLAGS)
            raise MatrixError(f"{where}: unknown key {key!r} (known: {known})")
        want = RUN_FLAGS[key]
        ok = isinstance(value, (int, float)) if want is float else isinstance(value, want)
        if not ok or isinstance(value, bool):
            raise MatrixError(f"{where}: {key} must be a {want.__name__}, not {value!r}")
        out[key] = value
    return out


def _args(flags: dict) -> tuple[str, ...]:
    args: list[str] = []
    for key, value in flags.items():
        args += [_flag(key), str(value)]
    return tuple(args)


def parse_campaign(text: str, path: Path | None = None) -> Campaign:
    """The :class:`Campaign` of a matrix's TOML text; MatrixError (one line) if it is invalid."""
    where = str(path) if path else "matrix"
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise MatrixError(f"{where}: not valid TOML ({e})") from None
    head = data.get("campaign", {})
    variants = tuple(head.get("variants", ("ordinary", "kpool_fused", "draft_alias")))
    modes = tuple(head.get("modes", ("graph", "node")))
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise MatrixError(f"{where}: modes must be some of {', '.join(MODES)}, not {bad or modes}")
    if not variants or len(set(variants)) != len(variants):
        raise MatrixError(f"{where}: variants must be distinct and at least one")
    reps = head.get("repetitions", 3)
    if not isinstance(reps, int) or reps < 1:
        raise MatrixError(f"{where}: repetitions must be a positive integer")
    run = _check_flags(data.get("run", {}), f"{where} [run]")
    unprof = dict(data.get("unprofiled", {}))
    nvtx = tuple(unprof.pop("nvtx", ("on", "off")))
    if any(v not in ("on", "off") for v in nvtx):
        raise MatrixError(f"{where} [unprofiled]: nvtx must list 'on' and/or 'off'")
    unprof_reps = unprof.pop("repetitions", 1)
    if not isinstance(unprof_reps, int) or unprof_reps < 0:
        raise MatrixError(f"{where} [unprofiled]: repetitions must be >= 0")
    unprofiled = {
        "nvtx": nvtx,
        "repetitions": unprof_reps,
        "flags": _check_flags(unprof, f"{where} [unprofiled]"),
    }
    cells = []
    for i, cell in enumerate(data.get("cells", []), 1):
        flags = _check_flags(cell, f"{where} [[cells]] #{i}")
        missing = [k for k in CELL_KEYS if k not in flags and k not in run]
        if missing:
            raise MatrixError(f"{where} [[cells]] #{i}: missing {', '.join(missing)}")
        base = {**run, **flags}
        rest = tuple((k, v) for k, v in flags.items() if k not in CELL_KEYS)
        cells.append(Cell(base["bs"], base["context"], base["index_kpool"], rest))
    if not cells:
        raise MatrixError(f"{where}: no [[cells]]")
    ids = [c.id for c in cells]
    if len(set(ids)) != len(ids):
        raise MatrixError(f"{where}: two cells with the same bs/context/index_kpool")
    skip = head.get("skip", 1)
    if not isinstance(skip, int) or skip < 0:
        raise MatrixError(f"{where}: skip must be an integer >= 0")
    return Campaign(
        name=str(head.get("name", path.stem if path else "campaign")),
        preset=str(head.get("preset", "eagle")),
        variants=variants,
        modes=modes,
        repetitions=reps,
        skip=skip,
        count_kernels=tuple(head.get("count_kernels", ())),
        run=run,
        unprofiled=unprofiled,
        cells=tuple(cells),
        source=text,
        path=path,
    )


def load_campaign(path: str | Path) -> Campaign:
    """Read and parse a matrix file."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise MatrixError(f"cannot read the matrix {path}: {e.strerror}") from None
    return parse_campaign(text, path)


def _cell_flags(c: Campaign, cell: Cell, extra: dict | None = None) -> dict:
    flags = {**c.run, "bs": cell.bs, "context": cell.context, "index_kpool": cell.index_kpool}
    flags.update(dict(cell.flags))
    flags.update(extra or {})
    return flags


def plan(c: Campaign) -> list[PlannedRun]:
    """Every run of the campaign, in priority order (module docstring)."""
    runs = []
    for cell in c.cells:
        unprof = _cell_flags(c, cell, c.unprofiled["flags"])
        for rep in range(1, c.unprofiled["repetitions"] + 1):
            for nvtx in c.unprofiled["nvtx"]:
                for v in c.variants:
                    args = ("--variant", v, *_args(unprof), "--nvtx", nvtx)
                    runs.append(PlannedRun(cell, v, f"unprofiled-nvtx-{nvtx}", rep, args))
        prof = _cell_flags(c, cell)
        for rep in range(1, c.repetitions + 1):
            for mode in c.modes:
                for v in c.variants:
                    args = ("--variant", v, *_args(prof))
                    runs.append(PlannedRun(cell, v, mode, rep, args))
    return runs


def select(runs: Sequence[PlannedRun], patterns: Sequence[str]) -> list[PlannedRun]:
    """The runs whose id matches any of the shell-style ``patterns`` (all if none given)."""
    if not patterns:
        return list(runs)
    chosen = [r for r in runs if any(fnmatch.fnmatchcase(r.id, p) for p in patterns)]
    if not chosen:
        raise MatrixError(
            f"--only {' '.join(patterns)} matches no run; ids look like {runs[0].id}"
            if runs
            else "the plan is empty"
        )
    return chosen
