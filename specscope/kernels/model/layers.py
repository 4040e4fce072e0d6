"""The toy DSA layer's pieces in plain torch: cache writes, the indexer's top-k, sparse attention.

Exactness: every activation, weight, key and score is an integer held in float32 and every sum
stays below 2**24 (and every operand below 2**11, exact in TF32 too), so matmuls are exact
whatever their reduction order, and the result does not depend on batch composition, CUDA
graphs, padding or the device. Divisions are IEEE-rounded then floored: deterministic
everywhere. Tokens therefore depend only on the metadata's *defined* parts (integers), which
every builder and copy path agrees on; undefined tails are masked before any gather.
"""

from __future__ import annotations

import torch

from specscope.kernels.ops.attention import DSAMetadata

from .cache import LayerCache

QMAX = 127  # activations are integers in [-QMAX, QMAX]
ATTN_WEIGHT_MAX = 7  # attention weights are integers in [1, ATTN_WEIGHT_MAX + 1]
_MASKED = -(1 << 62)


def requant(y: torch.Tensor, shift: int) -> torch.Tensor:
    """floor(y / 2**shift) clamped to [-QMAX, QMAX] (exact: a power-of-two scale)."""
    return torch.clamp(torch.floor(y * (2.0**-shift)), -QMAX, QMAX)


def write_caches(
    cache: LayerCache,
    meta: DSAMetadata,
    rows: int,
    out_cache_loc: torch.Tensor,  # [rows] int64
    k: torch.Tensor,  # [rows, D_kv]
    v: torch.Tensor,  # [rows, D_kv]
    index_key: torch.Tensor,  # [rows, D_idx]
) -> None:
    """Write each new token's K, V and index key at its slot, then flush pools (write plan).

    A flushing row sets pooled slot `pool_slot` to the sum of the token keys at offsets
    0..pool_offset of its pool. Rows that do not flush, and padded rows (pool_slot = -1), write
    to pool 0 of the trash page instead, which nothing reads.
    """
    cache.k.index_copy_(0, out_cache_loc, k)
    cache.v.index_copy_(0, out_cache_loc, v)
    cache.tok_key.index_copy_(0, out_cache_loc, index_key)
    plan = meta.write_plan
    kp = meta.geometry.index_kpool
    pool_slot = plan.pool_slot[:rows].long()  # [rows]
    real = pool_slot >= 0
    pool_slot = torch.where(real, pool_slot, 0)
    offsets = torch.arange(kp, device=k.device)  # [k]
    members = pool_slot[:, None] * kp + offsets  # [rows, k] slots of the pool
    live = offsets[None, :] <= plan.pool_offset[:rows].long()[:, None]  # [rows, k]
    pooled = (cache.tok_key[members] * live[..., None]).sum(1)  # [rows, D_idx]
    dest = torch.where(real & (plan.flush[:rows] != 0), pool_slot, 0)
    cache.kpool.index_copy_(0, dest, pooled)


def index_topk(
    cache: LayerCache, meta: DSAMetadata, rows: int, index_query: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The indexer: top-K keys of each row; returns (slots [rows, K] int64, valid [rows, K]).

    Row r scores its `kpool_seqlens[r]` pooled keys (found through `real_page_table`) against
    its index query; every token inherits its pool's score; tokens past `seqlens_expanded[r]`
    are masked; the top K = index_topk by (score, position) — positions break ties, so the
    order is total — are mapped to slots through `page_table_1`. The first
    `dsa_cache_seqlens[r]` = min(n_r, K) of them are real keys.
    """
    g = meta.geometry
    P, kp, L, K = g.page_size, g.index_kpool, g.page_table_width, g.index_topk
    device = index_query.device
    n = meta.seqlens_expanded[:rows].long()  # [rows]
    n_pools = meta.kpool_seqlens[:rows].long()  # [rows]
    per_page = P // kp
    p = torch.arange(L // kp, device=device)  # [L / k]
    page = meta.real_page_table[:rows][:, p // per_page].long()  # [rows, L / k]
    live = p[None, :] < n_pools[:, None]
    pool_slot = torch.where(live, page * per_page + p % per_page, 0)
    pooled = cache.kpool[pool_slot]  # [rows, L / k, D_idx]
    score = torch.bmm(pooled, index_query[:, :, None]).squeeze(-1)  # [rows, L / k]
    token_score = score.long()[:, :, None].expand(-1, -1, kp).reshape(rows, L)  # [rows, L]
    col = torch.arange(L, device=device)
    key = torch.where(col[None, :] < n[:, None], token_score * L + col, _MASKED)  # [rows, L]
    top = torch.topk(key, K, dim=1, sorted=True).indices  # [rows, K] int64
    valid = torch.arange(K, device=device)[None, :] < meta.dsa_cache_seqlens[:rows, None]
    slots = torch.gather(meta.page_table_1[:rows], 1, top).long()  # [rows, K]
    return torch.where(valid, slots, 0), valid


def sparse_attention(
    cache: LayerCache,
    q: torch.Tensor,  # [rows, D_kv]
    slots: torch.Tensor,  # [rows, K] int64
    valid: torch.Tensor,  # [rows, K] bool
    score_shift: int,
    kv_counter: torch.Tensor,  # [CTAs] int32
) -> torch.Tensor:
    """Integer attention over the selected keys: weights 1..8 from the scores, floor average.

    Also adds each row's attended key count to the KV counter entry of its CTA (row % CTAs);
    the caller resets the counter before the forward.
    """
    keys, values = cache.k[slots], cache.v[slots]  # [rows, K, D_kv]
    score = torch.bmm(keys, q[:, :, None]).squeeze(-1)  # [rows, K]
    weight = torch.clamp(torch.floor(score * (2.0**-score_shift)), 0, ATTN_WEIGHT_MAX) + 1
    weight = torch.where(valid, weight, 0.0)  # [rows, K]
    num = torch.bmm(weight[:, None, :], values).squeeze(1)  # [rows, D_kv]
    den = weight.sum(1, keepdim=True).clamp(min=1.0)
    rows = q.shape[0]
    cta = torch.arange(rows, device=q.device) % kv_counter.shape[0]
    kv_counter.index_add_(0, cta, valid.sum(1).to(torch.int32))
    return torch.floor(num / den)
