"""A large real export for the readers: an eager PyTorch loop of STEPS steps, each one NVTX
range (PyTorch's own ``torch.cuda.nvtx``) around a pinned host-to-device copy and KERNELS small
kernels: 1 M GPU operations at the defaults, recorded by a real nsys in seconds.

    nsys profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi \\
        --capture-range-end=stop python scripts/real/eager_steps.py [STEPS] [KERNELS]

``scripts/real/check_readers.sh`` records it and reads it every way (bench/README.md).
"""

import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
kernels = int(sys.argv[2]) if len(sys.argv) > 2 else 200
x = torch.zeros(1024, device="cuda")
host = torch.ones(1024).pin_memory()
for _ in range(3):  # warm up (allocator, kernels loaded)
    x.add_(1.0)
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for _ in range(steps):
    torch.cuda.nvtx.range_push("step")
    x.copy_(host, non_blocking=True)
    for _ in range(kernels):
        x.add_(1.0)
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("steps", steps, "kernels per step", kernels, "sum", float(x.sum()))
