"""The toy model's layer pieces against brute-force references, and its exactness contract."""

from __future__ import annotations

import pytest
import torch

from specscope.kernels.backend import KV_COUNTER_CTAS
from specscope.kernels.model import ForwardBatch, ModelConfig, ToyDSAModel
from specscope.kernels.model.cache import LayerCache, ModelCache, PagePool
from specscope.kernels.model.layers import index_topk, sparse_attention, write_caches
from specscope.kernels.ops.attention import (
    DSAGeometry,
    ForwardMode,
    allocate_metadata,
    build_metadata_fused,
    build_metadata_ordinary,
)
from specscope.kernels.ops.attention.testing import make_forward_inputs, scramble

VERIFY, EXTEND = ForwardMode.TARGET_VERIFY, ForwardMode.DRAFT_EXTEND
G = DSAGeometry(page_size=16, index_topk=24, index_kpool=4, page_table_width=128, num_sms=5)
D_KV, D_IDX = 8, 4


def _cache(num_slots: int, kp: int = 4, seed: int = 0) -> LayerCache:
    gen = torch.Generator().manual_seed(seed)
    c = ModelCache(1, num_slots, D_KV, D_IDX, kp, "cpu").layers[0]
    for t in (c.k, c.v, c.tok_key, c.kpool):
        t.copy_(torch.randint(-20, 21, t.shape, generator=gen).float())
    return c


def _forward(mode, lens, acc=None, seed=0, g=G):
    inputs = make_forward_inputs(mode, g, lens, accept_lens=acc, seed=seed, max_reqs=6)
    meta = allocate_metadata(8, 48, g, "cpu")
    build_metadata_ordinary(mode, inputs, meta)
    return inputs, meta


@pytest.mark.parametrize("mode,acc", [(VERIFY, None), (EXTEND, [2, 6, 1])])
def test_write_caches_flushes_pools_by_the_write_plan(mode, acc):
    inputs, meta = _forward(mode, [37, 64, 9], acc)
    num_slots = int(inputs.req_to_token.max()) + 1 + G.page_size
    cache = _cache(num_slots)
    before = cache.kpool.clone()
    rows = inputs.out_cache_loc.shape[0]
    valid = meta.write_plan.pool_slot[:rows] >= 0
    loc = torch.where(valid, inputs.out_cache_loc, 0)  # padded rows: the trash slot
    k = torch.randint(-9, 10, (rows, D_KV)).float()
    ki = torch.randint(-9, 10, (rows, D_IDX)).float()
    write_caches(cache, meta, rows, loc, k, k, ki)
    assert torch.equal(cache.tok_key[loc[valid]], ki[valid])
    flushed = set()
    for r in range(rows):
        slot, off, flush = (
            int(meta.write_plan.__dict__[f][r]) for f in ("pool_slot", "pool_offset", "flush")
        )
        if slot >= 0 and flush:
            want = cache.tok_key[slot * 4 : slot * 4 + off + 1].sum(0)
            assert torch.equal(cache.kpool[slot], want), r
            flushed.add(slot)
    untouched = [s for s in range(1, cache.kpool.shape[0]) if s not in flushed]
    assert torch.equal(cache.kpool[untouched], before[untouched])


def _brute_force_topk(cache, inputs, meta, rows, q):
    """Per row: slots of the top-K positions by (pooled score, position), best first."""
    t = G.rows_per_request(VERIFY)
    out = []
    for r in range(rows):
        req = int(inputs.req_pool_indices[r // t])
        n = int(meta.seqlens_expanded[r])
        keys = []
        for c in range(n):
            slot = int(inputs.req_to_token[req, c])
            score = int((cache.kpool[slot // G.index_kpool] * q[r]).sum())
            keys.append((score, c, slot))
        keys.sort(reverse=True)
        out.append([slot for _, _, slot in keys[: min(n, G.index_topk)]])
    return out


def test_index_topk_equals_brute_force():
    inputs, meta = _forward(VERIFY, [128, 11, 40])
    rows = 18
    cache = _cache(int(inputs.req_to_token.max()) + 1)
    q = torch.randint(-5, 6, (rows, D_IDX)).float()
    slots, valid = index_topk(cache, meta, rows, q)
    want = _brute_force_topk(cache, inputs, meta, rows, q)
    for r in range(rows):
        n_sel = int(valid[r].sum())
        assert n_sel == len(want[r])
        assert slots[r, :n_sel].tolist() == want[r], r
        assert (slots[r, n_sel:] == 0).all()


def test_sparse_attention_is_an_exact_weighted_floor_mean():
    cache = _cache(64)
    gen = torch.Generator().manual_seed(3)
    slots = torch.randint(0, 64, (5, 7), generator=gen)
    valid = torch.arange(7)[None, :] < torch.tensor([7, 1, 3, 5, 2])[:, None]
    q = torch.randint(-20, 21, (5, D_KV), generator=gen).float()
    counter = torch.full((KV_COUNTER_CTAS,), 0, dtype=torch.int32)
    out = sparse_attention(cache, q, slots, valid, 4, counter)
    for r in range(5):
        idx = slots[r][valid[r]]
        s = (cache.k[idx].double() * q[r].double()).sum(1)
        w = torch.clamp(torch.floor(s / 16), 0, 7) + 1
        want = torch.floor((w[:, None] * cache.v[idx].double()).sum(0) / w.sum())
        assert torch.equal(out[r].double(), want)
    assert counter.tolist() == [7 + 2, 1, 3, 5]


def test_model_reads_only_defined_metadata(triton_device):
    """Fused vs ordinary metadata over differently scrambled buffers: identical outputs."""
    g = G
    inputs = make_forward_inputs(VERIFY, g, [128, 40], seed=5, max_reqs=4, device=triton_device)
    model = ToyDSAModel(
        ModelConfig(hidden=32, layers=2, vocab=16, d_kv=8, d_idx=4), triton_device, draft=False
    )
    outs = []
    for seed, builder in ((1, build_metadata_ordinary), (2, build_metadata_fused)):
        meta = allocate_metadata(4, 24, g, triton_device)
        scramble(meta, seed)
        builder(VERIFY, inputs, meta)
        cache = model.new_cache(int(inputs.req_to_token.max()) + 1 + 16, g, triton_device)
        tokens = torch.arange(12, device=triton_device) % 16
        counter = torch.zeros(KV_COUNTER_CTAS, dtype=torch.int32, device=triton_device)
        batch = ForwardBatch(VERIFY, 2, tokens, inputs.out_cache_loc)
        tok, hid = model.forward(batch, meta, counter, cache)
        outs.append((tok.cpu(), hid.cpu(), counter.cpu()))
    for a, b in zip(*outs, strict=True):
        assert torch.equal(a, b)
    assert outs[0][2].sum() == 2 * sum(min(n, g.index_topk) for n in range(123, 129)) + 2 * sum(
        min(n, g.index_topk) for n in range(35, 41)
    )


def test_prefill_pools_equal_flushed_pools():
    g = G
    pool = PagePool(3, g.page_size, g.page_table_width, 0, torch.device("cpu"))
    row = pool.admit()
    model = ToyDSAModel(
        ModelConfig(hidden=32, layers=1, vocab=16, d_kv=8, d_idx=4), "cpu", draft=False
    )
    cache = model.new_cache(pool.num_slots, g, "cpu")
    m = 23
    slots = torch.tensor(pool.slots(row, range(m)))
    model.prefill(cache, torch.arange(m) % 16, slots)
    lc = cache.layers[0]
    for j in range(0, m, 4):
        s = pool.slots(row, [j])[0]
        want = lc.tok_key[s : s + min(4, m - j)].sum(0)
        assert torch.equal(lc.kpool[s // 4], want)
    assert pool.req_to_token[pool.pad_row].max() < g.page_size  # the pad row: trash page only
    assert 0 not in pool.pages[row]
