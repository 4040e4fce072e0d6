"""Output targets are vetted before any analysis; inputs are never touched, WAL mode included."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from testdata import BEFORE

from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import load_preset
from specscope.analysis.store import append_run
from specscope.analysis.targets import check_db_target, check_output_dir, check_output_file
from specscope.errors import SpecscopeError


def test_db_target_accepts_new_empty_and_results_files(tmp_path: Path) -> None:
    check_db_target(tmp_path / "new.sqlite", [BEFORE])
    (tmp_path / "empty.sqlite").touch()
    check_db_target(tmp_path / "empty.sqlite", [BEFORE])
    sqlite3.connect(tmp_path / "blank.sqlite").close()  # SQLite, no tables yet
    check_db_target(tmp_path / "blank.sqlite")
    db = tmp_path / "results.sqlite"
    append_run(db, analyze(BEFORE, load_preset("eagle"), AnalyzeOptions(skip=1)))
    check_db_target(db, [BEFORE])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: BEFORE, "this is an input"),
        (lambda d: d, "is a folder"),
        (lambda d: d / "missing" / "r.sqlite", "no such folder"),
        (lambda d: (d / "t.txt").write_text("hello") and d / "t.txt", "not a SQLite file"),
    ],
)
def test_db_target_refusals(tmp_path: Path, make, message: str) -> None:
    with pytest.raises(SpecscopeError, match=message) as e:
        check_db_target(make(tmp_path), [BEFORE])
    assert "\n" not in str(e.value) and str(e.value).startswith("--db ")


def test_db_target_refuses_a_foreign_sqlite_file(tmp_path: Path) -> None:
    copy = tmp_path / "export.sqlite"
    copy.write_bytes(BEFORE.read_bytes())
    with pytest.raises(SpecscopeError, match="not a specscope results database"):
        check_db_target(copy)  # not given as an input: still never appended to


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_targets(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "r.sqlite").touch()
    os.chmod(locked / "r.sqlite", 0o444)
    with pytest.raises(SpecscopeError, match="not writable"):
        check_db_target(locked / "r.sqlite")
    os.chmod(locked, 0o555)
    try:
        with pytest.raises(SpecscopeError, match="cannot create files"):
            check_output_file(locked / "j.xml", "--junit")
        with pytest.raises(SpecscopeError, match="cannot write in"):
            check_output_dir(locked / "reports", "--out")
    finally:
        os.chmod(locked, 0o755)


def test_output_file_and_dir(tmp_path: Path) -> None:
    check_output_file(tmp_path / "j.xml", "--junit", [BEFORE])
    (tmp_path / "j.xml").write_text("<x/>")
    with pytest.raises(SpecscopeError, match="pass --force"):
        check_output_file(tmp_path / "j.xml", "--junit", overwrite=False)
    with pytest.raises(SpecscopeError, match="this is an input"):
        check_output_file(BEFORE, "--junit", [BEFORE])
    with pytest.raises(SpecscopeError, match="is a folder"):
        check_output_file(tmp_path, "--junit")
    check_output_dir(tmp_path / "a" / "b", "--out")
    with pytest.raises(SpecscopeError, match="is a file"):
        check_output_dir(tmp_path / "j.xml", "--out")
    with pytest.raises(SpecscopeError, match="cannot be created"):
        check_output_dir(tmp_path / "j.xml" / "sub", "--out")


@pytest.mark.parametrize("reader", ["adbc", "sqlite3"])
def test_wal_mode_input_is_left_alone(tmp_path: Path, reader: str, monkeypatch) -> None:
    monkeypatch.setenv("SPECSCOPE_SQLITE_READER", reader)
    wal = tmp_path / "wal.sqlite"
    wal.write_bytes(BEFORE.read_bytes())
    con = sqlite3.connect(wal)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    con.close()
    before = wal.read_bytes()
    a = analyze(wal, load_preset("eagle"), AnalyzeOptions(skip=1))
    assert a.n_steps == 11
    a.trace.con.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wal.sqlite"]
    assert wal.read_bytes() == before
