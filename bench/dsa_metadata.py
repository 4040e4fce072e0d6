"""Benchmark: DSA metadata, ordinary torch chain vs fused Triton kernel, per forward mode.

Usage (on a CUDA machine; nothing here runs without one):

    python bench/dsa_metadata.py --out bench/out          # writes dsa_metadata.csv, prints a table

For each mode and bs (T = 6, live lengths 4k-8k, L = 16384, k = 4) it checks fused == ordinary,
then measures three things per builder, each after warm-up and compilation:

    launches   GPU activities (kernels + memcpy + memset) per build, counted by torch.profiler
               (CUPTI) over `--profile-iters` builds and divided; `launch_names` lists them
    eager_us   CUDA-event time of one eager build, median (p20/p80) of triton.testing.do_bench:
               includes the GPU idling while the CPU launches the next op of a chain
    graph_us   GPU time per build with no CPU launch gaps: builds captured in CUDA graphs of
               `--graph-reps` and 2x as many builds, the difference of their median replay
               times (`--graph-iters` replays each) divided by `--graph-reps`, so the graph's
               own launch cost drops out (`graph_time_us`)
    kernel_us  sum of the profiler's device durations per build: pure GPU busy time
    host_us    CPU time to issue one build (median of 50, no sync inside): launch overhead
    sm_clock_mhz  the SM clock read right after graph_us was measured

`empty` rows time an empty Triton kernel the same way: the floor of one launch, measured first
(bs 0, after a second of GPU warm-up) and last (bs -1). The fused copy
(one source to two sibling sets) is measured against per-field `copy_` calls as `copy` rows.
Rows carry provenance (GPU, versions, git SHA, time).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import triton
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specscope.kernels.ops.attention import (  # noqa: E402
    DSAGeometry,
    ForwardMode,
    allocate_metadata,
    build_metadata_fused,
    build_metadata_ordinary,
    fused_metadata_copy,
)
from specscope.kernels.ops.attention.testing import (  # noqa: E402
    assert_metadata_equal,
    defined_lengths,
    make_forward_inputs,
)


@triton.jit
def _empty_kernel():
    pass


VERIFY = ForwardMode.TARGET_VERIFY


def empty_launch() -> None:
    _empty_kernel[(1,)]()


def warm_gpu(seconds: float = 1.0) -> None:
    """Keep the GPU busy for `seconds` so its clocks have ramped up before anything is timed.

    Without it the first rows (the empty-kernel floor above all) are measured on an idling GPU:
    we saw the floor at 1.6-1.9 µs as the first row of a process and 1.1 µs after other work.
    """
    a = torch.randn(4096, 4096, device="cuda")
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()


def profile(fn: Callable[[], None], iters: int) -> tuple[float, float, list[str]]:
    """(GPU activities per call, summed device µs per call, names of one call's activities).

    Activities are what CUPTI records on the device: kernels, memcpys and memsets.
    """
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    found = [
        (e.name, e.time_range.elapsed_us())
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
    ]
    if not found:  # older/newer profilers: read the raw Kineto events
        found = [
            (e.name(), e.duration_ns() / 1000)
            for e in prof.profiler.kineto_results.events()
            if e.device_type() == torch.autograd.DeviceType.CUDA
        ]
    busy_us = sum(us for _, us in found)
    return len(found) / iters, busy_us / iters, sorted({name for name, _ in found})


def capture_graph(fn: Callable[[], None], reps: int) -> torch.cuda.CUDAGraph:
    """`reps` calls of `fn` captured in one CUDA graph (after one call on a side stream)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(reps):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


def replay_us(graph: torch.cuda.CUDAGraph) -> float:
    """CUDA-event time of one replay of `graph`, in µs."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1000


def graph_time_us(fn: Callable[[], None], reps: int, iters: int, warm_s: float = 0.1) -> float:
    """GPU time per call: the slope between a graph of `reps` calls and one of `2 * reps`.

    One replay costs launch_graph + reps * per_call. Dividing one graph's time by `reps`
    leaves launch_graph / reps in every figure: about 0.4 µs per call at 20 reps on the H200
    (an empty kernel read 1.15 µs per call that way, 0.73 µs at 100 reps). The difference of
    the two graphs' medians cancels it. The two are replayed alternately, `iters` times each,
    after `warm_s` seconds of replays.
    """
    short, long = capture_graph(fn, reps), capture_graph(fn, 2 * reps)
    # Replay first: the GPU idles while the CPU runs the eager parts of a row. Without this, one
    # H200 run read the empty kernel at 0.71 µs as its first row and 1.23 µs as its last.
    end = time.perf_counter() + warm_s
    while time.perf_counter() < end:
        long.replay()
        torch.cuda.synchronize()
    t_short, t_long = [], []
    for _ in range(iters):
        t_short.append(replay_us(short))
        t_long.append(replay_us(long))
    return (statistics.median(t_long) - statistics.median(t_short)) / reps


def sm_clock_mhz() -> float:
    """The GPU's SM clock right after a measurement (NVML through torch), NaN if unreadable."""
    try:
        return float(torch.cuda.clock_rate())
    except Exception:  # no NVML bindings on this machine
        return float("nan")


def host_time_us(fn: Callable[[], None], iters: int = 50) -> float:
    """Median CPU time to issue one call (no sync inside the window): the launch overhead."""
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def measure(fn: Callable[[], None], args: argparse.Namespace) -> dict:
    p20, p50, p80 = do_bench(fn, warmup=25, rep=args.rep_ms, quantiles=[0.2, 0.5, 0.8])
    try:
        launches, kernel_us, names = profile(fn, args.profile_iters)
    except Exception as exc:  # keep the timings if this torch's profiler API differs
        print(f"profiler failed: {exc!r}", flush=True)
        launches, kernel_us, names = float("nan"), float("nan"), []
    return {
        "launches": launches,
        "eager_us": p50 * 1000,
        "eager_p20_us": p20 * 1000,
        "eager_p80_us": p80 * 1000,
        "graph_us": graph_time_us(fn, args.graph_reps, args.graph_iters),
        "sm_clock_mhz": sm_clock_mhz(),
        "kernel_us": kernel_us,
        "host_us": host_time_us(fn),
        "launch_names": ";".join(names),
    }


def per_field_copy(src, dsts, mode, bs) -> None:
    """What a backend does without the fused copy: one copy_ per field and destination."""
    lengths = defined_lengths(mode, src.geometry, bs)
    rows = src.geometry.rows(mode, bs)
    for dst in dsts:
        d_all = dst.tensors()
        for name, t in src.tensors().items():
            n = lengths.get(name, rows)
            d_all[name][:n].copy_(t[:n])


def new_csv(out_dir: Path, name: str) -> Path:
    """`out_dir/name` for a new run's rows; exits with one line if an earlier run wrote it."""
    path = out_dir / name
    if path.exists():
        raise SystemExit(f"{path} exists: pass another --out (earlier results are kept)")
    out_dir.mkdir(parents=True, exist_ok=True)
    return path


def append_csv_row(path: Path, row: dict) -> None:
    """Append `row` to the CSV at `path` (header first): a run cut off keeps its rows."""
    new = not path.exists()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(row))
        if new:
            writer.writeheader()
        writer.writerow(row)


def git_sha() -> str:
    if os.environ.get("SPECSCOPE_GIT_SHA"):
        return os.environ["SPECSCOPE_GIT_SHA"]
    try:
        return subprocess.check_output(["git", "rev-parse", "HEAD"], text=True).strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def add_shape_args(parser: argparse.ArgumentParser) -> None:
    """The geometry and timing options both DSA metadata benches take."""
    parser.add_argument("--kpool", type=int, default=4)
    parser.add_argument("--topk", type=int, default=2048)
    parser.add_argument("--width", type=int, default=16384)
    parser.add_argument("--graph-reps", type=int, default=50)
    parser.add_argument("--graph-iters", type=int, default=20)
    parser.add_argument("--profile-iters", type=int, default=10)


def cuda_geometry(args: argparse.Namespace, script: str) -> tuple[DSAGeometry, dict]:
    """The benchmark geometry on this GPU (T = 6, P = 64) and the provenance of every row."""
    if not torch.cuda.is_available():
        raise SystemExit(f"{script} needs a CUDA device")
    props = torch.cuda.get_device_properties(0)
    g = DSAGeometry(
        page_size=64,
        index_topk=args.topk,
        index_kpool=args.kpool,
        page_table_width=args.width,
        num_sms=props.multi_processor_count,
        num_draft_tokens=6,
    )
    provenance = {
        "gpu": props.name,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "git_sha": git_sha(),
        "time_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }
    return g, provenance


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("bench/out"))
    parser.add_argument("--bs", default="1,8,32,128")
    parser.add_argument("--min-len", type=int, default=4096)
    parser.add_argument("--max-len", type=int, default=8192)
    parser.add_argument("--rep-ms", type=int, default=100)
    add_shape_args(parser)
    args = parser.parse_args()
    g, provenance = cuda_geometry(args, "bench/dsa_metadata.py")
    provenance = {
        **provenance,
        "num_sms": g.num_sms,
        "kpool": g.index_kpool,
        "topk": g.index_topk,
        "width": g.page_table_width,
    }
    path = new_csv(args.out, "dsa_metadata.csv")

    def record(op: str, mode: str, bs: int, builder: str, m: dict) -> None:
        append_csv_row(
            path, {"op": op, "mode": mode, "bs": bs, "builder": builder, **m, **provenance}
        )
        print(
            f"{op:8} {mode:14} bs={bs:4} {builder:9} launches={m['launches']:5.1f} "
            f"eager={m['eager_us']:8.2f}us graph={m['graph_us']:8.2f}us "
            f"kernel={m['kernel_us']:8.2f}us host={m['host_us']:8.2f}us "
            f"sm={m['sm_clock_mhz']:.0f}MHz",
            flush=True,
        )

    warm_gpu()
    record("empty", "-", 0, "triton", measure(empty_launch, args))
    for bs in [int(x) for x in args.bs.split(",")]:
        gen = torch.Generator().manual_seed(bs)
        lens = torch.randint(args.min_len, args.max_len + 1, (bs,), generator=gen).tolist()
        acc = torch.randint(1, 7, (bs,), generator=gen).tolist()
        built = {}
        for mode in ForwardMode:
            inputs = make_forward_inputs(
                mode, g, lens, accept_lens=acc, seed=bs, max_reqs=2 * bs, device="cuda"
            )
            rows = g.rows(mode, bs)
            ordinary = allocate_metadata(bs, rows, g, "cuda")
            fused = allocate_metadata(bs, rows, g, "cuda")
            build_metadata_ordinary(mode, inputs, ordinary)
            build_metadata_fused(mode, inputs, fused)
            assert_metadata_equal(fused, ordinary, mode, bs)
            built[mode] = fused
            for name, fn in (
                ("ordinary", lambda m=mode, i=inputs, o=ordinary: build_metadata_ordinary(m, i, o)),
                ("fused", lambda m=mode, i=inputs, o=fused: build_metadata_fused(m, i, o)),
            ):
                record("build", mode.name, bs, name, measure(fn, args))
        src = built[VERIFY]
        dsts = [allocate_metadata(bs, g.rows(VERIFY, bs), g, "cuda") for _ in range(2)]
        fused_metadata_copy(src, dsts, VERIFY, bs)
        for d in dsts:
            assert_metadata_equal(d, src, VERIFY, bs)
        for name, fn in (
            ("ordinary", lambda s=src, d=dsts, b=bs: per_field_copy(s, d, VERIFY, b)),
            ("fused", lambda s=src, d=dsts, b=bs: fused_metadata_copy(s, d, VERIFY, b)),
        ):
            record("copy", VERIFY.name, bs, name, measure(fn, args))

    record("empty", "-", -1, "triton", measure(empty_launch, args))  # the floor again, at the end
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
