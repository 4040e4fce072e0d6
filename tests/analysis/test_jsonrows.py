"""The per-step rows' JSON of the C loop (``jsonrows.c``) against pandas' ``to_json``, the
reference: the same text to the byte for random and edge values of every kind the loop writes,
for pieces of any size, and pandas' own text wherever the loop leaves a piece or a frame to
it (an exponent-form value, other dtypes, names pandas escapes or refuses, no loop at all)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specscope.analysis import jsonrows, native

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def built(native_cache):
    """The compiled loop, in a cache of this module's own (skipped without a compiler)."""
    if native.built(jsonrows.SOURCE)[0] is None:
        pytest.skip("no C compiler here: pandas writes every piece")


def _pandas(frame: pd.DataFrame) -> str:
    return frame.reset_index().to_json(orient="records")


def _text(frame: pd.DataFrame, piece_rows: int = jsonrows.PIECE_ROWS) -> str:
    return "".join(jsonrows.record_pieces(frame, piece_rows))


def _steps(n: int, **columns) -> pd.DataFrame:
    frame = pd.DataFrame(columns, index=pd.RangeIndex(n, name="step"))
    return frame


# values at each branch of the float rule (jsonrows.c's head): rounding at and around half of
# the tenth decimal, carries into the whole part, the bounds of the exponent form, signs
EDGE_FLOATS = [
    0.0, -0.0, 1.0, -1.0, 0.5, 2.5, 1e-10, 5e-11, 4.9999999999e-11, 1.5e-10, 2.5e-10,
    0.12345678905, 0.12345678915, 0.99999999995, 0.999999999949, 9.99999999996, 123.456,
    -123.456, 1e-15, 2e-15, -1e-15, 9.99e-16, 1e15, 9999999999999998.0, 1e16, -1e16, 2e16,
    1.0000000000000002e16, 4503599627370495.5,
    70.8583739428, 497.548, -42.63, 1.0000000000500001, 0.30000000000000004, 1 / 3, -2 / 3,
    np.nan, np.inf, -np.inf,
]  # fmt: skip


def test_edge_floats_are_written_as_pandas_writes_them(built) -> None:
    frame = _steps(len(EDGE_FLOATS), x=np.array(EDGE_FLOATS))
    assert _text(frame, 1) == _pandas(frame)
    assert _text(frame) == _pandas(frame)


def test_random_columns_of_every_kind_are_pandas_text(built) -> None:
    rng = np.random.default_rng(7)
    n = 5000
    floats = rng.normal(0, 1, n) * 10.0 ** rng.integers(-9, 14, n)
    floats[rng.random(n) < 0.05] = np.nan
    nanos = rng.integers(-(10**12), 10**12, n) / 1000.0  # ns as µs: what the metrics hold
    ints = rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, n, endpoint=True)
    ints[:2] = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    frame = _steps(
        n,
        cpu_step_us=nanos,
        occupancy_pct=rng.random(n) * 100,
        scaled=floats,
        eager_memcpy=rng.integers(0, 100, n),
        wide=ints,
        small=rng.integers(-100, 100, n).astype(np.int8),
        unsigned=rng.integers(0, 1 << 40, n).astype(np.uint64),
        f32=rng.normal(0, 1000, n).astype(np.float32),
        f16=rng.normal(0, 100, n).astype(np.float16),
        flag=rng.random(n) < 0.5,
    )
    frame.index = pd.Index(rng.permutation(n) * 3 - 50, name="step")
    want = _pandas(frame)
    for rows in (1, 7, 2048, n, 10 * n):
        assert _text(frame, rows) == want
    assert json.loads(want)[3]["flag"] in (True, False)


def test_a_piece_with_an_exponent_value_is_pandas_text(built, monkeypatch) -> None:
    """1e16 and more, or below 1e-15 but not 0: the loop gives that piece to pandas, and the
    other pieces stay the loop's."""
    values = np.arange(40, dtype=np.float64) / 7
    values[25] = 3e17
    values[31] = -4e-18
    frame = _steps(40, x=values, count=np.arange(40))
    calls = []
    reference = jsonrows.reference
    monkeypatch.setattr(jsonrows, "reference", lambda *a: calls.append(a[1:]) or reference(*a))
    assert _text(frame, 10) == _pandas(frame)
    assert sorted(calls) == [(20, 30), (30, 40)]  # (two threads: in either order)


def test_text_columns_are_pandas_text(built) -> None:
    """Strings (pandas' string dtype and objects), missing ones (None, NaN, NA), escapes and
    non-ASCII, as a rank label or a kernel's name would be."""
    labels = ["pid4242", "pid4243/dev1", 'q"uote', "é漢", "tab\there", "", "a\\b"]
    n = 300
    rng = np.random.default_rng(3)
    picks = rng.integers(0, len(labels), n)
    objects = np.array([labels[i] for i in picks], dtype=object)
    objects[::7] = None
    objects[3::11] = np.nan
    frame = _steps(
        n,
        slowest_rank=pd.array([labels[i] for i in picks], dtype="string"),
        last_to_arrive=objects,
        none_at_all=np.array([None] * n, dtype=object),
        x=rng.random(n),
    )
    frame.loc[frame.index[5::13], "slowest_rank"] = pd.NA
    assert jsonrows._columns(frame) is not None
    for rows in (1, 64, n):
        assert _text(frame, rows) == _pandas(frame)


@pytest.mark.parametrize(
    "make",
    [
        lambda: _steps(3, s=np.array(["a", 1, 2.5], dtype=object)),  # objects not all text
        lambda: _steps(3, c=pd.Categorical(["a", "b", "a"])),
        lambda: _steps(3, x=pd.array([1, None, 3], dtype="Int64")),
        lambda: pd.DataFrame({"x": [1.5, 2.5]}),  # an unnamed index: pandas names it
        lambda: _steps(2, x=np.array([2**63 + 1, 0], dtype=np.uint64)),
        lambda: pd.DataFrame(
            {"x": [1.0, 2.0]}, index=pd.MultiIndex.from_tuples([(0, 1), (1, 0)], names=["a", "b"])
        ),
    ],
)
def test_frames_the_loop_leaves_to_pandas(built, make) -> None:
    frame = make()
    assert jsonrows._columns(frame) is None
    assert _text(frame, 1) == _pandas(frame)


def test_keys_pandas_escapes_are_its_text(built) -> None:
    names = ["kernels:a/b", 'q"uote', "back\\slash", "tab\there", "é and 漢", "<tag>&", "x->y"]
    frame = _steps(3, **{name: np.arange(3) * 1.5 for name in names})
    assert jsonrows._columns(frame) is not None
    assert _text(frame, 2) == _pandas(frame)


@pytest.mark.parametrize(
    "frame",
    [
        pd.DataFrame([[1, 2]], columns=["a", "a"], index=pd.Index([0], name="step")),
        pd.DataFrame({"x": [1.5, 2.5]}, index=pd.Index([3, 4], name="x")),
    ],
    ids=["same columns", "index named as a column"],
)
def test_names_pandas_refuses_raise_as_pandas_does(built, frame) -> None:
    with pytest.raises(ValueError):
        _pandas(frame)
    with pytest.raises(ValueError):
        _text(frame)


def test_a_pandas_that_writes_the_probe_otherwise_keeps_the_loop_off(built, monkeypatch) -> None:
    """The loop is used only where its text of the probe is this pandas' (once per build)."""
    assert jsonrows._function() is not None
    monkeypatch.setattr(jsonrows, "_AGREES", {})
    real = jsonrows.reference
    monkeypatch.setattr(jsonrows, "reference", lambda *a: real(*a).replace("0.5", "0.50"))
    assert jsonrows._function() is None
    frame = _steps(3, x=np.array([0.5, 1.5, 2.0]))
    assert jsonrows._columns(frame) is None
    assert _text(frame) == _pandas(frame).replace("0.5", "0.50")


def test_a_caller_that_stops_early_leaves_no_thread(built) -> None:
    import threading

    frame = _steps(1000, x=np.arange(1000) / 7)
    pieces = jsonrows.record_pieces(frame, 10)
    assert next(pieces) == "["
    first = next(pieces)
    assert first == jsonrows.reference(frame, 0, 10)
    pieces.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("specscope-json")]


def test_no_rows_and_no_loop(built, monkeypatch) -> None:
    empty = _steps(0, x=np.array([], dtype=np.float64))
    assert _text(empty) == _pandas(empty) == "[]"
    frame = _steps(5, x=np.arange(5) / 3)
    monkeypatch.setenv("SPECSCOPE_NATIVE", "0")
    assert jsonrows._columns(frame) is None
    assert _text(frame, 2) == _pandas(frame)


EXPORTS = ["eagle_node_after.sqlite", "real/hf_generate.sqlite", "graphs/two_proc_graph.sqlite"]


@pytest.mark.parametrize("name", EXPORTS)
def test_per_step_json_of_exports_is_pandas_text(built, name) -> None:
    from specscope.analysis.auto import analyze_processes

    path = DATA / name
    if not path.exists():
        pytest.skip(f"{name} is not committed")
    for p in analyze_processes(path).processes:
        frame = p.analysis.frame
        assert p.analysis.per_step_json() == _pandas(frame)
        assert _text(frame, 3) == _pandas(frame)


def test_cross_rank_json_is_pandas_text(built) -> None:
    """The cross-rank view of an export of two processes (rank labels as text, NaN where a rank
    has no value) written by the loop is pandas' text."""
    from specscope.analysis import ranks
    from specscope.analysis.auto import analyze_processes

    export = analyze_processes(DATA / "graphs" / "two_proc_graph.sqlite")
    view = export.cross_rank
    assert view is not None and any(str(d) in ("object", "str", "string") for d in view.dtypes)
    assert jsonrows._columns(view) is not None
    value = ranks.json_value(view, export.labels)
    assert "".join(value["per_step"].parts) == _pandas(view)
