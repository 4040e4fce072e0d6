"""A small CUDA program with the NVTX shape of an EAGLE decode loop, used to record test fixtures.

It is not the toy model of the decode loop (that lives in ``specscope.kernels``); it only has to put
on a timeline what the analysis must read: a ``step`` range per decode step holding the phases
``draft.prepare -> draft.replay -> verify.prepare -> verify.replay -> accept ->
draft_extend.prepare -> draft_extend.replay``, three CUDA graphs replayed once per step, eager
H2D and D2D copies in the prepare phases, a named eager Triton kernel ``fused_metadata_copy_kernel``
(``--copy-kernels`` launches per step, like the sibling-copy path) and a D2H sync in ``accept``.

Run under ``nsys profile --capture-range=cudaProfilerApi``: the profiler range opens after warm-up
and graph capture, so only the measured steps are recorded.

    python scripts/fixture_program.py --steps 12 --copy-kernels 4 --eager-copies 6
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import nvtx
import torch
import triton
import triton.language as tl

DOMAIN = "specscope"


@triton.jit
def fused_metadata_copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def copy_metadata(src: torch.Tensor, dst: torch.Tensor) -> None:
    n = src.numel()
    fused_metadata_copy_kernel[(triton.cdiv(n, 1024),)](src, dst, n, BLOCK=1024)


def make_forward(width: int, layers: int, seed: int):
    g = torch.Generator(device="cuda").manual_seed(seed)
    ws = [torch.randn(width, width, device="cuda", generator=g) / width**0.5 for _ in range(layers)]

    def forward(x: torch.Tensor, meta: torch.Tensor) -> torch.Tensor:
        for w in ws:
            x = torch.tanh(x @ w + meta[: x.shape[-1]].float())
        return x

    return forward


def capture(forward, x: torch.Tensor, meta: torch.Tensor):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            forward(x, meta)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = forward(x, meta)
    return graph, out


def range_(name: str, style: str):
    """An NVTX range in our domain: push/pop (``annotate``) or start/end."""
    if style == "push":
        return nvtx.annotate(name, domain=DOMAIN)

    class _StartEnd:
        def __enter__(self):
            self.handle = nvtx.start_range(name, domain=DOMAIN)

        def __exit__(self, *exc):
            nvtx.end_range(self.handle)

    return _StartEnd()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--copy-kernels", type=int, default=4, help="eager copy kernels per step")
    p.add_argument("--eager-copies", type=int, default=6, help="eager H2D+D2D copies per prepare")
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--step-style", choices=["push", "startend"], default="push")
    p.add_argument(
        "--json",
        action="store_true",
        help="time each measured step (perf_counter, synchronize after each step) and print "
        "one line `FIXTURE_JSON {...}` with p50/p10/p90/mean step µs and the loop's wall µs",
    )
    a = p.parse_args()

    torch.manual_seed(0)
    w = a.width
    meta_host = torch.arange(w * 4, dtype=torch.int32).pin_memory()  # [4w] int32
    draft_meta = torch.zeros(w * 4, dtype=torch.int32, device="cuda")
    sibling_meta = [torch.zeros_like(draft_meta) for _ in range(max(a.copy_kernels, 1))]
    verify_meta = torch.zeros_like(draft_meta)
    extend_meta = torch.zeros_like(draft_meta)
    x_draft = torch.randn(8, w, device="cuda")
    x_verify = torch.randn(48, w, device="cuda")
    x_extend = torch.randn(48, w, device="cuda")
    # The forwards own the weights their graphs read: keep them alive as long as the graphs.
    forwards = [make_forward(w, 4, 1), make_forward(w, 6, 2), make_forward(w, 2, 3)]
    g_draft, _ = capture(forwards[0], x_draft, draft_meta)
    g_verify, out_verify = capture(forwards[1], x_verify, verify_meta)
    g_extend, _ = capture(forwards[2], x_extend, extend_meta)
    staging = torch.zeros_like(draft_meta)

    def prepare(dst: torch.Tensor) -> None:
        for i in range(a.eager_copies):
            if i % 2 == 0:
                dst.copy_(meta_host, non_blocking=True)  # H2D
            else:
                staging.copy_(dst)  # D2D

    def step(k: int) -> None:
        with range_("step", a.step_style):
            with range_("draft.prepare", "push"):
                prepare(draft_meta)
                for dst in sibling_meta[: a.copy_kernels]:
                    copy_metadata(draft_meta, dst)
            with range_("draft.replay", "push"):
                g_draft.replay()
            with range_("verify.prepare", "push"):
                prepare(verify_meta)
            with range_("verify.replay", "push"):
                g_verify.replay()
            with range_("accept", "push"):
                accepted = int(out_verify[k % 48, 0].gt(0).cpu())  # D2H, host sync
            with range_("draft_extend.prepare", "push"):
                prepare(extend_meta)
                extend_meta[:1].fill_(accepted)
                staging.zero_()  # memset
            with range_("draft_extend.replay", "push"):
                g_extend.replay()

    for k in range(a.warmup):
        step(k)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    step_us = []
    t_loop = time.perf_counter()
    for k in range(a.steps):
        t0 = time.perf_counter()
        step(k)
        if a.json:
            torch.cuda.synchronize()
            step_us.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    loop_us = (time.perf_counter() - t_loop) * 1e6
    torch.cuda.profiler.stop()
    print(f"ran {a.steps} steps after {a.warmup} warm-up steps")
    if a.json:
        q = statistics.quantiles(step_us, n=10) if len(step_us) > 1 else step_us * 9
        summary = {
            "steps": a.steps,
            "step_us_p50": statistics.median(step_us),
            "step_us_p10": q[0],
            "step_us_p90": q[-1],
            "step_us_mean": statistics.fmean(step_us),
            "loop_us": loop_us,
        }
        print("FIXTURE_JSON " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
