"""A program nobody instrumented for specscope: PyTorch's own CUDA graphs. An MLP block compiled
with ``torch.compile(mode="reduce-overhead")`` (Inductor's Triton kernels, replayed by
PyTorch's CUDA graph trees) called 40 times in the capture range, each output cloned and fed back
(no NVTX).

    nsys profile -t cuda,nvtx,osrt,cublas --cuda-memory-usage=true \\
        --cuda-graph-trace=graph --capture-range=cudaProfilerApi --capture-range-end=stop \\
        python scripts/real/torch_compile.py
"""

import torch

torch.manual_seed(0)
block = torch.nn.Sequential(
    torch.nn.LayerNorm(512),
    torch.nn.Linear(512, 2048),
    torch.nn.GELU(),
    torch.nn.Linear(2048, 512),
)
block = block.cuda().half().eval()
step = torch.compile(block, mode="reduce-overhead")
x = torch.randn(16, 512, device="cuda", dtype=torch.half)
with torch.no_grad():
    for _ in range(4):  # compile, record the graph, warm up
        x = step(x).clone()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(40):
        torch.compiler.cudagraph_mark_step_begin()
        x = step(x).clone()  # the clone: the graph's output buffer is reused by the next replay
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
print("output", tuple(x.shape), float(x.float().abs().mean()))
