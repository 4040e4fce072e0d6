"""Benchmark: host µs to issue one fused DSA metadata build, general path vs bound fast path.

Usage (on a CUDA machine; nothing here runs without one):

    python bench/dsa_host_launch.py --out bench/out   # writes dsa_host_launch.csv, prints a table

For each mode and bs (T = 6, live lengths 4k-8k, L = 16384, k = 4 by default) it checks that
both paths build the same metadata as the ordinary torch chain, then measures per path:

    host_us      CPU time to issue one build: median (p20/p80) of `--iters` calls, each timed
                 alone with perf_counter_ns; the queue is drained (synchronize) every 64 calls,
                 outside the timed windows, so the CPU never waits for a full launch queue
    gpu_us       GPU time per build with no launch gaps (`dsa_metadata.graph_time_us`: builds
                 captured in CUDA graphs of 50 and 100 builds, the slope)
    direct       whether later calls went through the compiled kernel's own launcher
                 (`BoundLaunch.direct`) rather than Triton's JIT
    sync_free    100 calls ran under torch.cuda.set_sync_debug_mode("error") without an error

Paths:
    general   build_metadata_fused(mode, inputs, out): checks, binds and launches every call
              (what every fused variant before `draft_captured` issues before a replay)
    fast      FastFusedBuilder()(mode, inputs, out): bound on the first call, then the bound
              launch only (what `draft_captured` issues before the verify and draft-extend
              replays; its draft build runs inside the draft graph)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dsa_metadata import (  # noqa: E402
    add_shape_args,
    append_csv_row,
    cuda_geometry,
    graph_time_us,
    new_csv,
    warm_gpu,
)

from specscope.kernels.ops.attention import (  # noqa: E402
    FastFusedBuilder,
    ForwardMode,
    allocate_metadata,
    build_metadata_fused,
    build_metadata_ordinary,
)
from specscope.kernels.ops.attention.testing import (  # noqa: E402
    assert_metadata_equal,
    make_forward_inputs,
)

DRAIN_EVERY = 64  # calls between queue drains (outside the timed windows)


def host_quantiles_us(fn, iters: int) -> tuple[float, float, float]:
    """(p20, p50, p80) of the CPU time of one call of `fn`, µs; no sync inside a window."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    times = []
    for i in range(iters):
        t0 = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - t0) / 1e3)
        if i % DRAIN_EVERY == DRAIN_EVERY - 1:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    q = statistics.quantiles(times, n=10)
    return q[1], statistics.median(times), q[7]


def sync_free(fn, calls: int = 100) -> bool:
    """`fn` makes no host sync: it runs `calls` times under sync debug mode "error"."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(calls):
            fn()
        return True
    except RuntimeError:
        return False
    finally:
        torch.cuda.set_sync_debug_mode(0)
        torch.cuda.synchronize()


def bench_case(mode: ForwardMode, bs: int, g, args: argparse.Namespace) -> list[dict]:
    gen = torch.Generator().manual_seed(bs)
    lens = torch.randint(args.min_len, args.max_len + 1, (bs,), generator=gen).tolist()
    acc = torch.randint(1, 7, (bs,), generator=gen).tolist()
    inputs = make_forward_inputs(
        mode, g, lens, accept_lens=acc, seed=bs, max_reqs=2 * bs, device="cuda"
    )
    rows = g.rows(mode, bs)
    ref = allocate_metadata(bs, rows, g, "cuda")
    build_metadata_ordinary(mode, inputs, ref)
    fast = FastFusedBuilder()
    paths = {
        "general": lambda o: build_metadata_fused(mode, inputs, o),
        "fast": lambda o: fast(mode, inputs, o),
    }
    out = []
    for name, build in paths.items():
        meta = allocate_metadata(bs, rows, g, "cuda", fill=-7)
        build(meta)
        build(meta)  # the fast path's second call is its first direct launch
        torch.cuda.synchronize()
        assert_metadata_equal(meta, ref, mode, bs)
        p20, p50, p80 = host_quantiles_us(lambda b=build, m=meta: b(m), args.iters)
        bound = next(iter(fast.bound.values()))[1] if name == "fast" else None
        out.append(
            {
                "mode": mode.name,
                "bs": bs,
                "path": name,
                "host_us": p50,
                "host_p20_us": p20,
                "host_p80_us": p80,
                "gpu_us": graph_time_us(lambda b=build, m=meta: b(m), 50, args.graph_iters),
                "direct": bool(bound and bound.direct),
                "sync_free": sync_free(lambda b=build, m=meta: b(m)),
                "iters": args.iters,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--bs", default="1,8,32")
    parser.add_argument("--min-len", type=int, default=4096)
    parser.add_argument("--max-len", type=int, default=8192)
    parser.add_argument("--iters", type=int, default=2000)
    add_shape_args(parser)
    args = parser.parse_args()
    g, provenance = cuda_geometry(args, "bench/dsa_host_launch.py")
    path = new_csv(args.out, "dsa_host_launch.csv")
    warm_gpu()
    for bs in [int(x) for x in args.bs.split(",")]:
        for mode in ForwardMode:
            for row in bench_case(mode, bs, g, args):
                append_csv_row(path, {**row, "kpool": g.index_kpool, **provenance})
                print(
                    f"{row['mode']:14} bs={bs:3} {row['path']:8} host={row['host_us']:7.2f}us "
                    f"(p20 {row['host_p20_us']:.2f}, p80 {row['host_p80_us']:.2f}) "
                    f"gpu={row['gpu_us']:6.2f}us direct={row['direct']} "
                    f"sync_free={row['sync_free']}",
                    flush=True,
                )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
