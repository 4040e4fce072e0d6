"""Fuzz: seeded mutations of the real exports never end in a traceback or touch the input.

Each mutant is a copy of a fixture of ``tests/data`` with one damage: rows deleted, cells of a
column set to NULL / negative / huge / text, or a table dropped. Every mutant is analysed
through the library (``analyze`` with ``--totals``' :func:`summary.totals`) and must end in a
result whose metrics are within range or in a one-line SpecscopeError; a subset also goes
through ``python -m specscope analyze`` (exit 0 or 2, no traceback). The input file is
compared byte for byte afterwards, and no file may appear beside it. Bounded to about a minute
on 2 CPUs (``MUTANTS``, ``CLI_EVERY``); odd mutants are read with the sqlite3 reader, even ones
with ADBC.
"""

from __future__ import annotations

import collections
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

from damage import damaged_copy
from test_validate import _in_range
from testdata import DATA, ROOT

from specscope.analysis.auto import analyze_processes
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import load_preset
from specscope.analysis.summary import totals
from specscope.errors import SpecscopeError

SEED = 17
MUTANTS = 240
CLI_EVERY = 20  # every 20th mutant also through the CLI
FIXTURES = ["eagle_node_before.sqlite", "eagle_graph_before.sqlite", "cpu_eagle_2023.sqlite"]
TABLES = [
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
    "NVTX_EVENTS",
    "StringIds",
    "META_DATA_EXPORT",
    "ANALYSIS_DETAILS",
    "TARGET_INFO_GPU",
]
VALUES = ["NULL", "-1", "-9223372036854775807", "9223372036854775807", "'text'", "x'00ff'"]


def _mutation(rng: random.Random, path: Path) -> tuple[list[str], list[str], str]:
    """(tables to loosen, SQL, description) of one random damage of ``path``."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    have = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    table = rng.choice([t for t in TABLES if t in have])
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
    con.close()
    kind = rng.choice(["delete", "cells", "cells", "cells", "drop"])
    frac = rng.choice([0.01, 0.1, 0.5, 1.0])
    where = f"(rowid * {rng.randrange(1, 997)}) % 1000 < {int(frac * 1000)}"  # seeded rows
    if kind == "drop":
        return [], [f'DROP TABLE "{table}"'], f"drop {table}"
    if kind == "delete":
        return [], [f'DELETE FROM "{table}" WHERE {where}'], f"delete {frac:.0%} of {table}"
    col, value = rng.choice(cols), rng.choice(VALUES)
    sql = f'UPDATE "{table}" SET "{col}" = {value} WHERE {where}'
    return [table], [sql], f"{table}.{col} = {value} in {frac:.0%}"


def _library(path: Path, zero_config: bool = False) -> str:
    """The eagle preset with --skip 1, or (``zero_config``) no spec at all: every process, steps
    chosen by :mod:`specscope.analysis.auto`."""
    try:
        if zero_config:
            export = analyze_processes(path, None, AnalyzeOptions())
            for p in export.processes:
                _in_range(p.analysis.frame)
            trace = export.processes[0].analysis.trace
            totals(trace)
            trace.con.close()
            return "ok"
        a = analyze(path, load_preset("eagle"), AnalyzeOptions(skip=1))
        totals(a.trace)
        _in_range(a.frame)
        a.trace.con.close()
    except SpecscopeError as e:
        assert "\n" not in str(e), str(e)
        return "error"
    return "ok"


def _cli(path: Path, zero_config: bool = False) -> int:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    args = ["-m", "specscope", "analyze", str(path), "--totals"]
    if not zero_config:
        args += ["--preset", "eagle", "--skip", "1"]
    r = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    assert r.returncode in (0, 2), (r.returncode, r.stderr[-500:])
    return r.returncode


def test_fuzz_mutants_end_cleanly(tmp_path: Path, monkeypatch) -> None:
    rng = random.Random(SEED)
    outcomes: collections.Counter[str] = collections.Counter()
    changed = 0
    for i in range(MUTANTS):
        src = DATA / FIXTURES[i % len(FIXTURES)]
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        tables, sql, what = _mutation(rng, src)
        path = damaged_copy(src, folder / src.name, tables, *sql)
        before = path.read_bytes()
        monkeypatch.setenv("SPECSCOPE_SQLITE_READER", "sqlite3" if i % 2 else "adbc")
        try:
            outcomes[f"library {_library(path, zero_config=i % 3 == 0)}"] += 1
            if i % CLI_EVERY == 0:
                outcomes[f"cli exit {_cli(path, zero_config=i % (2 * CLI_EVERY) == 0)}"] += 1
        except AssertionError as e:
            raise AssertionError(f"mutant {i} ({src.name}: {what}): {e}") from None
        except Exception as e:
            raise AssertionError(f"mutant {i} ({src.name}: {what}): traceback {e!r}") from e
        changed += path.read_bytes() != before or len(list(folder.iterdir())) != 1
        path.unlink()
    print(f"\nfuzz: {MUTANTS} mutants, {dict(outcomes)}, tracebacks 0, inputs changed {changed}")
    assert changed == 0
