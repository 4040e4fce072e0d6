"""JSON text in pieces (:mod:`specscope.analysis.jsonpieces`): ``json.dumps`` of the whole,
with some values given as text made elsewhere."""

from __future__ import annotations

import json

import pytest

from specscope.analysis.jsonpieces import Encoded, pieces

PLAIN = {"a": 1, "b": [1.5, None, "x"], "c": {"d": True, "e": 'é \\u0000 "q"'}, "f": []}


def test_without_encoded_values_it_is_json_dumps():
    assert "".join(pieces(PLAIN)) == json.dumps(PLAIN)
    assert "".join(pieces([PLAIN, 3])) == json.dumps([PLAIN, 3])


def test_encoded_values_go_in_their_place_as_they_are():
    rows = ['[{"x":1}', ',{"x":2}]']  # pandas' compact text, in two pieces
    value = {"head": PLAIN, "exports": [{"n": 1, "per_step": Encoded(rows)}, {"n": 2}]}
    text = "".join(pieces(value))
    assert json.loads(text) == {
        "head": PLAIN,
        "exports": [{"n": 1, "per_step": [{"x": 1}, {"x": 2}]}, {"n": 2}],
    }
    assert '"per_step": [{"x":1},{"x":2}]' in text  # not re-encoded
    assert "".join(pieces(Encoded(["[1,", "2]"]))) == "[1,2]"


def test_strings_that_look_like_the_placeholders_are_left_alone():
    # a value holding what a placeholder of another call looked like is not cut
    other = "".join(pieces({"v": Encoded(["0"])}))
    value = {"s": "0123456789abcdef0123456789abcdef:0", "v": Encoded(["[7]"]), "t": other}
    assert json.loads("".join(pieces(value))) == {"s": value["s"], "v": [7], "t": other}


def test_pieces_of_an_encoded_value_are_passed_one_by_one():
    parts = ["[", "1", ",2", "]"]
    out = list(pieces({"v": Encoded(iter(parts))}))
    assert all(p in out for p in parts)


def test_other_objects_are_refused_as_json_dumps_refuses_them():
    with pytest.raises(TypeError, match="not JSON serializable"):
        "".join(pieces({"v": object()}))
