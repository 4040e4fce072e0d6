"""Types shared by every DSA metadata builder: geometry, per-forward inputs, static output buffers.

DSA (DeepSeek sparse attention) needs, before every forward (and so before every CUDA-graph
replay), a set of int32 tensors that describe which keys each query row sees. This module defines
those tensors once; `ordinary_metadata.py` builds them with plain torch ops (the reference) and
`dsa_kpool_metadata/` builds them with one Triton launch per forward mode.

Rows and lengths
----------------
A forward has `bs` requests. Each request contributes `rows_per_request` query rows:

    DECODE         1 row;  row 0 sees seq_lens[b] keys
    TARGET_VERIFY  T rows; row j sees seq_lens[b] - T + j + 1 keys
    DRAFT_EXTEND   T rows (fixed width) with acc[b] accepted (1..T);
                   row j < acc[b] sees seq_lens[b] - acc[b] + j + 1 keys,
                   row j >= acc[b] is padding and repeats row acc[b] - 1

Row r belongs to request r // rows_per_request. `seqlens_expanded[r]` is the number of keys row
r sees; the first `seqlens_expanded[r]` entries of its page-table row are its *live prefix*.

Defined parts
-------------
Every 1-D field is defined on its first `bs`, `bs + 1`, `rows` or `rows + 1` entries (see
`DSAMetadata`); `page_table_1[r]` only on its live prefix and `real_page_table[r]` only on its
first ceil(seqlens_expanded[r] / page_size) pages. Everything past that is undefined: builders
may leave stale values there and tests never compare it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields

import torch

KPOOL_SIZES = (1, 2, 4, 8)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class ForwardMode(enum.Enum):
    """The forward modes whose metadata is built before a CUDA-graph replay."""

    DECODE = "decode"
    TARGET_VERIFY = "target_verify"
    DRAFT_EXTEND = "draft_extend"


@dataclass(frozen=True)
class DSAGeometry:
    """Static sizes of the KV cache and the indexer; fixed for the life of a server.

    page_size: KV slots per page (P); slots are page-aligned, page id = slot // P.
    index_topk: keys the indexer keeps per row (K); `dsa_cache_seqlens` is clamped to it.
    index_kpool: tokens pooled into one index key (k): 1 for DeepSeek-V3.2/GLM-5, 4 for
        GLM-5.3-Flash.
    page_table_width: columns of `req_to_token` and `page_table_1` (L), the longest context.
    num_sms: SMs the indexer's paged MQA logits kernel is split over (S).
    num_draft_tokens: rows per request in TARGET_VERIFY and DRAFT_EXTEND (T).
    """

    page_size: int = 64
    index_topk: int = 256
    index_kpool: int = 1
    page_table_width: int = 16384
    num_sms: int = 132
    num_draft_tokens: int = 6

    @property
    def max_pages(self) -> int:
        """Columns of `real_page_table`: ceil(L / P)."""
        return cdiv(self.page_table_width, self.page_size)

    @property
    def kpool_block(self) -> int:
        """Pooled index keys per indexer block: one page of tokens holds P / k pooled keys."""
        return self.page_size // self.index_kpool

    def rows_per_request(self, mode: ForwardMode) -> int:
        return 1 if mode is ForwardMode.DECODE else self.num_draft_tokens

    def rows(self, mode: ForwardMode, bs: int) -> int:
        return bs * self.rows_per_request(mode)


@dataclass
class DSAForwardInputs:
    """What one forward hands the metadata builders. All tensors on one device.

    `out_cache_loc` and `positions` hold one entry per row: the new token's KV slot and its
    position. In DRAFT_EXTEND the entries of padded rows (j >= accept_lens[b]) are ignored.
    """

    req_to_token: torch.Tensor  # [max_reqs, L] int32: (pool row, position) -> KV slot
    req_pool_indices: torch.Tensor  # [bs] int64: request -> pool row
    seq_lens: torch.Tensor  # [bs] int32: keys of the request, new tokens included
    out_cache_loc: torch.Tensor  # [rows] int64: KV slot of each new token
    positions: torch.Tensor  # [rows] int64: position of each new token
    accept_lens: torch.Tensor | None = None  # [bs] int32, DRAFT_EXTEND only: 1..T

    @property
    def bs(self) -> int:
        return self.req_pool_indices.shape[0]


@dataclass
class KPoolWritePlan:
    """Where each new token's index key goes in the pooled index-key cache (KPool).

    For the new token of row r with KV slot `loc` and position `pos`:
        pool_slot[r]   = loc // k           (pooled slot; k consecutive tokens share one)
        pool_offset[r] = pos % k            (the token's place inside its pool)
        flush[r]       = 1 when the pool completes (pool_offset == k - 1) or the token is the
                         last new token of its request (its live tail: pos == seq_lens[b] - 1),
                         else 0
    DRAFT_EXTEND padded rows (j >= acc[b]) write nothing: pool_slot = -1, offset = flush = 0.
    Defined on the first `rows` entries.
    """

    pool_slot: torch.Tensor  # [max_rows] int32
    pool_offset: torch.Tensor  # [max_rows] int32
    flush: torch.Tensor  # [max_rows] int32, 0 or 1


@dataclass
class DSAMetadata:
    """Static metadata buffers, allocated once at the largest batch and rewritten in place.

    With rows = geometry.rows(mode, bs), a build defines:
        cache_seqlens[:bs]          = seq_lens
        cu_seqlens_q[:bs + 1]       = [0, T, 2T, ...] (0..bs in DECODE): query row offsets
        cu_seqlens_k[:bs + 1]       = [0, cumsum(seq_lens)]
        seqlens_expanded[:rows]     = keys each row sees (module docstring)
        dsa_cache_seqlens[:rows]    = min(seqlens_expanded, K)
        dsa_cu_seqlens_k[:rows + 1] = [0, cumsum(dsa_cache_seqlens)]
        page_table_1[r, :n_r]       = req_to_token[req_pool_indices[r // T], :n_r],
                                      n_r = seqlens_expanded[r]
        real_page_table[r, :p_r]    = page_table_1[r, ::P][:p_r] // P, p_r = ceil(n_r / P)
        kpool_seqlens[:rows]        = ceil(seqlens_expanded / k)
        write_plan                  = `KPoolWritePlan`
        paged_mqa_schedule          = the split of the indexer's blocks over SMs, below

    paged_mqa_schedule: row r has nb_r = ceil(kpool_seqlens[r] / (P / k)) index blocks,
    B = sum(nb_r) in all, laid out row after row. SM s starts at global block
        start_s = s * (B // S) + min(s, B % S)        for s in 0..S
    (so SMs differ by at most one block) and the schedule holds, for each s, the row that block
    start_s falls in and its offset inside that row:
        paged_mqa_schedule[s] = (row_s, start_s - first_block(row_s))
    Rows with no blocks are skipped; start_S = B gives the end sentinel (rows, 0). All S + 1
    entries are defined.
    """

    geometry: DSAGeometry
    cache_seqlens: torch.Tensor  # [max_bs] int32
    cu_seqlens_q: torch.Tensor  # [max_bs + 1] int32
    cu_seqlens_k: torch.Tensor  # [max_bs + 1] int32
    seqlens_expanded: torch.Tensor  # [max_rows] int32
    dsa_cache_seqlens: torch.Tensor  # [max_rows] int32
    dsa_cu_seqlens_k: torch.Tensor  # [max_rows + 1] int32
    page_table_1: torch.Tensor  # [max_rows, L] int32
    real_page_table: torch.Tensor  # [max_rows, ceil(L / P)] int32
    kpool_seqlens: torch.Tensor  # [max_rows] int32
    write_plan: KPoolWritePlan
    paged_mqa_schedule: torch.Tensor  # [S + 1, 2] int32

    @property
    def max_bs(self) -> int:
        return self.cache_seqlens.shape[0]

    @property
    def max_rows(self) -> int:
        return self.seqlens_expanded.shape[0]

    @property
    def device(self) -> torch.device:
        return self.cache_seqlens.device

    def tensors(self) -> dict[str, torch.Tensor]:
        """Every buffer by name (write-plan fields as `write_plan.<name>`)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, torch.Tensor):
                out[f.name] = value
            elif isinstance(value, KPoolWritePlan):
                for g in fields(value):
                    out[f"write_plan.{g.name}"] = getattr(value, g.name)
        return out


def allocate_metadata(
    max_bs: int,
    max_rows: int,
    geometry: DSAGeometry,
    device: torch.device | str,
    fill: int = 0,
) -> DSAMetadata:
    """Allocate one set of static metadata buffers (every tensor int32, contiguous)."""

    def buf(*shape: int) -> torch.Tensor:
        return torch.full(shape, fill, dtype=torch.int32, device=device)

    return DSAMetadata(
        geometry=geometry,
        cache_seqlens=buf(max_bs),
        cu_seqlens_q=buf(max_bs + 1),
        cu_seqlens_k=buf(max_bs + 1),
        seqlens_expanded=buf(max_rows),
        dsa_cache_seqlens=buf(max_rows),
        dsa_cu_seqlens_k=buf(max_rows + 1),
        page_table_1=buf(max_rows, geometry.page_table_width),
        real_page_table=buf(max_rows, geometry.max_pages),
        kpool_seqlens=buf(max_rows),
        write_plan=KPoolWritePlan(
            pool_slot=buf(max_rows), pool_offset=buf(max_rows), flush=buf(max_rows)
        ),
        paged_mqa_schedule=buf(geometry.num_sms + 1, 2),
    )


def defined_lengths(mode: ForwardMode, geometry: DSAGeometry, bs: int) -> dict[str, int]:
    """How many leading entries of each 1-D field a build for `bs` requests defines.

    Entries past these prefixes are stale (left from an earlier, larger build); copies and
    comparisons of metadata touch only the defined prefixes.
    """
    rows = geometry.rows(mode, bs)
    return {
        "cache_seqlens": bs,
        "cu_seqlens_q": bs + 1,
        "cu_seqlens_k": bs + 1,
        "seqlens_expanded": rows,
        "dsa_cache_seqlens": rows,
        "dsa_cu_seqlens_k": rows + 1,
        "kpool_seqlens": rows,
        "write_plan.pool_slot": rows,
        "write_plan.pool_offset": rows,
        "write_plan.flush": rows,
        "paged_mqa_schedule": geometry.num_sms + 1,
    }


def check_build_args(mode: ForwardMode, inputs: DSAForwardInputs, out: DSAMetadata) -> int:
    """Check shapes and dtypes (host-side only, no device sync); return the row count."""
    g = out.geometry
    bs = inputs.bs
    rows = g.rows(mode, bs)
    if bs > out.max_bs or rows > out.max_rows:
        raise ValueError(f"bs={bs} rows={rows} exceed buffers ({out.max_bs}, {out.max_rows})")
    if inputs.req_to_token.shape[1] < g.page_table_width:
        raise ValueError(
            f"req_to_token has {inputs.req_to_token.shape[1]} columns, "
            f"page_table_width is {g.page_table_width}"
        )
    if inputs.req_to_token.dtype != torch.int32:
        raise TypeError("req_to_token must be int32")
    if inputs.seq_lens.shape != (bs,):
        raise ValueError(f"seq_lens has shape {tuple(inputs.seq_lens.shape)}, expected ({bs},)")
    for name in ("out_cache_loc", "positions"):
        if getattr(inputs, name).shape != (rows,):
            raise ValueError(f"{name} must have shape ({rows},) in {mode.name}")
    if mode is ForwardMode.DRAFT_EXTEND:
        if inputs.accept_lens is None or inputs.accept_lens.shape != (bs,):
            raise ValueError("DRAFT_EXTEND needs accept_lens of shape (bs,)")
    return rows
