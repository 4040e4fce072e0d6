"""Write a large synthetic Nsight Systems export of an EAGLE decode loop, for benchmarks.

The export looks like ``nsys profile -t cuda,nvtx --cuda-graph-trace=node`` of one process with
one main thread running speculative decoding steps::

    CPU  |step ...................................................................|
         |draft.prepare|draft.replay|verify.prepare|verify.replay|accept  |draft_extend...
          cpy cpy launch GraphLaunch  cpy cpy launch GraphLaunch  D2H sync
    GPU 7      c  c  k     gggggggggggggg  c  c  k   gggggggggggggggggggg d
    GPU 13      c (D2D copies, memsets)      c

Each ``*.prepare`` issues eager ``cudaMemcpyAsync`` calls (1-3 H2D on stream 7, one D2D on
stream 13), ``cudaLaunchKernel`` calls (``fused_metadata_copy_kernel`` plus 0-2 generic
kernels) and now and then a ``cudaMemsetAsync``. Each ``*.replay`` issues one
``cudaGraphLaunch`` whose K graph kernels (``graphNodeId`` set, ``correlationId`` of the launch)
run back to back on stream 7 once the stream is free. ``accept`` launches one kernel, copies the
accepted tokens D2H (a blocking copy: it runs during its call) and synchronises. Other GPU ops
start after their API call has returned and after the previous op on their stream (a fraction
``--overlap-frac`` of the eager ones start a little before that op ended).

With ``--launches eager`` there are no graphs: each replay's K kernels are launched one by one
(a ``cudaLaunchKernel`` each, ``graphNodeId`` NULL), as PyTorch without CUDA graphs does (vLLM's
``--enforce-eager``, SGLang's ``--disable-cuda-graph``): the RUNTIME table has a row per kernel,
and a kernel starts once its call has returned and the one before it has ended. Each step then
launches the same kernels in the same order (a prepare launches one generic kernel, the same for
each phase), as a decode loop does, so that the kernel-pattern search has a loop to find::

    CPU  |launch|launch|launch|launch| ...            (K calls per phase, 3.5-7 us each)
    GPU        k      k      k      k                  (each after its call and the last kernel)

Sizes are in GPU operations (rows of KERNEL + MEMCPY + MEMSET); whole steps are written, so the
total is ``--ops`` rounded up to a whole step. By default about 90% of the operations are graph
kernels. With ``--columns full`` (default) the KERNEL/MEMCPY/MEMSET/RUNTIME tables also carry the
other nsys 2025.3 columns (grid, block, registers, ...), so rows are as wide as in a real export
(2 M ops is about 200 MB); ``--columns min`` writes only the columns of
:data:`specscope.analysis.synthetic._DDL`.

Rows are generated step by step in chunks: the CPU side (API calls, NVTX ranges, eager ops) in
a Python loop, the graph kernels (90% of the rows) with numpy, and each chunk is written with one
``executemany`` per table. Memory stays flat whatever ``--ops`` is.

    python bench/make_export.py /tmp/bench/ops2m.sqlite --ops 2000000
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import os
import queue
import random
import sqlite3
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from pathlib import Path

import numpy as np

if importlib.util.find_spec("specscope") is None:  # a script run from a checkout, not installed
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specscope.analysis.synthetic import (  # noqa: E402
    _DDL,
    MEMCPY_ENUM,
    MEMCPY_KINDS,
    NVTX_DOMAIN_CREATE,
    NVTX_PUSHPOP,
    NVTX_STARTEND,
    global_pid,
    global_tid,
)

PID = TID = 4242
MAIN_STREAM, SIDE_STREAM = 7, 13
DOMAIN = "specscope"
PHASES = ("draft", "verify", "draft_extend")
RANGE_NAMES = (
    "step",
    "draft.prepare",
    "draft.replay",
    "verify.prepare",
    "verify.replay",
    "accept",
    "draft_extend.prepare",
    "draft_extend.replay",
)
API_NAMES = {
    "memcpy": "cudaMemcpyAsync_v3020",
    "memset": "cudaMemsetAsync_v3020",
    "launch": "cudaLaunchKernel_v7000",
    "graph": "cudaGraphLaunch_v10000",
    "capturing": "cudaStreamIsCapturing_v10000",
    "sync": "cudaStreamSynchronize_v3020",
    "getname": "cuKernelGetName",
}
# eventClass of RUNTIME rows: 0 runtime API, 1 driver API (as in our real exports).
API_CLASS = {"getname": 1}

# Eager ops per *.prepare: H2D copies uniform in [1, 3], one D2D copy, fused_metadata_copy_kernel
# plus generic kernels uniform in [0, 2], a memset with probability MEMSET_P. accept: 1 kernel
# and 1 D2H copy. DEFAULT_GRAPH_KERNELS makes graph kernels ~90% of all GPU operations.
H2D_RANGE, GENERIC_RANGE, MEMSET_P = (1, 3), (0, 2), 0.25
EAGER_PER_STEP = len(PHASES) * (2 + 1 + 1 + 1 + MEMSET_P) + 2  # 17.75
DEFAULT_GRAPH_KERNELS = round(9 * EAGER_PER_STEP / len(PHASES))  # 53 -> 159 / 176.75 = 0.90

# name, demangled template, launch config (grid xyz, block xyz, regs, static smem, dynamic smem,
# smem executed), duration range (ns) for eager kernels or base duration (ns) for graph nodes.
_KERNELS: list[tuple[str, str, tuple[int, ...], tuple[int, int] | int]] = [
    # eager
    ("fused_metadata_copy_kernel", "void specscope::fused_metadata_copy_kernel<(int)256>"
     "(specscope::MetadataPtrs, const int *, int)", (8, 1, 1, 256, 1, 1, 32, 0, 0, 0),
     (1500, 3000)),
    ("vectorized_elementwise_kernel", "void at::native::vectorized_elementwise_kernel<(int)4, "
     "at::native::FillFunctor<int>, std::array<char *, (unsigned long)1>>(int, T2, T3)",
     (2, 1, 1, 128, 1, 1, 16, 0, 0, 0), (700, 1000)),
    ("elementwise_kernel", "void at::native::elementwise_kernel<(int)128, (int)2, "
     "at::native::CUDAFunctor_add<float>>(int, T3)", (16, 1, 1, 128, 1, 1, 18, 0, 0, 32768),
     (900, 1400)),
    ("index_select_small_index_kernel", "void at::native::<unnamed>::"
     "indexSelectSmallIndex<long, long, unsigned int, (int)2, (int)2, (int)-2>(...)",
     (4, 1, 1, 128, 1, 1, 30, 0, 0, 0), (1100, 1800)),
    ("reduce_kernel", "void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<"
     "float, at::native::ArgMaxOps<float>, unsigned int, long, (int)4>>(T3)",
     (1, 4, 1, 32, 16, 1, 40, 0, 16, 16384), (1800, 2600)),
    # graph nodes (one transformer layer's worth, repeated)
    ("rms_norm_kernel", "void vllm::rms_norm_kernel<c10::BFloat16, (int)8, (int)4>(...)",
     (16, 1, 1, 256, 1, 1, 32, 0, 0, 0), 1400),
    ("Kernel2", "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_"
     "64x64_64x4_tn_align8>(T1::Params)", (8, 1, 8, 128, 1, 1, 76, 0, 20480, 135168), 4500),
    ("rotary_embedding_kernel", "void vllm::rotary_embedding_kernel<c10::BFloat16, (bool)1>(...)",
     (16, 1, 1, 128, 1, 1, 26, 0, 0, 0), 1100),
    ("flash_fwd_splitkv_kernel", "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<"
     "(int)128, (int)64, (int)128, (int)4>, (bool)0, (bool)1>(flash::Flash_fwd_params)",
     (1, 8, 16, 128, 1, 1, 255, 0, 49152, 102400), 5200),
    ("flash_fwd_splitkv_combine_kernel", "void flash::flash_fwd_splitkv_combine_kernel<"
     "Flash_fwd_kernel_traits<(int)128, (int)64, (int)128, (int)4>, (int)4>(...)",
     (1, 8, 1, 128, 1, 1, 64, 4096, 0, 8192), 1300),
    ("Kernel2", None, None, 3000),
    ("fused_add_rms_norm_kernel", "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, (int)8>"
     "(...)", (16, 1, 1, 256, 1, 1, 32, 0, 0, 0), 1500),
    ("Kernel2", None, None, 6500),
    ("act_and_mul_kernel", "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel, "
     "(bool)1>(...)", (16, 1, 1, 1024, 1, 1, 24, 0, 0, 0), 1600),
    ("Kernel2", None, None, 5800),
    ("splitKreduce_kernel", "void cublasLt::splitKreduce_kernel<(int)32, (int)16, int, float, "
     "__nv_bfloat16>(cublasLt::cublasSplitKParams<T6>, ...)", (16, 3, 1, 32, 16, 1, 32, 0, 0,
     16384), 1500),
]  # fmt: skip
FUSED, ACCEPT_KERNEL = 0, 4
GENERIC_KERNELS = (1, 2, 3)
LAYER = [i for i, k in enumerate(_KERNELS) if not isinstance(k[3], tuple)]
# graphId and duration scale per phase: the draft model is small, verify runs the target model.
GRAPHS = {"draft": (8, 0.45), "verify": (2, 1.0), "draft_extend": (5, 0.55)}
LOCAL_MEMORY_TOTAL = 250_871_808

# Columns of nsys 2025.3 that the analysis does not read, appended with --columns full so rows
# are as wide as in a real export.
_EXTRA = {
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "greenContextId INTEGER, mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER,"
        " registersPerThread INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER,"
        " blockX INTEGER, blockY INTEGER, blockZ INTEGER, staticSharedMemory INTEGER,"
        " dynamicSharedMemory INTEGER, localMemoryPerThread INTEGER, localMemoryTotal INTEGER,"
        " gridId INTEGER, sharedMemoryExecuted INTEGER, sharedMemoryLimitConfig INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMCPY": (
        "greenContextId INTEGER, deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER,"
        " srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER,"
        " migrationCause INTEGER, virtualAddress INTEGER, copyCount INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_MEMSET": (
        "greenContextId INTEGER, memKind INTEGER, virtualAddress INTEGER"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": "callchainId INTEGER",
}
# ENUM_CUDA_MEM_KIND: 1 pageable, 2 device.
_MEM_KINDS = {1: (1, 2), 2: (2, 1), 8: (2, 2)}
TABLES = (
    "META_DATA_EXPORT",
    "TARGET_INFO_GPU",
    "ENUM_CUDA_MEMCPY_OPER",
    "StringIds",
    "NVTX_EVENTS",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
)
GPU_TABLES = TABLES[-3:]


@dataclass
class _Strings:
    """StringIds, all known up front: API names, NVTX range names, kernel names."""

    ids: dict[str, int] = field(default_factory=dict)

    def __call__(self, value: str) -> int:
        return self.ids.setdefault(value, len(self.ids) + 1)


@dataclass
class _Chunk:
    """Rows of a run of whole steps; eager kernels as columns, graph launches for numpy."""

    nvtx: list[tuple] = field(default_factory=list)
    runtime: list[tuple] = field(default_factory=list)
    memcpy: list[tuple] = field(default_factory=list)
    memset: list[tuple] = field(default_factory=list)
    k_start: list[int] = field(default_factory=list)
    k_end: list[int] = field(default_factory=list)
    k_stream: list[int] = field(default_factory=list)
    k_corr: list[int] = field(default_factory=list)
    k_kind: list[int] = field(default_factory=list)
    g_start: list[int] = field(default_factory=list)  # GPU start of each replay's first kernel
    g_corr: list[int] = field(default_factory=list)
    e_replays: list[tuple[np.ndarray, ...]] = field(default_factory=list)  # --launches eager:
    # each replay's kernels as (start, end, corr), launched one by one


class _Generator:
    """The timeline: a CPU clock, a clock per stream, correlation ids; emits one step at a time."""

    def __init__(
        self,
        seed: int,
        graph_kernels: int,
        *,
        overlap_frac: float,
        step_style: str,
        launches: str = "graph",
    ):
        self.eager = launches == "eager"
        self.rnd = random.Random(seed)
        self._random = self.rnd.random
        self.np = np.random.default_rng(seed)
        self.k = graph_kernels
        self.overlap_frac = overlap_frac
        self.step_style = step_style
        self.gtid = global_tid(PID, TID)
        self.gpid = global_pid(PID)
        self.s = _Strings()
        self.api_id = {k: self.s(v) for k, v in API_NAMES.items()}
        self.range_id = {name: self.s(name) for name in RANGE_NAMES}
        names = {}
        for name, demangled, *_ in _KERNELS:
            if demangled is not None:
                names[name] = (self.s(name), self.s(demangled), self.s(f"_Z{len(name)}{name}v"))
        self.kernel_ids = np.array([names[k[0]] for k in _KERNELS], dtype=np.int64)  # [n, 3]
        config = {k[0]: k[2] for k in _KERNELS if k[2] is not None}
        self.kernel_cfg = np.array([config[k[0]] for k in _KERNELS], dtype=np.int64)  # [n, 10]
        # Graph templates: node -> kernel kind and base duration, fixed for the run.
        self.graph_kind, self.graph_base = {}, {}
        for phase in PHASES:
            _, scale = GRAPHS[phase]
            kinds = np.array([LAYER[i % len(LAYER)] for i in range(self.k)], dtype=np.int64)
            base = np.array([_KERNELS[i][3] for i in kinds], dtype=np.float64)
            self.graph_kind[phase] = kinds
            self.graph_base[phase] = base * scale * self.np.uniform(0.85, 1.15, self.k)
        self.cpu = 20_000_000
        self.free = {MAIN_STREAM: 0, SIDE_STREAM: 0}
        self.corr = 1000
        self.range_seq = 0
        self.steps = 0

    # -- primitives ---------------------------------------------------------------------------

    def _u(self, lo: int, hi: int) -> int:
        """Uniform integer in [lo, hi] (``random.randint`` is 5x slower)."""
        return lo + int(self._random() * (hi - lo + 1))

    def _api(self, c: _Chunk, what: str, lo: int, hi: int) -> tuple[int, int, int]:
        """A runtime call at the CPU clock lasting [lo, hi] ns; returns (start, end, corr)."""
        self.corr += 1 + (self.rnd.random() < 0.3)  # unrecorded driver calls use ids too
        start = self.cpu
        end = start + self._u(lo, hi)
        c.runtime.append(
            (start, end, API_CLASS.get(what, 0), self.gtid, self.corr, self.api_id[what], 0)
        )
        self.cpu = end + self._u(150, 900)
        return start, end, self.corr

    def _gpu_slot(self, stream: int, api_start: int, api_end: int, dur: int) -> tuple[int, int]:
        """Start an op after its API call returned and the stream is free (rarely overlapping)."""
        ready = api_end + self._u(300, 2500)
        after = self.free[stream] + self._u(150, 600)
        start = max(ready, after)
        if self.free[stream] > ready and self.rnd.random() < self.overlap_frac:
            start = max(api_start + 1, self.free[stream] - self._u(1, 200))
        end = start + dur
        self.free[stream] = max(self.free[stream], end)
        return start, end

    def _host(self, lo: int, hi: int) -> None:
        self.cpu += self._u(lo, hi)

    def _range(self, c: _Chunk, name: str, start: int, end: int, etype: int = NVTX_PUSHPOP):
        rid = None
        if etype == NVTX_STARTEND:
            self.range_seq += 1
            rid = self.range_seq
        c.nvtx.append((start, end, etype, rid, None, self.gtid, None, self.range_id[name], 1))

    def _memcpy(self, c: _Chunk, kind: str, nbytes: int, stream: int, dur: int) -> None:
        a0, a1, corr = self._api(c, "memcpy", 3500, 9000)
        g0, g1 = self._gpu_slot(stream, a0, a1, dur)
        c.memcpy.append((g0, g1, 0, 1, stream, corr, self.gpid, nbytes, MEMCPY_KINDS[kind], None))

    def _launch(self, c: _Chunk, kind: int, stream: int = MAIN_STREAM) -> None:
        self._api(c, "getname", 80, 200)
        a0, a1, corr = self._api(c, "launch", 4000, 8000)
        lo, hi = _KERNELS[kind][3]
        g0, g1 = self._gpu_slot(stream, a0, a1, self._u(lo, hi) // 32 * 32)
        c.k_start.append(g0)
        c.k_end.append(g1)
        c.k_stream.append(stream)
        c.k_corr.append(corr)
        c.k_kind.append(kind)

    # -- phases -------------------------------------------------------------------------------

    def _prepare(self, c: _Chunk, phase: str) -> None:
        start = self.cpu
        self._host(2000, 5000)
        self._api(c, "capturing", 250, 450)
        for _ in range(self._u(*H2D_RANGE)):
            self._memcpy(c, "htod", 8192 * self._u(1, 4), MAIN_STREAM,
                         self._u(1000, 2700))  # fmt: skip
        self._memcpy(c, "dtod", 8192, SIDE_STREAM, self._u(850, 950))
        self._host(1000, 6000)
        self._launch(c, FUSED)
        if self.eager:  # the same kernels every step (module doc)
            self._launch(c, GENERIC_KERNELS[PHASES.index(phase)])
        else:
            for _ in range(self._u(*GENERIC_RANGE)):
                self._launch(c, self.rnd.choice(GENERIC_KERNELS))
        if self.rnd.random() < MEMSET_P:
            a0, a1, corr = self._api(c, "memset", 2500, 5000)
            g0, g1 = self._gpu_slot(SIDE_STREAM, a0, a1, self._u(600, 900))
            c.memset.append((g0, g1, 0, 1, SIDE_STREAM, corr, self.gpid, 0, 4096, None))
        self._host(500, 3000)
        self._range(c, f"{phase}.prepare", start, self.cpu)
        self._host(200, 800)

    def _eager_replay(self, c: _Chunk, dur: np.ndarray, gap: np.ndarray) -> None:
        """The replay's kernels (durations ``dur``, gaps before each ``gap``) launched one by
        one: a ``cuKernelGetName`` then a ``cudaLaunchKernel`` each (as PyTorch's eager launches
        appear in real exports: ``tests/data/real/hf_generate.sqlite``); kernel j starts once
        its call has returned and kernel j - 1 has ended plus its gap. With ``off`` the
        kernels' offsets end to end (gaps and the durations before), ``start[j] = off[j] +
        max(free, max(ready[i] - off[i], i <= j))``."""
        k = len(dur)
        name_call = self.np.integers(80, 200, k)
        name_gap = name_call + self.np.integers(150, 900, k)  # cuKernelGetName, then the launch
        call = self.np.integers(3500, 7000, k)
        step = name_gap + call + self.np.integers(400, 1500, k)  # and the host's work after
        name_start = self.cpu + np.cumsum(step) - step
        api_start = name_start + name_gap
        api_end = api_start + call
        # each launch's correlation id; its cuKernelGetName's the one before. The driver calls
        # that nsys does not record take ids too: 4-20 per launch, so that a recorded call
        # has 6-7 ids on average, as in a real eager PyTorch export (scripts/real/hf_generate.py)
        corr = self.corr + np.cumsum(2 + self.np.integers(4, 21, k))
        self.corr = int(corr[-1])
        ready = api_end + self.np.integers(300, 2500, k)
        off = np.cumsum(gap) + np.cumsum(dur) - dur
        start = off + np.maximum(self.free[MAIN_STREAM], np.maximum.accumulate(ready - off))
        end = start + dur
        self.free[MAIN_STREAM] = int(end[-1])
        self.cpu = int(api_end[-1]) + self._u(150, 900)
        calls = {  # the two calls of each launch, one after the other (start order)
            "start": (name_start, api_start),
            "end": (name_start + name_call, api_end),
            "class": (np.full(k, API_CLASS["getname"]), np.zeros(k, dtype=np.int64)),
            "corr": (corr - 1, corr),
            "name": (np.full(k, self.api_id["getname"]), np.full(k, self.api_id["launch"])),
        }
        cols = {c: np.stack(pair, 1).ravel().tolist() for c, pair in calls.items()}
        c.runtime.extend(
            zip(cols["start"], cols["end"], cols["class"], repeat(self.gtid), cols["corr"],
                cols["name"], repeat(0), strict=False)
        )  # fmt: skip
        c.e_replays.append((start, end, corr))

    def _replay(self, c: _Chunk, phase: str, total: int, kernels=None) -> None:
        """A ``cudaGraphLaunch`` of ``total`` ns of graph kernels; with ``--launches eager``
        the kernels of ``kernels`` (durations, gaps) launched one by one instead."""
        start = self.cpu
        self._host(1500, 3500)
        self._api(c, "capturing", 250, 450)
        if kernels is not None:
            self._eager_replay(c, *kernels)
        else:
            self._graph_launch(c, total)
        self._host(500, 3000)
        self._range(c, f"{phase}.replay", start, self.cpu)
        self._host(200, 800)

    def _graph_launch(self, c: _Chunk, total: int) -> None:
        """A ``cudaGraphLaunch`` whose kernels (``total`` ns, :meth:`chunk` places them) start
        once the call has returned and the stream is free."""
        a0, a1, corr = self._api(c, "graph", 12_000, 45_000)
        ready = a1 + self._u(2000, 7000)
        g0 = max(ready, self.free[MAIN_STREAM] + self._u(150, 600))
        self.free[MAIN_STREAM] = g0 + total
        c.g_start.append(g0)
        c.g_corr.append(corr)

    def _accept(self, c: _Chunk) -> None:
        start = self.cpu
        self._host(2000, 4000)
        self._launch(c, ACCEPT_KERNEL)
        self._api(c, "capturing", 250, 450)
        # D2H into pageable memory: the call returns once the copy is done.
        self.corr += 1
        a0 = self.cpu
        g0, g1 = self._gpu_slot(MAIN_STREAM, a0, a0 + 1500, self._u(1300, 1500))
        a1 = g1 + self._u(1500, 3000)
        c.runtime.append((a0, a1, 0, self.gtid, self.corr, self.api_id["memcpy"], 0))
        nbytes = 4 * self._u(1, 8)
        row = (g0, g1, 0, 1, MAIN_STREAM, self.corr, self.gpid, nbytes, MEMCPY_KINDS["dtoh"], None)
        c.memcpy.append(row)
        self.cpu = a1 + self._u(300, 900)
        self.corr += 1
        s0 = self.cpu
        s1 = max(s0 + self._u(2500, 4000), max(self.free.values()) + 1500)
        c.runtime.append((s0, s1, 0, self.gtid, self.corr, self.api_id["sync"], 0))
        self.cpu = s1
        self._host(8000, 20_000)  # acceptance bookkeeping on the host
        self._range(c, "accept", start, self.cpu)
        self._host(200, 800)

    def chunk(self, n_steps: int) -> tuple[_Chunk, dict[str, np.ndarray]]:
        """``n_steps`` whole steps: the chunk's CPU rows and its graph kernels as columns."""
        c = _Chunk()
        # Graph kernel durations and gaps first: the loop needs each replay's GPU length.
        dur, gap = {}, {}
        for phase in PHASES:
            jitter = self.np.normal(1.0, 0.03, (n_steps, self.k))
            dur[phase] = np.maximum(640, (self.graph_base[phase] * jitter) // 32 * 32)
            dur[phase] = dur[phase].astype(np.int64)  # [n_steps, k] ns
            gap[phase] = self.np.integers(200, 450, (n_steps, self.k)) // 32 * 32
            gap[phase][:, 0] = 0
        total = {p: (dur[p].sum(1) + gap[p].sum(1)).tolist() for p in PHASES}
        for i in range(n_steps):
            step_start = self.cpu
            step_etype = NVTX_PUSHPOP if self.step_style == "push" else NVTX_STARTEND
            at = len(c.nvtx)
            self._host(1000, 3000)
            for phase in PHASES:
                if phase == "draft_extend":
                    self._accept(c)
                self._prepare(c, phase)
                kernels = (dur[phase][i], gap[phase][i]) if self.eager else None
                self._replay(c, phase, total[phase][i], kernels)
            self._host(500, 2000)
            self._range(c, "step", step_start, self.cpu, step_etype)
            c.nvtx.insert(at, c.nvtx.pop())  # the step row before its children, as nsys does
            self._host(3000, 15_000)
            self.steps += 1
        if self.eager:
            return c, self._eager_kernels(c, n_steps)
        # Graph kernels: [n_steps * 3, k] in replay order (draft, verify, draft_extend per step).
        d = np.stack([dur[p] for p in PHASES], 1).reshape(-1, self.k)
        g = np.stack([gap[p] for p in PHASES], 1).reshape(-1, self.k)
        offset = np.cumsum(g, 1) + np.cumsum(d, 1) - d
        start = np.array(c.g_start, dtype=np.int64)[:, None] + offset
        kinds = np.tile(np.stack([self.graph_kind[p] for p in PHASES]), (n_steps, 1))
        gid = np.tile(np.array([GRAPHS[p][0] for p in PHASES], dtype=np.int64), n_steps)
        node = (gid[:, None] << 32) + np.arange(self.k, dtype=np.int64)[None, :]
        corr = np.repeat(np.array(c.g_corr, dtype=np.int64), self.k)
        graph = {
            "start": start.ravel(),
            "end": (start + d).ravel(),
            "stream": np.full(start.size, MAIN_STREAM, dtype=np.int64),
            "corr": corr,
            "kind": kinds.ravel(),
            "node": node.ravel(),
        }
        return c, graph

    def _eager_kernels(self, c: _Chunk, n_steps: int) -> dict[str, np.ndarray]:
        """The replays' kernels launched one by one, as :meth:`chunk`'s graph columns (no
        graph node)."""
        start, end, corr = (np.concatenate(x) for x in zip(*c.e_replays, strict=True))
        kinds = np.tile(np.stack([self.graph_kind[p] for p in PHASES]), (n_steps, 1)).ravel()
        return {
            "start": start,
            "end": end,
            "stream": np.full(start.size, MAIN_STREAM, dtype=np.int64),
            "corr": corr,
            "kind": kinds,
            "node": np.full(start.size, -1, dtype=np.int64),
        }


def _kernel_rows(
    eager: tuple[list[int], ...],
    graph: dict[str, np.ndarray],
    kernel_ids: np.ndarray,
    kernel_cfg: np.ndarray,
    gpid: int,
    first_grid_id: int,
    full: bool,
) -> tuple[Iterator[tuple], int]:
    """Eager and graph kernels of a chunk, sorted by start: (row tuples, count)."""
    cols = {}
    for i, k in enumerate(("start", "end", "stream", "corr", "kind")):
        cols[k] = np.concatenate([np.array(eager[i], dtype=np.int64), graph[k]])
    cols["node"] = np.concatenate([np.full(len(eager[0]), -1, dtype=np.int64), graph["node"]])
    order = np.argsort(cols["start"], kind="stable")
    cols = {k: v[order] for k, v in cols.items()}
    n = order.size
    ids = kernel_ids[cols["kind"]]  # [n, 3] short, demangled, mangled
    node = [None if x < 0 else x for x in cols["node"].tolist()]
    base = (
        cols["start"].tolist(),
        cols["end"].tolist(),
        repeat(0),  # deviceId
        repeat(1),  # contextId
        cols["stream"].tolist(),
        cols["corr"].tolist(),
        repeat(gpid),
        ids[:, 1].tolist(),  # demangledName
        ids[:, 0].tolist(),  # shortName
        node,  # graphNodeId
    )
    if not full:
        return zip(*base, strict=False), n  # repeat() columns are endless
    cfg = kernel_cfg[cols["kind"]]
    extra = (
        repeat(0),  # greenContextId
        ids[:, 2].tolist(),  # mangledName
        repeat(1),  # launchType
        repeat(1),  # cacheConfig
        cfg[:, 6].tolist(),  # registersPerThread
        *(cfg[:, j].tolist() for j in range(6)),  # gridX..Z, blockX..Z
        cfg[:, 7].tolist(),  # staticSharedMemory
        cfg[:, 8].tolist(),  # dynamicSharedMemory
        repeat(0),  # localMemoryPerThread
        repeat(LOCAL_MEMORY_TOTAL),
        range(first_grid_id, first_grid_id + n),  # gridId
        cfg[:, 9].tolist(),  # sharedMemoryExecuted
        repeat(0),  # sharedMemoryLimitConfig
    )
    return zip(*base, *extra, strict=False), n


def _kernel_ddl(full: bool) -> str:
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    return _DDL[t] + (", " + _EXTRA[t] if full else "")


def _kernel_writer(path: str, full: bool, gpid: int, ids: np.ndarray, cfg: np.ndarray, q, res):
    """Child process: write the KERNEL table of the chunks read from ``q`` into ``path``.

    The KERNEL table is ~90% of the rows and SQLite-bound (~3 us a row), so it is written on the
    second core while the parent generates the next chunks, then copied into the export with
    ``INSERT INTO ... SELECT *`` (SQLite's transfer optimisation copies records undecoded).
    """
    try:
        con = sqlite3.connect(path, isolation_level=None)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "cache_size=-65536"):
            con.execute(f"PRAGMA {pragma}")
        con.execute(f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL ({_kernel_ddl(full)})")
        width = len(con.execute("SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL").description)
        sql = f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * width)})"
        total = 0
        con.execute("BEGIN")
        while (item := q.get()) is not None:
            rows, n = _kernel_rows(*item, ids, cfg, gpid, total + 1, full)
            con.executemany(sql, rows)
            total += n
        con.execute("COMMIT")
        con.close()
        res.put(total)
    except BaseException as e:  # reported to the parent, which raises
        res.put(e)
        raise


class _KernelWriter:
    """The parent's handle on :func:`_kernel_writer` (a child process it started)."""

    def __init__(self, path: Path, full: bool, gen: _Generator) -> None:
        methods = mp.get_all_start_methods()
        ctx = mp.get_context("fork" if "fork" in methods else "spawn")
        self.q, self.res = ctx.Queue(maxsize=2), ctx.Queue()
        args = (str(path), full, gen.gpid, gen.kernel_ids, gen.kernel_cfg, self.q, self.res)
        self.proc = ctx.Process(target=_kernel_writer, args=args, daemon=True)
        self.proc.start()

    def put(self, item) -> None:
        while True:
            try:
                self.q.put(item, timeout=1.0)
                return
            except queue.Full:
                if not self.proc.is_alive():
                    self._raise()

    def _raise(self):
        try:
            err = self.res.get(timeout=1.0)
        except queue.Empty:
            err = None
        raise RuntimeError(f"the kernel writer failed (exit code {self.proc.exitcode}): {err!r}")

    def finish(self) -> int:
        self.put(None)
        try:
            out = self.res.get(timeout=3600)
        except queue.Empty:
            out = None
        self.proc.join()
        if not isinstance(out, int) or self.proc.exitcode != 0:
            raise RuntimeError(
                f"the kernel writer failed (exit code {self.proc.exitcode}): {out!r}"
            )
        return out

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.terminate()
        self.proc.join()


def _memcpy_full(row: tuple) -> tuple:
    src, dst = _MEM_KINDS.get(row[8], (0, 0))
    addr = 0x7F00_0000_0000 + (row[5] % 4096) * 0x10000
    return row + (0, None, src, dst, 0, 1, 0, 1, None, addr, 1)


def _memset_full(row: tuple) -> tuple:
    return row + (0, 2, 0x7F10_0000_0000 + (row[5] % 4096) * 0x1000)


def _runtime_full(row: tuple) -> tuple:
    return row + (None,)


def generate(
    path: str | Path,
    ops: int,
    *,
    graph_kernels: int = DEFAULT_GRAPH_KERNELS,
    seed: int = 0,
    columns: str = "full",
    step_style: str = "push",
    overlap_frac: float = 0.001,
    chunk_steps: int = 1000,
    launches: str = "graph",
) -> dict[str, int]:
    """Write a new export of at least ``ops`` GPU operations at ``path``; rows per table.

    Refuses to overwrite ``path``. The file is built next to it as ``path + ".partial"`` and
    linked into place only when complete. Deterministic for a given seed and arguments.
    """
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists; refusing to overwrite it")
    if ops < 1 or graph_kernels < 1:
        raise ValueError("ops and graph_kernels must be positive")
    if columns not in ("full", "min"):
        raise ValueError(f"columns must be 'full' or 'min', not {columns!r}")
    if step_style not in ("push", "startend"):
        raise ValueError(f"step_style must be 'push' or 'startend', not {step_style!r}")
    if launches not in ("graph", "eager"):
        raise ValueError(f"launches must be 'graph' or 'eager', not {launches!r}")
    full = columns == "full"
    tmp = path.with_name(path.name + ".partial")
    side = path.with_name(path.name + ".kernels.partial")
    tmp.unlink(missing_ok=True)
    side.unlink(missing_ok=True)
    gen = _Generator(
        seed, graph_kernels, overlap_frac=overlap_frac, step_style=step_style, launches=launches
    )
    counts = dict.fromkeys(TABLES, 0)
    writer = _KernelWriter(side, full, gen)  # before any connection is open in this process
    con = sqlite3.connect(tmp, isolation_level=None)
    kt = "CUPTI_ACTIVITY_KIND_KERNEL"
    try:
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "cache_size=-65536"):
            con.execute(f"PRAGMA {pragma}")
        con.execute("BEGIN")
        for table in TABLES:
            ddl = _DDL[table] + (", " + _EXTRA[table] if full and table in _EXTRA else "")
            ddl = _kernel_ddl(full) if table == kt else ddl
            con.execute(f"CREATE TABLE {table} ({ddl})")

        def insert(table: str, rows, width: int) -> None:
            before = con.total_changes
            marks = ",".join("?" * width)
            con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
            counts[table] += con.total_changes - before

        def width(table: str) -> int:
            return len(con.execute(f"SELECT * FROM {table} LIMIT 0").description)

        widths = {t: width(t) for t in TABLES}
        synthetic = f"bench/make_export.py ops={ops} seed={seed}"
        synthetic += " launches=eager" if gen.eager else ""
        insert(
            "META_DATA_EXPORT",
            [
                ("EXPORT_PRODUCT_NAME", "NVIDIA Nsight Systems"),
                ("EXPORT_PRODUCT_VERSION", "2025.3.2.0"),
                ("EXPORT_SCHEMA_VERSION", "3.20.3"),
                ("SPECSCOPE_SYNTHETIC", synthetic),
            ],
            2,
        )
        gpu = [(1, 0, "NVIDIA H200", "0000:00:06.0")]
        insert("TARGET_INFO_GPU", gpu, widths["TARGET_INFO_GPU"])
        insert("ENUM_CUDA_MEMCPY_OPER", MEMCPY_ENUM, 3)
        insert(
            "NVTX_EVENTS",
            [(-195_227_391, None, NVTX_DOMAIN_CREATE, None, DOMAIN, gen.gtid, None, None, 1)],
            widths["NVTX_EVENTS"],
        )
        written = 0
        while written < ops:
            # Size the chunk so the last one stops at the first whole step reaching ``ops``.
            per_step = graph_kernels * len(PHASES) + EAGER_PER_STEP
            n = max(1, min(chunk_steps, int((ops - written) / per_step)))
            c, graph = gen.chunk(n)
            c.memcpy.sort(key=itemgetter(0))
            c.memset.sort(key=itemgetter(0))
            insert("NVTX_EVENTS", c.nvtx, widths["NVTX_EVENTS"])
            rt = "CUPTI_ACTIVITY_KIND_RUNTIME"
            insert(rt, map(_runtime_full, c.runtime) if full else c.runtime, widths[rt])
            writer.put(((c.k_start, c.k_end, c.k_stream, c.k_corr, c.k_kind), graph))
            counts[kt] += len(c.k_start) + graph["start"].size
            mt = "CUPTI_ACTIVITY_KIND_MEMCPY"
            insert(mt, map(_memcpy_full, c.memcpy) if full else c.memcpy, widths[mt])
            st = "CUPTI_ACTIVITY_KIND_MEMSET"
            insert(st, map(_memset_full, c.memset) if full else c.memset, widths[st])
            written = sum(counts[t] for t in GPU_TABLES)
        strings = sorted((i, v) for v, i in gen.s.ids.items())
        insert("StringIds", strings, 2)
        con.execute("COMMIT")
        if writer.finish() != counts[kt]:
            raise RuntimeError("the kernel writer lost rows")
        con.execute("ATTACH DATABASE ? AS k", (str(side),))
        con.execute("BEGIN")
        con.execute(f"INSERT INTO main.{kt} SELECT * FROM k.{kt}")
        con.execute("COMMIT")
        con.execute("DETACH DATABASE k")
    except BaseException:
        writer.kill()
        con.close()
        tmp.unlink(missing_ok=True)
        side.unlink(missing_ok=True)
        raise
    con.close()
    side.unlink(missing_ok=True)
    try:
        try:
            os.link(tmp, path)  # fails if ``path`` appeared meanwhile: never overwrite
        except FileExistsError:
            raise FileExistsError(f"{path} exists; refusing to overwrite it") from None
        except OSError:  # no hard links on this file system
            if path.exists():
                raise FileExistsError(f"{path} exists; refusing to overwrite it") from None
            os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    counts["steps"] = gen.steps
    return counts


def _parse_int(text: str) -> int:
    return int(float(text.replace("_", ""))) if "e" in text.lower() else int(text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Write a synthetic nsys SQLite export of an EAGLE decode loop (node trace).",
        epilog="example: python bench/make_export.py /tmp/bench/ops2m.sqlite --ops 2000000",
    )
    p.add_argument("out", type=Path, help="output .sqlite (must not exist)")
    p.add_argument("--ops", type=_parse_int, default=2_000_000,
                   help="GPU operations (kernels + memcpys + memsets), rounded up to a whole step;"
                   " accepts 2_000_000 or 2e6 (default 2000000)")  # fmt: skip
    p.add_argument("--graph-kernels", type=int, default=DEFAULT_GRAPH_KERNELS,
                   help=f"kernels per graph replay (default {DEFAULT_GRAPH_KERNELS}: ~90%% of ops)",
                   )  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--columns", choices=("full", "min"), default="full",
                   help="full: every nsys 2025.3 column of the GPU tables (real row width);"
                   " min: only the columns specscope reads")  # fmt: skip
    p.add_argument("--step-style", choices=("push", "startend"), default="push",
                   help="NVTX type of the `step` range (push/pop 59 or start/end 60)")  # fmt: skip
    p.add_argument("--launches", choices=("graph", "eager"), default="graph",
                   help="graph: each replay one cudaGraphLaunch; eager: its kernels launched one"
                   " by one (no graphs)")  # fmt: skip
    p.add_argument("--overlap-frac", type=float, default=0.001,
                   help="fraction of eager ops that start before the previous op on their stream"
                   " ended (default 0.001)")  # fmt: skip
    args = p.parse_args(argv)
    if args.out.exists():
        print(f"error: {args.out} exists; refusing to overwrite it", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    counts = generate(
        args.out,
        args.ops,
        graph_kernels=args.graph_kernels,
        seed=args.seed,
        columns=args.columns,
        step_style=args.step_style,
        overlap_frac=args.overlap_frac,
        launches=args.launches,
    )
    elapsed = time.perf_counter() - t0
    size = args.out.stat().st_size
    ops = sum(counts[t] for t in GPU_TABLES)
    for table in TABLES:
        print(f"{table:<30} {counts[table]:>12,}")
    print(f"{'steps':<30} {counts['steps']:>12,}")
    print(f"{'GPU operations':<30} {ops:>12,}")
    print(f"size {size / 1e6:.1f} MB ({size:,} bytes), {elapsed:.1f} s, {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
