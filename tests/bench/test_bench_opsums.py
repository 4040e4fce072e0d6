"""``bench/bench_opsums.py``: each C loop timed against its numpy reference on one export."""

from __future__ import annotations

import re

import pytest
from testdata import DATA, bench_module

from specscope.analysis import native

ROW = re.compile(r"\d+\.\d / +\d+\.\d +\d+\.\d / +\d+\.\d +(yes|NO)$")


def _rows(capsys, export, preset: str) -> list[str]:
    if native.built(native.OPSUMS)[0] is None:
        pytest.skip("no C compiler here")
    bench_module("bench_opsums").main([str(export), "--preset", preset, "--repeat", "1"])
    out = capsys.readouterr().out.splitlines()
    rows = [x for x in out if ROW.search(x)]
    assert len(rows) >= 6 and all(x.endswith("yes") for x in rows), out
    return rows


@pytest.mark.parametrize("export", ["eagle_graph_before.sqlite", "real/two_procs.sqlite"])
def test_each_stage_is_timed_both_ways_and_agrees(capsys, native_cache, export):
    rows = _rows(capsys, DATA / export, "eagle" if "eagle" in export else "")
    assert not any(x.startswith("regrouping") for x in rows)  # (one device each)


def test_ranks_on_their_devices_are_regrouped_both_ways(capsys, native_cache, tmp_path):
    make_export, merge_ranks = bench_module("make_export"), bench_module("merge_ranks")
    ranks = [tmp_path / f"s{seed}.sqlite" for seed in (1, 2)]
    for seed, path in enumerate(ranks, 1):
        make_export.generate(path, 2_000, seed=seed)
    merge_ranks.merge(tmp_path / "ranks.sqlite", ranks)
    rows = _rows(capsys, tmp_path / "ranks.sqlite", "eagle")
    assert any(x.startswith("regrouping by device") for x in rows)
