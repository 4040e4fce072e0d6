"""Two ranks of an EAGLE-shaped decode loop with one NCCL all-reduce per step (issue 9 fixture).

Each rank runs ``--steps`` steps; a step is an NVTX ``step`` range (domain ``specscope``, the
``eagle`` preset's names) holding ``draft.replay``, ``verify.replay`` and
``draft_extend.replay`` (a few matmuls each) and an ``allreduce`` range around one
``torch.distributed.all_reduce`` (NCCL). ``--straggler-rank R --straggler-us U`` makes rank R
spend U µs more on the host before its all-reduce, so the cross-rank view has a straggler.
NVLink multicast is kept off: ``NCCL_NVLS_ENABLE=0`` is set before NCCL starts.

Warm-up runs before ``torch.cuda.profiler.start()``, so record with the capture range:

    NSYS=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys
    torchrun --nproc-per-node 2 --no-python $NSYS profile -t cuda,nvtx -s none \\
        --cpuctxsw=none --cuda-graph-trace=node --capture-range=cudaProfilerApi \\
        --capture-range-end=stop -o /tmp/two_rank/rank%q{LOCAL_RANK} \\
        python scripts/two_rank_program.py --steps 40 --straggler-rank 1 --straggler-us 300
    for r in 0 1; do $NSYS export --type sqlite -o /tmp/two_rank/rank$r.sqlite \\
        /tmp/two_rank/rank$r.nsys-rep; done
    specscope analyze /tmp/two_rank/rank0.sqlite /tmp/two_rank/rank1.sqlite --skip 2

Without torchrun (no RANK in the environment) it spawns both ranks itself (one report with two
processes when run under a single ``nsys profile``; pick a rank with ``--pid``).
Needs two CUDA devices and the ``gpu`` extra (torch, nvtx).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast off, before torch/NCCL initialise

DOMAIN = "specscope"


def run_rank(rank: int, world: int, args: argparse.Namespace) -> None:
    import nvtx
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world)
    g = torch.Generator(device="cuda").manual_seed(rank)
    w = torch.randn(args.width, args.width, device="cuda", generator=g) / args.width**0.5
    x = torch.randn(args.batch, args.width, device="cuda", generator=g)
    grad = torch.ones(args.allreduce_elems, device="cuda")

    def phase(name: str, layers: int):
        nonlocal x
        with nvtx.annotate(name, domain=DOMAIN):
            for _ in range(layers):
                x = torch.tanh(x @ w)

    def step(k: int) -> None:
        with nvtx.annotate("step", domain=DOMAIN):
            phase("draft.replay", 2)
            phase("verify.replay", 4)
            if rank == args.straggler_rank:
                time.sleep(args.straggler_us / 1e6)  # host-side delay: the straggler
            with nvtx.annotate("allreduce", domain=DOMAIN):
                dist.all_reduce(grad)
            phase("draft_extend.replay", 1)
            torch.cuda.synchronize()

    for k in range(args.warmup):
        step(k)
    dist.barrier()
    torch.cuda.profiler.start()
    for k in range(args.steps):
        step(k)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    dist.barrier()
    dist.destroy_process_group()


def _spawned(rank: int, world: int, args: argparse.Namespace) -> None:
    run_rank(rank, world, args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--allreduce-elems", type=int, default=1 << 20)
    ap.add_argument("--straggler-rank", type=int, default=-1)
    ap.add_argument("--straggler-us", type=float, default=0.0)
    ap.add_argument("--port", type=int, default=29517)
    args = ap.parse_args()
    if "RANK" in os.environ:  # launched by torchrun: one process per rank
        run_rank(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    import torch.multiprocessing as mp

    mp.spawn(_spawned, args=(2, args), nprocs=2, join=True)


if __name__ == "__main__":
    main()
