"""``bench/goal_sitting.sh``: a ``python`` that cannot import the analysis stops it at once."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from testdata import ROOT


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_a_python_without_the_analysis_is_a_one_line_error(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "python").write_text("#!/bin/sh\nexit 1\n")  # (imports nothing)
    (fake / "python").chmod(0o755)
    exports = tmp_path / "exports"
    exports.mkdir()
    p = subprocess.run(
        ["bash", str(ROOT / "bench" / "goal_sitting.sh"), str(exports)],
        capture_output=True,
        text=True,
        env={"PATH": f"{fake}:/usr/bin:/bin"},
        timeout=60,
    )
    assert p.returncode == 2
    assert p.stdout == ""  # (nothing measured, nothing recorded)
    (line,) = p.stderr.strip().splitlines()
    assert "cannot import specscope's analysis" in line and ".venv/bin/activate" in line
