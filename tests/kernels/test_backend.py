"""DSA backends: draft-step aliasing invariants, sibling copies, feature selection.

Runs on the CPU (fused kernels under TRITON_INTERPRET=1) and on CUDA, at tiny shapes.
"""

from __future__ import annotations

import pytest
import torch

from specscope.kernels.backend import (
    CAPTURE_ENV,
    SHARE_ENV,
    DeepseekSparseAttnBackend,
    DeepseekSparseAttnMultiStepBackend,
    resolve_variant,
    share_draft_metadata_enabled,
)
from specscope.kernels.backend import dsa_metadata_manager as manager
from specscope.kernels.ops.attention import (
    DSAGeometry,
    ForwardMode,
    allocate_metadata,
    build_metadata_ordinary,
)
from specscope.kernels.ops.attention.testing import (
    assert_metadata_equal,
    make_forward_inputs,
    scramble,
)

DECODE = ForwardMode.DECODE
GEOMETRY = DSAGeometry(page_size=16, index_topk=32, index_kpool=4, page_table_width=128, num_sms=5)
MAX_BS = 4


def _inputs(seq_lens, seed, device):
    return make_forward_inputs(DECODE, GEOMETRY, seq_lens, seed=seed, max_reqs=8, device=device)


def _reference(inputs, bs):
    ref = allocate_metadata(MAX_BS, MAX_BS, GEOMETRY, inputs.seq_lens.device)
    build_metadata_ordinary(DECODE, inputs, ref)
    return ref


def _multi(device, *, fusion, share, steps=4):
    multi = DeepseekSparseAttnMultiStepBackend(GEOMETRY, device, steps, fusion=fusion, share=share)
    multi.init_cuda_graph_state(MAX_BS)
    return multi


def _count_calls(monkeypatch, obj, name):
    calls = []
    original = getattr(obj, name)

    def wrapper(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(obj, name, wrapper)
    return calls


def test_aliased_steps_share_step0_storage_and_own_their_kv_counter():
    multi = _multi("cpu", fusion=False, share=True)
    first = multi.step_metadata(0).tensors()
    for i in range(1, multi.num_steps):
        for name, t in multi.step_metadata(i).tensors().items():
            assert t.data_ptr() == first[name].data_ptr(), (i, name)
    counters = {b.kv_counter.data_ptr() for b in multi.backends}
    assert len(counters) == multi.num_steps
    assert multi.precomputed is None
    assert [b.owns_metadata for b in multi.backends] == [True] + [False] * 3


def test_sibling_steps_own_distinct_buffers():
    multi = _multi("cpu", fusion=False, share=False)
    ptrs = [t.data_ptr() for b in multi.backends for t in b.forward_metadata.tensors().values()]
    ptrs += [t.data_ptr() for t in multi.precomputed.tensors().values()]
    assert len(set(ptrs)) == len(ptrs)


@pytest.mark.parametrize("fusion", [False, True], ids=["ordinary", "fused"])
def test_aliasing_refreshes_step0_once_and_runs_no_copy(fusion, triton_device, monkeypatch):
    multi = _multi(triton_device, fusion=fusion, share=True)
    builds = _count_calls(monkeypatch, multi.backends[0], "build")
    other_builds = [_count_calls(monkeypatch, b, "build") for b in multi.backends[1:]]
    fused = _count_calls(monkeypatch, manager, "fused_metadata_copy")
    ordinary = _count_calls(monkeypatch, manager, "ordinary_metadata_copy")
    inputs = _inputs([40, 17, 128], seed=1, device=triton_device)
    multi.init_forward_metadata_replay_cuda_graph(3, inputs)
    assert len(builds) == 1
    assert other_builds == [[], [], []]
    assert fused == [] and ordinary == []
    ref = _reference(inputs, 3)
    for i in range(multi.num_steps):
        assert_metadata_equal(multi.step_metadata(i), ref, DECODE, 3)
    with pytest.raises(RuntimeError, match="aliases"):
        multi.backends[1].init_forward_metadata_replay_cuda_graph(DECODE, 3, inputs)


@pytest.mark.parametrize("fusion", [False, True], ids=["ordinary", "fused"])
@pytest.mark.parametrize("steps", [2, 5])
def test_sibling_copy_refreshes_every_step(fusion, steps, triton_device, monkeypatch):
    """More than 3 destinations: every step's derived metadata (the schedule too) is fresh."""
    multi = _multi(triton_device, fusion=fusion, share=False, steps=steps)
    launches = _count_calls(
        monkeypatch, manager, "fused_metadata_copy" if fusion else "ordinary_metadata_copy"
    )
    for seed, lens in ((2, [128, 3 + 6, 33]), (3, [65, 100, 7])):
        for i, b in enumerate(multi.backends):
            scramble(b.forward_metadata, seed=10 + i)
        inputs = _inputs(lens, seed=seed, device=triton_device)
        multi.init_forward_metadata_replay_cuda_graph(3, inputs)
        ref = _reference(inputs, 3)
        for i in range(steps):
            assert_metadata_equal(multi.step_metadata(i), ref, DECODE, 3)
            got = multi.step_metadata(i).paged_mqa_schedule
            assert torch.equal(got.cpu(), ref.paged_mqa_schedule.cpu()), i
    assert len(launches) == 2 * steps  # one copy launch (or chain) per destination step
    assert multi.copies_per_refresh() == steps


def test_aliasing_matches_sibling_copies(triton_device):
    inputs = _inputs([50, 128, 9, 31], seed=4, device=triton_device)
    alias = _multi(triton_device, fusion=True, share=True)
    copy = _multi(triton_device, fusion=True, share=False)
    alias.init_forward_metadata_replay_cuda_graph(4, inputs)
    copy.init_forward_metadata_replay_cuda_graph(4, inputs)
    for i in range(4):
        assert_metadata_equal(alias.step_metadata(i), copy.step_metadata(i), DECODE, 4)


def test_aliasing_shrinks_draft_metadata_memory():
    alias = _multi("cpu", fusion=False, share=True).metadata_nbytes()
    copy = _multi("cpu", fusion=False, share=False).metadata_nbytes()
    one_set = sum(
        t.nbytes for t in allocate_metadata(MAX_BS, MAX_BS, GEOMETRY, "cpu").tensors().values()
    )
    assert alias == one_set + 4 * manager.KV_COUNTER_CTAS * 4
    assert copy == 5 * one_set + 4 * manager.KV_COUNTER_CTAS * 4  # 4 steps + precomputed
    assert copy > 3 * alias


def test_share_flag_from_env(monkeypatch):
    monkeypatch.delenv(SHARE_ENV, raising=False)
    assert share_draft_metadata_enabled()
    assert DeepseekSparseAttnMultiStepBackend(GEOMETRY, "cpu", 4).share
    monkeypatch.setenv(SHARE_ENV, "0")
    assert not share_draft_metadata_enabled()
    assert not DeepseekSparseAttnMultiStepBackend(GEOMETRY, "cpu", 4).share
    assert resolve_variant("env").share is False
    assert resolve_variant("draft_alias").share is True


def test_variants():
    assert resolve_variant("ordinary") == resolve_variant("ordinary")
    assert (resolve_variant("ordinary").fusion, resolve_variant("ordinary").share) == (False, False)
    assert (resolve_variant("kpool_fused").fusion, resolve_variant("kpool_fused").share) == (
        True,
        False,
    )
    captured = resolve_variant("draft_captured")
    assert (captured.fusion, captured.share, captured.capture) == (True, True, True)
    assert not resolve_variant("draft_alias").capture
    with pytest.raises(ValueError, match="unknown variant"):
        resolve_variant("nope")


def test_capture_flag_from_env(monkeypatch):
    monkeypatch.delenv(CAPTURE_ENV, raising=False)
    assert not resolve_variant("env").capture
    assert not DeepseekSparseAttnMultiStepBackend(GEOMETRY, "cpu", 2).capture
    monkeypatch.setenv(CAPTURE_ENV, "1")
    assert resolve_variant("env").capture
    assert DeepseekSparseAttnMultiStepBackend(GEOMETRY, "cpu", 2).capture


def test_captured_refresh_runs_in_the_forward_not_before_the_replay(triton_device, monkeypatch):
    multi = DeepseekSparseAttnMultiStepBackend(GEOMETRY, triton_device, 3, share=True, capture=True)
    multi.init_cuda_graph_state(MAX_BS)
    builds = _count_calls(monkeypatch, multi.backends[0], "build")
    inputs = _inputs([20, 40], seed=3, device=triton_device)
    multi.init_forward_metadata_replay_cuda_graph(2, inputs)
    assert builds == []
    multi.init_forward_metadata_in_graph(2, inputs)
    assert len(builds) == 1
    assert_metadata_equal(multi.step_metadata(2), _reference(inputs, 2), DECODE, 2)
    plain = _multi(triton_device, fusion=True, share=True, steps=3)
    plain_builds = _count_calls(monkeypatch, plain.backends[0], "build")
    plain.init_forward_metadata_in_graph(2, inputs)
    assert plain_builds == []


def test_feature_selection(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    b = DeepseekSparseAttnBackend(GEOMETRY, "cpu", fusion=True)
    b.init_cuda_graph_state(2, 12)
    assert not b.kpool_fusion and "runs no Triton" in b.fusion_reason
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    b = DeepseekSparseAttnBackend(GEOMETRY, "cpu", fusion=True)
    b.init_cuda_graph_state(2, 12)
    assert b.kpool_fusion
    odd = DSAGeometry(page_size=24, index_topk=32, index_kpool=4, page_table_width=96, num_sms=5)
    b = DeepseekSparseAttnBackend(odd, "cpu", fusion=True)
    b.init_cuda_graph_state(2, 12)
    assert not b.kpool_fusion and "power of two" in b.fusion_reason
    assert b.supported_geometry_reason() is not None
    b = DeepseekSparseAttnBackend(GEOMETRY, "cpu", fusion=False)
    b.init_cuda_graph_state(2, 12)
    assert not b.kpool_fusion


def test_backend_builds_each_mode_into_static_buffers(triton_device):
    b = DeepseekSparseAttnBackend(GEOMETRY, triton_device, fusion=True)
    b.init_cuda_graph_state(MAX_BS, MAX_BS * GEOMETRY.num_draft_tokens)
    ptrs = [t.data_ptr() for t in b.forward_metadata.tensors().values()]
    for mode in ForwardMode:
        inputs = make_forward_inputs(
            mode, GEOMETRY, [70, 12], accept_lens=[2, 6], max_reqs=8, device=triton_device
        )
        b.init_forward_metadata_replay_cuda_graph(mode, 2, inputs)
        ref = allocate_metadata(MAX_BS, MAX_BS * 6, GEOMETRY, triton_device)
        build_metadata_ordinary(mode, inputs, ref)
        assert_metadata_equal(b.forward_metadata, ref, mode, 2)
    assert ptrs == [t.data_ptr() for t in b.forward_metadata.tensors().values()]
    with pytest.raises(ValueError, match="expected 3"):
        b.init_forward_metadata_replay_cuda_graph(mode, 3, inputs)
