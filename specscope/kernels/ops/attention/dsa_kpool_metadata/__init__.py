"""Fused DSA metadata: one Triton launch per forward mode builds every `DSAMetadata` field.

`build_metadata_fused(mode, inputs, out)` is the general entry point, `FastFusedBuilder` the
bound one for static buffers before a CUDA-graph replay (`bound.py`); `unsupported_reason(
geometry, max_rows)` says why a geometry cannot take the fused path (None when it can).
"""

from __future__ import annotations

from .bound import (
    FastFusedBuilder,
    bind_fused_build,
    build_metadata_fused,
    unsupported_reason,
)
from .scan import LaunchSettings, launch_settings

__all__ = [
    "FastFusedBuilder",
    "LaunchSettings",
    "bind_fused_build",
    "build_metadata_fused",
    "launch_settings",
    "unsupported_reason",
]
