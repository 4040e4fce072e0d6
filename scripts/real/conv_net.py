"""A program nobody instrumented for specscope, on cuDNN: an eager convolutional network's
inference (PyTorch, channels-last half precision, cuDNN convolutions and batch norms) on
STEPS batches, each batch copied from pinned memory and its class indices copied back. No
NVTX, no CUDA graphs.

    nsys profile -t cuda,cudnn,cublas --capture-range=cudaProfilerApi --capture-range-end=stop \\
        python scripts/real/conv_net.py [STEPS]
"""

import sys

import torch

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 30
torch.manual_seed(0)
torch.backends.cudnn.benchmark = False
layers = []
channels = 3
for width in (32, 64, 64, 128):
    layers += [torch.nn.Conv2d(channels, width, 3, padding=1), torch.nn.BatchNorm2d(width),
               torch.nn.ReLU(), torch.nn.MaxPool2d(2)]  # fmt: skip
    channels = width
net = torch.nn.Sequential(*layers, torch.nn.Flatten(), torch.nn.Linear(128 * 4 * 4, 10))
net = net.cuda().half().eval().to(memory_format=torch.channels_last)
host = torch.randn(16, 3, 64, 64).half().pin_memory()
x = torch.empty(16, 3, 64, 64, device="cuda", dtype=torch.half)
out = torch.empty(16, dtype=torch.long).pin_memory()
with torch.no_grad():
    for _ in range(3):  # warm up: cuDNN picks its algorithms here
        net(x.to(memory_format=torch.channels_last))
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(steps):
        x.copy_(host, non_blocking=True)
        logits = net(x.to(memory_format=torch.channels_last))
        out.copy_(logits.argmax(dim=1), non_blocking=True)
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
print("steps", steps, "first class", int(out[0]))
