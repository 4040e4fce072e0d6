"""NVTX instrumentation overhead in one process: blocks of steps with ranges on and off.

Fresh processes differ from each other by more than the effect (±7 % between runs on an H200,
`bench/nvtx_overhead.py`), so this builds one EAGLE loop, warms it up, and then runs `--pairs`
pairs of blocks of `--block-steps` steps: one block with the loop's NVTX ranges emitted, one with
null ranges, in ABBA order (on/off, off/on, ...) so a slow drift of the step time cancels. Same
process, same CUDA graphs, same memory, only the ranges differ. No profiler is attached, as in
production.

Per step: CUDA-event time from before the step's first launch to after its last (what `specscope
run` reports as step time) and host time of `loop.step()` (perf_counter). Per pair: the ratio of
the on-block's median to the off-block's. Reported: the median ratio over pairs with a bootstrap
95 % interval (resampling pairs), and the pooled medians.

    python bench/nvtx_interleaved.py --variant draft_alias --bs 1 --pairs 20 --out nvtx.json

Needs the `nvtx` package (else both blocks would be null and the bench says so and stops).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specscope.kernels.model import EagleLoop, LoopConfig  # noqa: E402
from specscope.kernels.model.nvtx_ranges import range_factory  # noqa: E402


def block(loop: EagleLoop, steps: int, cuda: bool) -> tuple[list[float], list[float]]:
    """(step ms by CUDA events, host ms of loop.step()) for `steps` steps."""
    marks, host = [], []
    for _ in range(steps):
        if cuda:
            start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
        t0 = time.perf_counter()
        loop.step()
        host.append((time.perf_counter() - t0) * 1e3)
        if cuda:
            end.record()
            marks.append((start, end))
    if cuda:
        torch.cuda.synchronize(loop.device)
        return [a.elapsed_time(b) for a, b in marks], host
    return host, host


def bootstrap_ci(values: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95 % interval of the median of `values`, resampling them with replacement."""
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--variant", default="draft_alias")
    p.add_argument("--bs", type=int, default=1)
    p.add_argument("--context", type=int, default=8192)
    p.add_argument("--index-kpool", type=int, default=4)
    p.add_argument("--pairs", type=int, default=20)
    p.add_argument("--block-steps", type=int, default=25)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--out", type=Path, help="write the per-pair numbers and summary as JSON")
    a = p.parse_args()

    on, emitted = range_factory(True)
    if not emitted:
        raise SystemExit("error: the nvtx package is not installed; pip install nvtx")
    off, _ = range_factory(False)
    cfg = LoopConfig(
        variant=a.variant,
        bs=a.bs,
        context=a.context,
        index_kpool=a.index_kpool,
        device=a.device,
        steps=a.pairs * 2 * a.block_steps,
        warmup=a.warmup,
        spec_steps=5,
        accept_len=5.0,
    )
    loop = EagleLoop(cfg)
    cuda = loop.device.type == "cuda"
    for _ in range(a.warmup):
        loop.step()
    pairs = []
    for i in range(a.pairs):
        order = ("on", "off") if i % 2 == 0 else ("off", "on")  # ABBA: drift cancels
        res = {}
        for name in order:
            loop.rng = on if name == "on" else off
            res[name] = block(loop, a.block_steps, cuda)
        gpu = {k: statistics.median(v[0]) for k, v in res.items()}
        host = {k: statistics.median(v[1]) for k, v in res.items()}
        pairs.append(
            {
                "pair": i,
                "order": order,
                "step_ms_on": gpu["on"],
                "step_ms_off": gpu["off"],
                "ratio": gpu["on"] / gpu["off"],
                "host_ms_on": host["on"],
                "host_ms_off": host["off"],
                "host_ratio": host["on"] / host["off"],
            }
        )
        print(
            f"pair {i:2} {order[0]:>3}/{order[1]:<3} step on {gpu['on']:.4f} off "
            f"{gpu['off']:.4f} ms ratio {pairs[-1]['ratio']:.4f}; host ratio "
            f"{pairs[-1]['host_ratio']:.4f}",
            flush=True,
        )
    summary = {}
    for key in ("ratio", "host_ratio"):
        values = [q[key] for q in pairs]
        lo, hi = bootstrap_ci(values)
        summary[key] = {"median": statistics.median(values), "ci95": [lo, hi]}
    summary["step_ms_on_p50"] = statistics.median(q["step_ms_on"] for q in pairs)
    summary["step_ms_off_p50"] = statistics.median(q["step_ms_off"] for q in pairs)
    r = summary["ratio"]
    print(
        f"NVTX on/off step-time ratio over {len(pairs)} pairs of {a.block_steps} steps: median "
        f"{r['median']:.4f} (95 % CI {r['ci95'][0]:.4f}-{r['ci95'][1]:.4f}); overhead "
        f"{100 * (r['median'] - 1):+.2f} %"
    )
    if a.out:
        meta = {
            "args": vars(a) | {"out": str(a.out)},
            "gpu": torch.cuda.get_device_name(loop.device) if cuda else "",
            "torch": torch.__version__,
        }
        a.out.write_text(json.dumps({**meta, "summary": summary, "pairs": pairs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
