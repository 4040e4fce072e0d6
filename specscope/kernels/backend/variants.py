"""Named backend variants for before/after work on the draft metadata path.

ordinary      fusion off, sibling copies      (per-field builds and copies)
kpool_fused   fusion on,  sibling copies      (one build launch + one copy launch per step)
draft_alias   fusion on,  draft aliasing      (one build launch, no copy)
env           both from the env flags SPECSCOPE_DSA_KPOOL_METADATA_FUSION and
              SPECSCOPE_DSA_SHARE_DRAFT_METADATA (both default on: as draft_alias)
"""

from __future__ import annotations

from dataclasses import dataclass

from specscope.kernels.ops.attention import fusion_enabled

from .dsa_metadata_manager import share_draft_metadata_enabled


@dataclass(frozen=True)
class Variant:
    name: str
    fusion: bool
    share: bool


VARIANT_NAMES = ("ordinary", "kpool_fused", "draft_alias", "env")


def resolve_variant(name: str) -> Variant:
    """The (fusion, share) pair of a named variant; `env` reads the env flags now."""
    if name == "ordinary":
        return Variant(name, fusion=False, share=False)
    if name == "kpool_fused":
        return Variant(name, fusion=True, share=False)
    if name == "draft_alias":
        return Variant(name, fusion=True, share=True)
    if name == "env":
        return Variant(name, fusion=fusion_enabled(), share=share_draft_metadata_enabled())
    raise ValueError(f"unknown variant {name!r}: one of {', '.join(VARIANT_NAMES)}")
