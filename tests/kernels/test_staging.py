"""Staged runner inputs: one buffer, aligned typed views, one copy fills every field."""

from __future__ import annotations

import numpy as np
import torch

from specscope.kernels.model.staging import ALIGN, StagedInputs


def test_fields_are_aligned_views_of_one_buffer_filled_by_one_copy():
    shapes = {
        "a": ((5,), torch.int64),
        "b": ((3,), torch.int32),
        "grid": ((2, 4), torch.int64),
    }
    s = StagedInputs(shapes, torch.device("cpu"))
    base = s.buffer.data_ptr()
    for name, (shape, dtype) in shapes.items():
        v = s.views[name]
        assert v.shape == shape and v.dtype == dtype and v.is_contiguous()
        assert (v.data_ptr() - base) % ALIGN == 0
        assert v.untyped_storage().data_ptr() == s.buffer.untyped_storage().data_ptr()
    s.write("a", np.array([7, 8], np.int64))
    s.write("b", np.array([1, 2, 3], np.int32))
    s.write("grid", np.array([[1], [2]], np.int64))  # first columns of every row
    assert s.views["a"].tolist() == [0] * 5  # nothing on the device before the upload
    s.upload()
    assert s.views["a"].tolist() == [7, 8, 0, 0, 0]
    assert s.views["b"].tolist() == [1, 2, 3]
    assert s.views["grid"].tolist() == [[1, 0, 0, 0], [2, 0, 0, 0]]
