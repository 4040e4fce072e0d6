"""``report`` sheds each input's operations once its median-step view and gap story are made
(issue 19: two 20 M exports held 3.2 GiB at once): the same report as with every input whole."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner
from testdata import AFTER, BEFORE, DATA

from specscope.analysis.run import Analysis
from specscope.cli import report as report_cli
from specscope.cli.report import report_cmd

GRAPHS = DATA / "graphs"
PAIRS = [
    [str(BEFORE), str(AFTER), "--preset", "eagle"],
    [str(BEFORE), str(AFTER)],  # zero-config: the gap known from the first input's spec
    [str(GRAPHS / "run_graph_kpool_nvtx.sqlite"), str(GRAPHS / "run_graph_alias_nvtx.sqlite"),
     str(GRAPHS / "cycle_graph_nvtx.sqlite"), "--labels", "a,b,c", "--preset", "eagle"],
]  # fmt: skip


def _report(tmp_path: Path, args: list[str], name: str) -> dict[str, str]:
    r = CliRunner().invoke(report_cmd, [*args, "--out", str(tmp_path / name)])
    assert r.exit_code == 0, r.output
    (folder,) = (tmp_path / name).iterdir()
    texts = {}
    for f in ("summary.md", "report.html"):
        lines = (folder / f).read_text().splitlines()
        out = str(tmp_path / name)  # (the --out folder, in the reproduce commands)
        texts[f] = "\n".join(x for x in lines if "generated 20" not in x and out not in x)
    return texts


@pytest.mark.parametrize("args", PAIRS)
def test_a_report_of_shed_inputs_is_the_report_of_whole_ones(tmp_path, monkeypatch, args):
    shed_calls = []
    real_shed = Analysis.shed

    def counted(self):
        shed_calls.append(self.source)
        return real_shed(self)

    monkeypatch.setattr(Analysis, "shed", counted)
    shed = _report(tmp_path, args, "shed")
    n_inputs = len([a for a in args if a.endswith(".sqlite")])
    assert len(shed_calls) == n_inputs  # (each input shed once its views were made)
    monkeypatch.setattr(report_cli, "_resolve_shedding", _whole)
    assert _report(tmp_path, args, "whole") == shed


def _whole(sides_of, inputs, *_):
    """The inputs resolved and kept whole (what report did before)."""
    return [sides_of(ref) for ref in inputs], {}


def test_the_views_error_is_raised_after_every_input_as_before(tmp_path):
    """A gap the second input has no value of (its ``draft_extend.replay`` ranges renamed):
    its view fails when made, and the error comes where the report raised it before, after
    both inputs were analysed."""
    lacking = tmp_path / "lacking.sqlite"
    shutil.copyfile(BEFORE, lacking)
    with closing(sqlite3.connect(lacking)) as con:
        for table, column in (("NVTX_EVENTS", "text"), ("StringIds", "value")):
            con.execute(f"UPDATE {table} SET {column} = 'draft_extend.other'"
                        f" WHERE {column} = 'draft_extend.replay'")  # fmt: skip
        con.commit()
    out = tmp_path / "out"
    r = CliRunner().invoke(report_cmd, [str(BEFORE), str(lacking), "--out", str(out)])
    assert r.exit_code == 2
    assert f"{lacking}: no value of 'gap_us:" in r.output
    assert not out.exists() or not list(out.iterdir())  # (nothing written)


def test_a_per_rank_report_of_shed_inputs_is_the_report_of_whole_ones(tmp_path, monkeypatch):
    """Every rank of each export shed once its views are made (the export's operations, shared
    by its ranks, freed before the next export is read): each rank's report the same."""
    path = str(GRAPHS / "two_proc_graph.sqlite")
    args = [path, path, "--per-rank", "--min-steps", "5"]

    def reports(name: str) -> dict[str, str]:
        r = CliRunner().invoke(report_cmd, [*args, "--out", str(tmp_path / name)])
        assert r.exit_code == 0, r.output
        (folder,) = (tmp_path / name).iterdir()
        out = str(tmp_path / name)
        return {
            str(f.relative_to(folder)): "\n".join(
                x for x in f.read_text().splitlines() if "generated 20" not in x and out not in x
            )
            for f in sorted(folder.rglob("*")) if f.suffix in (".md", ".html")
        }  # fmt: skip

    shed_calls = []
    real_shed = Analysis.shed
    monkeypatch.setattr(Analysis, "shed", lambda a: shed_calls.append(a.pid) or real_shed(a))
    shed = reports("shed")
    assert sorted(shed_calls) == [2099, 2099, 2100, 2100]  # (two ranks of each input)
    assert "rank1/report.html" in shed
    monkeypatch.setattr(report_cli, "_resolve_shedding", _whole)
    assert reports("whole") == shed
