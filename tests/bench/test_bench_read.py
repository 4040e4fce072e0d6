"""``bench/bench_read.py``: the reads of an export by page scan and by SQL, timed and compared."""

from __future__ import annotations

import shutil
import sqlite3

from testdata import AFTER, bench_module


def _bench():
    return bench_module("bench_read")


def test_every_read_is_timed_and_the_readers_agree(capsys):
    assert _bench().main([str(AFTER), "--readers", "pages,numpy,sqlite3", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for reader in ("pages", "numpy", "sqlite3"):
        assert f"{reader:8s} peak RSS" in out
    assert out.count("  ops ") == out.count("  api ") == 3
    assert "arrays: the same for every reader" in out


def test_readers_that_differ_fail(capsys, tmp_path, monkeypatch):
    """A stand-in reader whose arrays differ (one op's start changed under its child)."""
    bench = _bench()
    real = bench.run_child

    def shifted(export, reader):
        if reader != "sqlite3":
            return real(export, reader)
        copy = tmp_path / "changed.sqlite"
        shutil.copy(export, copy)
        with sqlite3.connect(copy) as con:
            con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + 1 WHERE rowid = 1")
        return real(copy, reader)

    monkeypatch.setattr(bench, "run_child", shifted)
    assert bench.main([str(AFTER), "--readers", "pages,sqlite3", "--repeat", "1"]) == 1
    assert "DIFFER" in capsys.readouterr().out


def test_a_missing_export_is_one_error_line(capsys, tmp_path):
    assert _bench().main([str(tmp_path / "missing.sqlite")]) == 2
    assert capsys.readouterr().err.startswith("Error: ")
