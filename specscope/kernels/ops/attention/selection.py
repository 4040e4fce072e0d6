"""Choosing between the fused and the ordinary DSA metadata builders.

The fused path is taken when all of these hold, else the ordinary path:
    - the env flag SPECSCOPE_DSA_KPOOL_METADATA_FUSION is not "0" (default on);
    - the platform runs Triton: the buffers live on CUDA, or TRITON_INTERPRET=1 (CPU tests);
    - the geometry is supported (`dsa_kpool_metadata.unsupported_reason`).
A supported platform with an unsupported geometry logs one warning saying why.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

import torch

from .dsa_kpool_metadata import build_metadata_fused, unsupported_reason
from .dsa_metadata import DSAForwardInputs, DSAGeometry, DSAMetadata, ForwardMode
from .ordinary_metadata import build_metadata_ordinary

FUSION_ENV = "SPECSCOPE_DSA_KPOOL_METADATA_FUSION"

Builder = Callable[[ForwardMode, DSAForwardInputs, DSAMetadata], None]

logger = logging.getLogger(__name__)


def fusion_enabled() -> bool:
    """The env flag: on unless SPECSCOPE_DSA_KPOOL_METADATA_FUSION=0."""
    return os.environ.get(FUSION_ENV, "1").strip() != "0"


def triton_platform(device: torch.device | str) -> bool:
    """Triton can run on `device`: CUDA, or any device under the Triton interpreter."""
    return torch.device(device).type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"


def select_builder(
    geometry: DSAGeometry, device: torch.device | str, max_rows: int | None = None
) -> Builder:
    """The metadata builder for this geometry and device; call once, at backend setup."""
    if not fusion_enabled():
        logger.info("DSA metadata: ordinary path (%s=0)", FUSION_ENV)
        return build_metadata_ordinary
    if not triton_platform(device):
        logger.info("DSA metadata: ordinary path (device %s runs no Triton)", device)
        return build_metadata_ordinary
    reason = unsupported_reason(geometry, max_rows)
    if reason is not None:
        logger.warning("DSA metadata: ordinary path, fused kernels unsupported: %s", reason)
        return build_metadata_ordinary
    return build_metadata_fused
