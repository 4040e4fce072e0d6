"""``bench/bench_read_ahead.py``: when the read ahead is done, in a child process or on threads."""

from __future__ import annotations

import os

from testdata import AFTER, bench_module


def _bench():
    return bench_module("bench_read_ahead")


def test_each_way_is_timed_and_the_arrays_agree(capsys):
    assert _bench().main([str(AFTER), "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    for way in ("process", "threads", "alone"):
        assert f"{way:8s} reads taken: best" in out
    forked = "1/1" if hasattr(os, "memfd_create") else "0/1"
    assert "process  reads taken" in out and f"in a child process: {forked}" in out
    assert out.count("in a child process: 0/1") == (2 if forked == "1/1" else 3)
    assert "arrays: the same every way" in out


def test_ways_whose_arrays_differ_fail(capsys, monkeypatch):
    bench = _bench()
    real = bench.run_child

    def changed(export, way):
        out = real(export, way)
        return out | {"digest": "other"} if way == "alone" else out

    monkeypatch.setattr(bench, "run_child", changed)
    assert bench.main([str(AFTER), "--repeat", "1"]) == 1
    assert "DIFFER" in capsys.readouterr().out


def test_a_missing_export_is_one_error_line(capsys, tmp_path):
    assert _bench().main([str(tmp_path / "missing.sqlite")]) == 2
    assert capsys.readouterr().err.startswith("Error: ")
