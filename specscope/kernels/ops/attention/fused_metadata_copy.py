"""Copy one metadata set into several others in one Triton launch (live prefixes only).

Draft-step backends of a multi-step drafter each own static buffers but share one forward's
metadata: instead of ~13 copies per destination, one launch copies every field from a source set
to all destinations. Destinations stay where they are (their buffers are graph-captured), so the
copy writes through a table of their data pointers, uploaded once per set of buffers.

Launch layout, grid (n_dsts, 1 + rows * n_spans):
    program (d, 0)      every 1-D field, its defined prefix (`dsa_metadata.defined_lengths`)
    program (d, 1 + w)  span w % n_spans of row w // n_spans: page_table_1's live prefix, and
                        (span 0) real_page_table's live pages; lengths from the source's
                        seqlens_expanded
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from .dsa_kpool_metadata.scan import check_contiguous, launch_settings
from .dsa_metadata import DSAMetadata, ForwardMode

# Order of the pointer table; the kernel's field indices follow it.
COPY_FIELDS = (
    "cache_seqlens",  # 0: bs
    "cu_seqlens_q",  # 1: bs + 1
    "cu_seqlens_k",  # 2: bs + 1
    "seqlens_expanded",  # 3..8: rows
    "dsa_cache_seqlens",
    "kpool_seqlens",
    "write_plan.pool_slot",
    "write_plan.pool_offset",
    "write_plan.flush",
    "dsa_cu_seqlens_k",  # 9: rows + 1
    "paged_mqa_schedule",  # 10: 2 * (S + 1)
    "page_table_1",  # 11: live prefix of each row
    "real_page_table",  # 12: live pages of each row
)
BLOCK_1D = 1024


@triton.jit
def _field_ptr(table, f):
    return tl.load(table + f).to(tl.pointer_type(tl.int32))


@triton.jit
def _copy_prefix(src, dst, start, end, BLOCK: tl.constexpr):
    """dst[start:end] = src[start:end], BLOCK entries at a time."""
    for c in range(start, end, BLOCK):
        o = c + tl.arange(0, BLOCK)
        m = o < end
        tl.store(dst + o, tl.load(src + o, mask=m), mask=m)


@triton.jit
def _fused_metadata_copy_kernel(
    src_table,
    dst_tables,
    seqlens_ptr,
    bs,
    rows,
    stride_pt,
    stride_rpt,
    N_FIELDS: tl.constexpr,
    NUM_SMS: tl.constexpr,
    PAGE_SIZE: tl.constexpr,
    BLOCK_1D: tl.constexpr,
    BLOCK_COLS: tl.constexpr,
    N_SPANS: tl.constexpr,
):
    dst_table = dst_tables + tl.program_id(0) * N_FIELDS
    pid = tl.program_id(1)
    if pid == 0:
        _copy_prefix(_field_ptr(src_table, 0), _field_ptr(dst_table, 0), 0, bs, BLOCK_1D)
        for f in tl.static_range(1, 3):
            _copy_prefix(_field_ptr(src_table, f), _field_ptr(dst_table, f), 0, bs + 1, BLOCK_1D)
        for f in tl.static_range(3, 9):
            _copy_prefix(_field_ptr(src_table, f), _field_ptr(dst_table, f), 0, rows, BLOCK_1D)
        _copy_prefix(_field_ptr(src_table, 9), _field_ptr(dst_table, 9), 0, rows + 1, BLOCK_1D)
        n_sched = 2 * (NUM_SMS + 1)
        _copy_prefix(_field_ptr(src_table, 10), _field_ptr(dst_table, 10), 0, n_sched, BLOCK_1D)
    else:
        w = pid - 1
        row = (w // N_SPANS).to(tl.int64)
        span = w % N_SPANS
        live = tl.load(seqlens_ptr + row)
        start = span * BLOCK_COLS
        end = tl.minimum(live, start + BLOCK_COLS)
        src_row = _field_ptr(src_table, 11) + row * stride_pt
        dst_row = _field_ptr(dst_table, 11) + row * stride_pt
        _copy_prefix(src_row, dst_row, start, end, BLOCK_COLS)
        if span == 0:
            n_pages = (live + PAGE_SIZE - 1) // PAGE_SIZE
            src_row = _field_ptr(src_table, 12) + row * stride_rpt
            dst_row = _field_ptr(dst_table, 12) + row * stride_rpt
            _copy_prefix(src_row, dst_row, 0, n_pages, BLOCK_COLS)


@functools.lru_cache(maxsize=64)
def _pointer_tables(
    src_ptrs: tuple[int, ...], dst_ptrs: tuple[tuple[int, ...], ...], device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Device tables of data pointers: [n_fields] and [n_dsts, n_fields] int64 (an H2D copy)."""
    src = torch.tensor(src_ptrs, dtype=torch.int64, device=device)
    dst = torch.tensor(dst_ptrs, dtype=torch.int64, device=device)
    return src, dst


def _field_ptrs(meta: DSAMetadata) -> tuple[int, ...]:
    tensors = meta.tensors()
    return tuple(tensors[name].data_ptr() for name in COPY_FIELDS)


def fused_metadata_copy(
    src: DSAMetadata, dsts: Sequence[DSAMetadata], mode: ForwardMode, bs: int
) -> None:
    """Copy the defined parts of `src` (built for `bs` requests in `mode`) into every `dsts`.

    One launch for all destinations. Sync-free except the first call for a given set of buffers,
    which uploads their pointer table (an H2D copy that syncs): make that first call at setup,
    before any graph capture or sync-checked region. Destination buffers are written in place.
    """
    if not dsts:
        return
    g = src.geometry
    rows = g.rows(mode, bs)
    check_contiguous(src)
    for dst in dsts:
        if dst.geometry != g:
            raise ValueError("destination geometry differs from the source's")
        if bs > dst.max_bs or rows > dst.max_rows:
            raise ValueError(f"bs={bs} rows={rows} exceed a destination's buffers")
        check_contiguous(dst)
    src_table, dst_table = _pointer_tables(
        _field_ptrs(src), tuple(_field_ptrs(d) for d in dsts), src.device
    )
    settings = launch_settings(rows, bs, g)
    grid = (len(dsts), 1 + rows * settings.n_spans)
    _fused_metadata_copy_kernel[grid](
        src_table,
        dst_table,
        src.seqlens_expanded,
        bs,
        rows,
        g.page_table_width,
        g.max_pages,
        N_FIELDS=len(COPY_FIELDS),
        NUM_SMS=g.num_sms,
        PAGE_SIZE=g.page_size,
        BLOCK_1D=BLOCK_1D,
        BLOCK_COLS=settings.block_cols,
        N_SPANS=settings.n_spans,
        num_warps=settings.num_warps,
    )
