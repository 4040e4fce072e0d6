"""Building blocks shared by the three fused DSA metadata kernels, and their launch settings.

Every fused kernel is one launch on a 1-D grid:

    program 0                      request fields (cache_seqlens, cu_seqlens_q, cu_seqlens_k)
    program 1                      every per-row field (vectorised over all rows, with the
                                   row scan) and the KPool write plan
    program 2                      the paged-MQA schedule
    programs 3 .. 2 + bs*n_spans   page-table workers: program 3 + b * n_spans + c copies
                                   span c of request b's live prefix into page_table_1 (one
                                   load, a store per row of the request) and the page ids of
                                   those columns into real_page_table

Programs 0-2 (the *meta programs*, `META_PROGRAMS`) are the only ones that need scans across
requests or rows; the workers need nothing but their own request. Each meta program is one
serial chain of dependent steps (load, scan, store), so they run side by side rather than one
after another. A build takes as long as its slowest program. On the H200 (`bench/dsa_copy_bound.py`,
rows `stage,meta`, GPU µs per launch; an empty kernel takes 0.66) the meta work took, for
TARGET_VERIFY at bs 1 / 8 / 32, 1.50 / 1.73 / 2.19 µs in one program and 1.32 / 1.52 / 1.59 µs
in three. At every length measured (256-1024 and 4k-8k live) the page-table workers took
longer still (1.7 / 2.0 / 3.0 µs at 4k-8k), so the builds did not change
(`bench/data/dsa_copy_bound_meta_ab.txt`): the split shortens a path that is not the critical
one in these shapes.

The helpers here are `@triton.jit` functions inlined into each mode's kernel; each mode supplies
its own row mapping (which request a row belongs to, how many keys it sees).

`LaunchSettings.stages` selects which of the three kinds of work run (FIELDS, SCHEDULE,
PAGE_TABLE bits). Builders always run all of them; `bench/dsa_metadata_stages.py` leaves stages out
to measure where a build's GPU time goes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ..dsa_metadata import DSAForwardInputs, DSAGeometry, DSAMetadata

MAX_FUSED_ROWS = 4096  # a meta program holds every row in one block
MAX_FUSED_SMS = 1023  # the schedule's S + 1 entries sit in one block
MAX_BLOCK_COLS = 1024  # page-table columns one worker copies (its span of the rows)
META_PROGRAMS = tl.constexpr(3)  # request fields, row fields, schedule; the workers follow

FIELDS = 1  # stage bits of LaunchSettings.stages: request and row fields, KPool write plan
SCHEDULE = 2  # paged_mqa_schedule
PAGE_TABLE = 4  # page_table_1 and real_page_table
ALL_STAGES = FIELDS | SCHEDULE | PAGE_TABLE


@dataclass(frozen=True)
class LaunchSettings:
    """Block sizes and grid of a fused metadata launch; a pure function of the shapes."""

    block_rows: int  # >= rows, a power of two: the meta program's vector over rows
    block_bs: int  # >= bs + 1: its vector over requests
    block_sms: int  # >= num_sms + 1: its vector over schedule entries
    block_cols: int  # page-table columns per worker (a multiple of page_size): its span
    n_spans: int  # workers per request (each copies one span of all the request's rows)
    num_warps: int
    stages: int  # ALL_STAGES, except when a benchmark leaves work out

    @property
    def row_bits(self) -> int:
        """log2(block_rows): the steps of the schedule's binary search."""
        return self.block_rows.bit_length() - 1

    def grid(self, bs: int) -> tuple[int]:
        return (META_PROGRAMS.value + bs * self.n_spans,)


def launch_settings(rows: int, bs: int, geometry: DSAGeometry, **overrides) -> LaunchSettings:
    """Deterministic launch settings from shapes (no autotuning: trial runs pollute profiles).

    `overrides` (benchmarks and tests only) replace `block_cols`, `num_warps` or `stages`;
    `n_spans` follows `block_cols`.
    """
    g = geometry
    width = triton.next_power_of_2(g.page_table_width)
    chosen = {
        "block_cols": max(g.page_size, min(MAX_BLOCK_COLS, width)),
        "num_warps": 4,
        "stages": ALL_STAGES,
    }
    unknown = set(overrides) - set(chosen)
    if unknown or overrides.get("block_cols", g.page_size) % g.page_size:
        raise ValueError(f"invalid launch settings {overrides}")
    chosen |= overrides
    return LaunchSettings(
        block_rows=triton.next_power_of_2(max(rows, 2)),
        block_bs=triton.next_power_of_2(bs + 1),
        block_sms=triton.next_power_of_2(g.num_sms + 1),
        n_spans=triton.cdiv(g.page_table_width, chosen["block_cols"]),
        **chosen,
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
        ROW_BITS=s.row_bits,
        BLOCK_COLS=s.block_cols,
        N_SPANS=s.n_spans,
        STAGES=s.stages,
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
    seq_lens_ptr, bs, request_out, ROWS_PER_REQ: tl.constexpr, BLOCK_BS: tl.constexpr
):
    """cache_seqlens, cu_seqlens_q = [0, T, 2T, ...] and cu_seqlens_k = [0, cumsum(seq_lens)];
    `request_out`: their pointers, in that order."""
    cache_seqlens_ptr, cu_seqlens_q_ptr, cu_seqlens_k_ptr = request_out
    b = tl.arange(0, BLOCK_BS)
    m = b < bs
    seq_lens = tl.load(seq_lens_ptr + b, mask=m, other=0)
    tl.store(cache_seqlens_ptr + b, seq_lens, mask=m)
    _exclusive_scan_store(seq_lens, m, b, cu_seqlens_k_ptr)
    tl.store(cu_seqlens_q_ptr + b, b * ROWS_PER_REQ, mask=b <= bs)


@triton.jit
def _row_fields(
    rows,
    loc,
    pos,
    row_out,
    plan_out,
    PAGE_SIZE: tl.constexpr,
    TOPK: tl.constexpr,
    KPOOL: tl.constexpr,
):
    """Every per-row field and the KPool write plan for `rows` = (r, rm, seqlens, valid, tail)
    (see `_meta_program`); `row_out`: the pointers of seqlens_expanded, dsa_cache_seqlens,
    dsa_cu_seqlens_k and kpool_seqlens; `plan_out`: of pool_slot, pool_offset and flush."""
    r, rm, seqlens, valid, tail = rows
    seqlens_expanded_ptr, dsa_cache_seqlens_ptr, dsa_cu_seqlens_k_ptr, kpool_seqlens_ptr = row_out
    pool_slot_ptr, pool_offset_ptr, flush_ptr = plan_out
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


@triton.jit
def _indexer_blocks(seqlens, rm, PAGE_SIZE: tl.constexpr, KPOOL: tl.constexpr):
    """Each row's number of indexer blocks, ceil(kpool_seqlens / (P / k)); 0 past `rm`."""
    KPOOL_BLOCK: tl.constexpr = PAGE_SIZE // KPOOL
    kpool_seqlens = (seqlens + (KPOOL - 1)) // KPOOL
    return tl.where(rm, (kpool_seqlens + (KPOOL_BLOCK - 1)) // KPOOL_BLOCK, 0)


@triton.jit
def _paged_mqa_schedule(
    blocks,
    rm,
    schedule_ptr,
    NUM_SMS: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    ROW_BITS: tl.constexpr,
    BLOCK_SMS: tl.constexpr,
):
    """Write paged_mqa_schedule [S + 1, 2] (definition in `DSAMetadata`) from `blocks`
    ([BLOCK_ROWS], each row's indexer blocks, 0 past `rm`), all SMs at once.

    SM s starts at block start(s) = s * q + min(s, rem), q = total // S, rem = total % S. Its row
    is the number of rows whose inclusive block prefix `ends` is <= start(s)
    (torch.searchsorted(right=True)): a binary search over `ends`, one step per bit of
    BLOCK_ROWS = 2 ** ROW_BITS, for every SM in the same vector (`tl.gather` reads `ends` at each
    SM's probe). Its offset is start(s) minus the prefix of the rows before it.
    """
    ends = tl.cumsum(blocks, axis=0)  # [BLOCK_ROWS] inclusive block prefix
    total = tl.sum(blocks, axis=0)
    q = total // NUM_SMS
    rem = total % NUM_SMS
    s = tl.arange(0, BLOCK_SMS)
    starts = s * q + tl.minimum(s, rem)  # [BLOCK_SMS]
    search = tl.where(rm, ends, 2147483647)  # padding rows never end at or before a start
    row = tl.zeros([BLOCK_SMS], dtype=tl.int32)  # rows known to end at or before each start
    for i in tl.static_range(ROW_BITS + 1):
        cand = row + (BLOCK_ROWS >> i)
        probe = tl.gather(search, tl.minimum(cand, BLOCK_ROWS) - 1, axis=0)
        row = tl.where((cand <= BLOCK_ROWS) & (probe <= starts), cand, row)
    first_block = tl.gather(ends, tl.maximum(row - 1, 0), axis=0)
    first_block = tl.where(row > 0, first_block, 0)
    sm = s <= NUM_SMS
    tl.store(schedule_ptr + 2 * s, row, mask=sm)
    tl.store(schedule_ptr + 2 * s + 1, starts - first_block, mask=sm)


@triton.jit
def _meta_program(
    part,
    rows,
    bs,
    row_in,
    request_out,
    row_out,
    plan_out,
    schedule_ptr,
    ROWS_PER_REQ: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    TOPK: tl.constexpr,
    KPOOL: tl.constexpr,
    NUM_SMS: tl.constexpr,
    BLOCK_ROWS: tl.constexpr,
    ROW_BITS: tl.constexpr,
    BLOCK_BS: tl.constexpr,
    BLOCK_SMS: tl.constexpr,
    STAGES: tl.constexpr,
):
    """Meta program `part` (0 .. META_PROGRAMS - 1). If STAGES has FIELDS, 0 writes the request
    fields and 1 every row field; if STAGES has SCHEDULE, 2 writes the schedule.

    `rows` = (r, rm, seqlens, valid, tail): the rows `r`, masked by `rm`, each seeing `seqlens`
    keys; `valid`: it writes the KPool; `tail`: its request's last (the mode's row mapping).
    Pointers, grouped as `kernel_args` orders them: `row_in` = (seq_lens, out_cache_loc,
    positions), `request_out` = (cache_seqlens, cu_seqlens_q, cu_seqlens_k), `row_out` =
    (seqlens_expanded, dsa_cache_seqlens, dsa_cu_seqlens_k, kpool_seqlens), `plan_out` =
    (pool_slot, pool_offset, flush)."""
    r, rm, seqlens, valid, tail = rows
    seq_lens_ptr, out_cache_loc_ptr, positions_ptr = row_in
    if part == 0:
        if STAGES & 1:  # FIELDS
            _request_fields(seq_lens_ptr, bs, request_out, ROWS_PER_REQ, BLOCK_BS)
    elif part == 1:
        if STAGES & 1:  # FIELDS
            loc = tl.load(out_cache_loc_ptr + r, mask=rm, other=0)
            pos = tl.load(positions_ptr + r, mask=rm, other=0)
            _row_fields(rows, loc, pos, row_out, plan_out, PAGE_SIZE, TOPK, KPOOL)
    elif STAGES & 2:  # SCHEDULE, in program 2
        blocks = _indexer_blocks(seqlens, rm, PAGE_SIZE, KPOOL)
        _paged_mqa_schedule(blocks, rm, schedule_ptr, NUM_SMS, BLOCK_ROWS, ROW_BITS, BLOCK_SMS)


@triton.jit
def _copy_live_prefix(
    source,
    tables,
    req,
    row0,
    shortest,
    last_growing,
    span,
    PAGE_SIZE: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    ROWS_PER_REQ: tl.constexpr,
):
    """Copy span `span` (columns [span * BLOCK_COLS, (span + 1) * BLOCK_COLS)) of the live
    prefix of every row of one request: from req_to_token row `req` to page_table_1 rows
    row0 .. row0 + ROWS_PER_REQ - 1, and the page ids (slot // P) of the span's page-starting
    columns to the same rows of real_page_table. `source` = (req_to_token, its row stride),
    `tables` = (page_table_1, its row stride, real_page_table, its row stride).

    Row j of the request is live for shortest + min(j, last_growing) columns (DECODE: one row;
    TARGET_VERIFY: last_growing = T - 1; DRAFT_EXTEND: acc - 1, padded rows repeat the last
    accepted one). The rows share one source row, so the span is loaded once and stored to each.

    A span live to its end in every row is stored without masks: a mask that ends at a runtime
    column keeps Triton from proving 4 neighbours share it, so masked accesses are 4-byte and
    unmasked ones 16-byte vectors. In the spans holding a row's live tail, the mask is taken per
    group of 4 columns (a group is copied when all 4 are live), which keeps the 16-byte
    accesses, and the row's last 0-3 live columns go in a 4-wide copy of their own. Nothing past
    a row's live prefix is written. On the H200 with 256-1024 live columns, where every copy is a
    tail, this took the TARGET_VERIFY bs 32 page-table stage from 2.80 µs (per-column masks) to
    2.14 µs (`bench/data/dsa_copy_bound_tail_ab.txt`).
    """
    req_to_token_ptr, stride_r2t = source
    page_table_1_ptr, stride_pt, real_page_table_ptr, stride_rpt = tables
    src_row_ptr = req_to_token_ptr + req * stride_r2t
    start = span * BLOCK_COLS
    cols = start + tl.arange(0, BLOCK_COLS)
    pages = span * (BLOCK_COLS // PAGE_SIZE) + tl.arange(0, BLOCK_COLS // PAGE_SIZE)
    longest = shortest + last_growing
    if start + BLOCK_COLS <= shortest:
        slots = tl.load(src_row_ptr + cols)
        page_ids = tl.load(src_row_ptr + pages * PAGE_SIZE) // PAGE_SIZE
        for j in tl.static_range(ROWS_PER_REQ):
            row = (row0 + j).to(tl.int64)
            tl.store(page_table_1_ptr + row * stride_pt + cols, slots)
            tl.store(real_page_table_ptr + row * stride_rpt + pages, page_ids)
    elif start < longest:
        group_end = cols // 4 * 4 + 4  # one past the last column of each column's group of 4
        slots = tl.load(src_row_ptr + cols, mask=group_end <= longest)
        page_ids = tl.load(src_row_ptr + pages * PAGE_SIZE, mask=pages * PAGE_SIZE < longest)
        page_ids = page_ids // PAGE_SIZE
        for j in tl.static_range(ROWS_PER_REQ):
            row = (row0 + j).to(tl.int64)
            live = shortest + tl.minimum(j, last_growing)
            dst_row_ptr = page_table_1_ptr + row * stride_pt
            tl.store(dst_row_ptr + cols, slots, mask=group_end <= live)
            rest = live // 4 * 4 + tl.arange(0, 4)  # the row's last live_len % 4 columns
            rest_mask = (rest < live) & (rest >= start) & (rest < start + BLOCK_COLS)
            tl.store(dst_row_ptr + rest, tl.load(src_row_ptr + rest, mask=rest_mask), rest_mask)
            pm = pages * PAGE_SIZE < live
            tl.store(real_page_table_ptr + row * stride_rpt + pages, page_ids, mask=pm)
