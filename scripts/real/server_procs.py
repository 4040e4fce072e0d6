"""A server's processes as SGLang lays them out, in one export: a CPU-only front end (NVTX
ranges ``tokenize`` and ``detokenize``, no CUDA at all) and a GPU worker that replays a CUDA
graph per decode step without any NVTX, both started by this script with ``subprocess``
(record with ``--trace-fork-before-exec=true``). The parent makes no NVTX or CUDA calls itself.

    nsys profile -t cuda,nvtx --trace-fork-before-exec=true --cuda-graph-trace=graph \\
        python scripts/real/server_procs.py [STEPS]

Zero-config should analyse the worker (the only process with GPU work) and say nothing odd of
the front end, whose ranges are many and regular but launch nothing.
"""

import subprocess
import sys
import time


def front_end(steps: int) -> None:
    import torch  # (torch.cuda.nvtx only: this process never initialises CUDA)

    for i in range(steps):
        torch.cuda.nvtx.range_push("tokenize")
        text = " ".join(str(j * i) for j in range(2000))
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("detokenize")
        _ = text.split()
        torch.cuda.nvtx.range_pop()
        time.sleep(0.002)


def worker(steps: int) -> None:
    import torch

    x = torch.zeros(8, 1024, device="cuda", dtype=torch.half)
    w = torch.randn(1024, 1024, device="cuda", dtype=torch.half) * 0.01
    host = torch.ones(8, 1024, dtype=torch.half).pin_memory()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up off the capture stream, as capture requires
        for _ in range(3):
            y = torch.relu(x @ w) + x
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(6):
            y = torch.relu(y @ w) + x
    torch.cuda.synchronize()
    out = torch.empty(8, dtype=torch.long).pin_memory()
    for _ in range(steps):
        x.copy_(host, non_blocking=True)
        graph.replay()
        out.copy_(y.argmax(dim=1), non_blocking=True)
        torch.cuda.synchronize()
    print("worker done", int(out[0]))


def main() -> None:
    if sys.argv[1:2] == ["--front"]:
        front_end(int(sys.argv[2]))
        return
    if sys.argv[1:2] == ["--worker"]:
        worker(int(sys.argv[2]))
        return
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    procs = [subprocess.Popen([sys.executable, __file__, role, str(steps)])
             for role in ("--front", "--worker")]  # fmt: skip
    sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
