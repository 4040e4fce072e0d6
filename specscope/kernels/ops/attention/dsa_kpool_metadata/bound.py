"""The host side of the fused DSA metadata builds: checks, launch settings, and the launch.

Two ways to issue a build, with the same kernels and the same results:

build_metadata_fused(mode, inputs, out)     the general path: checks every argument, makes
                                            inputs contiguous, binds and launches, each call
                                            (tests, benchmarks, one-off builds)
FastFusedBuilder()(mode, inputs, out)       the hot path before a CUDA-graph replay: the first
                                            call for given buffers checks and binds them
                                            (`bind_fused_build`); later calls for the same
                                            buffers only re-issue the bound launch
                                            (`ops/launch.py::BoundLaunch`: the compiled
                                            kernel's own launcher)

Host µs per build of both paths, beside the build's GPU µs: `bench/dsa_host_launch.py`.
"""

from __future__ import annotations

from ...launch import BoundLaunch
from ..dsa_metadata import (
    KPOOL_SIZES,
    DSAForwardInputs,
    DSAGeometry,
    DSAMetadata,
    ForwardMode,
    check_build_args,
)
from .decode import _dsa_decode_metadata_kernel
from .draft_extend import _dsa_draft_extend_metadata_kernel
from .scan import (
    MAX_FUSED_ROWS,
    MAX_FUSED_SMS,
    LaunchSettings,
    check_contiguous,
    kernel_args,
    kernel_constexprs,
    launch_settings,
)
from .verify import _dsa_verify_metadata_kernel

KERNELS = {
    ForwardMode.DECODE: _dsa_decode_metadata_kernel,
    ForwardMode.TARGET_VERIFY: _dsa_verify_metadata_kernel,
    ForwardMode.DRAFT_EXTEND: _dsa_draft_extend_metadata_kernel,
}
INPUT_FIELDS = ("req_pool_indices", "seq_lens", "out_cache_loc", "positions", "accept_lens")


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


def bind_fused_build(
    mode: ForwardMode,
    inputs: DSAForwardInputs,
    out: DSAMetadata,
    settings: LaunchSettings | None = None,
) -> BoundLaunch:
    """Check a build's arguments and bind its launch (nothing runs yet); no host sync.

    Every input must already be contiguous (the launch keeps these very tensors).
    `settings` (benchmarks and tests only) replaces `launch_settings(...)` for this shape.
    """
    rows = check_build_args(mode, inputs, out)
    reason = unsupported_reason(out.geometry, rows)
    if reason is not None:
        raise ValueError(f"fused DSA metadata unsupported: {reason}")
    check_contiguous(out)
    if inputs.req_to_token.stride(1) != 1:
        raise ValueError("req_to_token rows must be contiguous")
    for name in INPUT_FIELDS:
        t = getattr(inputs, name)
        if t is not None and not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous")
    settings = settings or launch_settings(rows, inputs.bs, out.geometry)
    return BoundLaunch(
        KERNELS[mode],
        settings.grid(inputs.bs),
        (*kernel_args(inputs, out), inputs.bs, rows),
        kernel_constexprs(out.geometry, settings),
    )


def build_metadata_fused(
    mode: ForwardMode,
    inputs: DSAForwardInputs,
    out: DSAMetadata,
    settings: LaunchSettings | None = None,
) -> None:
    """Build every field of `out` for one forward in one Triton launch; no host sync.

    Checks and binds on every call (the general path); `FastFusedBuilder` binds once.
    `settings` (benchmarks and tests only) replaces `launch_settings(...)` for this shape.
    """
    inputs = DSAForwardInputs(
        req_to_token=inputs.req_to_token,
        req_pool_indices=inputs.req_pool_indices.contiguous(),
        seq_lens=inputs.seq_lens.contiguous(),
        out_cache_loc=inputs.out_cache_loc.contiguous(),
        positions=inputs.positions.contiguous(),
        accept_lens=None if inputs.accept_lens is None else inputs.accept_lens.contiguous(),
    )
    bind_fused_build(mode, inputs, out, settings).launch()


class FastFusedBuilder:
    """`build_metadata_fused` for static buffers: each set of buffers is checked and bound once.

    A call is identified by (mode, bs, the output set, the data pointers of req_to_token and
    of every input tensor, req_to_token's row stride). The first call with an identity checks
    everything (`bind_fused_build`) and keeps the bound launch, which holds the tensors it was
    given (so those pointers cannot be reused by other tensors while it lives); later calls
    with the same identity issue that launch and nothing else. The contract of static
    buffers: a tensor at the same address and the same batch size has the same layout (new
    *values* are what a refresh is for). At most `max_bindings` are kept (the oldest dropped):
    one per (mode, bucket) in a graph runner.
    """

    def __init__(self, max_bindings: int = 64) -> None:
        self.max_bindings = max_bindings
        self.bound: dict[tuple, tuple[DSAMetadata, BoundLaunch]] = {}

    def __call__(self, mode: ForwardMode, inputs: DSAForwardInputs, out: DSAMetadata) -> None:
        acc = inputs.accept_lens
        key = (
            mode,
            id(out),
            inputs.req_pool_indices.shape[0],
            inputs.req_to_token.data_ptr(),
            inputs.req_to_token.stride(0),
            inputs.req_pool_indices.data_ptr(),
            inputs.seq_lens.data_ptr(),
            inputs.out_cache_loc.data_ptr(),
            inputs.positions.data_ptr(),
            None if acc is None else acc.data_ptr(),
        )
        entry = self.bound.get(key)
        if entry is None:
            entry = (out, bind_fused_build(mode, inputs, out))  # `out` kept: its id stays unique
            if len(self.bound) >= self.max_bindings:
                self.bound.pop(next(iter(self.bound)))
            self.bound[key] = entry
        entry[1].launch()
