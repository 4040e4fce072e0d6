"""Write a synthetic graph-mode export shaped like vLLM's piecewise CUDA graphs: STEPS decode
steps, each an H2D copy, PIECES graph replays (one graph per batch-size bucket and piece, the
bucket a random walk over BUCKETS) with an eager attention kernel between two pieces, then an
argmax and a D2H copy.

    python bench/make_piecewise.py /tmp/pw.sqlite [--steps 2000] [--buckets 67] [--pieces 33]
    specscope analyze /tmp/pw.sqlite          # zero-config: one step per cycle of PIECES roles

67 buckets of 33 pieces (1716 graphs) made zero-config's note list every run of the cycle and
every graph id of ``--anchors``: 100 000 characters (``auto.MAX_LISTED``). It refuses to write
over a file.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

from specscope.analysis.synthetic import SyntheticExport


def build(steps: int, buckets: int, pieces: int, seed: int = 5) -> SyntheticExport:
    """The export (module doc); times in ns from 1 ms, each step about 700 µs."""
    x, rng, t, b = SyntheticExport(), random.Random(seed), 1_000_000, buckets // 2
    for _ in range(steps):
        b = min(buckets - 1, max(0, b + rng.choice((-1, 0, 1))))
        c = x.api("cudaMemcpyAsync", t, t + 5_000)
        x.memcpy("htod", 4096, t + 6_000, t + 8_000, c)
        t += 10_000
        for p in range(pieces):
            c = x.api("cudaGraphLaunch", t, t + 8_000)
            x.graph_replay(t + 9_000, t + 39_000 + 1_000 * b, c, graph_id=b * pieces + p + 1)
            t += 12_000
            if p < pieces - 1:
                c = x.api("cudaLaunchKernel", t, t + 4_000)
                x.kernel("flash_attn_fwd", t + 30_000, t + 40_000, c)
                t += 6_000
        c = x.api("cudaLaunchKernel", t, t + 4_000)
        x.kernel("argmax", t + 50_000, t + 52_000, c)
        t += 5_000
        c = x.api("cudaMemcpyAsync", t, t + 60_000)
        x.memcpy("dtoh", 64, t + 53_000, t + 54_000, c)
        t += 80_000
    return x


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--buckets", type=int, default=67)
    p.add_argument("--pieces", type=int, default=33)
    args = p.parse_args()
    if Path(args.out).exists():
        p.error(f"{args.out} exists; give a new path")
    build(args.steps, args.buckets, args.pieces).write(args.out)
    print(f"{args.out}: {args.steps} steps over {args.buckets} buckets of {args.pieces} pieces")


if __name__ == "__main__":
    main()
