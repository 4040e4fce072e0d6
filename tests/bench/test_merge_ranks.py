"""bench/merge_ranks.py joins exports of bench/make_export.py as the ranks of one export."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
import testdata

make_export = testdata.bench_module("make_export")
merge_ranks = testdata.bench_module("merge_ranks")

GPU = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


def q(path, sql):
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("merge")
    paths = [folder / f"s{seed}.sqlite" for seed in (1, 2)]
    for seed, path in enumerate(paths, 1):
        make_export.generate(path, 2_000, seed=seed)
    return paths


def test_ranks_are_processes_on_their_own_devices(inputs, tmp_path):
    out = tmp_path / "ranks.sqlite"
    counts = merge_ranks.merge(out, inputs)
    for table, n in counts.items():
        if table in GPU or table in merge_ranks.PER_RANK:
            assert n == sum(q(p, f"SELECT count(*) FROM {table}")[0][0] for p in inputs), table
    pids = q(out, f"SELECT DISTINCT deviceId, globalPid >> 24 FROM {GPU[0]} ORDER BY 1")
    pid0 = q(inputs[0], f"SELECT DISTINCT globalPid >> 24 FROM {GPU[0]}")[0][0]
    assert pids == [(0, pid0), (1, pid0 + 1)]
    starts = [r[0] for r in q(out, f"SELECT start FROM {GPU[0]} ORDER BY rowid")]
    assert starts == sorted(starts)  # the ranks' rows interleaved in time
    assert q(out, "SELECT count(*) FROM TARGET_INFO_GPU")[0][0] == 2
    assert not list(tmp_path.glob("*.partial"))


def test_refuses_to_overwrite_and_different_strings(inputs, tmp_path):
    out = tmp_path / "ranks.sqlite"
    out.write_bytes(b"earlier run")
    with pytest.raises(FileExistsError):
        merge_ranks.merge(out, inputs)
    assert out.read_bytes() == b"earlier run"
    other = tmp_path / "other.sqlite"
    shutil.copy(inputs[1], other)
    con = sqlite3.connect(other)
    con.execute("UPDATE StringIds SET value = 'renamed' WHERE id = (SELECT min(id) FROM StringIds)")
    con.commit()
    con.close()
    with pytest.raises(ValueError, match="StringIds differ"):
        merge_ranks.merge(tmp_path / "x.sqlite", [inputs[0], other])
    assert not (tmp_path / "x.sqlite").exists() and not list(tmp_path.glob("*.partial"))
    assert merge_ranks.main([str(tmp_path / "y.sqlite"), str(tmp_path / "missing.sqlite")]) == 2
