"""``compare`` holds one export's operations at a time (issue 19): each input's analysis (each
rank's, with ``--per-rank``) is shed before the next input is read, its trace freed then; the
output is the one of the whole analyses."""

from __future__ import annotations

import weakref

import pytest
from click.testing import CliRunner
from testdata import AFTER, BEFORE, DATA

from specscope.analysis import inputs
from specscope.analysis.run import Analysis
from specscope.cli import cli

CASES = [
    ([str(BEFORE), str(AFTER), "--preset", "eagle"], "resolve"),
    ([str(DATA / "graphs" / "two_proc_graph.sqlite")] * 2 + ["--per-rank"], "resolve_ranks"),
]


@pytest.mark.parametrize("args,resolver", CASES, ids=["inputs", "per-rank"])
def test_each_input_is_shed_before_the_next_is_read(monkeypatch, args, resolver):
    argv = ["compare", *args, "--format", "json"]
    whole = CliRunner().invoke(cli, argv)  # (the comparison itself; shed or not, the same)
    assert whole.exit_code == 0, whole.output
    traces, held, real = [], [], getattr(inputs, resolver)

    def recorded(ref, *a, **k):
        held.append([t() is not None for t in traces])  # (no collection: freed at once)
        out = real(ref, *a, **k)
        for r in out.values() if isinstance(out, dict) else [out]:
            traces.append(weakref.ref(r.analysis.trace))
        return out

    monkeypatch.setattr(inputs, resolver, recorded)
    got = CliRunner().invoke(cli, argv)
    assert got.exit_code == 0, got.output
    assert len(held) == 2 and held[0] == [] and held[1] and not any(held[1])
    assert got.output == whole.output


def test_shed_analyses_compare_as_whole_ones(monkeypatch):
    """The same JSON with each input kept whole (shed turned into a no-op)."""
    argv = ["compare", str(BEFORE), str(AFTER), "--preset", "eagle", "--format", "json"]
    shed = CliRunner().invoke(cli, argv).output
    monkeypatch.setattr(Analysis, "shed", lambda self: self)
    assert CliRunner().invoke(cli, argv).output == shed
