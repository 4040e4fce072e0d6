"""Benchmark: how fast can anything write a DSA page table, and how close do the builds come?

Usage (on a CUDA machine):

    python bench/dsa_copy_bound.py --out bench/out          # writes dsa_copy_bound.csv
    python bench/dsa_copy_bound.py --once                    # each kernel once (for ncu)

Issue 3 asks for a fused build within 2x an empty kernel at bs 32. The TARGET_VERIFY and
DRAFT_EXTEND builds must write the live prefix of 192 page-table rows (4.77 MB at T = 6, live
lengths 4k-8k), DECODE 32 rows (0.8 MB), so this bench measures the lower bounds of that write
side by side with the fused build and its stages. The candidate copies measured against them
(`tail,*`, `units,*` rows in `bench/data/`) were dropped once measured; they are in this file
as of `cb3ba54`. Same geometry and inputs as `bench/dsa_metadata.py`. Rows (`config`):

    empty               an empty Triton kernel on a grid of 1: the floor of one launch
    load-store          one program copying one int32: the floor of a kernel whose output
                        depends on a load (one round trip to memory)
    load-load-store     dst[0] = src[idx[0]]: two dependent round trips, the floor of anything
                        that copies page-table rows (request -> pool row -> its slots)
    fill                `Tensor.fill_` of as many int32 as the live prefixes hold, contiguous
    store-contig,B,W    the same bytes stored by Triton, B int32 per program, W warps, no loads
                        and no masks: the cheapest way to write that many bytes
    store-rows          the real layout (rows of width L, live prefixes only), one program per
                        (request, span of 1024 columns), storing to the request's T rows; it
                        loads only its request's length, no page-table data
    layout,...          store-rows with one thing changed: programs numbered span-major, rows
                        padded by 32, 64 or 1024 columns, or every request 6144 long (no load)
    build               the fused build as the builders launch it (all fields)
    page-table,C,W      the fused build's page-table stage alone, spans of C columns, W warps
    stage,S             the fused build with only stage S (fields, schedule, or meta = both)
    build-rot8          the fused build over 8 rotating input/output sets (134 MB > the 50 MB L2):
                        a cold-cache figure, closer to a build between model forwards

Timing: every config is captured in two CUDA graphs, of `--graph-reps` and twice as many launches;
the rounds replay every config's pair in turn (`--rounds` x `--graph-iters` pairs), so slow
drift hits all configs alike. A pair's time difference over `--graph-reps` is one launch's GPU
time without the graph's own launch cost (`graph_time_us` in `dsa_metadata.py`); graph_us is
its median over all pairs, p10/p90 its spread. kernel_us is the CUPTI device time per launch.
Every config that writes a page table is checked against the ordinary path first.
"""

from __future__ import annotations

import argparse
import statistics
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
    capture_graph,
    cuda_geometry,
    new_csv,
    profile,
    replay_us,
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
from specscope.kernels.ops.attention.testing import make_forward_inputs  # noqa: E402


@triton.jit
def _store_contig_kernel(dst, BLOCK: tl.constexpr):
    """dst[i] = i over BLOCK int32 per program; no loads, no masks."""
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + o, o)


@triton.jit
def _load_store_kernel(src, dst):
    """dst[0] = src[0]: the floor of any kernel whose output depends on a load."""
    tl.store(dst, tl.load(src))


@triton.jit
def _load_load_store_kernel(idx, src, dst):
    """dst[0] = src[idx[0]]: the floor of a page-table copy (row index, then the row)."""
    tl.store(dst, tl.load(src + tl.load(idx)))


@triton.jit
def _store_rows_kernel(
    dst,
    stride,
    seq_lens_ptr,
    bs,
    T: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    N_SPANS: tl.constexpr,
    SPAN_MAJOR: tl.constexpr,
    FIXED_LEN: tl.constexpr,
):
    """The page table's layout without its data: program (b, c) stores column indices into
    span c of request b's T rows (TARGET_VERIFY lengths), unmasked where the span is live.

    Knobs, to find what the row layout costs over contiguous stores: SPAN_MAJOR numbers the
    programs span-major (neighbouring programs write different requests); FIXED_LEN > 0 gives
    every request that length (no load)."""
    w = tl.program_id(0)
    if SPAN_MAJOR:
        b = w % bs
        start = (w // bs) * BLOCK_COLS
    else:
        b = w // N_SPANS
        start = (w % N_SPANS) * BLOCK_COLS
    cols = start + tl.arange(0, BLOCK_COLS)
    if FIXED_LEN > 0:
        shortest = FIXED_LEN - T + 1
    else:
        shortest = tl.load(seq_lens_ptr + b) - T + 1
    if start + BLOCK_COLS <= shortest:
        for j in tl.static_range(T):
            tl.store(dst + (b * T + j).to(tl.int64) * stride + cols, cols)
    elif start < shortest + T - 1:
        for j in tl.static_range(T):
            tl.store(dst + (b * T + j).to(tl.int64) * stride + cols, cols, mask=cols < shortest + j)


def check_page_table(out, ref, rows: int, g) -> None:
    """page_table_1 and real_page_table of `out` equal `ref` on every row's live prefix."""
    lens = ref.seqlens_expanded[:rows].tolist()
    for r, n in enumerate(lens):
        pages = triton.cdiv(n, g.page_size)
        if not torch.equal(out.page_table_1[r, :n], ref.page_table_1[r, :n]) or not torch.equal(
            out.real_page_table[r, :pages], ref.real_page_table[r, :pages]
        ):
            raise AssertionError(f"page table differs from the ordinary path in row {r}")


def configs_for(mode: ForwardMode, bs: int, g, lengths: tuple[int, int]) -> tuple[dict, int]:
    """config name -> zero-argument launch, for one mode at one batch size."""
    gen = torch.Generator().manual_seed(bs)
    lens = torch.randint(lengths[0], lengths[1] + 1, (bs,), generator=gen).tolist()
    acc = torch.randint(1, 7, (bs,), generator=gen).tolist()
    rows = g.rows(mode, bs)
    sets = []
    for k in range(8):
        inputs = make_forward_inputs(
            mode, g, lens, accept_lens=acc, seed=bs + k, max_reqs=2 * bs, device="cuda"
        )
        ref = allocate_metadata(bs, rows, g, "cuda")
        build_metadata_ordinary(mode, inputs, ref)
        sets.append((inputs, ref, allocate_metadata(bs, rows, g, "cuda")))
    inputs, ref, out = sets[0]
    live = int(ref.seqlens_expanded[:rows].sum())
    configs = {}
    checked = {"build": out}  # config -> the metadata it writes, checked before timing

    fill_buf = torch.empty(live, dtype=torch.int32, device="cuda")
    configs["fill"] = lambda: fill_buf.fill_(7)
    for block, warps in ((256, 2), (512, 4), (1024, 4), (2048, 4), (4096, 8)):
        n = triton.cdiv(live, block) * block
        buf = torch.empty(n, dtype=torch.int32, device="cuda")
        configs[f"store-contig,{block},{warps}"] = lambda b=buf, n=n, blk=block, w=warps: (
            _store_contig_kernel[(n // blk,)](b, BLOCK=blk, num_warps=w)
        )
    if mode is ForwardMode.TARGET_VERIFY:
        n_spans = triton.cdiv(g.page_table_width, 1024)

        def rows_buffer(pad):  # the [rows, L] layout, each row `pad` int32 further apart
            buf = torch.empty(rows, g.page_table_width + pad, dtype=torch.int32, device="cuda")
            return buf[:, : g.page_table_width]

        for name, pad, major, fixed in (
            ("store-rows", 0, False, 0),
            ("layout,span-major", 0, True, 0),
            ("layout,pad32", 32, False, 0),
            ("layout,pad64", 64, False, 0),
            ("layout,pad1024", 1024, False, 0),
            ("layout,fixed6144", 0, False, 6144),
            ("layout,fixed6144,pad64", 64, False, 6144),
        ):
            buf = rows_buffer(pad)
            configs[name] = lambda buf=buf, major=major, fixed=fixed: _store_rows_kernel[
                (bs * n_spans,)
            ](
                buf,
                buf.stride(0),
                inputs.seq_lens,
                bs,
                T=g.num_draft_tokens,
                BLOCK_COLS=1024,
                N_SPANS=n_spans,
                SPAN_MAJOR=major,
                FIXED_LEN=fixed,
            )

    configs["build"] = lambda: build_metadata_fused(mode, inputs, out)
    for cols, warps in ((1024, 4), (512, 2), (256, 1), (256, 2)):
        s = launch_settings(rows, bs, g, block_cols=cols, num_warps=warps, stages=PAGE_TABLE)
        pt_out = allocate_metadata(bs, rows, g, "cuda")
        configs[f"page-table,{cols},{warps}"] = lambda s=s, o=pt_out: build_metadata_fused(
            mode, inputs, o, s
        )
        checked[f"page-table,{cols},{warps}"] = pt_out
    for name, stages in (("fields", FIELDS), ("schedule", SCHEDULE), ("meta", FIELDS | SCHEDULE)):
        s = launch_settings(rows, bs, g, stages=stages)
        st_out = allocate_metadata(bs, rows, g, "cuda")
        configs[f"stage,{name}"] = lambda s=s, o=st_out: build_metadata_fused(mode, inputs, o, s)
    state = {"k": 0}

    def build_rot8():
        i, _, o = sets[state["k"] % len(sets)]
        state["k"] += 1
        build_metadata_fused(mode, i, o)

    configs["build-rot8"] = build_rot8

    # correctness of everything that builds page tables, before any timing
    for name in checked:
        configs[name]()
    for _ in sets:
        build_rot8()
    torch.cuda.synchronize()
    for o in checked.values():
        check_page_table(o, ref, rows, g)
    for _, r, o in sets:
        check_page_table(o, r, rows, g)
    return configs, live


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--bs", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-len", type=int, default=4096, help="shortest live length")
    parser.add_argument("--max-len", type=int, default=8192, help="longest live length")
    parser.add_argument("--once", action="store_true", help="run each config once (for ncu)")
    add_shape_args(parser)
    args = parser.parse_args()
    g, provenance = cuda_geometry(args, "bench/dsa_copy_bound.py")
    path = None if args.once else new_csv(args.out, "dsa_copy_bound.csv")
    one = torch.ones(4, dtype=torch.int32, device="cuda")
    all_configs = {
        ("-", "empty"): (lambda: _empty_kernel[(1,)](), 0),
        ("-", "load-store"): (lambda: _load_store_kernel[(1,)](one, one[1:]), 4),
        ("-", "load-load-store"): (
            lambda: _load_load_store_kernel[(1,)](one, one[1:], one[1:]),
            4,
        ),
    }
    for mode in ForwardMode:
        configs, live = configs_for(mode, args.bs, g, (args.min_len, args.max_len))
        for name, fn in configs.items():
            all_configs[(mode.name, name)] = (fn, 4 * live)
    print(f"{len(all_configs)} configs checked", flush=True)
    if args.once:
        for fn, _ in all_configs.values():
            fn()
        torch.cuda.synchronize()
        return

    warm_gpu()
    reps = args.graph_reps
    graphs = {
        key: (capture_graph(fn, reps), capture_graph(fn, 2 * reps))
        for key, (fn, _) in all_configs.items()
    }
    times: dict = {key: [] for key in graphs}  # per-launch µs of each paired replay
    for _ in range(args.rounds):
        for key, (short, long) in graphs.items():
            for _ in range(args.graph_iters):
                t_short = replay_us(short)
                times[key].append((replay_us(long) - t_short) / reps)
    floor = statistics.median(times[("-", "empty")])
    for (mode, name), (fn, nbytes) in all_configs.items():
        ts = sorted(times[(mode, name)])
        _, kernel_us, _ = profile(fn, args.profile_iters)
        row = {
            "mode": mode,
            "bs": args.bs,
            "min_len": args.min_len,
            "max_len": args.max_len,
            "config": name,
            "graph_us": statistics.median(ts),
            "graph_p10_us": ts[len(ts) // 10],
            "graph_p90_us": ts[9 * len(ts) // 10],
            "x_floor": statistics.median(ts) / floor,
            "kernel_us": kernel_us,
            "bytes_written": nbytes,
            **provenance,
        }
        append_csv_row(path, row)
        print(
            f"{mode:14} {name:26} graph={row['graph_us']:6.2f}us "
            f"(p10 {row['graph_p10_us']:5.2f} p90 {row['graph_p90_us']:5.2f}) "
            f"x{row['x_floor']:4.2f} kernel={kernel_us:6.2f}us",
            flush=True,
        )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
