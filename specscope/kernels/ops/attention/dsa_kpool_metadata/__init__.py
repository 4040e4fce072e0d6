"""Fused DSA metadata: one Triton launch per forward mode builds every `DSAMetadata` field.

`build_metadata_fused(mode, inputs, out)` is the entry point; `unsupported_reason(geometry,
max_rows)` says why a geometry cannot take the fused path (None when it can).
"""

from __future__ import annotations

from collections.abc import Callable

from ..dsa_metadata import KPOOL_SIZES, DSAForwardInputs, DSAGeometry, DSAMetadata, ForwardMode
from .decode import dsa_decode_metadata
from .draft_extend import dsa_draft_extend_metadata
from .scan import (
    MAX_FUSED_ROWS,
    MAX_FUSED_SMS,
    LaunchSettings,
    check_contiguous,
    launch_settings,
)
from .verify import dsa_verify_metadata

_LAUNCHERS: dict[ForwardMode, Callable[..., None]] = {
    ForwardMode.DECODE: dsa_decode_metadata,
    ForwardMode.TARGET_VERIFY: dsa_verify_metadata,
    ForwardMode.DRAFT_EXTEND: dsa_draft_extend_metadata,
}


def unsupported_reason(geometry: DSAGeometry, max_rows: int | None = None) -> str | None:
    """Why the fused kernels cannot build metadata for this geometry, or None if they can."""
    g = geometry
    if g.index_kpool not in KPOOL_SIZES:
        return f"index_kpool={g.index_kpool} is not one of {KPOOL_SIZES}"
    if g.page_size % g.index_kpool:
        return f"page_size={g.page_size} is not a multiple of index_kpool={g.index_kpool}"
    if g.page_size & (g.page_size - 1):
        return f"page_size={g.page_size} is not a power of two"
    if g.num_sms > MAX_FUSED_SMS:
        return f"num_sms={g.num_sms} exceeds {MAX_FUSED_SMS}"
    if max_rows is not None and max_rows > MAX_FUSED_ROWS:
        return f"max_rows={max_rows} exceeds {MAX_FUSED_ROWS}"
    return None


def build_metadata_fused(
    mode: ForwardMode,
    inputs: DSAForwardInputs,
    out: DSAMetadata,
    settings: LaunchSettings | None = None,
) -> None:
    """Build every field of `out` for one forward in one Triton launch; no host sync.

    `settings` (benchmarks and tests only) replaces `launch_settings(...)` for this shape.
    """
    reason = unsupported_reason(out.geometry, out.geometry.rows(mode, inputs.bs))
    if reason is not None:
        raise ValueError(f"fused DSA metadata unsupported: {reason}")
    check_contiguous(out)
    if inputs.req_to_token.stride(1) != 1:
        raise ValueError("req_to_token rows must be contiguous")
    inputs = DSAForwardInputs(
        req_to_token=inputs.req_to_token,
        req_pool_indices=inputs.req_pool_indices.contiguous(),
        seq_lens=inputs.seq_lens.contiguous(),
        out_cache_loc=inputs.out_cache_loc.contiguous(),
        positions=inputs.positions.contiguous(),
        accept_lens=None if inputs.accept_lens is None else inputs.accept_lens.contiguous(),
    )
    _LAUNCHERS[mode](inputs, out, settings)


__all__ = ["LaunchSettings", "build_metadata_fused", "launch_settings", "unsupported_reason"]
