"""An eager decode loop under PyTorch's own NVTX ranges, ``torch.autograd.profiler.emit_nvtx``
(``record_shapes=True``), as users record a model they did not instrument: a range per ATen
operator, named with its sequence number and shapes (``aten::linear, seq = 12, op_id = 34,
sizes = [[8, 512], ...]``), so that nearly every range name occurs once. Each step: an H2D
copy of the inputs, a 4-layer MLP, the argmax copied back. Capture and warm-up happen before
``cudaProfilerStart``.

    nsys profile -t cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop \\
        python scripts/real/emit_nvtx.py [STEPS]
"""

import argparse

import torch

HIDDEN = 512


def main() -> None:
    p = argparse.ArgumentParser(description="an eager MLP under torch's emit_nvtx")
    p.add_argument("steps", nargs="?", type=int, default=30)
    steps = p.parse_args().steps  # (a bad STEPS: one line, exit 2)
    if steps < 1:
        p.error("STEPS must be at least 1")
    torch.manual_seed(0)
    layers = [torch.nn.Linear(HIDDEN, HIDDEN) for _ in range(4)]
    model = torch.nn.Sequential(*[m for lin in layers for m in (lin, torch.nn.GELU())])
    model = model.cuda().half().eval()
    host = torch.randn(8, HIDDEN, dtype=torch.half).pin_memory()
    tokens = torch.empty(8, dtype=torch.long).pin_memory()
    x = torch.empty(8, HIDDEN, device="cuda", dtype=torch.half)
    with torch.no_grad():
        for _ in range(3):  # kernels loaded
            x.copy_(host, non_blocking=True)
            tokens.copy_(model(x).argmax(dim=1), non_blocking=True)
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        with torch.autograd.profiler.emit_nvtx(record_shapes=True):
            for _ in range(steps):
                x.copy_(host, non_blocking=True)
                tokens.copy_(model(x).argmax(dim=1), non_blocking=True)
                torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
    print("steps", steps, "token", int(tokens[0]))


if __name__ == "__main__":
    main()
