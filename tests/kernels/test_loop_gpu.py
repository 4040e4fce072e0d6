"""The decode loop on a GPU: CUDA-graph replay == eager, across variants; sync-free refresh."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from specscope.kernels.model import EagleLoop, LoopConfig, run_loop
from specscope.kernels.ops.attention import ForwardMode, allocate_metadata, build_metadata_ordinary
from specscope.kernels.ops.attention.testing import assert_metadata_equal

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

# bs 3 runs in bucket 4 (one pad request); lengths cross page (64) and pool boundaries, and
# requests finish after 14 tokens, so new requests land in recycled pool rows and pages.
SMALL = LoopConfig(
    bs=3,
    steps=6,
    warmup=1,
    context=300,
    device="cuda",
    nvtx=False,
    hidden=128,
    layers=2,
    vocab=128,
    page_size=64,
    index_topk=128,
    max_new_tokens=14,
)


@pytest.mark.parametrize("kpool", [4, 1])
def test_graph_replay_equals_eager_for_every_variant(kpool):
    hashes = {}
    for variant in ("ordinary", "kpool_fused", "draft_alias", "draft_captured"):
        for graphs in (True, False):
            cfg = replace(SMALL, variant=variant, graphs=graphs, index_kpool=kpool)
            loop = EagleLoop(cfg)
            result = loop.run()
            assert len(loop.finished) >= 2
            hashes[(variant, graphs)] = result.tokens_sha256
    assert len(set(hashes.values())) == 1, hashes


@pytest.mark.parametrize("variant", ["ordinary", "draft_captured"])
def test_gpu_tokens_equal_cpu_tokens(variant):
    """Integer-exact arithmetic: the device does not change a single token."""
    cfg = replace(SMALL, variant=variant, bs=2, steps=3, max_new_tokens=None)
    gpu = run_loop(replace(cfg, graphs=True))
    cpu = run_loop(replace(cfg, device="cpu", graphs=False))
    assert gpu.tokens_sha256 == cpu.tokens_sha256


def test_captured_draft_refresh_sees_new_inputs_on_every_replay():
    """draft_captured: the draft graph rebuilds step 0's metadata from the staged inputs of
    each step (bucket 4 for 3 requests: the pad request included); prepare builds nothing."""
    loop = EagleLoop(replace(SMALL, variant="draft_captured"))
    runner, multi = loop.draft_runner, loop.draft_backend
    be = runner.bucket(SMALL.bs)
    seen = set()
    for _ in range(4):
        loop.step()
        torch.cuda.synchronize()
        inputs = runner.forward_inputs(be)
        ref = allocate_metadata(be, be, loop.geometry, "cuda")
        build_metadata_ordinary(ForwardMode.DECODE, inputs, ref)
        assert_metadata_equal(multi.step_metadata(0), ref, ForwardMode.DECODE, be)
        seen.add(tuple(inputs.seq_lens.tolist()))
    assert len(seen) >= 2  # the lengths moved between steps


@pytest.mark.parametrize("variant", ["ordinary", "kpool_fused", "draft_alias", "draft_captured"])
def test_metadata_refresh_and_replay_make_no_host_sync(variant):
    loop = EagleLoop(replace(SMALL, variant=variant))
    loop.step()  # compile, upload pointer tables
    torch.cuda.synchronize()
    be = loop.draft_runner.bucket(SMALL.bs)
    torch.cuda.set_sync_debug_mode("error")
    try:
        loop.draft_runner.refresh_metadata(be)
        loop.draft_runner.replay(be)
        loop.verify_runner.refresh_metadata(be)
        loop.verify_runner.replay(be)
        loop.extend_runner.refresh_metadata(be)
        loop.extend_runner.replay(be)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()


def test_draft_graph_reads_aliased_metadata_after_refresh():
    """A refresh of step 0 alone changes what every captured draft step reads."""
    loop = EagleLoop(replace(SMALL, variant="draft_alias"))
    multi = loop.draft_backend
    ptrs = {m: t.data_ptr() for m, t in multi.step_metadata(0).tensors().items()}
    for i in range(1, multi.num_steps):
        assert {m: t.data_ptr() for m, t in multi.step_metadata(i).tensors().items()} == ptrs
    loop.run()
    assert {m: t.data_ptr() for m, t in multi.step_metadata(3).tensors().items()} == ptrs
