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
import time

import numpy as np
import torch

from specscope.kernels.backend import (
    DeepseekSparseAttnBackend,
    DeepseekSparseAttnMultiStepBackend,
    resolve_variant,
)
from specscope.kernels.ops.attention import ForwardMode

from .cache import PagePool
from .config import LoopConfig, Request, RunResult, simulated_accept_len
from .nvtx_ranges import range_factory
from .runners import DraftExtendRunner, DraftRunner, VerifyRunner, bucket_sizes
from .toy import ModelConfig, ToyDSAModel


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
