"""Decode loops whose CUDA graphs use more than one stream or hold copies, with nothing added
for specscope (no NVTX); capture and warm-up happen before ``cudaProfilerStart``. Each step is
an H2D copy of the inputs, the SHAPE's replays, the argmax copied back and a synchronize:

- ``fork``: one graph whose capture forks a side stream and joins it again, as a MoE layer's
  shared experts run beside its routed ones (vLLM's shared-experts stream): each layer's
  kernels on two streams of one replay, overlapping on the GPU;
- ``overlap``: two graphs per step, one micro-batch each, replayed on two streams back to back
  and overlapping on the GPU (dual-batch overlap), the step waiting for both;
- ``copies``: one graph holding copies and a memset as well as kernels: a device-to-device
  copy of the inputs, a host-to-device copy from pinned memory and a ``cudaMemsetAsync`` of
  a scratch buffer (the CUDA runtime called through ctypes; left out, and said, where no
  ``libcudart`` is found), as a sampler's state is reset inside a replay.

    nsys profile -t cuda --cuda-graph-trace=graph|node --capture-range=cudaProfilerApi \\
        --capture-range-end=stop python scripts/real/stream_graphs.py SHAPE [STEPS] [TOKENS]

TOKENS (default 8): rows of each micro-batch. At 8, a replay's GPU work (about 20 us) is shorter
than the host's launch calls between them, so nothing overlaps across graphs; at 32768 each
replay runs for hundreds of microseconds and the ``overlap`` graphs do overlap on the GPU.
"""

import argparse
import ctypes
import glob
import os

import torch

HIDDEN = 512
LAYERS = 4
SHAPES = ("fork", "overlap", "copies")


def cudart():
    """The CUDA runtime library PyTorch loaded (its wheel's), or None."""
    here = os.path.dirname(torch.__file__)
    for pattern in ("../nvidia/*/lib/libcudart.so*", "../nvidia/cuda_runtime/lib/libcudart.so*",
                    "lib/libcudart*.so*"):  # fmt: skip
        for path in sorted(glob.glob(os.path.join(here, pattern))):
            try:
                return ctypes.CDLL(path)
            except OSError:
                continue
    try:
        return ctypes.CDLL("libcudart.so")
    except OSError:
        return None


def main() -> None:
    p = argparse.ArgumentParser(description="decode loops of CUDA graphs over two streams")
    p.add_argument("shape", choices=SHAPES)
    p.add_argument("steps", nargs="?", type=int, default=40)
    p.add_argument("tokens", nargs="?", type=int, default=8, help="rows of a micro-batch")
    args = p.parse_args()  # (a bad argument: one line, exit 2)
    if args.steps < 1 or args.tokens < 1:
        p.error("STEPS and TOKENS must be at least 1")
    shape, steps, tokens_n = args.shape, args.steps, args.tokens
    torch.manual_seed(0)
    w = [torch.randn(HIDDEN, HIDDEN, device="cuda", dtype=torch.half) * 0.02 for _ in range(LAYERS)]
    shared = [torch.randn(HIDDEN, HIDDEN, device="cuda", dtype=torch.half) * 0.02 for _ in w]
    side = torch.cuda.Stream()
    main_stream = torch.cuda.current_stream()

    def layers(x: torch.Tensor) -> torch.Tensor:
        for m in w:
            x = torch.relu(x @ m) + x
        return x

    def forked(x: torch.Tensor) -> torch.Tensor:
        for m, s in zip(w, shared, strict=True):
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # the shared expert, beside the routed one
                h = torch.nn.functional.silu(x @ s)
            routed = torch.relu(x @ m)
            torch.cuda.current_stream().wait_stream(side)
            x = routed + h + x
        return x

    rt = cudart() if shape == "copies" else None
    scratch = torch.empty(1 << 20, device="cuda", dtype=torch.uint8)
    pinned_bias = torch.randn(tokens_n, HIDDEN, dtype=torch.half).pin_memory()
    bias = torch.empty(tokens_n, HIDDEN, device="cuda", dtype=torch.half)
    staged = torch.empty(tokens_n, HIDDEN, device="cuda", dtype=torch.half)

    def with_copies(x: torch.Tensor) -> torch.Tensor:
        staged.copy_(x)  # device to device
        bias.copy_(pinned_bias, non_blocking=True)  # host (pinned) to device
        if rt is not None:
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            ptr = ctypes.c_void_p(scratch.data_ptr())
            rt.cudaMemsetAsync(ptr, ctypes.c_int(0), ctypes.c_size_t(scratch.numel()), stream)
        return layers(staged + bias)

    body = {"fork": forked, "overlap": layers, "copies": with_copies}[shape]
    inputs = [torch.zeros(tokens_n, HIDDEN, device="cuda", dtype=torch.half) for _ in range(2)]
    host = torch.randn(tokens_n, HIDDEN, dtype=torch.half).pin_memory()
    tokens = torch.empty(2, tokens_n, dtype=torch.long).pin_memory()
    warm = torch.cuda.Stream()
    warm.wait_stream(main_stream)
    with torch.cuda.stream(warm):  # warm up off the capture stream, as capture requires
        for _ in range(3):
            body(inputs[0])
    main_stream.wait_stream(warm)
    micro = 2 if shape == "overlap" else 1
    graphs, outs = [], []
    for i in range(micro):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outs.append(body(inputs[i]))
        graphs.append(g)
    streams = [main_stream, side][:micro]
    for _ in range(2):  # uploaded
        for g in graphs:
            g.replay()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(steps):
        for i in range(micro):
            inputs[i].copy_(host, non_blocking=True)
        for s in streams:  # (both streams wait for the inputs before either replays)
            s.wait_stream(main_stream)
        for g, s in zip(graphs, streams, strict=True):
            with torch.cuda.stream(s):
                g.replay()
        for i, s in enumerate(streams):
            main_stream.wait_stream(s)
            tokens[i].copy_(outs[i].argmax(dim=1), non_blocking=True)
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    memset = "" if shape != "copies" else f", memset {'on' if rt is not None else 'left out'}"
    print(f"shape {shape}, steps {steps}, tokens {tokens_n}{memset}, token {int(tokens[0, 0])}")


if __name__ == "__main__":
    main()
