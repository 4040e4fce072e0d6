"""Named backend variants for before/after work on the draft metadata path.

ordinary        fusion off, sibling copies  (per-field builds and copies)
kpool_fused     fusion on,  sibling copies  (one build launch + one copy launch per step)
draft_alias     fusion on,  draft aliasing  (one build launch, no copy)
draft_captured  fusion on,  draft aliasing, captured refresh: the draft graph builds its own
                metadata from static inputs; runners stage their host inputs in one copy
                and read device inputs inside their graphs; the draft-extend graph derives
                its inputs and metadata on the device (the accept's copy to the host waits
                behind its launch); the eager verify build is bound once (`FastFusedBuilder`)
env             from the env flags SPECSCOPE_DSA_KPOOL_METADATA_FUSION,
                SPECSCOPE_DSA_SHARE_DRAFT_METADATA (both default on) and
                SPECSCOPE_DSA_CAPTURE_DRAFT_METADATA (default off): as draft_alias by default
"""

from __future__ import annotations

from dataclasses import dataclass

from specscope.kernels.ops.attention import fusion_enabled

from .dsa_metadata_manager import capture_draft_metadata_enabled, share_draft_metadata_enabled


@dataclass(frozen=True)
class Variant:
    name: str
    fusion: bool
    share: bool
    capture: bool = False


VARIANT_NAMES = ("ordinary", "kpool_fused", "draft_alias", "draft_captured", "env")


def resolve_variant(name: str) -> Variant:
    """The (fusion, share, capture) choices of a named variant; `env` reads the env flags now."""
    if name == "ordinary":
        return Variant(name, fusion=False, share=False)
    if name == "kpool_fused":
        return Variant(name, fusion=True, share=False)
    if name == "draft_alias":
        return Variant(name, fusion=True, share=True)
    if name == "draft_captured":
        return Variant(name, fusion=True, share=True, capture=True)
    if name == "env":
        return Variant(
            name,
            fusion=fusion_enabled(),
            share=share_draft_metadata_enabled(),
            capture=capture_draft_metadata_enabled(),
        )
    raise ValueError(f"unknown variant {name!r}: one of {', '.join(VARIANT_NAMES)}")
