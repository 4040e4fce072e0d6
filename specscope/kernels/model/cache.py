"""The paged KV cache, the token index-key cache and the pooled index-key cache (KPool).

Slots and pages
---------------
A slot is one token's place in every cache; slots are page-aligned (page id = slot // P) and a
request's position p lives at slot `pages[p // P] * P + p % P`, recorded in the shared
`req_to_token` pool (target and draft use the same slots, each in its own caches). Page 0 is
the *trash page*: padded rows write there and no request ever owns it.

Per layer, with D_kv the attention width and D_idx the indexer width:

    k, v      [num_slots, D_kv]           float32 (integer-valued)
    tok_key   [num_slots, D_idx]          the index key of each token
    kpool     [num_slots // k, D_idx]     pooled index keys: pool slot s sums the token keys of
                                          slots s*k .. s*k + k - 1 that were live when the pool
                                          was last flushed (KPoolWritePlan)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LayerCache:
    k: torch.Tensor  # [num_slots, D_kv] float32
    v: torch.Tensor  # [num_slots, D_kv] float32
    tok_key: torch.Tensor  # [num_slots, D_idx] float32
    kpool: torch.Tensor  # [num_slots // k, D_idx] float32


class ModelCache:
    """The caches of one model: one `LayerCache` per layer."""

    def __init__(
        self, layers: int, num_slots: int, d_kv: int, d_idx: int, kpool: int, device
    ) -> None:
        if num_slots % kpool:
            raise ValueError("num_slots must be a multiple of index_kpool")

        def buf(*shape: int) -> torch.Tensor:
            return torch.zeros(shape, dtype=torch.float32, device=device)

        self.kpool_size = kpool
        self.layers = [
            LayerCache(
                k=buf(num_slots, d_kv),
                v=buf(num_slots, d_kv),
                tok_key=buf(num_slots, d_idx),
                kpool=buf(num_slots // kpool, d_idx),
            )
            for _ in range(layers)
        ]


class PagePool:
    """Pool rows and pages on the host, mirrored into the device `req_to_token` [rows, L] int32.

    Each admitted request takes one pool row and ceil(L / P) pages (its whole possible length),
    from free lists shuffled by the seed; a finished request gives both back (pages go to the
    back of the list, so a new request lands on pages that hold stale KV). The last pool row is
    the *pad row*: it maps every position to the trash page.
    """

    def __init__(
        self, max_reqs: int, page_size: int, width: int, seed: int, device: torch.device
    ) -> None:
        if width % page_size:
            raise ValueError("page_table_width must be a multiple of page_size")
        self.page_size = page_size
        self.width = width
        self.pages_per_req = width // page_size
        self.num_pages = 1 + (max_reqs - 1) * self.pages_per_req
        gen = torch.Generator().manual_seed(seed)
        self.free_pages = (torch.randperm(self.num_pages - 1, generator=gen) + 1).tolist()
        self.free_rows = list(range(max_reqs - 1))
        self.pad_row = max_reqs - 1
        self.pages: dict[int, list[int]] = {}
        pos = torch.arange(width, dtype=torch.int32)
        self.req_to_token = torch.zeros(max_reqs, width, dtype=torch.int32, device=device)
        self.req_to_token[self.pad_row] = (pos % page_size).to(device)  # [L] trash slots

    @property
    def num_slots(self) -> int:
        return self.num_pages * self.page_size

    def admit(self) -> int:
        """Take a pool row and its pages; return the row (writes one req_to_token row)."""
        row = self.free_rows.pop(0)
        pages = [self.free_pages.pop(0) for _ in range(self.pages_per_req)]
        self.pages[row] = pages
        pos = torch.arange(self.width)
        slots = torch.tensor(pages)[pos // self.page_size] * self.page_size + pos % self.page_size
        self.req_to_token[row].copy_(slots.to(torch.int32))
        return row

    def release(self, row: int) -> None:
        self.free_pages.extend(self.pages.pop(row))
        self.free_rows.append(row)

    def slots(self, row: int, positions) -> list[int]:
        """KV slots of `positions` (ints) of the request in pool row `row` (host only)."""
        pages, p = self.pages[row], self.page_size
        return [pages[x // p] * p + x % p for x in positions]
