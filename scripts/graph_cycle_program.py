"""An SGLang-shaped EAGLE decode loop for recording the fixtures of traces nobody instrumented.

SGLang captures one CUDA graph per batch-size bucket and role: every target/verify graph
first, then the draft graphs, then the draft-extend graphs. A decode step is a cycle of replays
``draft -> verify -> draft_extend`` of the current bucket's graphs, with eager metadata work
(H2D/D2D copies, a named Triton copy kernel ``fused_metadata_copy_kernel``, a memset) before each
replay and a D2H sync in ``accept``. This program does the same with small matmul graphs, so
that its export has the shape of a real server's:

- ``--schedule 3x8,8x8``: batch size 3 for 8 steps (bucket 4), then 8 for 8 (bucket 8): the
  graph ids of each role change with the bucket, as in a server whose batch moves.
- ``--nvtx on|off``: NVTX ranges in domain ``specscope`` with the ``eagle`` preset's names
  (``step``, ``draft.prepare``, ``draft.replay``, ...), or none at all (an unmodified server).
- ``--no-graphs``: the same forwards run eagerly (an eager loop, for ``--step kernel:REGEX``);
  each step begins with one ``step_marker_kernel`` launch.
- ``--procs N``: N copies of the loop in N processes on the same device (the children are
  started with ``subprocess``: record with ``--trace-fork-before-exec=true``), like TP ranks of a
  server in one export.

Warm-up and graph capture happen before ``torch.cuda.profiler.start()``: record with
``--capture-range=cudaProfilerApi --capture-range-end=stop``.

    python scripts/graph_cycle_program.py --schedule 3x6,8x6 --nvtx on
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time

import torch
import triton
import triton.language as tl

DOMAIN = "specscope"
BUCKETS = (1, 2, 4, 8)
ROLES = ("verify", "draft", "draft_extend")  # SGLang's capture order: target first
LAYERS = {"draft": 4, "verify": 6, "draft_extend": 2}
ROWS = {"draft": 1, "verify": 6, "draft_extend": 6}  # rows per request (EAGLE 5/1/6)


@triton.jit
def fused_metadata_copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


@triton.jit
def step_marker_kernel(ptr, step):
    tl.store(ptr, step)


def parse_schedule(text: str) -> list[int]:
    """``3x8,8x8`` -> the batch size of each measured step."""
    out: list[int] = []
    for part in text.split(","):
        bs, _, n = part.partition("x")
        out += [int(bs)] * int(n)
    if not out or max(out) > BUCKETS[-1] or min(out) < 1:
        raise SystemExit(f"--schedule {text!r}: batch sizes 1..{BUCKETS[-1]}")
    return out


def bucket(bs: int) -> int:
    return next(b for b in BUCKETS if b >= bs)


def ranges(enabled: bool):
    if not enabled:
        return lambda name: contextlib.nullcontext()
    import nvtx

    return lambda name: nvtx.annotate(name, domain=DOMAIN)


class Role:
    """One role's weights, static inputs per bucket and (with graphs) one graph per bucket."""

    def __init__(self, name: str, width: int, seed: int) -> None:
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.ws = [
            torch.randn(width, width, device="cuda", generator=g) / width**0.5
            for _ in range(LAYERS[name])
        ]
        self.meta = torch.zeros(width * 4, dtype=torch.int32, device="cuda")  # [4w] int32
        self.x = {b: torch.randn(b * ROWS[name], width, device="cuda") for b in BUCKETS}
        self.out: dict[int, torch.Tensor] = {}
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}

    def forward(self, b: int) -> torch.Tensor:
        x = self.x[b]
        for w in self.ws:
            x = torch.tanh(x @ w + self.meta[: x.shape[-1]].float())
        return x

    def capture(self, b: int) -> None:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                self.forward(b)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.out[b] = self.forward(b)
        self.graphs[b] = graph

    def run(self, b: int) -> torch.Tensor:
        if self.graphs:
            self.graphs[b].replay()
            return self.out[b]
        return self.forward(b)


def loop(a: argparse.Namespace) -> None:
    torch.manual_seed(0)
    w = a.width
    roles = {name: Role(name, w, seed) for seed, name in enumerate(ROLES, 1)}
    if a.graphs:
        for name in ROLES:  # every bucket of a role, role by role
            for b in BUCKETS:
                roles[name].capture(b)
    rng = ranges(a.nvtx == "on")
    meta_host = torch.arange(w * 4, dtype=torch.int32).pin_memory()  # [4w] int32
    siblings = [torch.zeros_like(roles["draft"].meta) for _ in range(a.copy_kernels)]
    staging = torch.zeros_like(roles["draft"].meta)
    marker = torch.zeros(1, dtype=torch.int32, device="cuda")

    def prepare(meta: torch.Tensor) -> None:
        meta.copy_(meta_host, non_blocking=True)  # H2D
        staging.copy_(meta)  # D2D

    def step(k: int, bs: int) -> None:
        b = bucket(bs)
        with rng("step"):
            if not a.graphs:
                step_marker_kernel[(1,)](marker, k)
            with rng("draft.prepare"):
                prepare(roles["draft"].meta)
                for dst in siblings:
                    n = dst.numel()
                    fused_metadata_copy_kernel[(triton.cdiv(n, 1024),)](
                        roles["draft"].meta, dst, n, BLOCK=1024
                    )
            with rng("draft.replay"):
                roles["draft"].run(b)
            with rng("verify.prepare"):
                prepare(roles["verify"].meta)
            with rng("verify.replay"):
                out = roles["verify"].run(b)
            with rng("accept"):
                accepted = int(out[k % out.shape[0], 0].gt(0).cpu())  # D2H, host sync
            with rng("draft_extend.prepare"):
                prepare(roles["draft_extend"].meta)
                roles["draft_extend"].meta[:1].fill_(accepted)
                staging.zero_()  # memset
            with rng("draft_extend.replay"):
                roles["draft_extend"].run(b)

    schedule = parse_schedule(a.schedule)
    for k in range(a.warmup):
        step(k, schedule[k % len(schedule)])
    torch.cuda.synchronize()
    barrier("start")
    torch.cuda.profiler.start()
    for k, bs in enumerate(schedule):
        step(k, bs)
    torch.cuda.synchronize()
    barrier("stop")  # the first process to stop ends the capture: stop together
    torch.cuda.profiler.stop()
    print(f"pid {os.getpid()}: ran {len(schedule)} steps (batch sizes {a.schedule})", flush=True)


def barrier(name: str, timeout_s: float = 120.0) -> None:
    """Wait until every process of ``--procs`` reached ``name`` (files in $GRAPH_CYCLE_BARRIER)."""
    folder, procs = os.environ.get("GRAPH_CYCLE_BARRIER"), int(os.environ.get("GRAPH_CYCLE_N", 1))
    if not folder or procs < 2:
        return
    with open(os.path.join(folder, f"{name}.{os.getpid()}"), "w"):
        pass
    deadline = time.monotonic() + timeout_s
    while sum(f.startswith(name + ".") for f in os.listdir(folder)) < procs:
        if time.monotonic() > deadline:
            raise SystemExit(f"barrier {name}: not every process arrived in {timeout_s} s")
        time.sleep(0.001)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--schedule", default="3x6,8x6", help="BSxSTEPS,...: batch size per step")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--nvtx", choices=["on", "off"], default="off")
    p.add_argument("--graphs", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--copy-kernels", type=int, default=2, help="eager copy kernels per step")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--procs", type=int, default=1, help="run N copies in N child processes")
    a = p.parse_args()
    if a.procs > 1:
        argv, args = sys.argv[1:], []
        while argv:  # drop --procs N / --procs=N, keep the rest for the children
            arg = argv.pop(0)
            if arg == "--procs":
                argv.pop(0)
            elif not arg.startswith("--procs="):
                args.append(arg)
        with tempfile.TemporaryDirectory() as folder:
            env = os.environ | {"GRAPH_CYCLE_BARRIER": folder, "GRAPH_CYCLE_N": str(a.procs)}
            children = [
                subprocess.Popen([sys.executable, __file__, *args, "--procs=1"], env=env)
                for _ in range(a.procs)
            ]
            sys.exit(max(c.wait() for c in children))
    loop(a)


if __name__ == "__main__":
    main()
