"""A capture range that starts and ends inside a step, as a hand-placed ``cudaProfilerStart``
often does: an eager loop of STEPS NVTX ``step`` ranges (PyTorch's ``torch.cuda.nvtx``), each an
H2D copy and KERNELS launches, with the profiler started after step 2's range opened and half
its kernels ran, and stopped halfway through the last step, before its range closes.

    nsys profile -t cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop \\
        python scripts/real/partial_capture.py [STEPS] [KERNELS]

The export then holds a first step whose range began before the capture and a last one whose
range never closes: neither is a whole step.
"""

import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
kernels = int(sys.argv[2]) if len(sys.argv) > 2 else 16
x = torch.zeros(1024, device="cuda")
host = torch.ones(1024).pin_memory()
for _ in range(3):
    x.add_(1.0)
torch.cuda.synchronize()
for i in range(steps):
    torch.cuda.nvtx.range_push("step")
    x.copy_(host, non_blocking=True)
    for k in range(kernels):
        if i == 2 and k == kernels // 2:
            torch.cuda.cudart().cudaProfilerStart()
        if i == steps - 1 and k == kernels // 2:
            torch.cuda.synchronize()
            torch.cuda.cudart().cudaProfilerStop()
        x.add_(1.0)
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
print("steps", steps, "kernels per step", kernels, "sum", float(x.sum()))
