"""Benchmark: where a fused DSA metadata build's GPU time goes (stage ablation + launch sweep).

Usage (on a CUDA machine):

    python bench/dsa_metadata_stages.py --out bench/out        # writes dsa_metadata_stages.csv

Same geometry and inputs as `bench/dsa_metadata.py` (T = 6, live lengths 4k-8k, L = 16384,
k = 4, K = 2048). For each mode at `--bs`, every row is one launch configuration:

    empty            an empty Triton kernel on a grid of 1 (the floor of one launch), first
                     (bs 0, after a second of GPU warm-up) and last (bs -1)
    empty-grid       the same empty kernel on the fused build's grid: the cost of the programs
    full             the fused build as the builders launch it
    fields / schedule / meta / page-table
                     the fused build with only those stages (`scan.py`'s stage bits; `meta` =
                     fields + schedule); the grid stays the full one
    bytes-copy       `Tensor.copy_` of as many int32 as the live page-table prefixes hold: what
                     moving those bytes costs as one bandwidth-bound copy kernel
    bytes-copy-triton
                     the same bytes (rounded up to 1024 int32) by a 3-line unmasked Triton copy,
                     1024 int32 per program
    cols=C,warps=W
                     (`--sweep`) the full build under other launch settings

Columns: graph_us (GPU time per launch from CUDA-graph replays with the graph's own launch cost
taken out: `graph_time_us` in `bench/dsa_metadata.py`, which reports the same) and kernel_us
(CUPTI device time per launch: busy time). Every configuration that builds is first checked
against the ordinary path.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from dsa_metadata import (  # noqa: E402
    _empty_kernel,
    add_shape_args,
    append_csv_row,
    cuda_geometry,
    graph_time_us,
    new_csv,
    profile,
    warm_gpu,
)

from specscope.kernels.ops.attention import (  # noqa: E402
    ForwardMode,
    allocate_metadata,
    build_metadata_fused,
    build_metadata_ordinary,
)
from specscope.kernels.ops.attention.dsa_kpool_metadata import launch_settings  # noqa: E402
from specscope.kernels.ops.attention.dsa_kpool_metadata.scan import (  # noqa: E402
    FIELDS,
    PAGE_TABLE,
    SCHEDULE,
)
from specscope.kernels.ops.attention.testing import (  # noqa: E402
    assert_metadata_equal,
    make_forward_inputs,
)


@triton.jit
def _bytes_copy_kernel(src, dst, BLOCK: tl.constexpr):
    """dst = src, BLOCK int32 per program, no masks (the length is a multiple of BLOCK)."""
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + o, tl.load(src + o))


STAGE_ROWS = {
    "fields": dict(stages=FIELDS),
    "schedule": dict(stages=SCHEDULE),
    "meta": dict(stages=FIELDS | SCHEDULE),
    "page-table": dict(stages=PAGE_TABLE),
}


def sweep_rows() -> dict[str, dict]:
    rows = {}
    for cols, warps in itertools.product((256, 512, 1024), (2, 4)):
        rows[f"cols={cols},warps={warps}"] = dict(block_cols=cols, num_warps=warps)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--bs", default="32")
    parser.add_argument("--sweep", action="store_true", help="also sweep the launch settings")
    add_shape_args(parser)
    args = parser.parse_args()
    g, provenance = cuda_geometry(args, "bench/dsa_metadata_stages.py")
    path = new_csv(args.out, "dsa_metadata_stages.csv")

    def record(mode: str, bs: int, config: str, fn, extra: dict | None = None) -> dict:
        fn()
        torch.cuda.synchronize()
        launches, kernel_us, _ = profile(fn, args.profile_iters)
        row = {
            "mode": mode,
            "bs": bs,
            "config": config,
            "graph_us": graph_time_us(fn, args.graph_reps, args.graph_iters),
            "kernel_us": kernel_us,
            "launches": launches,
            "grid": (extra or {}).get("grid", ""),
            "bytes": (extra or {}).get("bytes", ""),
            **provenance,
        }
        append_csv_row(path, row)
        print(
            f"{mode:14} bs={bs:4} {config:34} graph={row['graph_us']:7.2f}us "
            f"kernel={kernel_us:7.2f}us launches={launches:.1f} {extra or ''}",
            flush=True,
        )
        return row

    warm_gpu()
    record("-", 0, "empty", lambda: _empty_kernel[(1,)]())
    for bs in [int(x) for x in args.bs.split(",")]:
        gen = torch.Generator().manual_seed(bs)
        lens = torch.randint(4096, 8193, (bs,), generator=gen).tolist()
        acc = torch.randint(1, 7, (bs,), generator=gen).tolist()
        for mode in ForwardMode:
            inputs = make_forward_inputs(
                mode, g, lens, accept_lens=acc, seed=bs, max_reqs=2 * bs, device="cuda"
            )
            rows = g.rows(mode, bs)
            ordinary = allocate_metadata(bs, rows, g, "cuda")
            build_metadata_ordinary(mode, inputs, ordinary)
            live = int(ordinary.seqlens_expanded[:rows].sum())
            default = launch_settings(rows, bs, g)
            grid = default.grid(bs)
            record(
                mode.name,
                bs,
                "empty-grid",
                lambda grid=grid: _empty_kernel[grid](),
                {"grid": grid[0]},
            )
            src = torch.zeros(live, dtype=torch.int32, device="cuda")
            dst = torch.empty_like(src)
            record(
                mode.name, bs, "bytes-copy", lambda d=dst, s=src: d.copy_(s), {"bytes": 4 * live}
            )
            n = triton.cdiv(live, 1024) * 1024
            src2 = torch.zeros(n, dtype=torch.int32, device="cuda")
            dst2 = torch.empty_like(src2)
            record(
                mode.name,
                bs,
                "bytes-copy-triton",
                lambda d=dst2, s=src2, n=n: _bytes_copy_kernel[(n // 1024,)](s, d, BLOCK=1024),
                {"bytes": 4 * n},
            )

            configs = {"full": {}, **STAGE_ROWS}
            if args.sweep:
                configs.update(sweep_rows())
            for name, overrides in configs.items():
                settings = launch_settings(rows, bs, g, **overrides)
                out = allocate_metadata(bs, rows, g, "cuda")

                def build(s=settings, i=inputs, o=out, m=mode):
                    build_metadata_fused(m, i, o, s)

                try:
                    build()
                    if "stages" not in overrides:
                        assert_metadata_equal(out, ordinary, mode, bs)
                    record(mode.name, bs, name, build, {"grid": settings.grid(bs)[0]})
                except Exception as exc:  # one failing configuration must not end the sweep
                    print(f"{mode.name} bs={bs} {name}: {exc!r}", flush=True)
    record("-", -1, "empty", lambda: _empty_kernel[(1,)]())  # the floor again, at the end
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
