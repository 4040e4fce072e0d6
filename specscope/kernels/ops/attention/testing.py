"""Synthetic inputs and a defined-parts comparison for DSA metadata (tests and benchmarks).

`make_forward_inputs` builds a consistent forward: a page-aligned `req_to_token` pool whose rows
map positions to slots on shuffled pages, stale garbage past each live prefix, and new tokens
whose slots and positions agree with it. `assert_metadata_equal` compares two metadata sets on
their defined parts only (see `dsa_metadata`), never on the undefined tails.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .dsa_metadata import (
    DSAForwardInputs,
    DSAGeometry,
    DSAMetadata,
    ForwardMode,
    defined_lengths,
)

STALE = -7  # written past every live prefix of req_to_token: "reused pool rows" hold garbage


def make_forward_inputs(
    mode: ForwardMode,
    geometry: DSAGeometry,
    seq_lens: Sequence[int],
    *,
    accept_lens: Sequence[int] | None = None,
    req_pool_indices: Sequence[int] | None = None,
    max_reqs: int | None = None,
    seed: int = 0,
    device: torch.device | str = "cpu",
) -> DSAForwardInputs:
    """One forward's inputs with the given per-request lengths (new tokens included).

    req_pool_indices defaults to a random permutation of pool rows (so request order and pool
    order differ); repeated pool rows are allowed. In DRAFT_EXTEND the padded rows get random
    garbage slots and positions, which the builders must ignore.
    """
    g = geometry
    bs = len(seq_lens)
    t = g.rows_per_request(mode)
    gen = torch.Generator().manual_seed(seed)
    if req_pool_indices is None:
        max_reqs = max_reqs or bs + 3
        req_pool_indices = torch.randperm(max_reqs, generator=gen)[:bs].tolist()
    max_reqs = max(max_reqs or 0, max(req_pool_indices) + 1)
    if mode is ForwardMode.DRAFT_EXTEND:
        if accept_lens is None or len(accept_lens) != bs:
            raise ValueError("DRAFT_EXTEND needs one accept length per request")
        if not all(1 <= a <= t and a <= n for a, n in zip(accept_lens, seq_lens, strict=True)):
            raise ValueError("accept_lens must be in 1..min(T, seq_len)")
    if not all(t <= n <= g.page_table_width for n in seq_lens):
        raise ValueError(f"seq_lens must be in {t}..{g.page_table_width}")

    width, pages = g.page_table_width, g.max_pages
    num_pages = 2 * max_reqs * pages
    page_ids = torch.stack(
        [torch.randperm(num_pages, generator=gen)[:pages] for _ in range(max_reqs)]
    )
    pos = torch.arange(width)
    req_to_token = page_ids[:, pos // g.page_size] * g.page_size + pos % g.page_size
    live = torch.zeros(max_reqs, dtype=torch.int64)
    for req, n in zip(req_pool_indices, seq_lens, strict=True):
        live[req] = max(live[req].item(), n)
    req_to_token[pos[None, :] >= live[:, None]] = STALE
    req_to_token = req_to_token.to(torch.int32)

    seq = torch.tensor(seq_lens, dtype=torch.int64)
    j = torch.arange(t)[None, :]
    if mode is ForwardMode.DRAFT_EXTEND:
        acc = torch.tensor(accept_lens, dtype=torch.int64)[:, None]
        positions = seq[:, None] - acc + j
        valid = j < acc
    else:
        positions = seq[:, None] - t + j
        valid = torch.ones_like(positions, dtype=torch.bool)
    reqs = torch.tensor(req_pool_indices, dtype=torch.int64)
    locs = req_to_token[reqs[:, None], positions.clamp(0, width - 1)].to(torch.int64)
    garbage = torch.randint(0, 1 << 20, positions.shape, generator=gen)
    positions = torch.where(valid, positions, garbage).reshape(-1)
    locs = torch.where(valid, locs, garbage + 3).reshape(-1)

    def dev(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return x.to(dtype).to(device)

    return DSAForwardInputs(
        req_to_token=dev(req_to_token, torch.int32),
        req_pool_indices=dev(reqs, torch.int64),
        seq_lens=dev(seq, torch.int32),
        out_cache_loc=dev(locs, torch.int64),
        positions=dev(positions, torch.int64),
        accept_lens=(
            dev(torch.tensor(accept_lens), torch.int32)
            if mode is ForwardMode.DRAFT_EXTEND
            else None
        ),
    )


def live_masks(geometry: DSAGeometry, seqlens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Masks of the defined entries of page_table_1 [rows, L] and real_page_table [rows, pages]."""
    cols = torch.arange(geometry.page_table_width, device=seqlens.device)
    pages = torch.arange(geometry.max_pages, device=seqlens.device)
    n = seqlens.to(torch.int64)[:, None]
    return cols[None, :] < n, pages[None, :] < (n + geometry.page_size - 1) // geometry.page_size


def assert_metadata_equal(
    actual: DSAMetadata, expected: DSAMetadata, mode: ForwardMode, bs: int
) -> None:
    """Raise AssertionError naming the first field whose defined part differs (syncs)."""
    g = expected.geometry
    a_all, e_all = actual.tensors(), expected.tensors()
    for name, n in defined_lengths(mode, g, bs).items():
        a, e = a_all[name][:n].cpu(), e_all[name][:n].cpu()
        if not torch.equal(a, e):
            bad = (a != e).reshape(n, -1).any(1).nonzero()[0, 0].item()
            raise AssertionError(f"{name}[{bad}]: got {a[bad].tolist()}, want {e[bad].tolist()}")
    rows = g.rows(mode, bs)
    seqlens = expected.seqlens_expanded[:rows].cpu()
    tok_mask, page_mask = live_masks(g, seqlens)
    for name, mask in (("page_table_1", tok_mask), ("real_page_table", page_mask)):
        a, e = a_all[name][:rows].cpu(), e_all[name][:rows].cpu()
        diff = (a != e) & mask
        if diff.any():
            r, c = diff.nonzero()[0].tolist()
            raise AssertionError(
                f"{name}[{r}, {c}] (live {seqlens[r].item()}): got {a[r, c].item()}, "
                f"want {e[r, c].item()}"
            )


def scramble(meta: DSAMetadata, seed: int = 1) -> None:
    """Fill every buffer with random garbage, so a build that skips a defined entry is caught."""
    gen = torch.Generator().manual_seed(seed)
    for t in meta.tensors().values():
        t.copy_(torch.randint(-(1 << 30), 1 << 30, t.shape, generator=gen, dtype=torch.int32))


__all__ = [
    "STALE",
    "assert_metadata_equal",
    "defined_lengths",
    "live_masks",
    "make_forward_inputs",
    "scramble",
]
