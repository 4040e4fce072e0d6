"""The toy target and draft models: indexer -> top-k -> sparse attention -> MLP, per layer.

    x = embed[token]                                   (draft: + requant(hidden_in @ fc))
    per layer:
        q, k, v = requant(x @ Wq), requant(x @ Wk), requant(x @ Wv)       [rows, D_kv]
        qi, ki  = requant(x @ Wiq), requant(x @ Wik)                       [rows, D_idx]
        write k, v, ki at out_cache_loc; flush pools by the KPoolWritePlan
        slots   = indexer top-k (real_page_table, kpool_seqlens, page_table_1)
        x       = clamp(x + requant(sparse_attention(q, slots) @ Wo))
        x       = clamp(x + requant(relu(requant(x @ W1)) @ W2))
    token = argmax(x @ W_lm)  (first maximum), hidden = x

Weights are random integers in {-1, 0, 1} (embeddings in [-127, 127]) from a seed; see
`layers.py` for why everything is integer-valued. Prefill is not modelled: `prefill` writes a
prompt's caches from the layer projections of its embeddings (no attention), once per request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from specscope.kernels.ops.attention import DSAGeometry, DSAMetadata, ForwardMode

from .cache import ModelCache
from .layers import QMAX, index_topk, requant, sparse_attention, write_caches


@dataclass(frozen=True)
class ModelConfig:
    hidden: int = 1024
    layers: int = 4
    vocab: int = 1024
    d_kv: int = 64  # attention width (MLA-like latent)
    d_idx: int = 32  # indexer width
    seed: int = 0


@dataclass
class ForwardBatch:
    """One forward's model inputs (static buffers, sliced to the forward's rows)."""

    mode: ForwardMode
    bs: int
    tokens: torch.Tensor  # [rows] int64
    out_cache_loc: torch.Tensor  # [rows] int64
    hidden_in: torch.Tensor | None = None  # [rows, hidden] float32, draft only

    @property
    def rows(self) -> int:
        return self.tokens.shape[0]


def _shift(fan_in: int) -> int:
    """Requantisation shift for a {-1, 0, 1} matmul over `fan_in` inputs of size ~QMAX / 2."""
    return max(0, round(math.log2(math.sqrt(2 * fan_in / 3))))


class ToyDSAModel:
    """Random-weight DSA model; `draft=True` adds the EAGLE input projection of the hidden."""

    def __init__(self, cfg: ModelConfig, device: torch.device | str, *, draft: bool) -> None:
        self.cfg = cfg
        self.draft = draft
        gen = torch.Generator().manual_seed(cfg.seed)
        h, dk, di = cfg.hidden, cfg.d_kv, cfg.d_idx

        def w(i: int, o: int) -> torch.Tensor:
            return torch.randint(-1, 2, (i, o), generator=gen).float().to(device)

        self.embed = torch.randint(-QMAX, QMAX + 1, (cfg.vocab, h), generator=gen).float()
        self.embed = self.embed.to(device)  # [vocab, hidden]
        self.fc = w(h, h) if draft else None
        self.layers = [
            {
                "wq": w(h, dk),
                "wk": w(h, dk),
                "wv": w(h, dk),
                "wiq": w(h, di),
                "wik": w(h, di),
                "wo": w(dk, h),
                "w1": w(h, 2 * h),
                "w2": w(2 * h, h),
            }
            for _ in range(cfg.layers)
        ]
        self.lm_head = w(h, cfg.vocab)  # [hidden, vocab]
        self.s_in, self.s_o, self.s_mlp = _shift(h), _shift(dk), _shift(2 * h)
        # attention scores q.k have spread ~ sqrt(D_kv) * (QMAX / 2)^2: map ~4 spreads to 0..7
        self.s_attn = max(0, round(math.log2(math.sqrt(dk) * (QMAX / 2) ** 2 / 4)))

    def new_cache(self, num_slots: int, geometry: DSAGeometry, device) -> ModelCache:
        c = self.cfg
        return ModelCache(c.layers, num_slots, c.d_kv, c.d_idx, geometry.index_kpool, device)

    def forward(
        self,
        batch: ForwardBatch,
        meta: DSAMetadata,
        kv_counter: torch.Tensor,
        cache: ModelCache,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(argmax tokens [rows] int64, last hidden [rows, hidden]); no host sync."""
        rows = batch.rows
        x = self.embed[batch.tokens]  # [rows, hidden]
        if self.draft:
            x = torch.clamp(x + requant(batch.hidden_in @ self.fc, self.s_in), -QMAX, QMAX)
        kv_counter.zero_()
        for p, lc in zip(self.layers, cache.layers, strict=True):
            q = requant(x @ p["wq"], self.s_in)  # [rows, D_kv]
            k = requant(x @ p["wk"], self.s_in)
            v = requant(x @ p["wv"], self.s_in)
            qi = requant(x @ p["wiq"], self.s_in)  # [rows, D_idx]
            ki = requant(x @ p["wik"], self.s_in)
            write_caches(lc, meta, rows, batch.out_cache_loc, k, v, ki)
            slots, valid = index_topk(lc, meta, rows, qi)
            o = sparse_attention(lc, q, slots, valid, self.s_attn, kv_counter)
            x = torch.clamp(x + requant(o @ p["wo"], self.s_o), -QMAX, QMAX)
            m = torch.relu(requant(x @ p["w1"], self.s_in))
            x = torch.clamp(x + requant(m @ p["w2"], self.s_mlp), -QMAX, QMAX)
        logits = x @ self.lm_head  # [rows, vocab], exact integers
        return torch.argmax(logits, dim=-1), x

    def prefill(self, cache: ModelCache, tokens: torch.Tensor, slots: torch.Tensor) -> None:
        """Write a prompt's caches: tokens/slots [m] int64 for positions 0..m-1 (eager)."""
        kp = cache.kpool_size
        m = tokens.shape[0]
        x = self.embed[tokens]  # [m, hidden]
        pad = (-m) % kp
        pool_slots = slots[::kp] // kp  # [ceil(m / k)]: positions j*k start pool j
        for p, lc in zip(self.layers, cache.layers, strict=True):
            lc.k.index_copy_(0, slots, requant(x @ p["wk"], self.s_in))
            lc.v.index_copy_(0, slots, requant(x @ p["wv"], self.s_in))
            ki = requant(x @ p["wik"], self.s_in)  # [m, D_idx]
            lc.tok_key.index_copy_(0, slots, ki)
            ki = torch.nn.functional.pad(ki, (0, 0, 0, pad))
            lc.kpool.index_copy_(0, pool_slots, ki.view(-1, kp, ki.shape[1]).sum(1))
