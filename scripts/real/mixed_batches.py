"""A server's schedule of prefills and decodes, as SGLang and vLLM run it, with nothing added
for specscope: a decode step is an H2D copy of the inputs, one CUDA graph replay (the model at
batch 8) and the argmax copied back; every EVERY-th step is a prefill instead, run eagerly at
64 tokens (another shape, so other kernels: a layer norm, a softmax, more GEMM work). No NVTX.
Capture and warm-up happen before ``cudaProfilerStart``.

    nsys profile -t cuda --cuda-graph-trace=graph --capture-range=cudaProfilerApi \\
        --capture-range-end=stop python scripts/real/mixed_batches.py [STEPS] [EVERY]
"""

import sys

import torch

HIDDEN = 512


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 48
    every = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    torch.manual_seed(0)
    w = [torch.randn(HIDDEN, HIDDEN, device="cuda", dtype=torch.half) * 0.02 for _ in range(4)]

    def decode(x: torch.Tensor) -> torch.Tensor:
        for m in w:
            x = torch.relu(x @ m) + x
        return x

    def prefill(x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.layer_norm(x, (HIDDEN,))
        scores = torch.softmax(x @ x.T / HIDDEN**0.5, dim=-1)
        x = scores @ x
        for m in w:
            x = torch.nn.functional.gelu(x @ m) + x
        return x[-8:]

    x = torch.zeros(8, HIDDEN, device="cuda", dtype=torch.half)
    host = torch.randn(8, HIDDEN, dtype=torch.half).pin_memory()
    prompt = torch.randn(64, HIDDEN, dtype=torch.half).pin_memory()
    tokens = torch.empty(8, dtype=torch.long).pin_memory()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture stream, as capture requires
        for _ in range(3):
            y = decode(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = decode(x)
    for _ in range(2):  # the prefill's kernels loaded, the graph uploaded
        prefill(prompt.cuda())
        graph.replay()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for i in range(steps):
        if i % every == 0:
            out = prefill(prompt.to("cuda", non_blocking=True))
        else:
            x.copy_(host, non_blocking=True)
            graph.replay()
            out = y
        tokens.copy_(out.argmax(dim=1), non_blocking=True)
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("steps", steps, "prefill every", every, "token", int(tokens[0]))


if __name__ == "__main__":
    main()
