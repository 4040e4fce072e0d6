"""NVTX range names as specscope groups them: a range's name is what it names, not the
attributes some tools append to it.

PyTorch's ``torch.autograd.profiler.emit_nvtx`` names the range of each ATen operator it
records ``OP, seq = N, op_id = N, sizes = [[8, 512], ...], input_op_ids = [(0,-1), ...]``
(``getNvtxStr`` in PyTorch's ``torch/csrc/profiler/util.cpp``: each part after ``OP`` only
when known, in that order). With the sequence number and the operator id in it, nearly every
range has a name of its own, so no name recurs from step to step: ``ranges`` listed hundreds of
names seen once, ``analyze`` a ``cpu_us:`` metric for each (in one step and 0 in all the
others), and zero-config found no range that repeats. :func:`range_name` cuts that suffix
off, so those ranges are named by their operator (``aten::addmm``), as nsys's own NVTX
summaries group them by hand.

A name is cut only where all that follows its first ``, seq = ``, ``, op_id = ``, ``, sizes = [``
or ``, input_op_ids = [`` is that list of attributes, in PyTorch's order; any other name (a
user's ``decode, batch = 8``) is kept whole.
"""

from __future__ import annotations

import re

_FIRST = re.compile(r", (?:seq = -?\d|op_id = \d|sizes = \[|input_op_ids = \[)")
_ATTRIBUTES = re.compile(
    r"(?:, seq = -?\d+)?(?:, op_id = \d+)?(?:, sizes = \[.*\])?(?:, input_op_ids = \[.*\])?",
    re.DOTALL,
)


def range_name(text: str) -> str:
    """``text`` without PyTorch's ``emit_nvtx`` attributes (module doc); else ``text``.

    >>> range_name("aten::addmm, seq = 12, op_id = 34, sizes = [[512], [8, 512]]")
    'aten::addmm'
    >>> range_name("aten::view, op_id = 7")
    'aten::view'
    >>> range_name("decode, batch = 8")
    'decode, batch = 8'
    >>> range_name("step, seq = 3 of 10")
    'step, seq = 3 of 10'
    """
    if ", " not in text:  # (most names: no regex search)
        return text
    m = _FIRST.search(text)
    if m is None or m.start() == 0 or _ATTRIBUTES.fullmatch(text, m.start()) is None:
        return text
    return text[: m.start()]
