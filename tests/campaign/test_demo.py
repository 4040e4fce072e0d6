"""``specscope demo``: the bundled H200 examples analysed, compared and reported (no GPU, nsys)."""

from __future__ import annotations

import hashlib
import lzma
from pathlib import Path

import pytest
import sqlite_utils
from click.testing import CliRunner
from testdata import ROOT

from specscope.campaign import demo
from specscope.cli.demo import demo_cmd

EXAMPLES = ROOT / "examples"


def test_demo_prints_the_table_and_writes_a_new_report(tmp_path):
    r = CliRunner().invoke(demo_cmd, ["--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "| Metric | ordinary | kpool_fused | change | draft_alias | change |"
    assert any(line.startswith("| Gap: draft-extend → draft [graph] |") for line in lines)
    copies = "| fused_metadata_copy_kernel per step [graph] | 0 | 4 |"
    assert any(line.startswith(copies) for line in lines)
    assert "GPU NVIDIA H200" in r.stdout and "capture mode graph" in r.stdout
    html = Path(lines[-1])
    assert html.name == "report.html" and html.is_file() and html.parent.parent == tmp_path
    for name in ("timeline.png", "summary.md", "composition.png"):
        assert (html.parent / name).is_file()
    assert "fallback" not in r.output and "tests/data" not in r.output
    # the report explains the gap (specscope explain's text), in the page and in summary.md
    for name in ("report.html", "summary.md"):
        text = (html.parent / name).read_text()
        assert "Why (specscope explain)" in text
        assert "_fused_metadata_copy_kernel 0 → 4" in text  # ordinary → kpool_fused
        assert "draft.replay was launched" in text
    again = CliRunner().invoke(demo_cmd, ["--out", str(tmp_path)])
    assert again.exit_code == 0 and Path(again.stdout.strip().splitlines()[-1]) != html


def test_graph_examples_are_the_exports_their_manifests_recorded():
    """Each graph-mode export the demo compares, decompressed, is byte for byte the
    report.sqlite of its `specscope profile` run folder (manifest under examples/manifests/)."""
    import json

    for label, name in demo.EXAMPLES:
        path = EXAMPLES / "exports" / name
        assert path.stat().st_size <= 3 * 1024 * 1024
        manifest = json.loads((EXAMPLES / "manifests" / f"bs1-graph-{label}.json").read_text())
        sha = hashlib.sha256(lzma.decompress(path.read_bytes())).hexdigest()
        assert sha == manifest["outputs"]["report.sqlite"]["sha256"], name
        assert manifest["mode"] == "graph"
        assert "--cuda-graph-trace=graph" in manifest["nsys"]["args"]
        assert f"--variant {label}" in manifest["command_line"]


def test_examples_are_the_exports_in_the_results_database():
    """Each bundled node-mode export, decompressed, is byte for byte an export the campaign
    analysed."""
    db = sqlite_utils.Database(EXAMPLES / "results.sqlite")
    known = {r["sha256"]: r["trace"] for r in db["runs"].rows}
    for label, name in demo.NODE_EXAMPLES:
        path = EXAMPLES / "exports" / name
        assert path.stat().st_size <= 3 * 1024 * 1024
        sha = hashlib.sha256(lzma.decompress(path.read_bytes())).hexdigest()
        assert sha in known, name
        assert "/node/" in known[sha] and f"-{label}-r1/" in known[sha]
    modes = {r["mode"] for r in db["campaign_runs"].rows}
    assert {"graph", "node", "unprofiled-nvtx-on", "unprofiled-nvtx-off"} <= modes


def test_without_examples_the_test_fixtures_are_used(tmp_path, monkeypatch):
    data = tmp_path / "tests" / "data"
    data.mkdir(parents=True)
    for _, name in demo.FALLBACK:
        (data / name).symlink_to(ROOT / "tests" / "data" / name)
    monkeypatch.setattr(demo, "REPO", tmp_path)
    r = CliRunner().invoke(demo_cmd, ["--out", str(tmp_path / "reports")])
    assert r.exit_code == 0, r.output
    assert "using the test fixtures" in r.output
    assert r.stdout.startswith("| Metric | before | after | change |")


@pytest.mark.parametrize("make", ["empty", "corrupt"])
def test_bad_examples_folder_is_one_line_error(tmp_path, make):
    folder = tmp_path / "ex"
    (folder / "exports").mkdir(parents=True)
    if make == "corrupt":
        for _, name in demo.EXAMPLES:
            (folder / "exports" / name).write_bytes(b"not xz")
    r = CliRunner().invoke(demo_cmd, ["--out", str(tmp_path), "--examples", str(folder)])
    assert r.exit_code == 2 and "Error:" in r.output and "Traceback" not in r.output
