"""Exports whose times ``nsys export --ts-normalize``/``--ts-shift`` moved
(:mod:`specscope.analysis.timeshift`): the same analysis as the plain export of the report.

The real pair: ``tests/data/real/two_procs.sqlite`` and ``two_procs_normalized.sqlite``, one report
exported twice by nsys 2025.3.1 (``scripts/real/sweep.sh``). Every other committed export is
shifted here the way nsys shifts one (every ``start``/``end``, ``EXPORT_CONFIG_TIME_SHIFT`` set)
and must analyse as its original does, zero-config and ``--totals``.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing

import numpy as np
import pytest
import testdata
from click.testing import CliRunner

from specscope.analysis.loader import load
from specscope.analysis.sqlread import NULL_INT
from specscope.analysis.timeshift import export_time_shift, unshift
from specscope.cli import cli

REAL = testdata.DATA / "real"
EPOCH_SHIFT = 1_796_198_901_091_852_671  # a session's start as nsys --ts-normalize adds it


def test_shift_from_the_export_metadata():
    assert export_time_shift({}) == 0
    assert export_time_shift({"EXPORT_CONFIG_TIME_SHIFT": "0"}) == 0
    assert export_time_shift({"EXPORT_CONFIG_TIME_SHIFT": str(EPOCH_SHIFT)}) == EPOCH_SHIFT
    assert export_time_shift({"EXPORT_CONFIG_TIME_SHIFT": "-5"}) == -5
    assert export_time_shift({"EXPORT_CONFIG_TIME_SHIFT": "soon"}) == 0  # unreadable: none
    assert export_time_shift({"EXPORT_CONFIG_TIME_SHIFT": str(1 << 63)}) == 0  # no time


def test_unshift_keeps_missing_times_and_read_only_inputs():
    values = np.array([EPOCH_SHIFT + 5, NULL_INT, EPOCH_SHIFT], dtype=np.int64)
    frozen = values.copy()
    frozen.flags.writeable = False
    out = unshift(frozen, EPOCH_SHIFT)
    assert out.tolist() == [5, NULL_INT, 0]
    assert frozen.tolist() == values.tolist()  # a read-only input is left as it was
    assert unshift(values, EPOCH_SHIFT) is values and values.tolist() == [5, NULL_INT, 0]
    assert unshift(values, 0) is values


def _shifted_copy(src, dst, shift: int):
    """``src`` as ``nsys export --ts-shift=shift`` would have written it."""
    shutil.copyfile(src, dst)
    with sqlite3.connect(dst) as con:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            cols = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
            times = [c for c in ("start", "end", "startTime", "stopTime") if c in cols]
            if times:
                sets = ", ".join(f'"{c}" = "{c}" + {shift}' for c in times)
                con.execute(f"UPDATE {table} SET {sets}")
        for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
            if table in tables:
                con.execute(f"DELETE FROM {table} WHERE name = 'EXPORT_CONFIG_TIME_SHIFT'")
                con.execute(
                    f"INSERT INTO {table} (name, value) VALUES ('EXPORT_CONFIG_TIME_SHIFT', ?)",
                    (str(shift),),
                )
    return dst


def _outputs(path) -> tuple[dict, str]:
    """Zero-config JSON (the file's name taken out) and ``--totals`` text of ``path``."""
    runner = CliRunner()
    analysed = runner.invoke(cli, ["analyze", str(path), "--format", "json"])
    totals = runner.invoke(cli, ["analyze", str(path), "--totals"])
    assert analysed.exit_code == 0 and totals.exit_code == 0, (analysed.output, totals.output)
    data = json.loads(analysed.stdout)
    return _without_names(data, path), _named(totals.stdout, path)


def _named(text: str, path) -> str:
    return text.replace(str(path), "TRACE").replace(path.name, "TRACE")


def _without_names(data, path):
    if isinstance(data, dict):
        return {k: _without_names(v, path) for k, v in data.items()}
    if isinstance(data, list):
        return [_without_names(v, path) for v in data]
    return _named(data, path) if isinstance(data, str) else data


EXPORTS = sorted(p for p in testdata.DATA.rglob("*.sqlite") if "normalized" not in p.name)


@pytest.mark.parametrize("export", EXPORTS, ids=lambda p: p.relative_to(testdata.DATA).as_posix())
def test_a_shifted_export_analyses_as_its_original(export, tmp_path):
    with closing(sqlite3.connect(f"file:{export}?mode=ro", uri=True)) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
    if not tables & {"META_DATA_EXPORT", "EXPORT_META_DATA"}:
        pytest.skip("no metadata table (nsys 2020.4 writes none): no shift to record")
    shifted = _shifted_copy(export, tmp_path / export.name, EPOCH_SHIFT)
    assert load(shifted).time_shift == EPOCH_SHIFT
    assert _outputs(shifted) == _outputs(export)


def test_the_real_normalized_export_analyses_as_the_plain_one(tmp_path):
    plain, normalized = REAL / "two_procs.sqlite", REAL / "two_procs_normalized.sqlite"
    trace = load(normalized)
    assert trace.time_shift > 1 << 60  # nsys wrote epoch times
    # (names differ: the plain one's copied under the normalized one's name)
    same_name = tmp_path / normalized.name
    shutil.copyfile(plain, same_name)
    assert _outputs(normalized) == _outputs(same_name)
    nvtx, ops = trace.nvtx, trace.ops
    assert len(ops) and len(nvtx) and ops["start_ns"].max() < 10**11  # session time again


def test_a_shifted_export_is_explained_as_its_original(tmp_path):
    """``explain`` reads the OS runtime calls of the gap's window alone, by SQL on the export's
    own clock: a shifted export (``-t osrt``) tells the same calls."""
    export = REAL / "overlap_thread.sqlite"
    shifted = _shifted_copy(export, tmp_path / export.name, EPOCH_SHIFT)
    told = []
    for path in (export, shifted):
        r = CliRunner().invoke(cli, ["explain", str(path)])
        assert r.exit_code == 0, r.output
        told.append(_named(r.stdout, path))
    assert told[0] == told[1] and "in OS runtime calls" in told[0]
