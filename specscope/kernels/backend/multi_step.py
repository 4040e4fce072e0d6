"""`DeepseekSparseAttnMultiStepBackend`: one DSA backend per draft step, shared or copied.

An EAGLE drafter with `speculative_num_steps` N runs N - 1 draft forwards in one CUDA graph;
forward i reads draft backend i's metadata. Every step needs the same metadata (they are built
from the same DECODE inputs), so there are two ways to serve them, chosen by `share`
(default: the env flag SPECSCOPE_DSA_SHARE_DRAFT_METADATA, on unless "0"):

sibling copy (share=False, the state before the change)
    every step backend owns static buffers; a precomputed set (the step-0 refresh) is built
    once per replay and copied into each step backend: one `fused_metadata_copy` launch per
    step (N - 1 launches per decode step) with fusion on, the per-field `copy_` chain with
    fusion off. As SGLang's `init_forward_metadata_replay_cuda_graph_from_precomputed`.

        prepare:  build -> precomputed --copy--> step 0 ... --copy--> step N-2

draft aliasing (share=True, the change)
    steps 1.. alias step 0's buffers (same storage, no page table or length buffers of their
    own); replay builds into step 0 once; no copy kernel runs.

        prepare:  build -> step 0  (= step 1 = ... = step N-2)

Either way each step backend keeps its own multi-CTA KV counter, reset by its forward.

Where the refresh runs, chosen by `capture` (default: the env flag
SPECSCOPE_DSA_CAPTURE_DRAFT_METADATA, off unless "1"):

eager refresh (capture=False)
    the runner's eager `prepare` calls `init_forward_metadata_replay_cuda_graph` before the
    draft graph replays: host time between the replays.

captured refresh (capture=True, the `draft_captured` variant)
    the draft graph itself starts with the refresh (`init_forward_metadata_in_graph`, called
    from the captured forward), reading the runner's static input buffers; before a replay
    the host only writes those inputs, and `init_forward_metadata_replay_cuda_graph` does
    nothing. The fused builds are bound once (`fast_launch`).

        host:   stage inputs --replay-->
        graph:  [build -> step 0 (= 1 = ... = N-2)] [draft step 0] ... [draft step N-2]
"""

from __future__ import annotations

import torch

from specscope.kernels.ops.attention import DSAForwardInputs, DSAGeometry, DSAMetadata, ForwardMode

from .dsa_backend import DeepseekSparseAttnBackend
from .dsa_metadata_manager import (
    DSAMetadataManagementMixin,
    capture_draft_metadata_enabled,
    metadata_nbytes,
    share_draft_metadata_enabled,
)

DRAFT_MODE = ForwardMode.DECODE


class DeepseekSparseAttnMultiStepBackend(DSAMetadataManagementMixin):
    """The draft model's backends: `num_steps` (= speculative_num_steps - 1) step backends."""

    def __init__(
        self,
        geometry: DSAGeometry,
        device: torch.device | str,
        num_steps: int,
        *,
        fusion: bool | None = None,
        share: bool | None = None,
        capture: bool | None = None,
    ) -> None:
        if num_steps < 1:
            raise ValueError("a multi-step draft backend needs at least one step")
        self.geometry = geometry
        self.device = torch.device(device)
        self.fusion = fusion
        self.share = share_draft_metadata_enabled() if share is None else share
        self.capture = capture_draft_metadata_enabled() if capture is None else capture
        self.fast_launch = self.capture
        self.backends = [
            DeepseekSparseAttnBackend(
                geometry, device, fusion=fusion, step_id=i, fast_launch=self.capture
            )
            for i in range(num_steps)
        ]
        self.precomputed: DSAMetadata | None = None  # sibling copy only

    @property
    def num_steps(self) -> int:
        return len(self.backends)

    def init_cuda_graph_state(self, max_bs: int, max_rows: int | None = None) -> None:
        """Allocate every step's state; in sibling-copy mode also upload the copy pointer tables.

        The pointer-table upload of `fused_metadata_copy` syncs once per destination: it happens
        here, at setup, never at replay.
        """
        max_rows = max_rows or self.geometry.rows(DRAFT_MODE, max_bs)
        self._init_metadata_features(self.geometry, self.device, max_rows, self.fusion)
        first, rest = self.backends[0], self.backends[1:]
        if self.share:
            first.init_cuda_graph_state(max_bs, max_rows)
            for b in rest:
                b.init_cuda_graph_state(max_bs, max_rows, alias_of=first.forward_metadata)
            self.precomputed = None
            return
        self.precomputed = self._allocate_metadata(max_bs, max_rows)
        for b in self.backends:
            b.init_cuda_graph_state(max_bs, max_rows)
            self._copy_metadata(self.precomputed, b.forward_metadata, DRAFT_MODE, 1)

    def _refresh(self, bs: int, inputs: DSAForwardInputs) -> None:
        if self.share:
            self.backends[0].init_forward_metadata_replay_cuda_graph(DRAFT_MODE, bs, inputs)
            return
        if self.precomputed is None:
            raise RuntimeError("call init_cuda_graph_state first")
        self.build(DRAFT_MODE, inputs, self.precomputed)
        for b in self.backends:
            self._copy_metadata(self.precomputed, b.forward_metadata, DRAFT_MODE, bs)

    def init_forward_metadata(self, inputs: DSAForwardInputs) -> None:
        """Eager draft forwards: the same refresh as before a replay; no host sync."""
        self._refresh(inputs.bs, inputs)

    def init_forward_metadata_capture_cuda_graph(self, bs: int, inputs: DSAForwardInputs) -> None:
        self._refresh(bs, inputs)

    def init_forward_metadata_replay_cuda_graph(self, bs: int, inputs: DSAForwardInputs) -> None:
        """Before the draft graph replays: refresh step 0 (aliasing) or build + copy (siblings);
        nothing with a captured refresh (the graph refreshes itself)."""
        if not self.capture:
            self._refresh(bs, inputs)

    def init_forward_metadata_in_graph(self, bs: int, inputs: DSAForwardInputs) -> None:
        """At the start of the draft forward (captured into its graph): the refresh, when it
        is captured; nothing otherwise. `inputs` must be the runner's static buffers."""
        if self.capture:
            self._refresh(bs, inputs)

    def step_metadata(self, i: int) -> DSAMetadata:
        return self.backends[i].forward_metadata

    def copies_per_refresh(self) -> int:
        """Copy launches (fused) or copy chains (ordinary) each refresh makes."""
        return 0 if self.share else self.num_steps

    def metadata_nbytes(self) -> int:
        """Bytes of every distinct storage of the draft metadata state (counters included)."""
        sets = [b.forward_metadata for b in self.backends]
        if self.precomputed is not None:
            sets.append(self.precomputed)
        return metadata_nbytes(sets, [b.kv_counter for b in self.backends])
