"""``bench/shuffle_rows.py``: a copy of an export with its rows in another order; bad input
gets one line and exit 2, nothing written, the input untouched."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys

from testdata import BEFORE, ROOT

SCRIPT = ROOT / "bench" / "shuffle_rows.py"


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_copy_holds_the_same_rows_in_another_order(tmp_path):
    before = _digest(BEFORE)
    out = tmp_path / "shuffled.sqlite"
    r = _run(BEFORE, out, "--seed", "3")
    assert r.returncode == 0, r.stderr
    assert _digest(BEFORE) == before  # (the input untouched)
    query = "SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL"
    old, new = sqlite3.connect(BEFORE), sqlite3.connect(out)
    try:
        assert sorted(old.execute(query).fetchall()) == sorted(new.execute(query).fetchall())
        assert new.execute(query).fetchall() != old.execute(query).fetchall()
    finally:
        old.close()
        new.close()


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(BEFORE.read_bytes()[:20_000])
    existing = tmp_path / "exists.sqlite"
    existing.write_bytes(b"x")
    cases = [
        (tmp_path / "missing.sqlite", tmp_path / "a.sqlite", "is not an SQLite file"),
        (ROOT / "README.md", tmp_path / "b.sqlite", "is not an SQLite file"),
        (damaged, tmp_path / "c.sqlite", "give an undamaged nsys export"),
        (BEFORE, existing, "exists; give a new path"),
    ]
    for src, dst, says in cases:
        r = _run(src, dst)
        assert r.returncode == 2 and says in r.stderr, (src, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        assert dst == existing or not dst.exists()  # (nothing written)
    assert existing.read_bytes() == b"x"
