"""The note on steps of another kind (:mod:`specscope.analysis.stepkinds`)."""

from __future__ import annotations

import pandas as pd
from testdata import DATA

from specscope.analysis.stepkinds import long_steps_note, odd_steps_note


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


def _host(us: list[float], start: int = 0) -> pd.DataFrame:
    return pd.DataFrame(
        {"cpu_step_us": us}, index=pd.RangeIndex(start, start + len(us), name="step")
    )


def test_a_few_long_steps_are_noted():
    us = [100.0] * 20
    us[1] = 43_200.0  # (a module loaded on a kernel's first launch)
    (note,) = long_steps_note(_host(us))
    assert note.startswith("1 of 20 steps took over 10x the median step on the host (43.2 ms")
    assert "against 100.0 µs: step 1)" in note and note.endswith("; --skip 2 drops them")
    (told,) = long_steps_note(_host(us), [(1, "cuLibraryLoadData", 19_100.0)])
    assert "; in them: cuLibraryLoadData 19.1 ms (step 1); the medians" in told
    us[1], us[9], us[12] = 1_200.0, 28_600.0, 85_300.0  # (later: no --skip to name)
    (note,) = long_steps_note(_host(us, start=3))
    assert "(1.2-85.3 ms against 100.0 µs: steps 4, 12, 15)" in note and "--skip" not in note


def test_what_is_no_long_step_is_not_noted():
    assert long_steps_note(_host([100.0] * 20)) == []  # all alike
    assert long_steps_note(_host([100.0] * 19 + [1_000.0])) == []  # 10x: not over it
    assert long_steps_note(_host([10.0] * 19 + [900.0])) == []  # 90x but under 1 ms more
    assert long_steps_note(_host([100.0] * 14 + [9_000.0] * 6)) == []  # over a quarter
    assert long_steps_note(_host([100.0] * 6 + [9_000.0])) == []  # too few steps to tell
    assert long_steps_note(_host([100.0] * 19 + [float("nan")])) == []  # a step without it
    assert long_steps_note(pd.DataFrame({"busy_us": [1.0] * 10})) == []  # no host time


def test_first_steps_of_real_exports_are_noted():
    """Real captures' first steps: a module loaded on an argmax's first launch (the step of
    the replay after it), the first graph replays; the module loads named."""
    from specscope.analysis.auto import analyze_processes

    long = "steps took over 10x the median step on the host"
    cases = {
        "stream_overlap_graph": (f"1 of 40 {long} (43.8 ms", "cuLibraryLoadData 19.1 ms (step 1)"),
        "piecewise_graphs": (
            f"2 of 40 {long} (28.6-85.3 ms",
            "cuLibraryLoadData 43.7 ms (step 0), cuLibraryLoadData 13.6 ms (step 1)",
        ),
    }
    for name, (words, costs) in cases.items():
        (p,) = analyze_processes(DATA / f"real/{name}.sqlite").processes
        (note,) = [n for n in p.analysis.notes if "took over 10x" in n]
        assert note.startswith(words) and note.endswith("--skip 2 drops them"), name
        assert f"; in them: {costs};" in note, name
    (q,) = analyze_processes(DATA / "real/torch_compile.sqlite").processes
    assert not any("took over 10x" in n for n in q.analysis.notes)
