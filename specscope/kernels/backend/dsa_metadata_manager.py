"""Metadata management shared by the DSA backends: feature selection, copies, sibling reuse.

Everything a backend decides about its metadata buffers lives here, in one place:

    feature selection   which builder runs (fused Triton kernels or the ordinary torch chain),
                        from the KPool fusion flag, the platform and the geometry checks; with
                        `fast_launch` the fused build is bound once per set of buffers
                        (`FastFusedBuilder`) instead of checked and bound at every call
    allocation          one static `DSAMetadata` set per backend, plus a small KV counter
    sibling copies      one set into another: one `fused_metadata_copy` launch per
                        destination, or the ordinary per-field `copy_` chain when fusion is off
    sibling reuse       a view of another backend's set that shares its storage (no buffers of
                        its own, no copy at replay)

No kernel code here: the builders and the copy kernel live in `ops/attention/`.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import torch

from specscope.kernels.ops.attention import (
    DSAGeometry,
    DSAMetadata,
    FastFusedBuilder,
    ForwardMode,
    allocate_metadata,
    build_metadata_fused,
    build_metadata_ordinary,
    defined_lengths,
    fused_metadata_copy,
    fusion_enabled,
    unsupported_reason,
)
from specscope.kernels.ops.attention.selection import Builder, triton_platform

SHARE_ENV = "SPECSCOPE_DSA_SHARE_DRAFT_METADATA"
CAPTURE_ENV = "SPECSCOPE_DSA_CAPTURE_DRAFT_METADATA"
KV_COUNTER_CTAS = 4  # entries of the per-backend multi-CTA KV counter

logger = logging.getLogger(__name__)


def share_draft_metadata_enabled() -> bool:
    """The env flag: draft steps alias step 0's metadata unless it is "0"."""
    return os.environ.get(SHARE_ENV, "1").strip() != "0"


def capture_draft_metadata_enabled() -> bool:
    """The env flag: the draft graph refreshes its own metadata when it is "1" (default off)."""
    return os.environ.get(CAPTURE_ENV, "0").strip() == "1"


def alias_metadata(src: DSAMetadata) -> DSAMetadata:
    """A metadata object whose every tensor *is* `src`'s (same storage, no allocation); its
    write plan is a new object over the same tensors."""
    return dataclasses.replace(src, write_plan=dataclasses.replace(src.write_plan))


def ordinary_metadata_copy(src: DSAMetadata, dst: DSAMetadata, mode: ForwardMode, bs: int) -> None:
    """Copy `src` into `dst` field by field (one `copy_` each, whole page-table rows); no sync."""
    g = src.geometry
    rows = g.rows(mode, bs)
    s_all, d_all = src.tensors(), dst.tensors()
    for name, n in defined_lengths(mode, g, bs).items():
        d_all[name][:n].copy_(s_all[name][:n])
    for name in ("page_table_1", "real_page_table"):
        d_all[name][:rows].copy_(s_all[name][:rows])


def metadata_nbytes(sets: list[DSAMetadata], extra: list[torch.Tensor] = ()) -> int:
    """Bytes of the distinct storages behind `sets` and `extra` (aliases are counted once)."""
    seen: dict[int, int] = {}
    tensors = [t for m in sets for t in m.tensors().values()] + list(extra)
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


class DSAMetadataManagementMixin:
    """Feature selection, allocation, copies and sibling reuse of DSA metadata buffers.

    A backend calls `_init_metadata_features` once; afterwards `self.build(mode, inputs, out)`
    is the chosen builder and `self.kpool_fusion` says which one it is.
    """

    fast_launch: bool = False

    geometry: DSAGeometry
    device: torch.device
    build: Builder
    kpool_fusion: bool
    fusion_reason: str

    def _init_metadata_features(
        self,
        geometry: DSAGeometry,
        device: torch.device | str,
        max_rows: int | None,
        fusion: bool | None = None,
    ) -> None:
        """Choose the builder. `fusion=None` reads SPECSCOPE_DSA_KPOOL_METADATA_FUSION."""
        self.geometry = geometry
        self.device = torch.device(device)
        want = fusion_enabled() if fusion is None else fusion
        reason = None
        if not want:
            reason = "fusion off"
        elif not triton_platform(self.device):
            reason = f"device {self.device} runs no Triton (set TRITON_INTERPRET=1 on a CPU)"
        else:
            reason = unsupported_reason(geometry, max_rows)
        self.kpool_fusion = reason is None
        self.fusion_reason = reason or "fused"
        if not self.kpool_fusion:
            self.build = build_metadata_ordinary
        else:
            self.build = FastFusedBuilder() if self.fast_launch else build_metadata_fused
        if want and reason is not None:
            logger.warning("DSA metadata: ordinary path: %s", reason)

    def supported_geometry_reason(self, max_rows: int | None = None) -> str | None:
        """Why the fused kernels cannot serve this backend's geometry (None: they can)."""
        return unsupported_reason(self.geometry, max_rows)

    def _allocate_metadata(self, max_bs: int, max_rows: int) -> DSAMetadata:
        return allocate_metadata(max_bs, max_rows, self.geometry, self.device)

    def _allocate_kv_counter(self) -> torch.Tensor:
        return torch.zeros(KV_COUNTER_CTAS, dtype=torch.int32, device=self.device)  # [CTAs] int32

    def _copy_metadata(
        self, src: DSAMetadata, dst: DSAMetadata, mode: ForwardMode, bs: int
    ) -> None:
        """One sibling copy: a `fused_metadata_copy` launch (fusion on) or per-field copies.

        The first fused copy into a given destination uploads its pointer table (a host sync):
        `init_cuda_graph_state` callers make it at setup, before any measured or captured region.
        """
        if self.kpool_fusion:
            fused_metadata_copy(src, [dst], mode, bs)
        else:
            ordinary_metadata_copy(src, dst, mode, bs)

    @staticmethod
    def _alias_metadata(src: DSAMetadata) -> DSAMetadata:
        return alias_metadata(src)
