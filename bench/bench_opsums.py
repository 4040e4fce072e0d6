"""Each C loop of ``analysis/opsums.c`` and ``analysis/jsonrows.c`` against its reference.

    python bench/bench_opsums.py EXPORT [--preset eagle] [--repeat 5]

Loads EXPORT once and finds its steps (``--preset``, else zero-config's first process), then
times each stage that has a C loop, with the loops (the default) and with
``SPECSCOPE_NATIVE=0`` (the numpy reference), alternating, ``--repeat`` times each: best and
median in ms, and whether the two results are equal. Stages: the launch lookup
(``Trace.launches``), the names' categorical codes (``opnames.unique_inverse``), the class
and pattern counts (``metrics._class_counts``), first start and last end per step
(``metrics.group_first_last``), the anchors' head operations (``gaps.anchor_extents``), the
union coverage's prefix (``coverage._coverage_of``) and its queries at the steps' bounds (a
float time each, as the window and gap metrics query it); with several devices, the
regrouping of their rows (``devices.by_device``); the per-step rows' JSON text
(``jsonrows.record_pieces``, two threads; its reference is pandas' ``to_json``). One core,
in this process (the JSON two): the stages as the analysis runs them, without the read, the
other stages or the threads beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specscope.analysis import coverage, devices, gaps, jsonrows, loader, metrics, native, opnames  # noqa: E402
from specscope.analysis.auto import analyze_processes  # noqa: E402
from specscope.analysis.spec import load_preset  # noqa: E402


def _same(a, b) -> bool:
    if isinstance(a, pd.DataFrame):
        return a.equals(b)
    if isinstance(a, str):
        return a == b
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if callable(a):  # (a coverage: compared on the windows' bounds by the caller)
        return True
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def _timed(fn, repeat: int) -> tuple[list[float], list[float], bool]:
    """(ms with the loops, ms with numpy, the same result), alternating."""
    c, ref, same = [], [], True
    for _ in range(repeat):
        t0 = time.perf_counter()
        fast = fn()
        c.append((time.perf_counter() - t0) * 1e3)
        os.environ["SPECSCOPE_NATIVE"] = "0"
        try:
            t0 = time.perf_counter()
            slow = fn()
            ref.append((time.perf_counter() - t0) * 1e3)
        finally:
            os.environ.pop("SPECSCOPE_NATIVE", None)
        same &= _same(fast, slow)
    return c, ref, same


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("export", type=Path)
    p.add_argument("--preset", default="", help="a preset (eagle); '' for zero-config")
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args(argv)
    if native.built(native.OPSUMS)[0] is None:
        sys.exit(f"error: the C loops are not built here ({native.built(native.OPSUMS)[1]})")
    trace = loader.load(a.export)
    spec = load_preset(a.preset) if a.preset else None
    analysis = next(iter(analyze_processes(trace, spec).analyses.values()))
    st = analysis.steps
    ops = st.ops
    pid, corr = trace.ops["pid"].to_numpy(), trace.ops["correlation_id"].to_numpy()
    # (name codes as the read gives them: StringIds ids, negative for copies and memsets; the
    # frame keeps the categorical's, here spread back over a range of that kind)
    codes = trace.ops["name"].array.codes.astype(np.int32) * 3 - 20
    patterns = list(st.spec.count_kernels) or ["fused_metadata_copy"]
    group, times = ops["step"].to_numpy(), (ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy())
    stages = {
        "launch lookup (Trace.launches)": lambda: trace.launches(pid, corr),
        "names' codes (unique_inverse)": lambda: opnames.unique_inverse(codes),
        "class counts (_class_counts)": lambda: metrics._class_counts(st, patterns),
        "first/last per step": lambda: metrics.group_first_last(group, len(st.all_steps), *times),
        "anchor heads (anchor_extents)": lambda: gaps.anchor_extents(st, trace.launches),
        "union coverage (_coverage_of)": lambda: coverage._coverage_of(*times),
    }
    covered = coverage._coverage_of(*times)
    steps = st.all_steps
    bounds = np.r_[steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()] + 0.5
    stages["coverage queries (covered_at)"] = lambda: covered(bounds.astype(np.float64))
    device = trace.ops["device_id"].to_numpy()
    if len(np.unique(device)) > 1:  # (the ranks' rows in time order again, as read)
        order = np.argsort(trace.ops["start_ns"].to_numpy(), kind="stable")
        cols = {c: trace.ops[c].to_numpy()[order] for c in ("device_id", "start_ns", "end_ns")}
        # (the columns held here: moved into new memory, not over a moved one's as in a read)
        stages["regrouping by device (by_device)"] = lambda: devices.by_device(dict(cols))
    frame = analysis.frame
    stages["per-step JSON (record_pieces)"] = lambda: "".join(jsonrows.record_pieces(frame))
    print(f"export   {a.export}  {len(trace.ops):,} GPU ops, {len(st.kept):,} steps "
          f"(step: {analysis.spec.get('step')})")  # fmt: skip
    print(f"{'stage':38s} {'C best/median ms':>18s} {'numpy best/median ms':>22s}  same")
    for name, fn in stages.items():
        c, ref, same = _timed(fn, a.repeat)
        print(
            f"{name:38s} {min(c):8.1f} / {statistics.median(c):7.1f} "
            f"{min(ref):10.1f} / {statistics.median(ref):9.1f}  {'yes' if same else 'NO'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
