"""The ordinary (plain torch) DSA metadata path: pinned by hand and by a per-row naive loop."""

from __future__ import annotations

import pytest
import torch

from specscope.kernels.ops.attention import (
    DSAForwardInputs,
    DSAGeometry,
    ForwardMode,
    allocate_metadata,
    build_metadata_ordinary,
)
from specscope.kernels.ops.attention.dsa_metadata import cdiv
from specscope.kernels.ops.attention.testing import (
    assert_metadata_equal,
    make_forward_inputs,
    scramble,
)


def naive_metadata(mode: ForwardMode, inputs: DSAForwardInputs, geometry: DSAGeometry):
    """The definitions of `DSAMetadata`, one row at a time in plain Python."""
    g = geometry
    t = g.rows_per_request(mode)
    P, K, k, S = g.page_size, g.index_topk, g.index_kpool, g.num_sms
    seq = inputs.seq_lens.tolist()
    reqs = inputs.req_pool_indices.tolist()
    r2t = inputs.req_to_token
    bs = len(seq)
    out = allocate_metadata(bs, bs * t, g, "cpu")
    scramble(out)
    out.cache_seqlens[:] = torch.tensor(seq)
    out.cu_seqlens_q[:] = torch.tensor([b * t for b in range(bs + 1)])
    out.cu_seqlens_k[:] = torch.tensor([sum(seq[:b]) for b in range(bs + 1)])
    blocks, dsa = [], []
    for b in range(bs):
        acc = inputs.accept_lens[b].item() if mode is ForwardMode.DRAFT_EXTEND else t
        for j in range(t):
            r = b * t + j
            if mode is ForwardMode.DECODE:
                n = seq[b]
            elif mode is ForwardMode.TARGET_VERIFY:
                n = seq[b] - t + j + 1
            else:
                n = seq[b] - acc + min(j, acc - 1) + 1
            out.seqlens_expanded[r] = n
            dsa.append(min(n, K))
            out.kpool_seqlens[r] = cdiv(n, k)
            blocks.append(cdiv(cdiv(n, k), P // k))
            out.page_table_1[r, :n] = r2t[reqs[b], :n]
            for p in range(cdiv(n, P)):
                out.real_page_table[r, p] = r2t[reqs[b], p * P] // P
            loc, pos = inputs.out_cache_loc[r].item(), inputs.positions[r].item()
            if j < acc:
                out.write_plan.pool_slot[r] = loc // k
                out.write_plan.pool_offset[r] = pos % k
                out.write_plan.flush[r] = int(pos % k == k - 1 or pos == seq[b] - 1)
            else:
                out.write_plan.pool_slot[r] = -1
                out.write_plan.pool_offset[r] = 0
                out.write_plan.flush[r] = 0
    out.dsa_cache_seqlens[:] = torch.tensor(dsa)
    out.dsa_cu_seqlens_k[:] = torch.tensor([sum(dsa[:r]) for r in range(len(dsa) + 1)])
    total = sum(blocks)
    for s in range(S + 1):
        start = s * (total // S) + min(s, total % S)
        row, first = 0, 0
        while row < len(blocks) and first + blocks[row] <= start:
            first += blocks[row]
            row += 1
        out.paged_mqa_schedule[s] = torch.tensor([row, start - first])
    return out


def test_hand_computed_target_verify():
    # P=4, k=2: pool row 0 holds pages [7, 2], pool row 1 holds pages [5, 9].
    g = DSAGeometry(
        page_size=4, index_topk=5, index_kpool=2, page_table_width=8, num_sms=3, num_draft_tokens=2
    )
    r2t = torch.tensor([[28, 29, 30, 31, 8, 9, 10, 11], [20, 21, 22, 23, 36, 37, 38, 39]])
    inputs = DSAForwardInputs(
        req_to_token=r2t.to(torch.int32),
        req_pool_indices=torch.tensor([1, 0]),
        seq_lens=torch.tensor([5, 3], dtype=torch.int32),
        out_cache_loc=torch.tensor([23, 36, 29, 30]),
        positions=torch.tensor([3, 4, 1, 2]),
    )
    out = allocate_metadata(2, 4, g, "cpu", fill=-1)
    build_metadata_ordinary(ForwardMode.TARGET_VERIFY, inputs, out)
    assert out.cache_seqlens.tolist() == [5, 3]
    assert out.cu_seqlens_q.tolist() == [0, 2, 4]
    assert out.cu_seqlens_k.tolist() == [0, 5, 8]
    assert out.seqlens_expanded.tolist() == [4, 5, 2, 3]
    assert out.dsa_cache_seqlens.tolist() == [4, 5, 2, 3]
    assert out.dsa_cu_seqlens_k.tolist() == [0, 4, 9, 11, 14]
    assert out.kpool_seqlens.tolist() == [2, 3, 1, 2]
    assert out.page_table_1[1, :5].tolist() == [20, 21, 22, 23, 36]
    assert out.page_table_1[3, :3].tolist() == [28, 29, 30]
    assert out.real_page_table[:, 0].tolist() == [5, 5, 7, 7]
    assert out.real_page_table[1, 1].item() == 9
    assert out.write_plan.pool_slot.tolist() == [11, 18, 14, 15]
    assert out.write_plan.pool_offset.tolist() == [1, 0, 1, 0]
    assert out.write_plan.flush.tolist() == [1, 1, 1, 1]
    # blocks per row [1, 2, 1, 1], B = 5 over 3 SMs: starts 0, 2, 4 and the sentinel 5.
    assert out.paged_mqa_schedule.tolist() == [[0, 0], [1, 1], [3, 0], [4, 0]]


def test_topk_clamp_and_draft_padding():
    g = DSAGeometry(
        page_size=4, index_topk=3, index_kpool=4, page_table_width=16, num_sms=2, num_draft_tokens=3
    )
    inputs = make_forward_inputs(ForwardMode.DRAFT_EXTEND, g, [9, 4], accept_lens=[2, 1])
    out = allocate_metadata(2, 6, g, "cpu")
    build_metadata_ordinary(ForwardMode.DRAFT_EXTEND, inputs, out)
    assert out.seqlens_expanded.tolist() == [8, 9, 9, 4, 4, 4]
    assert out.dsa_cache_seqlens.tolist() == [3, 3, 3, 3, 3, 3]
    assert out.write_plan.pool_slot[[2, 4, 5]].tolist() == [-1, -1, -1]
    # req 0 writes positions 7 (completes its pool, k = 4) and 8 (its tail); req 1 position 3.
    assert out.write_plan.flush.tolist() == [1, 1, 0, 1, 0, 0]


@pytest.mark.parametrize("mode", list(ForwardMode))
@pytest.mark.parametrize("kpool", [1, 2, 4, 8])
def test_ordinary_matches_naive(mode, kpool):
    g = DSAGeometry(page_size=16, index_topk=40, index_kpool=kpool, page_table_width=96, num_sms=5)
    gen = torch.Generator().manual_seed(kpool)
    bs = 7
    seq_lens = torch.randint(6, 97, (bs,), generator=gen).tolist()
    seq_lens[:3] = [96, 40, 6]
    acc = torch.randint(1, 7, (bs,), generator=gen).tolist()
    inputs = make_forward_inputs(
        mode, g, seq_lens, accept_lens=acc, req_pool_indices=[3, 0, 3, 5, 1, 2, 6]
    )
    out = allocate_metadata(bs + 2, (bs + 2) * 6, g, "cpu")
    scramble(out)
    build_metadata_ordinary(mode, inputs, out)
    assert_metadata_equal(out, naive_metadata(mode, inputs, g), mode, bs)


def test_shape_errors():
    g = DSAGeometry(page_size=4, page_table_width=16, num_draft_tokens=2)
    inputs = make_forward_inputs(ForwardMode.TARGET_VERIFY, g, [3, 4])
    with pytest.raises(ValueError, match="exceed"):
        out = allocate_metadata(1, 2, g, "cpu")
        build_metadata_ordinary(ForwardMode.TARGET_VERIFY, inputs, out)
    with pytest.raises(ValueError, match="out_cache_loc"):
        build_metadata_ordinary(ForwardMode.DECODE, inputs, allocate_metadata(4, 8, g, "cpu"))
