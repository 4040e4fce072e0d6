"""`DeepseekSparseAttnBackend`: static DSA metadata for CUDA graphs, refreshed before each replay.

One backend serves one model (target, draft-extend, or one draft step). Its life:

    backend = DeepseekSparseAttnBackend(geometry, "cuda", fusion=None)
    backend.init_cuda_graph_state(max_bs, max_rows)      # static buffers + KV counter, once
    backend.init_forward_metadata_capture_cuda_graph(mode, bs, inputs)   # per bucket, at capture
    backend.init_forward_metadata_replay_cuda_graph(mode, bs, inputs)    # before each replay
    backend.forward_metadata                            # what the captured forward reads

Every buffer is allocated at the largest batch and rewritten in place, so a graph captured at any
batch-size bucket keeps reading valid addresses; bucket `bs` uses the first `rows(mode, bs)`
rows. Eager mode (`init_forward_metadata`) builds into the same static buffers, so the eager and
graph paths run the same builders. Builds never sync with the host.
"""

from __future__ import annotations

import torch

from specscope.kernels.ops.attention import DSAForwardInputs, DSAGeometry, DSAMetadata, ForwardMode

from .dsa_metadata_manager import DSAMetadataManagementMixin, metadata_nbytes


class DeepseekSparseAttnBackend(DSAMetadataManagementMixin):
    """Static metadata buffers of one model, built with the ordinary or fused builder."""

    def __init__(
        self,
        geometry: DSAGeometry,
        device: torch.device | str,
        *,
        fusion: bool | None = None,
        step_id: int = 0,
        fast_launch: bool = False,
    ) -> None:
        """`fast_launch`: bind each fused build once per set of buffers (`FastFusedBuilder`)."""
        self.geometry = geometry
        self.device = torch.device(device)
        self.fusion = fusion
        self.fast_launch = fast_launch
        self.step_id = step_id
        self.metadata: DSAMetadata | None = None
        self.kv_counter: torch.Tensor | None = None  # [CTAs] int32, reset by each forward
        self.owns_metadata = False

    def init_cuda_graph_state(
        self, max_bs: int, max_rows: int, *, alias_of: DSAMetadata | None = None
    ) -> None:
        """Allocate the static buffers (or alias `alias_of`'s) and this backend's KV counter."""
        self._init_metadata_features(self.geometry, self.device, max_rows, self.fusion)
        if alias_of is None:
            self.metadata = self._allocate_metadata(max_bs, max_rows)
            self.owns_metadata = True
        else:
            self.metadata = self._alias_metadata(alias_of)
            self.owns_metadata = False
        self.kv_counter = self._allocate_kv_counter()

    @property
    def forward_metadata(self) -> DSAMetadata:
        if self.metadata is None:
            raise RuntimeError("call init_cuda_graph_state first")
        return self.metadata

    def _refresh(self, mode: ForwardMode, bs: int, inputs: DSAForwardInputs) -> None:
        if inputs.bs != bs:
            raise ValueError(f"inputs hold {inputs.bs} requests, expected {bs}")
        if not self.owns_metadata:
            raise RuntimeError(f"draft step {self.step_id} aliases another backend's metadata")
        self.build(mode, inputs, self.forward_metadata)

    def init_forward_metadata(self, mode: ForwardMode, inputs: DSAForwardInputs) -> None:
        """Eager forward: build into the static buffers; no host sync."""
        self._refresh(mode, inputs.bs, inputs)

    def init_forward_metadata_capture_cuda_graph(
        self, mode: ForwardMode, bs: int, inputs: DSAForwardInputs
    ) -> None:
        """Before capturing bucket `bs`: build once, so warm-up and capture read real values."""
        self._refresh(mode, bs, inputs)

    def init_forward_metadata_replay_cuda_graph(
        self, mode: ForwardMode, bs: int, inputs: DSAForwardInputs
    ) -> None:
        """Before replaying bucket `bs`: rebuild in place from the new inputs; no host sync."""
        self._refresh(mode, bs, inputs)

    def metadata_nbytes(self) -> int:
        """Bytes of the storages this backend reads (its KV counter included)."""
        return metadata_nbytes([self.forward_metadata], [self.kv_counter])
