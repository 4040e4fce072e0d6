"""``bench/bench_stages.py``: the memory of each stage of a command, in this process."""

from __future__ import annotations

from testdata import AFTER, bench_module


def _bench():
    return bench_module("bench_stages")


def test_every_stage_that_ran_has_a_row_and_the_peak_follows(capsys, monkeypatch):
    bench = _bench()
    monkeypatch.setattr(bench, "_wrap", _recording(bench._wrap, wrapped := []))
    assert bench.main(["analyze", str(AFTER), "--preset", "eagle"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[0] == "stage" and out[-1].startswith("peak RSS ")
    labels = {label for _, _, label in bench.STAGES}
    rows = out[1:-1]
    for stage in ("steps found", "host metrics", "gap attribution", "summary"):
        (row,) = {r for r in rows if r.startswith(stage)}
        highest, at_end, seconds = map(float, row[40:].split())
        assert 0 < at_end <= highest and seconds >= 0
    assert len(wrapped) == len(labels)  # every stage found in this tree
    from specscope.analysis import metrics, steps

    assert not hasattr(steps.find_steps, "__wrapped__")  # unwrapped again
    assert not hasattr(metrics._host_metrics, "__wrapped__")


def test_the_commands_exit_code_comes_back(capsys, tmp_path):
    assert _bench().main(["analyze", str(tmp_path / "missing.sqlite")]) == 2


def _recording(wrap, wrapped: list):
    def recording(sampler, rows, owner, name, label):
        wrapped.append(label)
        return wrap(sampler, rows, owner, name, label)

    return recording
