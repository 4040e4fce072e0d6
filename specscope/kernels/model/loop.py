"""The EAGLE decode loop: draft -> verify -> accept -> draft-extend, per decode step.

State between steps, per request: n committed tokens x_0..x_{n-1}, the last one (the target's
bonus token) not yet run through the target; the draft-extend's guess d_0 for x_n and its hidden.
With N = speculative_num_steps and T = N + 1 rows per request:

    draft         forwards i = 0..N-2 at positions n+i: d_{i+1} = draft(d_i)      (DECODE)
    verify        target over [x_{n-1}, d_0..d_{N-1}] at positions n-1..n+T-2    (TARGET_VERIFY)
    accept        a in 1..T tokens: real = 1 + leading matches of d_j and the target's t_j
                  (tokens t_0..t_{a-1}); sim = a drawn from the seed with mean --accept-len
                  (tokens d_0..d_{a-2}, t_{a-1}); a and the tokens come to the host (a sync)
    draft-extend  draft over the a new tokens at positions n..n+a-1 with the verify rows'
                  hidden, padded to T rows; its last real row gives d_0 and the hidden

NVTX (domain `specscope`): `step` around each step and the seven phase ranges inside it
(`nvtx_ranges.RANGES`); `torch.cuda.profiler.start()/stop()` wrap only the measured steps,
after warm-up and graph capture.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from specscope.errors import SpecscopeError
from specscope.kernels.backend import (
    VARIANT_NAMES,
    DeepseekSparseAttnBackend,
    DeepseekSparseAttnMultiStepBackend,
    resolve_variant,
)
from specscope.kernels.ops.attention import DSAGeometry, ForwardMode

from .cache import PagePool
from .nvtx_ranges import range_factory
from .runners import DraftExtendRunner, DraftRunner, VerifyRunner, bucket_sizes
from .toy import ModelConfig, ToyDSAModel

ACCEPT_MODES = ("sim", "real")


@dataclass
class LoopConfig:
    """Everything a run depends on; `graphs=None` means on for CUDA, off for the CPU."""

    variant: str = "env"  # a name of VARIANT_NAMES; "env" reads the environment flags
    bs: int = 1  # requests per batch
    steps: int = 50  # measured decode steps
    warmup: int = 10  # decode steps before the measured ones
    context: int = 8192  # prompt length (requests vary it down by up to 1/8, at most 96)
    index_kpool: int = 4  # tokens pooled into one index key (k: 1, 2, 4 or 8)
    device: str = "cuda"  # cuda or cpu
    graphs: bool | None = None
    nvtx: bool = True  # NVTX ranges (domain specscope) around steps and phases
    accept_mode: str = "sim"  # sim: accept lengths drawn from the seed; real: the target's
    accept_len: float = 5.0  # mean accept length in sim mode (tokens per request per step)
    seed: int = 0  # of the weights, prompts and simulated acceptance
    hidden: int = 1024  # model width
    layers: int = 4  # target model layers
    draft_layers: int = 1  # draft model layers
    vocab: int = 1024  # vocabulary size
    page_size: int = 64  # KV slots per page (P)
    index_topk: int = 2048  # keys each query attends to (K)
    spec_steps: int = 5  # speculative_num_steps N: N - 1 draft forwards, T = N + 1
    max_new_tokens: int | None = None  # per request; a finished request is replaced
    num_sms: int | None = None  # default: the GPU's SM count, 8 on the CPU

    @property
    def num_draft_tokens(self) -> int:
        return self.spec_steps + 1

    @property
    def use_graphs(self) -> bool:
        return self.device == "cuda" if self.graphs is None else self.graphs

    def prompt_len(self, rid: int) -> int:
        span = max(1, min(97, self.context // 8))
        return self.context - (rid * 37) % span

    @property
    def page_table_width(self) -> int:
        t = self.num_draft_tokens
        budget = (
            self.max_new_tokens + t if self.max_new_tokens else (self.warmup + self.steps + 1) * t
        )
        need = self.context + budget + 2 * t
        return -(-need // self.page_size) * self.page_size

    def validate(self) -> None:
        """Raise SpecscopeError (one line, with the fix) for flags that cannot run."""
        t = self.num_draft_tokens

        def bad(msg: str) -> None:
            raise SpecscopeError(msg)

        if self.variant not in VARIANT_NAMES:
            bad(f"unknown variant {self.variant!r}: one of {', '.join(VARIANT_NAMES)}")
        if self.device not in ("cuda", "cpu"):
            bad(f"--device must be cuda or cpu, not {self.device}")
        if self.device == "cuda" and not torch.cuda.is_available():
            bad("no CUDA device here: use --device cpu (eager, no graphs)")
        if self.device == "cpu" and self.graphs:
            bad("CUDA graphs need --device cuda: add --no-graphs")
        for name in ("bs", "steps", "hidden", "layers", "draft_layers"):
            if getattr(self, name) < 1:
                bad(f"--{name.replace('_', '-')} must be at least 1")
        if self.warmup < 0:
            bad("--warmup must be >= 0")
        if self.spec_steps < 2:
            bad("--spec-steps must be at least 2 (one draft forward)")
        if self.accept_mode not in ACCEPT_MODES:
            bad(f"--accept-mode must be one of {', '.join(ACCEPT_MODES)}")
        if not 1 <= self.accept_len <= t:
            bad(f"--accept-len must be in 1..{t} (T = spec steps + 1)")
        if self.vocab < 2:
            bad("--vocab must be at least 2")
        if self.context < t + 2:
            bad(f"--context must be at least {t + 2}")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            bad("--max-new-tokens must be at least 1")
        if self.page_size < 2 * t or self.page_size & (self.page_size - 1):
            bad(f"--page-size must be a power of two >= {2 * t}")
        if self.index_kpool not in (1, 2, 4, 8):
            bad("--index-kpool must be 1, 2, 4 or 8")
        if not 1 <= self.index_topk <= self.page_table_width:
            bad(f"--index-topk must be in 1..{self.page_table_width} (the page-table width)")

    def geometry(self, num_sms: int) -> DSAGeometry:
        return DSAGeometry(
            page_size=self.page_size,
            index_topk=self.index_topk,
            index_kpool=self.index_kpool,
            page_table_width=self.page_table_width,
            num_sms=num_sms,
            num_draft_tokens=self.num_draft_tokens,
        )


def simulated_accept_len(mean: float, t: int, seed: int, rid: int, step: int) -> int:
    """Accept length of request `rid` at its decode step `step`, in 1..t, with mean `mean`.

    floor(mean + u) (u uniform in [0, 1): mean exactly `mean`), then -1 or +1 with probability
    1/4 each when both stay in 1..t (symmetric: the mean is kept). A function of the seed, the
    request and its step only, so batch composition never changes it.
    """
    rng = np.random.default_rng([seed, rid, step])
    a = min(t, max(1, math.floor(mean + rng.random())))
    x = rng.random()
    if a - 1 >= 1 and a + 1 <= t:
        a += -1 if x < 0.25 else (1 if x >= 0.75 else 0)
    return a


@dataclass
class Request:
    rid: int
    row: int  # pool row
    n: int  # committed tokens, prompt included
    last: int  # x_{n-1}
    generated: list[int] = field(default_factory=list)
    steps: int = 0  # decode steps taken (seeds the simulated acceptance)


@dataclass
class RunResult:
    """What `specscope run` prints and writes (JSON names as in the issue)."""

    tokens: int  # generated in the measured steps, all requests
    accept_len_mean: float  # tokens per request per measured step
    tok_per_s_per_request: float
    step_ms_p50: float
    step_ms_p90: float
    draft_metadata_bytes: int
    tokens_sha256: str  # every generated token of the run, warm-up included
    variant: str = ""
    fusion: bool = False
    share: bool = False
    builder: str = ""
    copies_per_step: int = 0
    device: str = ""
    graphs: bool = False
    bs: int = 0
    steps: int = 0
    warmup: int = 0
    context: int = 0
    index_kpool: int = 0
    accept_mode: str = ""
    step_ms_mean: float = 0.0
    wall_s: float = 0.0
    gpu: str = ""
    step_ms: list[float] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


class EagleLoop:
    """The toy EAGLE server: models, caches, backends, runners, host state."""

    def __init__(self, cfg: LoopConfig) -> None:
        cfg.validate()
        self.cfg = cfg
        self.variant = resolve_variant(cfg.variant)
        dev = self.device = torch.device(cfg.device)
        sms = cfg.num_sms or (
            torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 8
        )
        g = self.geometry = cfg.geometry(sms)
        self.T = g.num_draft_tokens
        self.buckets = bucket_sizes(cfg.bs)  # static buffers: the largest bucket, graphs or not
        max_bs = self.buckets[-1]
        self.pool = PagePool(2 * max_bs + 1, g.page_size, g.page_table_width, cfg.seed, dev)
        self.target = ToyDSAModel(
            ModelConfig(cfg.hidden, cfg.layers, cfg.vocab, seed=cfg.seed), dev, draft=False
        )
        self.draft = ToyDSAModel(
            ModelConfig(cfg.hidden, cfg.draft_layers, cfg.vocab, seed=cfg.seed + 1), dev, draft=True
        )
        self.target_cache = self.target.new_cache(self.pool.num_slots, g, dev)
        self.draft_cache = self.draft.new_cache(self.pool.num_slots, g, dev)

        v = self.variant
        rows = g.rows(ForwardMode.TARGET_VERIFY, max_bs)
        fast = v.capture  # draft_captured: the eager builds bound once too
        self.verify_backend = DeepseekSparseAttnBackend(g, dev, fusion=v.fusion, fast_launch=fast)
        self.verify_backend.init_cuda_graph_state(max_bs, rows)
        self.extend_backend = DeepseekSparseAttnBackend(g, dev, fusion=v.fusion, fast_launch=fast)
        self.extend_backend.init_cuda_graph_state(max_bs, rows)
        self.draft_backend = DeepseekSparseAttnMultiStepBackend(
            g, dev, cfg.spec_steps - 1, fusion=v.fusion, share=v.share, capture=v.capture
        )
        before = torch.cuda.memory_allocated(dev) if dev.type == "cuda" else 0
        self.draft_backend.init_cuda_graph_state(max_bs)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            self.draft_metadata_bytes = torch.cuda.memory_allocated(dev) - before
        else:
            self.draft_metadata_bytes = self.draft_backend.metadata_nbytes()

        mempool = torch.cuda.graph_pool_handle() if cfg.use_graphs else None
        common = (self.pool.req_to_token, self.buckets, dev, cfg.use_graphs, mempool, v.capture)
        self.draft_runner = DraftRunner(
            self.draft, self.draft_cache, self.draft_backend, g, *common
        )
        self.verify_runner = VerifyRunner(
            self.target, self.target_cache, self.verify_backend, g, *common
        )
        self.extend_runner = DraftExtendRunner(
            self.draft, self.draft_cache, self.extend_backend, g, *common
        )
        self.sim_acc = torch.ones(max_bs, dtype=torch.int64, device=dev)  # [max_bs]
        self.acc = torch.ones(max_bs, dtype=torch.int64, device=dev)  # [max_bs] draft_captured
        self.new_tokens = torch.zeros(max_bs, self.T, dtype=torch.int64, device=dev)
        self.fetched = torch.zeros(  # [max_bs, 1 + T] int64: accept lengths and tokens, host
            max_bs, 1 + self.T, dtype=torch.int64, pin_memory=dev.type == "cuda"
        )
        self.fetch_done = torch.cuda.Event() if dev.type == "cuda" else None
        if v.capture:
            self._bind_device_inputs()
        if cfg.use_graphs:
            for runner in (self.draft_runner, self.verify_runner, self.extend_runner):
                runner.capture(self.pool.pad_row)
        self.next_rid = 0
        self.requests: list[Request] = []
        self.finished: list[Request] = []
        for b in range(cfg.bs):
            self.requests.append(self._admit(b))
        self.rng, self.nvtx_on = range_factory(cfg.nvtx)

    def _bind_device_inputs(self) -> None:
        """Staged runners: where each forward takes its device inputs from (static buffers)."""
        er, vr = self.extend_runner, self.verify_runner
        self.draft_runner.bind_device_inputs(token0=er.next_token, hidden0=er.next_hidden)
        vr.bind_device_inputs(drafts=self.draft_runner.out_tokens)
        acc = vr.inp["sim_accept"] if self.cfg.accept_mode == "sim" else self.acc
        er.bind_device_inputs(
            tokens=self.new_tokens,
            hidden=vr.out_hidden,
            acc=acc,
            verify_seq_lens=vr.inp["seq_lens"],
            verify_req_pool_indices=vr.inp["req_pool_indices"],
        )

    # -- requests -------------------------------------------------------------------------------
    def _admit(self, b: int) -> Request:
        """A new request in batch slot b: pool row, pages, prefill (eager), first draft input."""
        cfg = self.cfg
        rid = self.next_rid
        self.next_rid += 1
        row = self.pool.admit()
        m = cfg.prompt_len(rid)
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + rid)
        prompt = torch.randint(0, cfg.vocab, (m,), generator=gen)
        tokens = prompt.to(self.device)
        slots = torch.tensor(self.pool.slots(row, range(m)), dtype=torch.int64, device=self.device)
        self.target.prefill(self.target_cache, tokens, slots)
        self.draft.prefill(self.draft_cache, tokens, slots)
        last = int(prompt[-1])
        self.extend_runner.next_token[b] = last
        self.extend_runner.next_hidden[b].zero_()
        return Request(rid, row, m, last)

    def _retire_finished(self) -> None:
        cfg, t = self.cfg, self.T
        for b, req in enumerate(self.requests):
            full = req.n + 3 * t > self.geometry.page_table_width
            done = cfg.max_new_tokens is not None and len(req.generated) >= cfg.max_new_tokens
            if full or done:
                self.pool.release(req.row)
                self.finished.append(req)
                self.requests[b] = self._admit(b)

    # -- phases ---------------------------------------------------------------------------------
    def _slots(self, req: Request, positions) -> list[int]:
        return self.pool.slots(req.row, positions)

    def _draft_prepare(self, bs: int, be: int) -> None:
        s = self.draft_backend.num_steps
        reqs = self.requests
        pos = np.array([[r.n + i for r in reqs] for i in range(s)], np.int64)  # [steps, bs]
        locs = np.array([self._slots(r, [r.n + i for i in range(s)]) for r in reqs], np.int64).T
        host = {
            "req_pool_indices": np.array([r.row for r in reqs], np.int64),
            "seq_lens": np.array([r.n + 1 for r in reqs], np.int32),
            "positions": pos,
            "locs": np.ascontiguousarray(locs),
        }
        er = self.extend_runner
        self.draft_runner.prepare(
            bs, be, host, er.next_token[:bs], er.next_hidden[:bs], self.pool.pad_row
        )

    def _verify_prepare(self, bs: int, be: int) -> None:
        t, reqs = self.T, self.requests
        pos = np.array([[r.n - 1 + j for j in range(t)] for r in reqs], np.int64)  # [bs, T]
        tokens = np.zeros((bs, t), np.int64)
        tokens[:, 0] = [r.last for r in reqs]
        host = {
            "req_pool_indices": np.array([r.row for r in reqs], np.int64),
            "seq_lens": np.array([r.n + t - 1 for r in reqs], np.int32),
            "positions": pos,
            "out_cache_loc": np.array(
                [self._slots(r, list(p)) for r, p in zip(reqs, pos, strict=True)], np.int64
            ),
            "tokens": tokens,
        }
        if self.verify_runner.staged and self.cfg.accept_mode == "sim":
            host["sim_accept"] = self._sim_accept_lens()  # staged with verify's inputs
        drafts = self.draft_runner.out_tokens[:bs]  # [bs, T - 1]
        self.verify_runner.prepare(bs, be, host, drafts, self.pool.pad_row)

    def accept(self, bs: int) -> np.ndarray:
        """Accept lengths and tokens, on the device, then fetched: [bs, 1 + T] (SYNCS: .cpu()).

        Column 0 is a in 1..T; columns 1..a the committed tokens.
        """
        return self._accepted(bs).cpu().numpy()  # the host sync

    def _accepted(self, bs: int) -> torch.Tensor:
        """[bs, 1 + T] on the device (`accept`'s columns); fills new_tokens; no host sync.

        draft_captured: the simulated lengths come staged with verify's inputs, the real ones
        are written into `self.acc` (the draft-extend graph reads both), and the tokens are
        written into new_tokens directly (no copy)."""
        t, captured = self.T, self.variant.capture
        drafts = self.draft_runner.out_tokens[:bs]  # [bs, T - 1]
        target = self.verify_runner.out_tokens[: bs * t].view(bs, t)  # [bs, T]
        if self.cfg.accept_mode == "real":
            match = (drafts == target[:, : t - 1]).to(torch.int64).cumprod(1)
            if captured:
                acc = torch.add(match.sum(1), 1, out=self.acc[:bs])
            else:
                acc = 1 + match.sum(1)  # [bs]
            new = target
            self.new_tokens[:bs].copy_(new)
        else:
            acc = self.sim_acc[:bs]
            if captured:  # uploaded with verify's inputs
                acc = self.verify_runner.inp["sim_accept"][:bs]
            else:
                acc.copy_(torch.from_numpy(self._sim_accept_lens()), non_blocking=True)
            j = torch.arange(t, device=self.device)
            padded = torch.nn.functional.pad(drafts, (0, 1))  # [bs, T]
            keep = j[None, :] < acc[:, None] - 1
            new = self.new_tokens[:bs]
            if captured:
                torch.where(keep, padded, target, out=new)  # a kernel, no copy
            else:
                new.copy_(torch.where(keep, padded, target))
        return torch.cat([acc[:, None], new], 1)

    def _fetch_start(self, bs: int) -> None:
        """draft_captured: start copying `_accepted` to the host (pinned memory); no wait."""
        self.fetched[:bs].copy_(self._accepted(bs), non_blocking=True)
        if self.fetch_done is not None:
            self.fetch_done.record()

    def _fetch_wait(self, bs: int) -> np.ndarray:
        """Wait for `_fetch_start`'s copy only (SYNCS on its event, not on later work)."""
        if self.fetch_done is not None:
            self.fetch_done.synchronize()
        return self.fetched[:bs].numpy().copy()

    def _sim_accept_lens(self) -> np.ndarray:
        cfg = self.cfg
        lens = [
            simulated_accept_len(cfg.accept_len, self.T, cfg.seed, r.rid, r.steps)
            for r in self.requests
        ]
        return np.array(lens, np.int64)

    def _commit(self, fetched: np.ndarray) -> list[int]:
        lens = []
        for req, row in zip(self.requests, fetched, strict=True):
            a = int(row[0])
            toks = [int(x) for x in row[1 : 1 + a]]
            req.generated.extend(toks)
            req.n += a
            req.last = toks[-1]
            req.steps += 1
            lens.append(a)
        return lens

    def _extend_prepare(self, bs: int, be: int, lens: list[int]) -> None:
        t, reqs = self.T, self.requests
        pos = np.zeros((bs, t), np.int64)
        locs = np.zeros((bs, t), np.int64)  # padded rows: trash slot 0
        for b, (r, a) in enumerate(zip(reqs, lens, strict=True)):
            p = [r.n - a + j for j in range(a)]
            pos[b, :a] = p
            pos[b, a:] = r.n - 1
            locs[b, :a] = self._slots(r, p)
        host = {
            "req_pool_indices": np.array([r.row for r in reqs], np.int64),
            "seq_lens": np.array([r.n for r in reqs], np.int32),
            "accept_lens": np.array(lens, np.int32),
            "positions": pos,
            "out_cache_loc": locs,
        }
        hidden = self.verify_runner.out_hidden[: bs * t]
        self.extend_runner.prepare(bs, be, host, self.new_tokens[:bs], hidden, self.pool.pad_row)

    def step(self) -> list[int]:
        """One decode step; returns the accept lengths."""
        rng, bs = self.rng, self.cfg.bs
        be = self.draft_runner.bucket(bs)
        with rng("step"):
            with rng("draft.prepare"):
                self._draft_prepare(bs, be)
            with rng("draft.replay"):
                self.draft_runner.replay(be)
            with rng("verify.prepare"):
                self._verify_prepare(bs, be)
            with rng("verify.replay"):
                self.verify_runner.replay(be)
            if self.variant.capture:
                lens = self._accept_behind_extend(bs, be)
            else:
                with rng("accept"):
                    lens = self._commit(self.accept(bs))
                with rng("draft_extend.prepare"):
                    self._extend_prepare(bs, be, lens)
                with rng("draft_extend.replay"):
                    self.extend_runner.replay(be)
            self._retire_finished()
        return lens

    def _accept_behind_extend(self, bs: int, be: int) -> list[int]:
        """draft_captured: the accept's kernels and its copy to the host are queued, then the
        draft-extend replay, which derives its inputs on the device; the host waits for the
        copy only and commits while the draft-extend runs.

            host:  accept (queue) | draft_extend.replay (launch) | wait copy | commit ...
            GPU:   [verify] [accept] [copy] [draft-extend ..................]
        """
        rng = self.rng
        with rng("accept"):
            self._fetch_start(bs)
        with rng("draft_extend.prepare"):
            pass  # nothing: the graph derives its inputs and metadata (`derive_inputs`)
        with rng("draft_extend.replay"):
            self.extend_runner.replay(be)
        return self._commit(self._fetch_wait(bs))

    # -- the run --------------------------------------------------------------------------------
    def tokens_sha256(self) -> str:
        h = hashlib.sha256()
        for r in sorted(self.finished + self.requests, key=lambda r: r.rid):
            h.update(f"{r.rid}:{','.join(map(str, r.generated))};".encode())
        return h.hexdigest()

    def run(self) -> RunResult:
        cfg, cuda = self.cfg, self.device.type == "cuda"
        for _ in range(cfg.warmup):
            self.step()
        if cuda:
            torch.cuda.synchronize(self.device)
            torch.cuda.profiler.start()
        marks, lens = [], []
        t0 = time.perf_counter()
        for _ in range(cfg.steps):
            if cuda:
                start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
                start.record()
                lens.extend(self.step())
                end.record()
                marks.append((start, end))
            else:
                s = time.perf_counter()
                lens.extend(self.step())
                marks.append((s, time.perf_counter()))
        if cuda:
            torch.cuda.synchronize(self.device)
        wall = time.perf_counter() - t0
        if cuda:
            torch.cuda.profiler.stop()
            step_ms = [a.elapsed_time(b) for a, b in marks]
        else:
            step_ms = [(b - a) * 1e3 for a, b in marks]
        tokens = int(sum(lens))
        return RunResult(
            tokens=tokens,
            accept_len_mean=float(np.mean(lens)),
            tok_per_s_per_request=tokens / cfg.bs / wall,
            step_ms_p50=float(np.percentile(step_ms, 50)),
            step_ms_p90=float(np.percentile(step_ms, 90)),
            draft_metadata_bytes=int(self.draft_metadata_bytes),
            tokens_sha256=self.tokens_sha256(),
            variant=self.variant.name,
            fusion=self.variant.fusion,
            share=self.variant.share,
            builder="fused" if self.draft_backend.kpool_fusion else "ordinary",
            copies_per_step=self.draft_backend.copies_per_refresh(),
            device=str(self.device),
            graphs=cfg.use_graphs,
            bs=cfg.bs,
            steps=cfg.steps,
            warmup=cfg.warmup,
            context=cfg.context,
            index_kpool=cfg.index_kpool,
            accept_mode=cfg.accept_mode,
            step_ms_mean=float(np.mean(step_ms)),
            wall_s=wall,
            gpu=torch.cuda.get_device_name(self.device) if cuda else "",
            step_ms=step_ms,
        )


def run_loop(cfg: LoopConfig) -> RunResult:
    """Set up (caches, backends, graph capture), warm up, measure `cfg.steps` steps."""
    return EagleLoop(cfg).run()
