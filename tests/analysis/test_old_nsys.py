"""Exports of nsys 2024.2, 2022.4 and 2020.4 (``tests/data/old_nsys``: the CPU fixture program's
NVTX ranges, as ``cpu_eagle_2023.sqlite`` holds them from 2023.4): read and analysed alike."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from testdata import DATA

from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import load_preset
from specscope.cli import cli

OLD = DATA / "old_nsys"
VERSIONS = {
    "cpu_eagle_2024.sqlite": "2024.2.3.38",
    "cpu_eagle_2022.sqlite": "2022.4.2.1",
    "cpu_eagle_2020.sqlite": "unknown",
}
PHASES_US = {  # the busy-wait of each phase in scripts/cpu_fixture_program.py
    "draft.prepare": 200, "draft.replay": 600, "verify.prepare": 300, "verify.replay": 800,
    "accept": 150, "draft_extend.prepare": 250, "draft_extend.replay": 500,
}  # fmt: skip


@pytest.mark.parametrize("name", list(VERSIONS))
def test_an_old_export_is_analysed_as_the_2023_one(name):
    """The ten steps, each phase's host time at its busy-wait (within 10 %), the same metrics
    as the 2023.4 export of the same program; the nsys version as the export gives it."""
    eagle = load_preset("eagle")
    a = analyze(OLD / name, eagle, AnalyzeOptions())
    ref = analyze(DATA / "cpu_eagle_2023.sqlite", eagle, AnalyzeOptions())
    assert a.nsys_version == VERSIONS[name] and a.capture_mode == "no-cuda"
    assert a.n_steps == ref.n_steps == 10
    assert list(a.frame.columns) == list(ref.frame.columns)
    for phase, us in PHASES_US.items():
        assert abs(a.frame[f"cpu_us:{phase}"].median() - us) < 0.1 * us, phase
    assert a.frame["cpu_step_us"].median() > sum(PHASES_US.values())


@pytest.mark.parametrize("command", ["ranges", "compare", "report"])
def test_every_command_reads_both(command, tmp_path):
    """``ranges`` of one, ``compare`` and ``report`` of the oldest two: exit 0, no traceback."""
    paths = [str(OLD / n) for n in list(VERSIONS)[-2:]]
    args = {"ranges": [paths[0]], "compare": paths, "report": [*paths, "--out", str(tmp_path)]}
    r = CliRunner().invoke(cli, [command, *args[command]])
    assert r.exit_code == 0, r.output
    assert "Traceback" not in r.output
    if command == "ranges":
        assert "draft_extend.replay" in r.output
