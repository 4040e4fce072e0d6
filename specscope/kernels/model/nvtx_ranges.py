"""NVTX ranges of the decode loop (domain `specscope`), or no-ops.

`nvtx` is an optional dependency: `range_factory(False)` and a missing package both give
ranges that do nothing (the latter says so once on stderr).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager

DOMAIN = "specscope"
RANGES = (  # the names specscope/presets/eagle.toml expects
    "step",
    "draft.prepare",
    "draft.replay",
    "verify.prepare",
    "verify.replay",
    "accept",
    "draft_extend.prepare",
    "draft_extend.replay",
)

RangeFactory = Callable[[str], AbstractContextManager]


def _null(name: str) -> AbstractContextManager:
    return contextlib.nullcontext()


def range_factory(enabled: bool) -> tuple[RangeFactory, bool]:
    """(name -> context manager, whether ranges are really emitted)."""
    if not enabled:
        return _null, False
    try:
        import nvtx
    except ImportError:
        print("warning: package nvtx not installed: no NVTX ranges", file=sys.stderr)
        return _null, False

    def rng(name: str) -> AbstractContextManager:
        return nvtx.annotate(name, domain=DOMAIN)

    return rng, True
