"""The rows of an export in another order: the same outputs.

nsys 2025.6's release notes say its exports no longer keep rows in any order, timestamps
included. A copy of a real export with every table's rows in a random order (seeded; the rows
of a table keyed by an ``INTEGER PRIMARY KEY`` stay in key order, as SQLite stores them) must be
analysed, explained and compared as the export itself, to the last digit: per-step sums are
made in whole ns (exact in any order) and ties between equal values ordered by name.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from damage import shuffled_copy
from testdata import DATA

from specscope.cli import cli

EXPORTS = [
    "eagle_node_before",  # the preset's NVTX steps, node mode
    "graphs/run_graph_kpool_nvtx",  # graph mode
    "graphs/eager_nonvtx",  # an eager kernel pattern
    "real/two_procs",  # two processes in one export
    "real/hf_static",  # a compiled model's graphs; explain's breakdown has ties
    "real/emit_nvtx",  # hundreds of nested ranges summed per step
    "real/pytorch_functions",
    "real/unified_memory",
    "real/nsys2023_mixed_graph",  # a capture that lost its graph replays
]


def _outputs(path: Path) -> list[str]:
    """The JSON of analyze, explain and compare (the export against itself), path taken out."""
    runs = [
        ["analyze", str(path), "--format", "json"],
        ["explain", str(path), "--format", "json"],
        ["compare", str(path), str(path), "--format", "json"],
    ]
    out = []
    for args in runs:
        r = CliRunner().invoke(cli, args)
        assert r.exit_code == 0 and "Traceback" not in r.output, (args, r.output[-2000:])
        out.append(r.stdout.replace(str(path), "TRACE"))
    return out


@pytest.mark.parametrize("name", EXPORTS)
def test_an_export_with_its_rows_in_another_order_reads_the_same(name, tmp_path):
    src = DATA / f"{name}.sqlite"
    copy = shuffled_copy(src, tmp_path / "shuffled.sqlite", seed=len(name))
    con = sqlite3.connect(copy)
    try:  # (the copy's rows are in another order: the test tests something)
        rows = con.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid")
        starts = [r[0] for r in rows]
    finally:
        con.close()
    assert starts != sorted(starts)
    assert _outputs(copy) == _outputs(src)


def test_each_process_calls_are_put_in_id_order_in_place():
    """:func:`.callrows.calls_in_id_order`: each process' stretch sorted by correlation id,
    the rows' columns moved together, two calls of one id in the order they had, a column of
    one value left as it is and a read-only column sorted in a copy; a stretch in order is not
    touched."""
    from specscope.analysis.callrows import calls_in_id_order

    rng = np.random.default_rng(5)
    n = 3000
    corr = np.r_[rng.permutation(np.arange(1, 2001) * 3), np.arange(1, 1001)].astype(np.int32)
    corr[[10, 20]] = corr[30]  # (an id three times, in the first process)
    start = np.arange(n, dtype=np.int64) * 1000
    dur = rng.integers(1, 500, n).astype(np.uint32)
    gtid = np.broadcast_to(np.int64(7 << 24 | 7), (n,))  # (one value: stride 0)
    name = rng.integers(0, 9, n).astype(np.int16)
    name.flags.writeable = False
    calls = [start.copy(), dur.copy(), gtid, corr.copy(), name]
    second = calls[0][2000:]
    got = calls_in_id_order(calls, {7: slice(0, 2000), 8: slice(2000, n)})
    order = np.argsort(corr[:2000], kind="stable")
    assert np.array_equal(got[3][:2000], corr[:2000][order])
    for k, column in ((0, start), (1, dur), (4, name)):
        assert np.array_equal(got[k][:2000], column[:2000][order])
        assert np.array_equal(got[k][2000:], column[2000:])
    assert got[2] is gtid and got[0][2000:].base is second.base  # (in place)
    assert got[4] is not name and not name.flags.writeable
    tied = np.flatnonzero(got[3] == corr[30])
    assert list(got[0][tied]) == sorted(start[[10, 20, 30]])  # (their order kept)


@pytest.mark.parametrize(
    "ids",
    [
        np.array([5, -3, 5, 0, -3, 5], dtype=np.int32),  # (ties, negatives: damaged ids)
        np.arange(100_000)[::-1] % 977,
        np.array([2**40, 3, 2**40, 1]),  # (beyond 32 bits: numpy's stable argsort)
        np.array([], dtype=np.int32),
    ],
)
def test_the_calls_sort_is_numpys_stable_argsort(ids):
    from specscope.analysis.callrows import _stable_order

    assert np.array_equal(_stable_order(ids), np.argsort(ids, kind="stable"))
