"""``bench/bench_trees.py``: two source trees timed on one export, alternating."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from testdata import AFTER, ROOT, bench_module


def test_each_tree_is_timed_with_its_peak_rss(capsys, tmp_path):
    other = tmp_path / "same_tree"
    other.symlink_to(ROOT)  # (a second tree: this one again)
    bench_module("bench_trees").main([str(AFTER), str(ROOT), str(other), "--rounds", "1"])
    out = capsys.readouterr().out.splitlines()
    lines = [x for x in out if x.startswith((f"{ROOT}:", f"{other}:"))]
    assert len(lines) == 2
    for line in lines:
        rss = re.search(r"peak RSS (\d+) MiB", line)
        assert rss and 20 < int(rss.group(1)) < 4096, line
        assert re.search(r"wall best \d+\.\d\d s, median \d+\.\d\d s", line)


def test_a_tree_whose_analyze_fails_stops_it(tmp_path):
    (tmp_path / "specscope").mkdir()
    (tmp_path / "specscope" / "__init__.py").write_text("raise SystemExit(3)\n")
    with pytest.raises(SystemExit, match="analyze exited"):
        bench_module("bench_trees").main([str(AFTER), str(tmp_path), str(ROOT), "--rounds", "1"])


def test_a_report_of_two_exports_is_timed_into_a_folder_removed_after(capsys, tmp_path):
    from testdata import BEFORE

    other = tmp_path / "same_tree"
    other.symlink_to(ROOT)

    def folders() -> set[Path]:
        return set(Path(tempfile.gettempdir()).glob("bench_trees_*"))

    before = folders()
    bench_module("bench_trees").main(
        [str(BEFORE), str(ROOT), str(other), "--rounds", "1", "--command", "report",
         "--with", str(AFTER), "--", "--preset", "eagle"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert f"report {AFTER.name} --preset eagle" in out
    assert len(re.findall(r"wall best \d+\.\d\d s", out)) == 2
    assert folders() == before  # (each run's --out folder removed after it)
