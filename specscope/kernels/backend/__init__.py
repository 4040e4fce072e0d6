"""DSA attention backends: static metadata for CUDA graphs, draft-step sharing or copies."""

from .dsa_backend import DeepseekSparseAttnBackend
from .dsa_metadata_manager import (
    CAPTURE_ENV,
    KV_COUNTER_CTAS,
    SHARE_ENV,
    DSAMetadataManagementMixin,
    alias_metadata,
    capture_draft_metadata_enabled,
    metadata_nbytes,
    ordinary_metadata_copy,
    share_draft_metadata_enabled,
)
from .multi_step import DeepseekSparseAttnMultiStepBackend
from .variants import VARIANT_NAMES, Variant, resolve_variant

__all__ = [
    "CAPTURE_ENV",
    "KV_COUNTER_CTAS",
    "SHARE_ENV",
    "VARIANT_NAMES",
    "DSAMetadataManagementMixin",
    "DeepseekSparseAttnBackend",
    "DeepseekSparseAttnMultiStepBackend",
    "Variant",
    "alias_metadata",
    "capture_draft_metadata_enabled",
    "metadata_nbytes",
    "ordinary_metadata_copy",
    "resolve_variant",
    "share_draft_metadata_enabled",
]
