"""Two tensor-parallel ranks on two GPUs, as a TP=2 server's decode looks in one export.

This script starts itself twice with ``subprocess`` (record with
``--trace-fork-before-exec=true``), rank r on GPU r, joined by ``torch.distributed`` over NCCL.
Each rank holds half of every layer's weights (a column-parallel up projection and a
row-parallel down projection, as Megatron and vLLM split an MLP) and sums the partial outputs
with an NCCL all-reduce after every layer. A decode step is: an eager H2D copy of the step's
inputs, the LAYERS layers (replayed as one CUDA graph that holds the NCCL all-reduces, or run
eagerly with ``--eager``: every kernel its own launch, as ``--enforce-eager`` does), then the
sampled token's argmax and its D2H copy (a sync, as a sampler's ``.tolist()``). No NVTX. NCCL's
set-up, the warm-up and the capture happen before ``cudaProfilerStart``; both ranks start and
stop the capture after a barrier.

    nsys profile -t cuda --trace-fork-before-exec=true --cuda-graph-trace=graph \\
        --capture-range=cudaProfilerApi --capture-range-end=stop \\
        python scripts/real/tp_ranks.py [STEPS] [LAYERS] [--eager]

NVLink multicast stays off (``NCCL_NVLS_ENABLE=0``: the lending machines' rule).
"""

import os
import socket
import subprocess
import sys

HIDDEN = 1024
BATCH = 8
WORLD = int(os.environ.get("TP_WORLD", "2"))  # (1: the script checked on one GPU)


def layers_forward(x, weights, dist) -> None:
    """The TP MLP layers on ``x`` (in place): each rank's half of the up and down projections,
    the partial outputs summed across the ranks."""
    import torch

    for up, down in weights:
        partial = torch.relu(x @ up) @ down
        dist.all_reduce(partial)
        x.copy_(partial)


def child(rank: int, steps: int, layers: int, eager: bool) -> None:
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=WORLD, device_id=torch.device(rank))
    gen = torch.Generator(device="cuda").manual_seed(0)
    shard = 4 * HIDDEN // WORLD
    weights = [
        (
            torch.randn(HIDDEN, shard, device="cuda", dtype=torch.half, generator=gen) * 0.02,
            torch.randn(shard, HIDDEN, device="cuda", dtype=torch.half, generator=gen) * 0.02,
        )
        for _ in range(layers)
    ]
    head = torch.randn(HIDDEN, 4096, device="cuda", dtype=torch.half, generator=gen) * 0.02
    x = torch.zeros(BATCH, HIDDEN, device="cuda", dtype=torch.half)
    host = torch.randn(BATCH, HIDDEN, dtype=torch.half).pin_memory()
    dist.all_reduce(torch.ones(1, device="cuda"))  # NCCL's communicator, before any capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream, as capture requires
        for _ in range(3):
            layers_forward(x, weights, dist)
    torch.cuda.current_stream().wait_stream(side)
    graph = None
    if not eager:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            layers_forward(x, weights, dist)
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.profiler.start()
    tokens = []
    for _ in range(steps):
        x.copy_(host, non_blocking=True)
        if graph is not None:
            graph.replay()
        else:
            layers_forward(x, weights, dist)
        tokens.append((x @ head).argmax(dim=-1).tolist())  # the D2H copy: a sync
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.profiler.stop()
    print(f"rank {rank} done: {len(tokens)} steps, token {tokens[-1][0]}", flush=True)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    eager = "--eager" in sys.argv[1:]
    if args[:1] == ["child"]:
        child(int(args[1]), int(args[2]), int(args[3]), eager)
        return
    steps = int(args[0]) if args else 30
    layers = int(args[1]) if len(args) > 1 else 2
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    env |= {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}
    env |= {"NVSHMEM_DISABLE_NVLS": "1"}
    flags = ["--eager"] if eager else []
    ranks = [
        subprocess.Popen(
            [sys.executable, __file__, "child", str(r), str(steps), str(layers), *flags], env=env
        )
        for r in range(WORLD)
    ]
    sys.exit(max(p.wait() for p in ranks))


if __name__ == "__main__":
    main()
