"""Two processes on one GPU, as two ranks of a server look in one export: this script starts
itself twice with ``subprocess`` (record with ``--trace-fork-before-exec=true``); each child
captures a small CUDA graph (PyTorch's ``torch.cuda.CUDAGraph``) and replays it STEPS times, each
replay inside an NVTX range ``decode`` (PyTorch's own ``torch.cuda.nvtx``), with one eager
host-to-device copy before it.

    nsys profile -t cuda,nvtx --trace-fork-before-exec=true --cuda-graph-trace=graph \\
        python scripts/real/two_procs.py [STEPS]
"""

import subprocess
import sys


def child(steps: int) -> None:
    import torch

    x = torch.zeros(4096, device="cuda")
    host = torch.ones(4096).pin_memory()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture stream, as capture requires
        for _ in range(3):
            x.mul_(0.5).add_(1.0)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(8):
            x.mul_(0.5).add_(1.0)
    torch.cuda.synchronize()
    for _ in range(steps):
        torch.cuda.nvtx.range_push("decode")
        x.copy_(host, non_blocking=True)
        graph.replay()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print("rank done", float(x[0]))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]))
        return
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    ranks = [subprocess.Popen([sys.executable, __file__, "--child", str(steps)]) for _ in range(2)]
    sys.exit(max(p.wait() for p in ranks))


if __name__ == "__main__":
    main()
