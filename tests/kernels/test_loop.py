"""The EAGLE decode loop on the CPU (eager): variants agree on tokens, NVTX shape, requests.

Tiny sizes: the fused kernels run through the Triton interpreter (TRITON_INTERPRET=1).
"""

from __future__ import annotations

import sys
import types
from dataclasses import replace

import numpy as np
import pytest

from specscope.errors import SpecscopeError
from specscope.kernels.model import EagleLoop, LoopConfig, run_loop
from specscope.kernels.model.loop import simulated_accept_len
from specscope.kernels.model.nvtx_ranges import DOMAIN, RANGES
from specscope.kernels.ops.attention import ForwardMode, allocate_metadata, build_metadata_ordinary
from specscope.kernels.ops.attention.selection import triton_platform
from specscope.kernels.ops.attention.testing import assert_metadata_equal

TINY = LoopConfig(
    bs=2,
    steps=3,
    warmup=1,
    context=150,
    device="cpu",
    nvtx=False,
    hidden=64,
    layers=2,
    vocab=64,
    page_size=16,
    index_topk=32,
)
VARIANTS = ("ordinary", "kpool_fused", "draft_alias", "draft_captured")


@pytest.mark.skipif(
    not triton_platform(TINY.device),
    reason=f"the fused kernels cannot run on {TINY.device} without TRITON_INTERPRET=1",
)
@pytest.mark.parametrize("kpool", [4, 1])
def test_variants_generate_identical_tokens(kpool):
    """The loop runs on TINY.device (the CPU) even where CUDA is present, so the skip asks
    about that device, not about the machine (the triton_device fixture's question)."""
    results = {v: run_loop(replace(TINY, variant=v, index_kpool=kpool)) for v in VARIANTS}
    hashes = {r.tokens_sha256 for r in results.values()}
    assert len(hashes) == 1, {v: r.tokens_sha256[:12] for v, r in results.items()}
    assert [r.builder for r in results.values()] == ["ordinary", "fused", "fused", "fused"]
    assert [r.copies_per_step for r in results.values()] == [4, 4, 0, 0]
    r = results["draft_alias"]
    assert r.tokens == 2 * 3 * r.accept_len_mean
    assert 1 <= r.accept_len_mean <= 6
    assert results["kpool_fused"].draft_metadata_bytes > 3 * r.draft_metadata_bytes


def test_real_acceptance_agrees_across_variants():
    cfg = replace(TINY, accept_mode="real", steps=2)
    a = run_loop(replace(cfg, variant="ordinary"))
    b = run_loop(replace(cfg, variant="draft_alias"))
    c = run_loop(replace(cfg, variant="draft_captured"))
    assert a.tokens_sha256 == b.tokens_sha256 == c.tokens_sha256
    assert a.tokens >= 2 * 2  # at least the bonus token per request and step


def test_new_requests_in_pool_rows_agree_across_variants():
    """Requests finish and new ones land on recycled rows and pages holding stale KV."""
    cfg = replace(TINY, max_new_tokens=7, steps=4, warmup=0, bs=1)
    loops = [
        EagleLoop(replace(cfg, variant=v)) for v in ("ordinary", "draft_alias", "draft_captured")
    ]
    for loop in loops:
        loop.run()
        assert len(loop.finished) >= 2
        assert {r.row for r in loop.finished + loop.requests} != {loop.finished[0].row}
    assert len({loop.tokens_sha256() for loop in loops}) == 1


@pytest.mark.parametrize("variant", ["ordinary", "draft_captured"])
def test_padded_buckets_give_the_same_tokens(monkeypatch, variant):
    """The graph path's padding (pad requests up to the bucket), run eagerly on the CPU."""
    cfg = replace(TINY, bs=3, variant=variant, steps=2)
    plain = EagleLoop(cfg)
    padded = EagleLoop(cfg)
    for runner in (padded.draft_runner, padded.verify_runner, padded.extend_runner):
        monkeypatch.setattr(runner, "bucket", lambda bs: 4)
    assert plain.draft_runner.bucket(3) == 3
    assert plain.run().tokens_sha256 == padded.run().tokens_sha256


def test_captured_refresh_builds_from_each_steps_inputs():
    """draft_captured: the draft forward itself rebuilds step 0's metadata from the runner's
    static inputs, every step (here eager, the same code a graph replays); prepare builds none."""
    loop = EagleLoop(replace(TINY, variant="draft_captured"))
    multi, runner = loop.draft_backend, loop.draft_runner
    assert multi.capture and runner.staged and loop.verify_backend.fast_launch
    seen = set()
    for _ in range(3):
        loop.step()
        inputs = runner.forward_inputs(2)
        ref = allocate_metadata(2, 2, loop.geometry, "cpu")
        build_metadata_ordinary(ForwardMode.DECODE, inputs, ref)
        assert_metadata_equal(multi.step_metadata(0), ref, ForwardMode.DECODE, 2)
        seen.add(tuple(inputs.seq_lens.tolist()))
    assert len(seen) >= 2  # the lengths moved between steps


def test_staged_runners_upload_once_per_phase(monkeypatch):
    """draft_captured: one host-to-device copy each for draft and verify; the draft-extend
    derives its inputs on the device, so it uploads nothing and builds no metadata eagerly."""
    loop = EagleLoop(replace(TINY, variant="draft_captured"))
    loop.step()
    uploads = []
    for runner in (loop.draft_runner, loop.verify_runner, loop.extend_runner):
        staging = runner.staging
        monkeypatch.setattr(staging, "upload", lambda s=staging: uploads.append(s))
    monkeypatch.setattr(loop, "_extend_prepare", None)  # never called
    loop.step()
    assert uploads == [loop.draft_runner.staging, loop.verify_runner.staging]


@pytest.mark.parametrize("accept_mode", ["sim", "real"])
def test_derived_extend_inputs_equal_the_hosts(accept_mode):
    """The draft-extend inputs derived on the device == what the host computes for them."""
    cfg = replace(TINY, variant="draft_captured", accept_mode=accept_mode)
    loop = EagleLoop(cfg)
    for _ in range(2):
        loop.step()
        er, bs = loop.extend_runner, cfg.bs
        derived = {k: er.inp[k].clone() for k in er.fields if k != "tokens"}
        lens = [int(a) for a in derived["accept_lens"][:bs]]
        host = {}

        def keep(bs_, be, inputs, tokens, hidden, pad_row, host=host):
            host.update(inputs)

        er.prepare = keep
        loop._extend_prepare(bs, bs, lens)  # the host's inputs (the requests are committed)
        del er.prepare
        assert set(host) == set(derived)
        for name, values in host.items():
            n = bs * er.fields[name][0]
            assert derived[name][:n].tolist() == values.reshape(-1)[:n].tolist(), name


def test_each_draft_step_resets_and_fills_its_own_kv_counter():
    loop = EagleLoop(replace(TINY, variant="ordinary", draft_layers=2))
    loop.step()
    seq = loop.draft_runner.inp["seq_lens"][:2]
    want = 2 * sum(min(int(n), TINY.index_topk) for n in seq)  # 2 draft layers
    for b in loop.draft_backend.backends:
        assert int(b.kv_counter.sum()) == want
    assert len({b.kv_counter.data_ptr() for b in loop.draft_backend.backends}) == 4


def test_step_accepts_and_commits(monkeypatch):
    loop = EagleLoop(replace(TINY, variant="ordinary"))
    n0 = [r.n for r in loop.requests]
    lens = loop.step()
    assert [r.n for r in loop.requests] == [n + a for n, a in zip(n0, lens, strict=True)]
    assert [len(r.generated) for r in loop.requests] == lens


def _fake_nvtx(monkeypatch):
    events = []

    class Annotate:
        def __init__(self, message, domain=None):
            self.message, self.domain = message, domain

        def __enter__(self):
            events.append(("push", self.message, self.domain))

        def __exit__(self, *exc):
            events.append(("pop", self.message, self.domain))

    monkeypatch.setitem(sys.modules, "nvtx", types.SimpleNamespace(annotate=Annotate))
    return events


def test_nvtx_ranges_wrap_each_phase_of_a_step(monkeypatch):
    events = _fake_nvtx(monkeypatch)
    loop = EagleLoop(replace(TINY, variant="ordinary", nvtx=True))
    loop.step()
    assert {d for _, _, d in events} == {DOMAIN}
    assert [m for kind, m, _ in events if kind == "push"] == list(RANGES)
    assert events[0] == ("push", "step", DOMAIN) and events[-1] == ("pop", "step", DOMAIN)


def test_draft_captured_keeps_the_phase_ranges(monkeypatch):
    """The accept's commit moves behind the draft-extend launch; the ranges keep their order."""
    events = _fake_nvtx(monkeypatch)
    loop = EagleLoop(replace(TINY, variant="draft_captured", nvtx=True))
    loop.step()
    assert [m for kind, m, _ in events if kind == "push"] == list(RANGES)


def test_nvtx_off_and_missing_package(monkeypatch, capsys):
    events = _fake_nvtx(monkeypatch)
    loop = EagleLoop(replace(TINY, variant="ordinary", nvtx=False))
    loop.step()
    assert events == [] and not loop.nvtx_on
    monkeypatch.setitem(sys.modules, "nvtx", None)  # import nvtx -> ImportError
    loop = EagleLoop(replace(TINY, variant="ordinary", nvtx=True))
    loop.step()
    assert not loop.nvtx_on
    assert "nvtx not installed" in capsys.readouterr().err


def test_simulated_accept_lengths_have_the_requested_mean():
    for mean in (1.0, 2.5, 5.0, 6.0):
        lens = [simulated_accept_len(mean, 6, 0, rid, s) for rid in range(50) for s in range(40)]
        assert set(lens) <= set(range(1, 7))
        assert abs(np.mean(lens) - mean) < 0.06, mean
    assert len({simulated_accept_len(5.0, 6, 0, 0, s) for s in range(40)}) == 3


@pytest.mark.parametrize(
    "change,message",
    [
        ({"accept_len": 7.0}, "--accept-len"),
        ({"variant": "bogus"}, "unknown variant"),
        ({"graphs": True}, "--no-graphs"),
        ({"index_kpool": 3}, "--index-kpool"),
        ({"page_size": 24}, "--page-size"),
        ({"index_topk": 10_000}, "--index-topk"),
        ({"bs": 0}, "--bs"),
        ({"context": 5}, "--context"),
        ({"accept_mode": "maybe"}, "--accept-mode"),
    ],
)
def test_bad_configs_are_one_line_errors(change, message):
    with pytest.raises(SpecscopeError, match=message):
        EagleLoop(replace(TINY, **change))
