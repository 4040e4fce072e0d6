"""DSA (sparse attention) metadata for speculative decoding: ordinary torch path, fused kernels.

Public API (what an attention backend uses):

    geometry = DSAGeometry(page_size=64, index_topk=2048, index_kpool=4)
    out = allocate_metadata(max_bs, max_rows, geometry, "cuda")   # static buffers, once
    build = select_builder(geometry, "cuda", max_rows)              # fused or ordinary, once
    build(ForwardMode.TARGET_VERIFY, inputs, out)                   # before each graph replay
    fast = FastFusedBuilder()       # the fused build bound once per set of static buffers
    fast(ForwardMode.TARGET_VERIFY, inputs, out)                    # later calls: launch only
    fused_metadata_copy(out, sibling_sets, ForwardMode.TARGET_VERIFY, bs)

Field definitions: `dsa_metadata.DSAMetadata`.
"""

from .dsa_kpool_metadata import FastFusedBuilder, build_metadata_fused, unsupported_reason
from .dsa_metadata import (
    DSAForwardInputs,
    DSAGeometry,
    DSAMetadata,
    ForwardMode,
    KPoolWritePlan,
    allocate_metadata,
    defined_lengths,
)
from .fused_metadata_copy import fused_metadata_copy
from .ordinary_metadata import build_metadata_ordinary
from .selection import FUSION_ENV, fusion_enabled, select_builder

__all__ = [
    "FUSION_ENV",
    "FastFusedBuilder",
    "DSAForwardInputs",
    "DSAGeometry",
    "DSAMetadata",
    "ForwardMode",
    "KPoolWritePlan",
    "allocate_metadata",
    "build_metadata_fused",
    "defined_lengths",
    "build_metadata_ordinary",
    "fused_metadata_copy",
    "fusion_enabled",
    "select_builder",
    "unsupported_reason",
]
