"""End to end with a real nsys on the CPU: profile, export, analyse with the eagle preset.

Profiles ``scripts/cpu_fixture_program.py`` (the NVTX shape of the EAGLE loop, no CUDA) with the
nsys found by discovery (``SPECSCOPE_NSYS``, PATH, the install_nsys.sh prefix, ...). With
``CI=true`` these tests must run: a missing nsys, or an ``nvtx`` that this nsys records no ranges
from, fails them. Elsewhere they skip with the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from testdata import ROOT

from specscope.analysis.loader import load
from specscope.cli.doctor import doctor
from specscope.cli.profile import profile
from specscope.profiler import compat, discover
from specscope.profiler.errors import ProfilerError

PROGRAM = ROOT / "scripts" / "cpu_fixture_program.py"
PHASES = (
    "draft.prepare",
    "draft.replay",
    "verify.prepare",
    "verify.replay",
    "accept",
    "draft_extend.prepare",
    "draft_extend.replay",
)
STEPS, WARMUP = 6, 2  # the program adds 2 warm-up steps, recorded like the others


def _unavailable(reason: str):
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: the real nsys end-to-end test must run, but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def nsys() -> discover.Nsys:
    try:
        found = discover.find_nsys()
        discover.check_exports_sqlite(found)
    except ProfilerError as e:
        _unavailable(str(e))
    nvtx = compat.package_version("nvtx")
    if nvtx is None:
        _unavailable("the nvtx package is not installed (pip install 'nvtx==0.2.11')")
    warning = compat.nvtx_warning(found, nvtx)
    if warning:
        _unavailable(warning)
    return found


def _check_run(run_dir: Path) -> None:
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["status"] == "ok" and m["exit_status"] == 0
    assert m["flags"]["trace"] == ["nvtx"] and m["mode"] == "no-cuda"
    assert {"report.nsys-rep", "report.sqlite", "command.log"} <= set(m["outputs"])
    trace = load(run_dir / "report.sqlite")
    counts = trace.nvtx[trace.nvtx["domain"] == "specscope"]["name"].value_counts()
    assert counts["step"] == STEPS + WARMUP
    for phase in PHASES:
        assert counts[phase] == STEPS + WARMUP, phase


def test_profile_export_analyze_eagle(nsys, tmp_path):
    args = ["--label", "e2e", "--out", str(tmp_path), "--nsys", str(nsys.path)]
    args += ["--trace", "nvtx", "--capture-range", "none", "--analyze", "eagle"]
    r = CliRunner().invoke(profile, [*args, "--", sys.executable, str(PROGRAM), "--steps", "6"])
    assert r.exit_code == 0, r.output
    (run_dir,) = tmp_path.glob("*-e2e")
    _check_run(run_dir)
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["nsys"]["path"] == str(nsys.path) and m["nsys"]["version"] == nsys.version
    assert m["analysis"]["steps"] == STEPS + WARMUP
    analysis = json.loads((run_dir / "analysis.json").read_text())
    assert analysis["steps"] == STEPS + WARMUP and analysis["capture_mode"] == "no-cuda"
    for phase in PHASES:
        entry = analysis["summary"][f"cpu_us:{phase}"]
        assert entry["n"] == STEPS + WARMUP and entry["p50"] > 0, phase
    import sqlite_utils

    db = sqlite_utils.Database(run_dir / "results.sqlite")
    assert [r["steps"] for r in db["runs"].rows] == [STEPS + WARMUP]


def test_shell_wrapper(nsys, tmp_path):
    env = {**os.environ, "PYTHON": sys.executable, "SPECSCOPE_NSYS": str(nsys.path)}
    out = subprocess.run(
        [str(ROOT / "scripts" / "nsys_profile.sh"), "sh", "--out", str(tmp_path), "--trace",
         "nvtx", "--capture-range", "none", "--", sys.executable, str(PROGRAM), "--steps", "6"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (run_dir,) = tmp_path.glob("*-sh")
    _check_run(run_dir)


def test_doctor_with_real_nsys(nsys, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_NSYS", str(nsys.path))
    r = CliRunner().invoke(doctor, [])
    assert r.exit_code == 0, r.output
    lines = {line.split()[1]: line for line in r.output.splitlines()}
    for name in ("nsys", "sqlite", "importer", "nvtx", "export"):
        assert lines[name].startswith("ok"), lines[name]
    assert "read back 3 NVTX ranges" in lines["export"]


def test_profile_the_eagle_loop(nsys, tmp_path):
    """`specscope run` on the CPU (eager, ordinary metadata path) under real nsys: every phase of
    every step is in the export and the eagle preset finds the steps."""
    pytest.importorskip("torch")
    loop = [sys.executable, "-m", "specscope", "run", "--device", "cpu", "--no-graphs"]
    loop += ["--variant", "ordinary", "--bs", "1", "--steps", "4", "--warmup", "1"]
    loop += ["--context", "512", "--hidden", "64", "--layers", "1", "--index-topk", "128"]
    args = ["--label", "loop", "--out", str(tmp_path), "--nsys", str(nsys.path)]
    args += ["--trace", "nvtx", "--capture-range", "none", "--analyze", "eagle"]
    r = CliRunner().invoke(profile, [*args, "--", *loop])
    assert r.exit_code == 0, r.output
    (run_dir,) = tmp_path.glob("*-loop")
    analysis = json.loads((run_dir / "analysis.json").read_text())
    assert analysis["steps"] == 5  # 1 warm-up + 4 measured: no capture range on the CPU
    for phase in PHASES:
        assert analysis["summary"][f"cpu_us:{phase}"]["p50"] > 0, phase
    for pair in ("draft_extend.replay->draft.replay", "draft.replay->verify.replay"):
        assert analysis["summary"][f"cpu_gap_us:{pair}"]["n"] >= 4, pair
