"""The bound fast path of the fused builds: same metadata, bound once, sync-free, graph-safe.

CPU under TRITON_INTERPRET=1 (every launch goes through the interpreter) and CUDA (later
launches go through the compiled kernel's own launcher); the GPU-only tests skip without one.
"""

from __future__ import annotations

import pytest
import torch

from specscope.kernels.ops.attention import (
    DSAGeometry,
    FastFusedBuilder,
    ForwardMode,
    allocate_metadata,
    build_metadata_ordinary,
)
from specscope.kernels.ops.attention.dsa_kpool_metadata import bound
from specscope.kernels.ops.attention.testing import (
    assert_metadata_equal,
    make_forward_inputs,
    scramble,
)

GEOMETRY = DSAGeometry(
    page_size=64, index_topk=256, index_kpool=4, page_table_width=1024, num_sms=7
)
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _inputs(mode, bs, seed, device, lo=6, hi=1000):
    gen = torch.Generator().manual_seed(seed)
    lens = torch.randint(lo, hi + 1, (bs,), generator=gen).tolist()
    acc = torch.randint(1, GEOMETRY.num_draft_tokens + 1, (bs,), generator=gen).tolist()
    return make_forward_inputs(
        mode, GEOMETRY, lens, accept_lens=acc, seed=seed, max_reqs=8, device=device
    )


def _reference(mode, inputs):
    ref = allocate_metadata(
        inputs.bs, GEOMETRY.rows(mode, inputs.bs), GEOMETRY, inputs.seq_lens.device
    )
    build_metadata_ordinary(mode, inputs, ref)
    return ref


def _refill(dst, src) -> None:
    """New values in the same static input buffers (what a runner's prepare does)."""
    for name in bound.INPUT_FIELDS:
        if getattr(dst, name) is not None:
            getattr(dst, name).copy_(getattr(src, name))
    dst.req_to_token.copy_(src.req_to_token)


@pytest.mark.parametrize("mode", list(ForwardMode), ids=lambda m: m.name)
def test_fast_builder_binds_once_and_sees_new_values(mode, triton_device, monkeypatch):
    binds = []
    real_bind = bound.bind_fused_build
    monkeypatch.setattr(bound, "bind_fused_build", lambda *a: binds.append(a) or real_bind(*a))
    static = _inputs(mode, 3, seed=1, device=triton_device)
    out = allocate_metadata(4, GEOMETRY.rows(mode, 4), GEOMETRY, triton_device)
    build = FastFusedBuilder()
    for seed in (1, 2, 3):
        fresh = _inputs(mode, 3, seed=seed, device=triton_device)
        _refill(static, fresh)
        scramble(out, seed)
        build(mode, static, out)
        assert_metadata_equal(out, _reference(mode, fresh), mode, 3)
    assert len(binds) == 1
    build(mode, _inputs(mode, 2, seed=4, device=triton_device), out)  # new buffers, new bs
    assert len(binds) == 2 and len(build.bound) == 2


def test_fast_builder_keeps_at_most_max_bindings(triton_device):
    mode = ForwardMode.DECODE
    build = FastFusedBuilder(max_bindings=2)
    out = allocate_metadata(4, 4, GEOMETRY, triton_device)
    for seed in range(4):
        build(mode, _inputs(mode, 2, seed=seed, device=triton_device), out)
    assert len(build.bound) == 2


def test_fast_builder_rejects_non_contiguous_inputs(triton_device):
    mode = ForwardMode.DECODE
    inputs = _inputs(mode, 2, seed=1, device=triton_device)
    wide = torch.stack([inputs.seq_lens, inputs.seq_lens], 1)  # [bs, 2]
    inputs.seq_lens = wide[:, 0]
    out = allocate_metadata(2, 2, GEOMETRY, triton_device)
    with pytest.raises(ValueError, match="seq_lens must be contiguous"):
        FastFusedBuilder()(mode, inputs, out)


@pytest.mark.parametrize("mode", list(ForwardMode), ids=lambda m: m.name)
def test_padded_requests_leave_the_real_rows_unchanged(mode, triton_device):
    """Padded-batch extension: bs real requests + pad requests (the pad pool row, shortest
    valid lengths) build the same metadata for the real rows as bs requests alone."""
    g, bs, bucket = GEOMETRY, 3, 4
    real = _inputs(mode, bs, seed=5, device=triton_device)
    t = g.rows_per_request(mode)
    rows, rows_eff = g.rows(mode, bs), g.rows(mode, bucket)
    pad = bucket - bs

    def ext(x, value, n):
        return torch.cat([x, torch.full((n,), value, dtype=x.dtype, device=x.device)])

    padded = type(real)(
        req_to_token=real.req_to_token,
        req_pool_indices=ext(real.req_pool_indices, 7, pad),
        seq_lens=ext(real.seq_lens, t + 1, pad),
        out_cache_loc=ext(real.out_cache_loc, 0, rows_eff - rows),
        positions=ext(real.positions, t, rows_eff - rows),
        accept_lens=None if real.accept_lens is None else ext(real.accept_lens, 1, pad),
    )
    out = allocate_metadata(bucket, rows_eff, g, triton_device)
    FastFusedBuilder()(mode, padded, out)
    ref = _reference(mode, real)
    a, e = out.tensors(), ref.tensors()
    for name in ("seqlens_expanded", "dsa_cache_seqlens", "kpool_seqlens", "cache_seqlens"):
        n = bs if name == "cache_seqlens" else rows
        assert torch.equal(a[name][:n].cpu(), e[name][:n].cpu()), name
    for name in ("write_plan.pool_slot", "write_plan.pool_offset", "write_plan.flush"):
        assert torch.equal(a[name][:rows].cpu(), e[name][:rows].cpu()), name
    assert torch.equal(
        a["dsa_cu_seqlens_k"][: rows + 1].cpu(), e["dsa_cu_seqlens_k"][: rows + 1].cpu()
    )
    live = int(ref.seqlens_expanded[:rows].max())
    for r in range(rows):
        n = int(ref.seqlens_expanded[r])
        assert torch.equal(a["page_table_1"][r, :n].cpu(), e["page_table_1"][r, :n].cpu())
    assert live > 0


@needs_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("mode", list(ForwardMode), ids=lambda m: m.name)
def test_later_launches_are_direct_and_sync_free(mode):
    static = _inputs(mode, 3, seed=1, device="cuda")
    out = allocate_metadata(3, GEOMETRY.rows(mode, 3), GEOMETRY, "cuda")
    build = FastFusedBuilder()
    build(mode, static, out)  # compile + bind, outside the checked region
    torch.cuda.synchronize()
    ((_, launch),) = build.bound.values()
    assert launch.direct
    fresh = _inputs(mode, 3, seed=2, device="cuda")
    torch.cuda.set_sync_debug_mode("error")
    try:
        for name in bound.INPUT_FIELDS:  # device-to-device: no sync
            if getattr(static, name) is not None:
                getattr(static, name).copy_(getattr(fresh, name))
        static.req_to_token.copy_(fresh.req_to_token)
        build(mode, static, out)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert_metadata_equal(out, _reference(mode, fresh), mode, 3)


@needs_cuda
@pytest.mark.gpu
def test_a_captured_fast_build_sees_new_inputs_on_every_replay():
    mode = ForwardMode.TARGET_VERIFY
    static = _inputs(mode, 3, seed=1, device="cuda")
    out = allocate_metadata(3, GEOMETRY.rows(mode, 3), GEOMETRY, "cuda")
    build = FastFusedBuilder()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        build(mode, static, out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        build(mode, static, out)
    for seed in (2, 3, 4):
        fresh = _inputs(mode, 3, seed=seed, device="cuda")
        _refill(static, fresh)
        scramble(out, seed)
        graph.replay()
        torch.cuda.synchronize()
        assert_metadata_equal(out, _reference(mode, fresh), mode, 3)
