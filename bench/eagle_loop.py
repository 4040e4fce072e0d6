"""Benchmark: the toy EAGLE loop for each backend variant and batch size (issue 4 numbers).

    python bench/eagle_loop.py --bs 1 8 --out results.jsonl

For each (variant, bs): `specscope run` defaults (EAGLE 5/1/6, index_kpool 4, context 8192,
hidden 1024, 4 target layers, 50 measured steps after 10 warm-up, CUDA graphs), then a few more
steps under torch.profiler to count metadata copy kernels per step. One JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace

import torch

from specscope.kernels.model import EagleLoop, LoopConfig


def copy_kernels_per_step(loop: EagleLoop, steps: int = 3) -> float:
    """Kernels whose name has `fused_metadata_copy` per decode step (torch.profiler, CUDA)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            loop.step()
        torch.cuda.synchronize()
    n = sum(e.count for e in prof.key_averages() if "fused_metadata_copy" in e.key)
    return n / steps


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--bs", type=int, nargs="+", default=[1, 8])
    p.add_argument("--variants", nargs="+", default=["ordinary", "kpool_fused", "draft_alias"])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--index-kpool", type=int, default=4)
    p.add_argument("--nvtx", choices=["on", "off"], default="on")
    p.add_argument("--out", default=None, help="append one JSON line per run here")
    a = p.parse_args()
    base = LoopConfig(
        steps=a.steps, warmup=a.warmup, index_kpool=a.index_kpool, nvtx=a.nvtx == "on"
    )
    rows = []
    for bs in a.bs:
        for variant in a.variants:
            loop = EagleLoop(replace(base, bs=bs, variant=variant))
            r = loop.run()
            row = {k: v for k, v in asdict(r).items() if k != "step_ms"}
            row["copy_kernels_per_step"] = copy_kernels_per_step(loop)
            rows.append(row)
            line = json.dumps(row)
            print(line, flush=True)
            if a.out:
                with open(a.out, "a") as f:
                    f.write(line + "\n")
            del loop
            torch.cuda.empty_cache()
    print("| variant | bs | step p50 ms | step p90 ms | tok/s/req | draft metadata B | copies/step"
          " | accept | sha256 |", file=sys.stderr)  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|", file=sys.stderr)
    for r in rows:
        print(
            f"| {r['variant']} | {r['bs']} | {r['step_ms_p50']:.3f} | {r['step_ms_p90']:.3f} | "
            f"{r['tok_per_s_per_request']:.0f} | {r['draft_metadata_bytes']} | "
            f"{r['copy_kernels_per_step']:.1f} | {r['accept_len_mean']:.2f} | "
            f"{r['tokens_sha256'][:12]} |",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
