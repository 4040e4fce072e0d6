"""EAGLE-shaped decode steps whose batch size changes from step to step: three CUDA graphs per
step (a draft, a verify, a draft-extend replay, in that launch order), one of each per
batch-size bucket (1, 2, 4, 8, 16), captured as SGLang does (every verify bucket first, then
the drafts, then the draft-extends), each step replaying its batch size's three (a seeded
random walk over the buckets), with an H2D copy of the inputs before them and a D2H copy of
the tokens after. No NVTX.

    nsys profile -t cuda --cuda-graph-trace=graph --capture-range=cudaProfilerApi \\
        --capture-range-end=stop python scripts/real/bucket_roles.py [STEPS]
"""

import random
import sys

import torch

HIDDEN = 512
BUCKETS = (1, 2, 4, 8, 16)
LAYERS = {"verify": 6, "draft": 1, "draft_extend": 3}  # (GPU time apart: roles apart)


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    torch.manual_seed(0)
    w = torch.randn(HIDDEN, HIDDEN, device="cuda", dtype=torch.half) * 0.02

    def part(x: torch.Tensor, layers: int) -> torch.Tensor:
        for _ in range(layers):
            x = torch.relu(x @ w) + x
        return x

    x = {b: torch.zeros(b, HIDDEN, device="cuda", dtype=torch.half) for b in BUCKETS}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture stream, as capture requires
        for b in BUCKETS:
            part(x[b], 1)
    torch.cuda.current_stream().wait_stream(side)
    graphs, outs = {}, {}
    for role in ("verify", "draft", "draft_extend"):  # SGLang's capture order
        for b in BUCKETS:
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                outs[role, b] = part(x[b], LAYERS[role])
            graphs[role, b] = g
    host = torch.randn(16, HIDDEN, dtype=torch.half).pin_memory()
    tokens = torch.empty(16, dtype=torch.long).pin_memory()
    rng = random.Random(31)  # (visits the batch size 8 three times, each alone)
    level = 2
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(steps):
        level = min(max(level + rng.choice((-1, 0, 0, 1)), 0), len(BUCKETS) - 1)
        b = BUCKETS[level]
        x[b].copy_(host[:b], non_blocking=True)
        for role in ("draft", "verify", "draft_extend"):  # launch order of a step
            graphs[role, b].replay()
        tokens[:b].copy_(outs["draft_extend", b].argmax(dim=1), non_blocking=True)
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("steps", steps, "last batch", b, "token", int(tokens[0]))


if __name__ == "__main__":
    main()
