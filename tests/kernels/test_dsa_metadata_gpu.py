"""DSA metadata on a real GPU: production shapes, no host syncs, CUDA-graph replay."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from specscope.kernels.ops.attention import (
    DSAGeometry,
    ForwardMode,
    allocate_metadata,
    build_metadata_fused,
    build_metadata_ordinary,
    fused_metadata_copy,
)
from specscope.kernels.ops.attention.testing import (
    assert_metadata_equal,
    make_forward_inputs,
    scramble,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

GEOMETRY = DSAGeometry(
    page_size=64, index_topk=2048, index_kpool=4, page_table_width=16384, num_sms=132
)
MAX_BS = 128


def _forward(mode, g, bs, seed, lo=6, hi=None, max_reqs=MAX_BS + 8):
    gen = torch.Generator().manual_seed(seed)
    hi = hi or g.page_table_width
    lens = torch.randint(lo, hi + 1, (bs,), generator=gen).tolist()
    lens[: min(bs, 4)] = [hi, lo, g.index_topk, g.index_topk + 1][: min(bs, 4)]
    acc = torch.randint(1, g.num_draft_tokens + 1, (bs,), generator=gen).tolist()
    return make_forward_inputs(
        mode, g, lens, accept_lens=acc, seed=seed, max_reqs=max_reqs, device="cuda"
    )


@pytest.mark.parametrize("mode", list(ForwardMode), ids=lambda m: m.name)
@pytest.mark.parametrize(
    "kpool,topk,bs", [(4, 2048, 1), (4, 2048, 32), (4, 256, 128), (1, 2048, 128), (8, 256, 64)]
)
def test_fused_equals_ordinary_at_production_shapes(mode, kpool, topk, bs):
    g = replace(GEOMETRY, index_kpool=kpool, index_topk=topk)
    inputs = _forward(mode, g, bs, seed=bs + kpool)
    expected = allocate_metadata(MAX_BS, MAX_BS * 6, g, "cuda")
    actual = allocate_metadata(MAX_BS, MAX_BS * 6, g, "cuda")
    scramble(expected, 1)
    scramble(actual, 2)
    build_metadata_ordinary(mode, inputs, expected)
    build_metadata_fused(mode, inputs, actual)
    assert_metadata_equal(actual, expected, mode, bs)


@pytest.mark.parametrize("mode", list(ForwardMode), ids=lambda m: m.name)
def test_builders_make_no_host_sync(mode):
    g, bs = GEOMETRY, 32
    inputs = _forward(mode, g, bs, seed=5)
    src = allocate_metadata(bs, bs * 6, g, "cuda")
    dsts = [allocate_metadata(bs, bs * 6, g, "cuda") for _ in range(2)]
    # Warm-up outside the checked region: Triton compiles, the copy uploads its pointer table.
    build_metadata_fused(mode, inputs, src)
    build_metadata_ordinary(mode, inputs, src)
    fused_metadata_copy(src, dsts, mode, bs)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        build_metadata_ordinary(mode, inputs, src)
        build_metadata_fused(mode, inputs, src)
        fused_metadata_copy(src, dsts, mode, bs)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    # The check is live: a sync in the region raises.
    torch.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError):
            src.seqlens_expanded[0].item()
    finally:
        torch.cuda.set_sync_debug_mode(0)


@pytest.mark.parametrize("mode", list(ForwardMode), ids=lambda m: m.name)
@pytest.mark.parametrize("builder", [build_metadata_fused, build_metadata_ordinary])
def test_cuda_graph_replay_follows_inputs_changed_in_place(mode, builder):
    g, bs = GEOMETRY, 16
    static = _forward(mode, g, bs, seed=100)
    out = allocate_metadata(bs, bs * 6, g, "cuda")
    dsts = [allocate_metadata(bs, bs * 6, g, "cuda") for _ in range(2)]

    def step():
        builder(mode, static, out)
        fused_metadata_copy(out, dsts, mode, bs)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up (compilation, pointer table) off the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    addresses = [t.data_ptr() for m in [out, *dsts] for t in m.tensors().values()]

    for seed in (101, 102, 103):
        new = _forward(mode, g, bs, seed=seed)
        for name in ("req_to_token", "req_pool_indices", "seq_lens", "out_cache_loc", "positions"):
            getattr(static, name).copy_(getattr(new, name))
        if static.accept_lens is not None:
            static.accept_lens.copy_(new.accept_lens)
        graph.replay()
        expected = allocate_metadata(bs, bs * 6, g, "cuda")
        build_metadata_ordinary(mode, new, expected)
        torch.cuda.synchronize()
        for m in [out, *dsts]:
            assert_metadata_equal(m, expected, mode, bs)
    assert addresses == [t.data_ptr() for m in [out, *dsts] for t in m.tensors().values()]
