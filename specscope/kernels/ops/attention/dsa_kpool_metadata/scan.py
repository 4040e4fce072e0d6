"""Building blocks shared by the three fused DSA metadata kernels, and their launch settings.

Every fused kernel is one launch on a 1-D grid:

    program 0                      the *meta program*: request fields, every per-row field
                                   (vectorised over all rows), the row scans and the
                                   paged-MQA schedule
    programs 1 .. rows * n_spans   page-table workers: program 1 + r * n_spans + c copies
                                   span c of row r's live prefix into page_table_1 and the
                                   page ids of those columns into real_page_table

The meta program is the only one that needs a prefix scan across rows; the workers need nothing
but their own row. The helpers here are `@triton.jit` functions inlined into each mode's kernel;
each mode supplies its own row mapping (which request a row belongs to, how many keys it sees).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ..dsa_metadata import DSAForwardInputs, DSAGeometry, DSAMetadata

MAX_FUSED_ROWS = 4096  # the meta program holds every row in one block
MAX_FUSED_SMS = 1023  # the schedule's S + 1 entries sit in one block
MAX_BLOCK_COLS = 1024  # page-table columns one worker moves per step
STEPS_PER_SPAN = 2  # steps one worker takes along its row before the next worker goes on


@dataclass(frozen=True)
class LaunchSettings:
    """Block sizes and grid of a fused metadata launch; a pure function of the shapes."""

    block_rows: int  # >= rows: the meta program's vector over rows
    block_bs: int  # >= bs + 1: its vector over requests
    block_sms: int  # >= num_sms + 1: its vector over schedule entries
    sched_chunk: int  # rows per step of the schedule's row search
    block_cols: int  # page-table columns per worker step (a multiple of page_size)
    n_spans: int  # workers per page-table row
    num_warps: int

    def grid(self, rows: int) -> tuple[int]:
        return (1 + rows * self.n_spans,)


def launch_settings(rows: int, bs: int, geometry: DSAGeometry) -> LaunchSettings:
    """Deterministic launch settings from shapes (no autotuning: trial runs pollute profiles)."""
    g = geometry
    block_sms = triton.next_power_of_2(g.num_sms + 1)
    block_cols = max(g.page_size, min(MAX_BLOCK_COLS, triton.next_power_of_2(g.page_table_width)))
    span = block_cols * STEPS_PER_SPAN
    return LaunchSettings(
        block_rows=triton.next_power_of_2(max(rows, 2)),
        block_bs=triton.next_power_of_2(bs + 1),
        block_sms=block_sms,
        sched_chunk=min(64, max(16, 8192 // block_sms)),
        block_cols=block_cols,
        n_spans=triton.cdiv(g.page_table_width, span),
        num_warps=4,
    )


def kernel_args(inputs: DSAForwardInputs, out: DSAMetadata) -> tuple:
    """The pointer and stride arguments every mode's kernel takes, in its order."""
    plan = out.write_plan
    accept_lens = inputs.accept_lens if inputs.accept_lens is not None else inputs.seq_lens
    return (
        inputs.req_to_token,
        inputs.req_to_token.stride(0),
        inputs.req_pool_indices,
        inputs.seq_lens,
        accept_lens,
        inputs.out_cache_loc,
        inputs.positions,
        out.cache_seqlens,
        out.cu_seqlens_q,
        out.cu_seqlens_k,
        out.seqlens_expanded,
        out.dsa_cache_seqlens,
        out.dsa_cu_seqlens_k,
        out.page_table_1,
        out.page_table_1.stride(0),
        out.real_page_table,
        out.real_page_table.stride(0),
        out.kpool_seqlens,
        plan.pool_slot,
        plan.pool_offset,
        plan.flush,
        out.paged_mqa_schedule,
    )


def kernel_constexprs(geometry: DSAGeometry, settings: LaunchSettings) -> dict:
    g, s = geometry, settings
    return dict(
        PAGE_SIZE=g.page_size,
        TOPK=g.index_topk,
        KPOOL=g.index_kpool,
        NUM_SMS=g.num_sms,
        T=g.num_draft_tokens,
        BLOCK_ROWS=s.block_rows,
        BLOCK_BS=s.block_bs,
        BLOCK_SMS=s.block_sms,
        SCHED_CHUNK=s.sched_chunk,
        BLOCK_COLS=s.block_cols,
        N_SPANS=s.n_spans,
        STEPS=STEPS_PER_SPAN,
        num_warps=s.num_warps,
    )


def check_contiguous(out: DSAMetadata) -> None:
    for name, t in out.tensors().items():
        if t.dtype != torch.int32 or not t.is_contiguous():
            raise ValueError(f"metadata buffer {name} must be contiguous int32")


@triton.jit
def _exclusive_scan_store(values, mask, offs, out_ptr):
    """out[0] = 0 and out[i + 1] = values[0] + ... + values[i] for the masked i; returns the sum."""
    values = tl.where(mask, values, 0)
    tl.store(out_ptr + offs + 1, tl.cumsum(values, axis=0), mask=mask)
    tl.store(out_ptr + offs, tl.zeros_like(values), mask=offs == 0)
    return tl.sum(values, axis=0)


@triton.jit
def _request_fields(
    seq_lens_ptr,
    bs,
    cache_seqlens_ptr,
    cu_seqlens_q_ptr,
    cu_seqlens_k_ptr,
    ROWS_PER_REQ: tl.constexpr,
    BLOCK_BS: tl.constexpr,
):
    """cache_seqlens, cu_seqlens_q = [0, T, 2T, ...] and cu_seqlens_k = [0, cumsum(seq_lens)]."""
    b = tl.arange(0, BLOCK_BS)
    m = b < bs
    seq_lens = tl.load(seq_lens_ptr + b, mask=m, other=0)
    tl.store(cache_seqlens_ptr + b, seq_lens, mask=m)
    _exclusive_scan_store(seq_lens, m, b, cu_seqlens_k_ptr)
    tl.store(cu_seqlens_q_ptr + b, b * ROWS_PER_REQ, mask=b <= bs)


@triton.jit
def _row_fields(
    r,
    rm,
    seqlens,
    valid,
    tail,
    loc,
    pos,
    seqlens_expanded_ptr,
    dsa_cache_seqlens_ptr,
    dsa_cu_seqlens_k_ptr,
    kpool_seqlens_ptr,
    pool_slot_ptr,
    pool_offset_ptr,
    flush_ptr,
    PAGE_SIZE: tl.constexpr,
    TOPK: tl.constexpr,
    KPOOL: tl.constexpr,
):
    """Every per-row field and the KPool write plan for rows `r` (masked by `rm`).

    Returns the total number of indexer blocks, sum(ceil(kpool_seqlens / (P / k))).
    """
    tl.store(seqlens_expanded_ptr + r, seqlens, mask=rm)
    dsa = tl.minimum(seqlens, TOPK)
    tl.store(dsa_cache_seqlens_ptr + r, dsa, mask=rm)
    _exclusive_scan_store(dsa, rm, r, dsa_cu_seqlens_k_ptr)
    kpool_seqlens = (seqlens + (KPOOL - 1)) // KPOOL
    tl.store(kpool_seqlens_ptr + r, kpool_seqlens, mask=rm)

    offset = (pos % KPOOL).to(tl.int32)
    flush = ((offset == KPOOL - 1) | tail) & valid
    tl.store(pool_slot_ptr + r, tl.where(valid, (loc // KPOOL).to(tl.int32), -1), mask=rm)
    tl.store(pool_offset_ptr + r, tl.where(valid, offset, 0), mask=rm)
    tl.store(flush_ptr + r, flush.to(tl.int32), mask=rm)

    KPOOL_BLOCK: tl.constexpr = PAGE_SIZE // KPOOL
    blocks = tl.where(rm, (kpool_seqlens + (KPOOL_BLOCK - 1)) // KPOOL_BLOCK, 0)
    return tl.sum(blocks, axis=0)


@triton.jit
def _paged_mqa_schedule(
    kpool_seqlens_ptr,
    rows,
    total_blocks,
    schedule_ptr,
    PAGE_SIZE: tl.constexpr,
    KPOOL: tl.constexpr,
    NUM_SMS: tl.constexpr,
    BLOCK_SMS: tl.constexpr,
    SCHED_CHUNK: tl.constexpr,
):
    """Write paged_mqa_schedule [S + 1, 2] (definition in `DSAMetadata`).

    Reads `kpool_seqlens` back, so the caller must have stored it and passed a barrier. For each
    SM start it counts the rows that end at or before it (a row search done as a scan over row
    chunks: compare every start with every chunk's inclusive block prefix).
    """
    KPOOL_BLOCK: tl.constexpr = PAGE_SIZE // KPOOL
    s = tl.arange(0, BLOCK_SMS)
    starts = s * (total_blocks // NUM_SMS) + tl.minimum(s, total_blocks % NUM_SMS)
    row = tl.zeros([BLOCK_SMS], dtype=tl.int32)
    first_block = tl.zeros([BLOCK_SMS], dtype=tl.int32)
    carry = total_blocks * 0
    for c0 in range(0, rows, SCHED_CHUNK):
        rr = c0 + tl.arange(0, SCHED_CHUNK)
        m = rr < rows
        kp = tl.load(kpool_seqlens_ptr + rr, mask=m, other=0)
        blocks = tl.where(m, (kp + (KPOOL_BLOCK - 1)) // KPOOL_BLOCK, 0)
        ends = tl.cumsum(blocks, axis=0) + carry  # inclusive block prefix of each row
        done = (ends[None, :] <= starts[:, None]) & m[None, :]  # [BLOCK_SMS, SCHED_CHUNK]
        row += tl.sum(done.to(tl.int32), axis=1)
        first_block += tl.sum(tl.where(done, blocks[None, :], 0), axis=1)
        carry += tl.sum(blocks, axis=0)
    sm = s <= NUM_SMS
    tl.store(schedule_ptr + 2 * s, row, mask=sm)
    tl.store(schedule_ptr + 2 * s + 1, starts - first_block, mask=sm)


@triton.jit
def _copy_live_prefix(
    src_row_ptr,
    dst_row_ptr,
    dst_page_row_ptr,
    live,
    span,
    PAGE_SIZE: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    STEPS: tl.constexpr,
):
    """Copy columns [span * STEPS * BLOCK_COLS, live) of this span from a req_to_token row to a
    page_table_1 row, and the page ids (slot // P) of its page-starting columns."""
    start = span * (STEPS * BLOCK_COLS)
    end = tl.minimum(live, start + STEPS * BLOCK_COLS)
    if start < end:
        for i in tl.static_range(STEPS):  # unrolled, so every step's loads issue together
            c = start + i * BLOCK_COLS
            cols = c + tl.arange(0, BLOCK_COLS)
            m = cols < end
            tl.store(dst_row_ptr + cols, tl.load(src_row_ptr + cols, mask=m), mask=m)
            pages = c // PAGE_SIZE + tl.arange(0, BLOCK_COLS // PAGE_SIZE)
            pm = pages * PAGE_SIZE < end
            first_slots = tl.load(src_row_ptr + pages * PAGE_SIZE, mask=pm)
            tl.store(dst_page_row_ptr + pages, first_slots // PAGE_SIZE, mask=pm)
