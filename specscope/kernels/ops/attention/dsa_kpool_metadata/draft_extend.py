"""Fused DSA metadata for DRAFT_EXTEND: every output field in one Triton launch.

DRAFT_EXTEND: T rows per request, acc[b] of them accepted; row j sees
seq_lens[b] - acc[b] + min(j, acc[b] - 1) + 1 keys (padded rows repeat the last accepted row).
Layout of the launch and the shared building blocks: `scan.py`; the host side (checks, launch
settings, the launch itself): `bound.py`. Reference: `ordinary_metadata.py`.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .scan import META_PROGRAMS, _copy_live_prefix, _meta_program


@triton.jit
def _dsa_draft_extend_metadata_kernel(
    req_to_token_ptr,
    stride_r2t,
    req_pool_indices_ptr,
    seq_lens_ptr,
    accept_lens_ptr,
    out_cache_loc_ptr,
    positions_ptr,
    cache_seqlens_ptr,
    cu_seqlens_q_ptr,
    cu_seqlens_k_ptr,
    seqlens_expanded_ptr,
    dsa_cache_seqlens_ptr,
    dsa_cu_seqlens_k_ptr,
    page_table_1_ptr,
    stride_pt,
    real_page_table_ptr,
    stride_rpt,
    kpool_seqlens_ptr,
    pool_slot_ptr,
    pool_offset_ptr,
    flush_ptr,
    schedule_ptr,
    bs,
    rows,
    PAGE_SIZE: tl.constexpr,
    TOPK: tl.constexpr,
    KPOOL: tl.constexpr,
    NUM_SMS: tl.constexpr,
    T: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    BLOCK_BS: tl.constexpr,
    BLOCK_SMS: tl.constexpr,
    ROW_BITS: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    N_SPANS: tl.constexpr,
    STAGES: tl.constexpr,
):
    pid = tl.program_id(0)
    if pid < META_PROGRAMS:
        r = tl.arange(0, BLOCK_ROWS)
        rm = r < rows
        j = r % T
        seq = tl.load(seq_lens_ptr + r // T, mask=rm, other=1)
        acc = tl.load(accept_lens_ptr + r // T, mask=rm, other=1)
        seqlens = seq - acc + tl.minimum(j, acc - 1) + 1
        valid = j < acc
        tail = j == acc - 1
        _meta_program(
            pid,
            (r, rm, seqlens, valid, tail),
            bs,
            (seq_lens_ptr, out_cache_loc_ptr, positions_ptr),
            (cache_seqlens_ptr, cu_seqlens_q_ptr, cu_seqlens_k_ptr),
            (seqlens_expanded_ptr, dsa_cache_seqlens_ptr, dsa_cu_seqlens_k_ptr, kpool_seqlens_ptr),
            (pool_slot_ptr, pool_offset_ptr, flush_ptr),
            schedule_ptr,
            T,
            PAGE_SIZE,
            TOPK,
            KPOOL,
            NUM_SMS,
            BLOCK_ROWS,
            ROW_BITS,
            BLOCK_BS,
            BLOCK_SMS,
            STAGES,
        )
    elif STAGES & 4:  # PAGE_TABLE
        w = pid - META_PROGRAMS
        b = w // N_SPANS
        # Names differ from the meta branch's: Triton merges names set in both branches.
        acc_b = tl.load(accept_lens_ptr + b)
        shortest = tl.load(seq_lens_ptr + b) - acc_b + 1  # row j: shortest + min(j, acc_b - 1)
        req = tl.load(req_pool_indices_ptr + b)
        _copy_live_prefix(
            (req_to_token_ptr, stride_r2t),
            (page_table_1_ptr, stride_pt, real_page_table_ptr, stride_rpt),
            req,
            b * T,
            shortest,
            acc_b - 1,
            w % N_SPANS,
            PAGE_SIZE,
            BLOCK_COLS,
            T,
        )
