"""The ordinary DSA metadata path: a chain of plain torch ops per forward mode.

This is how a backend builds metadata without fusion: every field is its own small op (an
arange, a cumsum, a gather, a copy into the static buffer...), so one forward costs a dozen or
more launches. It writes into caller-provided static buffers and never syncs with the host, so it
can run before a CUDA-graph replay or be captured into one. It is also the reference that the
fused kernels in `dsa_kpool_metadata/` are tested against; the definitions live in
`dsa_metadata.DSAMetadata`.

Unlike the fused kernels it copies whole page-table rows (all L columns), as the backends it
mirrors do; only the live prefix of each row is defined.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .dsa_metadata import DSAForwardInputs, DSAMetadata, ForwardMode, check_build_args


def expanded_rows(
    mode: ForwardMode, inputs: DSAForwardInputs, num_draft_tokens: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-row (request, seqlens_expanded, is_valid, is_tail) for `mode`; no host sync.

    is_valid: the row's new token is real (only DRAFT_EXTEND has padded rows).
    is_tail: the row's new token is the last new token of its request.
    """
    seq_lens = inputs.seq_lens
    bs = seq_lens.shape[0]
    device = seq_lens.device
    if mode is ForwardMode.DECODE:
        ones = torch.ones(bs, dtype=torch.bool, device=device)
        return inputs.req_pool_indices, seq_lens, ones, ones
    t = num_draft_tokens
    j = torch.arange(t, dtype=torch.int32, device=device)[None, :]  # [1, T]
    req = inputs.req_pool_indices[:, None].expand(bs, t).reshape(-1)  # [rows] int64
    if mode is ForwardMode.TARGET_VERIFY:
        seqlens = (seq_lens[:, None] - t + j + 1).reshape(-1)
        valid = torch.ones(bs * t, dtype=torch.bool, device=device)
        tail = (j == t - 1).expand(bs, t).reshape(-1)
        return req, seqlens, valid, tail
    acc = inputs.accept_lens[:, None]  # [bs, 1]
    last = torch.minimum(j, acc - 1)  # padded rows repeat the last accepted row
    seqlens = (seq_lens[:, None] - acc + last + 1).reshape(-1)
    valid = (j < acc).reshape(-1)
    tail = (j == acc - 1).reshape(-1)
    return req, seqlens, valid, tail


def paged_mqa_schedule_torch(blocks: torch.Tensor, num_sms: int) -> torch.Tensor:
    """Split `blocks` ([rows] int, blocks per row) over `num_sms` SMs; [S + 1, 2] int32.

    See `DSAMetadata` for the definition. Sync-free: the total stays on the device.
    """
    cum = torch.cumsum(blocks, 0)  # [rows] int64, inclusive
    total = cum[-1:]  # [1]
    s = torch.arange(num_sms + 1, device=blocks.device)
    starts = s * (total // num_sms) + torch.minimum(s, total % num_sms)  # [S + 1]
    row = torch.searchsorted(cum, starts, right=True)  # first row whose blocks reach past start
    first_block = F.pad(cum, (1, 0))[row]
    return torch.stack([row, starts - first_block], dim=1).to(torch.int32)


def build_metadata_ordinary(mode: ForwardMode, inputs: DSAForwardInputs, out: DSAMetadata) -> None:
    """Build every field of `out` for one forward with plain torch ops; no host sync."""
    g = out.geometry
    rows = check_build_args(mode, inputs, out)
    bs = inputs.bs
    k = g.index_kpool
    seq_lens = inputs.seq_lens
    device = seq_lens.device

    out.cache_seqlens[:bs].copy_(seq_lens)
    step = g.rows_per_request(mode)
    cu_q = torch.arange(0, (bs + 1) * step, step, dtype=torch.int32, device=device)
    out.cu_seqlens_q[: bs + 1].copy_(cu_q)
    out.cu_seqlens_k[: bs + 1].copy_(F.pad(torch.cumsum(seq_lens, 0, dtype=torch.int32), (1, 0)))

    req, seqlens, valid, tail = expanded_rows(mode, inputs, g.num_draft_tokens)
    out.seqlens_expanded[:rows].copy_(seqlens)
    dsa_seqlens = torch.clamp(seqlens, max=g.index_topk)
    out.dsa_cache_seqlens[:rows].copy_(dsa_seqlens)
    dsa_cu = F.pad(torch.cumsum(dsa_seqlens, 0, dtype=torch.int32), (1, 0))
    out.dsa_cu_seqlens_k[: rows + 1].copy_(dsa_cu)

    width = g.page_table_width
    page_table = out.page_table_1[:rows]  # [rows, L] int32
    page_table.copy_(inputs.req_to_token[req, :width])
    out.real_page_table[:rows].copy_(page_table[:, :: g.page_size] // g.page_size)

    kpool_seqlens = (seqlens + (k - 1)) // k
    out.kpool_seqlens[:rows].copy_(kpool_seqlens)

    offset = (inputs.positions % k).to(torch.int32)
    flush = (offset == k - 1) | tail
    plan = out.write_plan
    plan.pool_slot[:rows].copy_(torch.where(valid, inputs.out_cache_loc // k, -1))
    plan.pool_offset[:rows].copy_(torch.where(valid, offset, 0))
    plan.flush[:rows].copy_(flush & valid)

    blocks = (kpool_seqlens + (g.kpool_block - 1)) // g.kpool_block
    out.paged_mqa_schedule.copy_(paged_mqa_schedule_torch(blocks, g.num_sms))
