"""``bench/peak_where.py``: the stacks at a command's new memory highs, and its VmHWM."""

from __future__ import annotations

import os
import subprocess
import sys

from testdata import AFTER, ROOT


def test_each_high_names_its_specscope_lines_and_the_peak_follows(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "peak_where.py"), "--step", "1", "--last", "3",
         "analyze", str(AFTER), "--preset", "eagle"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stderr.splitlines()
    highs = [i for i, x in enumerate(lines) if x.startswith("== ") and x.endswith(" MiB")]
    assert 1 <= len(highs) <= 3
    assert lines[-1].startswith("VmHWM ") and int(lines[-1].split()[1]) >= int(
        lines[highs[-1]].split()[1]
    )
    frames = [x.strip() for x in lines[highs[0] + 1 : highs[1] if len(highs) > 1 else -1]]
    assert all(":" in f and not f.startswith("/") for f in frames)  # (paths in the package)
    assert run.stdout.startswith(str(AFTER))  # (the command's own output, as without it)


def test_the_commands_error_is_its_own(tmp_path):
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "peak_where.py"), "analyze",
         str(tmp_path / "missing.sqlite")],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert run.returncode == 2 and "missing.sqlite" in run.stderr
