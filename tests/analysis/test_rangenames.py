"""NVTX range names without PyTorch's ``emit_nvtx`` attributes
(:mod:`specscope.analysis.rangenames`), on names and on a synthetic export."""

from __future__ import annotations

import pytest

from specscope.analysis.loader import load
from specscope.analysis.rangenames import range_name
from specscope.analysis.synthetic import SyntheticExport

SHAPES = "sizes = [[512], [8, 512], [512, 512], [], []]"
IDS = "input_op_ids = [(0,-1), (97,0), (99,0), (0,-1), (0,-1)]"


@pytest.mark.parametrize(
    "text, name",
    [
        (f"aten::addmm, op_id = 102, {SHAPES}, {IDS}", "aten::addmm"),  # record_shapes=True
        ("aten::linear, seq = 12, op_id = 34", "aten::linear"),  # with autograd
        ("aten::mm, seq = -1", "aten::mm"),
        (f"aten::empty, {SHAPES}", "aten::empty"),
        ("aten::view, op_id = 7", "aten::view"),
        # kept whole: no such suffix, or one that is not PyTorch's list of attributes
        ("decode", "decode"),
        ("decode, batch = 8", "decode, batch = 8"),
        ("step, seq = 3 of 10", "step, seq = 3 of 10"),
        ("prefill, op_id = 3, rank = 0", "prefill, op_id = 3, rank = 0"),
        (", seq = 3", ", seq = 3"),  # (no name before it)
        ("", ""),
    ],
)
def test_range_name(text: str, name: str) -> None:
    assert range_name(text) == name


def test_ranges_of_one_operator_share_its_name(write_export) -> None:
    x = SyntheticExport()
    for k in range(3):  # one operator, a name of its own each time (as emit_nvtx writes it)
        x.range(f"aten::addmm, seq = {k}, op_id = {10 + k}, {SHAPES}", 1000 * k, 1000 * k + 500)
    x.range("decode, batch = 8", 5000, 6000)
    names = load(write_export(x)).nvtx["name"]
    assert names.tolist() == ["aten::addmm"] * 3 + ["decode, batch = 8"]
