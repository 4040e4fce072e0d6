"""Steps of another kind among the steps: a note, never a change of the steps.

A server's loop mixes kinds of step: SGLang and vLLM run a prefill between decodes, eagerly and
at another shape, with many more kernels than a decode's. Where the steps are found by their
CUDA graph cycle or by a marker kernel, such a step's eager work lands in one of the usual
steps (``tests/data/real/mixed_graph.sqlite``: 5 of 42 steps hold a prefill's 17 kernels and
its argmax besides the decode's own work). The per-step medians still stand for the usual step;
the means, the p90 and the max do not. :func:`odd_steps_note` says so::

    eager operations of a step = eager_kernels + eager_memcpy + eager_memset
    odd step: more eager operations than  median + max(MIN_MORE, median)
              (more than twice the median step's, and more than MIN_MORE more)

noted where the steps are at least :data:`MIN_STEPS` and at least one of them, at most
:data:`MAX_SHARE` of them, are odd. Steps whose eager work merely varies (a batch-size change,
copies that come and go) stay well inside that bound and are not noted.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

MIN_MORE = 4  # eager operations over the median step's: more than these
MIN_STEPS = 8  # fewer steps: no median to stand for "the usual step"
MAX_SHARE = 0.25  # more odd steps than this share: no usual step to tell them from
SHOWN = 6  # step numbers named in the note, at most
_COUNTS = ("eager_kernels", "eager_memcpy", "eager_memset")


def odd_steps_note(frame: pd.DataFrame) -> list[str]:
    """The note on the odd steps of per-step metrics ``frame`` (module doc), or none."""
    cols = [c for c in _COUNTS if c in frame.columns]
    if len(frame) < MIN_STEPS or not cols:
        return []
    ops = frame[cols].fillna(0).to_numpy(dtype=np.float64).sum(axis=1)
    median = float(np.median(ops))
    odd = np.flatnonzero(ops > median + max(MIN_MORE, median))
    if not len(odd) or len(odd) > MAX_SHARE * len(ops):
        return []
    lo, hi = int(ops[odd].min()), int(ops[odd].max())
    many = f"{lo}" if lo == hi else f"{lo}-{hi}"
    steps = [str(s) for s in frame.index[odd][:SHOWN]]
    named = ", ".join(steps) + (", ..." if len(odd) > SHOWN else "")
    return [
        f"{len(odd)} of {len(ops)} steps launched more eager GPU work than the median step "
        f"({many} eager operations against {median:g}: steps {named}): another kind of step "
        "among them (a prefill between decodes, say); the medians stand for the usual step, "
        "the means, p90 and max include these"
    ]
