"""DSA attention backends: static metadata for CUDA graphs, draft-step sharing or copies."""

from .dsa_backend import DeepseekSparseAttnBackend
from .dsa_metadata_manager import (
    KV_COUNTER_CTAS,
    SHARE_ENV,
    DSAMetadataManagementMixin,
    alias_metadata,
    metadata_nbytes,
    ordinary_metadata_copy,
    share_draft_metadata_enabled,
)
from .multi_step import DeepseekSparseAttnMultiStepBackend
from .variants import VARIANT_NAMES, Variant, resolve_variant

__all__ = [
    "KV_COUNTER_CTAS",
    "SHARE_ENV",
    "VARIANT_NAMES",
    "DSAMetadataManagementMixin",
    "DeepseekSparseAttnBackend",
    "DeepseekSparseAttnMultiStepBackend",
    "Variant",
    "alias_metadata",
    "metadata_nbytes",
    "ordinary_metadata_copy",
    "resolve_variant",
    "share_draft_metadata_enabled",
]
