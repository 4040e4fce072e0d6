"""``report.html`` in a real browser: headless Debian chromium over the DevTools protocol.

Every image must load (naturalWidth > 0), the comparison table must be there, and the page may
request nothing but files beside it. Under ``CI=true`` this test never skips: a missing chromium
or ``websockets`` fails it. The full-page screenshot is written next to the report.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from testdata import DATA, ROOT

from specscope.cli.report import report_cmd

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _browser_check():
    spec = importlib.util.spec_from_file_location(
        "browser_check", ROOT / "scripts/browser_check.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _requirements() -> str | None:
    """Why the test cannot run here, or None."""
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        return "no chromium on PATH (apt-get install chromium)"
    if importlib.util.find_spec("websockets") is None:
        return "websockets is not installed (the dev extra)"
    return None


def _need_browser() -> None:
    """Skip (fail under CI=true) when chromium or websockets is missing."""
    why = _requirements()
    if why is not None:
        if IN_CI:
            pytest.fail(f"CI=true and the browser test cannot run: {why}")
        pytest.skip(why)


def test_report_html_in_headless_chromium(tmp_path):
    _need_browser()
    out = tmp_path / "out"
    r = CliRunner().invoke(
        report_cmd,
        [
            str(DATA / "eagle_node_before.sqlite"),
            str(DATA / "eagle_node_after.sqlite"),
            "--skip", "1", "--min-steps", "5", "--out", str(out),
        ],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    (folder,) = out.iterdir()
    bc = _browser_check()
    shot = folder / "screenshot.png"
    data = bc.check(folder / "report.html", shot, bc.find_chromium())
    assert len(data["images"]) == 4
    for image in data["images"]:
        assert image["naturalWidth"] > 0, f"{image['src']} did not load"
        assert image["naturalWidth"] == 1600
    assert data["comparison_tables"] == 1 and data["comparison_rows"] > 5
    assert data["title"] == "specscope report: Before vs After"
    assert data["requests"], "the browser recorded no requests"
    assert all(u.startswith("file://") for u in data["requests"]), data["requests"]
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width == 1600 and height > 2000  # the whole page, not the first screen
    assert data["ok"]


def test_three_inputs_fit_1400_px(tmp_path):
    """The comparison tables of a three-input report fit a 1400 px window: the verdict column
    is not clipped and the page does not scroll sideways."""
    _need_browser()
    out = tmp_path / "out"
    inputs = [str(DATA / f"eagle_node_{s}.sqlite") for s in ("before", "after", "before")]
    r = CliRunner().invoke(
        report_cmd,
        [*inputs, "--skip", "1", "--min-steps", "5", "--out", str(out),
         "--labels", "ordinary_baseline,kpool_fused_variant,draft_alias_variant"],
    )  # fmt: skip
    assert r.exit_code == 0, r.stderr
    (folder,) = out.iterdir()
    bc = _browser_check()
    data = bc.check(folder / "report.html", folder / "shot.png", bc.find_chromium(), width=1400)
    assert data["comparison_tables"] == 2
    assert data["verdict_overflow_px"] <= 0, data["verdict_overflow_px"]
    assert data["overflow_px"] == 0
    assert data["ok"]


def _live_in_group(pgid: int) -> list[int]:
    """Processes of process group ``pgid`` that are not zombies (from /proc)."""
    live = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = (Path("/proc") / entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
            if int(fields[2]) == pgid and fields[0] != "Z":
                live.append(int(entry))
    return live


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_stopping_the_browser_ends_the_helpers_it_started():
    """A helper that outlives the browser process (as chromium's did, writing to the profile
    while it was removed) is ended with it: the whole process group goes."""
    proc = subprocess.Popen(["sh", "-c", "sleep 60 & sleep 60 & wait"], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(_live_in_group(proc.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_live_in_group(proc.pid)) == 3  # the shell and its two helpers
    _browser_check()._stop(proc, linger=3)
    assert _live_in_group(proc.pid) == []
