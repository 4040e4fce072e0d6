"""The note on steps of another kind (:mod:`specscope.analysis.stepkinds`)."""

from __future__ import annotations

import pandas as pd
from testdata import DATA

from specscope.analysis.stepkinds import odd_steps_note


def _frame(kernels: list[int], memcpy: int = 1, start: int = 0) -> pd.DataFrame:
    index = pd.RangeIndex(start, start + len(kernels), name="step")
    return pd.DataFrame(
        {"eager_kernels": kernels, "eager_memcpy": [memcpy] * len(kernels), "eager_memset": 0},
        index=index,
    )


def test_a_few_steps_with_much_more_eager_work_are_noted():
    kernels = [1] * 20
    kernels[4] = kernels[11] = 18
    (note,) = odd_steps_note(_frame(kernels, start=2))
    assert note.startswith("2 of 20 steps launched more eager GPU work than the median step")
    assert "(19 eager operations against 2: steps 6, 13)" in note  # (numbered as kept)


def test_what_is_no_other_kind_of_step_is_not_noted():
    assert odd_steps_note(_frame([1] * 20)) == []  # all alike
    assert odd_steps_note(_frame([10, 12] * 10)) == []  # eager work that varies a little
    assert odd_steps_note(_frame([1] * 19 + [5], memcpy=0)) == []  # 4 more: not over 1 + 4
    assert odd_steps_note(_frame([1] * 19 + [6], memcpy=0)) != []  # 5 more: over it
    assert odd_steps_note(_frame([100] * 19 + [199], memcpy=0)) == []  # not twice the median
    assert odd_steps_note(_frame([1] * 14 + [30] * 6)) == []  # over a quarter: no usual step
    assert odd_steps_note(_frame([1] * 6 + [30])) == []  # too few steps to tell
    assert odd_steps_note(pd.DataFrame({"busy_us": [1.0] * 10})) == []  # no counts (host only)


def test_many_odd_steps_are_named_up_to_six():
    kernels = [1] * 40
    for i in range(0, 40, 5):
        kernels[i] = 30
    (note,) = odd_steps_note(_frame(kernels))
    assert "8 of 40 steps" in note and "steps 0, 5, 10, 15, 20, 25, ...)" in note


def test_prefills_among_decodes_of_a_real_export_are_noted():
    from specscope.analysis.auto import analyze_processes

    (p,) = analyze_processes(DATA / "real/mixed_graph.sqlite").processes
    notes = [n for n in p.analysis.notes if "another kind of step" in n]
    assert len(notes) == 1 and "steps 7, 14, 21, 28, 35" in notes[0]
    (q,) = analyze_processes(DATA / "real/overlap_thread.sqlite").processes
    assert not any("another kind of step" in n for n in q.analysis.notes)
