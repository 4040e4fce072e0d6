"""Decode steps whose batch size changes from step to step, as a server's does while requests
come and go: one CUDA graph captured per batch-size bucket (1, 2, 4, 8, 16, 32, as SGLang and
vLLM capture them), each step replaying the bucket of its batch size (a seeded random walk),
with the inputs' H2D copy before the replay and the sampled tokens' D2H copy after it. No NVTX.

    nsys profile -t cuda --cuda-graph-trace=graph --capture-range=cudaProfilerApi \\
        --capture-range-end=stop python scripts/real/bucket_graphs.py [STEPS]
"""

import random
import sys

import torch

HIDDEN = 512
BUCKETS = (1, 2, 4, 8, 16, 32)


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    torch.manual_seed(0)
    w = [torch.randn(HIDDEN, HIDDEN, device="cuda", dtype=torch.half) * 0.02 for _ in range(4)]

    def decode(x: torch.Tensor) -> torch.Tensor:
        for m in w:
            x = torch.relu(x @ m) + x
        return x.argmax(dim=1)

    inputs = {b: torch.zeros(b, HIDDEN, device="cuda", dtype=torch.half) for b in BUCKETS}
    graphs, outs = {}, {}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture stream, as capture requires
        for b in BUCKETS:
            decode(inputs[b])
    torch.cuda.current_stream().wait_stream(side)
    for b in reversed(BUCKETS):  # (largest first, as servers capture them)
        graphs[b] = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graphs[b]):
            outs[b] = decode(inputs[b])
    host = torch.randn(32, HIDDEN, dtype=torch.half).pin_memory()
    tokens = torch.empty(32, dtype=torch.long).pin_memory()
    rng = random.Random(0)
    level = 3
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(steps):
        level = min(max(level + rng.choice((-1, 0, 1)), 0), len(BUCKETS) - 1)
        b = BUCKETS[level]
        inputs[b].copy_(host[:b], non_blocking=True)
        graphs[b].replay()
        tokens[:b].copy_(outs[b], non_blocking=True)
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("steps", steps, "last batch", b, "token", int(tokens[0]))


if __name__ == "__main__":
    main()
