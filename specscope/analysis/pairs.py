"""Per-step columns of anchor pairs and anchors, from one value per anchor instance.

A gap metric (``gap_us:A->B``, ``cpu_gap_us:A->B``, ``gap_busy_us:A->B``, ...) has one value per
consecutive anchor instances (i - 1, i), which belongs to instance i's step; a per-anchor metric
(``launch_latency_us:A``) one per instance. A step may hold a pair (or an anchor) more than
once: the first value that is not NaN is reported. These helpers turn such values into one
column per pair or anchor, aligned with the kept steps, by integer codes (no name per instance:
there are hundreds of thousands at 20 M operations).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specscope.analysis.steps import Steps, kept_position


def pair_columns(steps: Steps, values: np.ndarray, prefix: str) -> dict[str, np.ndarray]:
    """``prefix``A->B per kept step (NaN where the step has no such pair), from one value per
    consecutive anchor instances (i - 1, i), i = 1..n-1: the pair belongs to instance i's step,
    and the first value of a pair in a step that is not NaN is kept (the module doc's gaps);
    a column for each pair that occurs in some step (skipped ones too), in the order the pairs
    first occur."""
    a = steps.anchors
    if len(a) < 2:
        return {}
    codes, names = anchor_name_codes(steps)
    pair = codes[:-1].astype(np.int64) * len(names) + codes[1:]
    pairs, table = first_per_step(steps, a["step"].to_numpy()[1:], pair, values)
    n = len(names)
    rows = zip(pairs, table, strict=True)
    return {f"{prefix}{names[p // n]}->{names[p % n]}": row for p, row in rows}


def anchor_name_codes(steps: Steps) -> tuple[np.ndarray, np.ndarray]:
    """(code of each anchor instance's name, the distinct names in order of appearance), worked
    out once per :class:`Steps` (the CPU, GPU and attribution gaps all group by them)."""
    cache = steps.__dict__
    if "_anchor_codes" not in cache:
        names = steps.anchors["name"].to_numpy(dtype=object)
        cache["_anchor_codes"] = pd.factorize(names, use_na_sentinel=False)
    return cache["_anchor_codes"]


def first_per_step(
    steps: Steps, step: np.ndarray, label: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The first value that is not NaN of each (label, kept step), from rows (``step``,
    ``label``, ``values``); rows of step -1 (none) are left out: the labels that occur, in the
    order they first occur (skipped steps count), and a (labels, kept steps) table, NaN where
    a label has no value in a step. Integer codes throughout and one scatter, where pandas'
    ``groupby([step, label], sort=False).first().unstack()`` of the same rows, which gives the
    same table (``tests/analysis/test_pair_columns.py``), builds a name per row."""
    kept = steps.kept
    named = step >= 0
    code, labels = pd.factorize(label[named])  # in order of first occurrence
    pos = kept_position(steps)[step[named]]
    value = np.asarray(values, dtype=np.float64)[named]
    use = (pos >= 0) & ~np.isnan(value)
    keys, first = np.unique(code[use] * len(kept) + pos[use], return_index=True)
    table = np.full((len(labels), len(kept)), np.nan)
    table.flat[keys] = value[use][first]
    return labels, table
