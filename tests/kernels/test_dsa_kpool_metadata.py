"""Fused DSA metadata kernels == the ordinary torch path, exactly, on every defined part.

Runs on the CPU under TRITON_INTERPRET=1 (CI) and on CUDA; shapes are kept small for the
interpreter. Larger shapes live in test_dsa_metadata_gpu.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
import torch

from specscope.kernels.ops.attention import (
    DSAGeometry,
    ForwardMode,
    allocate_metadata,
    build_metadata_fused,
    build_metadata_ordinary,
)
from specscope.kernels.ops.attention.dsa_kpool_metadata import launch_settings
from specscope.kernels.ops.attention.dsa_kpool_metadata.scan import (
    FIELDS,
    META_PROGRAMS,
    PAGE_TABLE,
    SCHEDULE,
)
from specscope.kernels.ops.attention.testing import (
    assert_metadata_equal,
    defined_lengths,
    live_masks,
    make_forward_inputs,
    scramble,
)

DECODE, VERIFY, DRAFT = ForwardMode.DECODE, ForwardMode.TARGET_VERIFY, ForwardMode.DRAFT_EXTEND
CPU_GEOMETRY = DSAGeometry(
    page_size=64, index_topk=256, index_kpool=4, page_table_width=1024, num_sms=7
)


def boundary_lengths(g: DSAGeometry) -> list[int]:
    """Lengths = 0, 1, k - 1 mod k and mod P; around K; a full row; the shortest allowed."""
    k, P, K, L = g.index_kpool, g.page_size, g.index_topk, g.page_table_width
    out = {g.num_draft_tokens, 2 * k - 1, 2 * k, 2 * k + 1, L - 1, L}
    out |= {P * i + d for i in (1, 2, 5) for d in (-1, 0, 1, k - 1)}
    out |= {K - 1, K, K + 1}
    return sorted(n for n in out if g.num_draft_tokens <= n <= g.page_table_width)


@dataclass(frozen=True)
class Case:
    id: str
    mode: ForwardMode
    geometry: DSAGeometry
    seq_lens: tuple[int, ...]
    accept_lens: tuple[int, ...] | None = None
    req_pool_indices: tuple[int, ...] | None = None


def _acc_mixed(bs: int, t: int) -> tuple[int, ...]:
    return tuple(1 + (7 * b) % t for b in range(bs))


def _cases() -> list[Case]:
    cases = []
    for k in (1, 2, 4, 8):
        g = replace(CPU_GEOMETRY, index_kpool=k)
        lens = tuple(boundary_lengths(g))
        acc = _acc_mixed(len(lens), g.num_draft_tokens)
        for mode in ForwardMode:
            cases.append(Case(f"boundaries-{mode.name}-k{k}", mode, g, lens, acc))
    g = CPU_GEOMETRY
    for mode in ForwardMode:
        cases.append(Case(f"bs1-short-{mode.name}", mode, g, (6,), (1,)))
        cases.append(Case(f"bs1-full-{mode.name}", mode, g, (1024,), (6,)))
        gen = torch.Generator().manual_seed(64)
        lens = tuple(torch.randint(6, 513, (64,), generator=gen).tolist())
        g64 = replace(g, page_table_width=512, num_sms=132)
        cases.append(Case(f"bs64-{mode.name}", mode, g64, lens, _acc_mixed(64, 6)))
        # Reused pool rows: several requests read the same req_to_token row.
        reuse = (2, 2, 0, 2, 5, 0)
        cases.append(
            Case(
                f"reused-rows-{mode.name}",
                mode,
                g,
                (700, 65, 300, 6, 1000, 64),
                (1, 2, 3, 4, 5, 6),
                reuse,
            )
        )
    lens = (7, 64, 129, 256, 300, 1024, 6, 511)
    for name, acc in (("all1", (1,) * 8), ("allT", (6,) * 8), ("mixed", (6, 1, 3, 6, 2, 1, 6, 5))):
        cases.append(Case(f"acc-{name}", DRAFT, CPU_GEOMETRY, lens, acc))
    # Top-k 2048 with rows on both sides of it; a small page size; one SM; more SMs than blocks.
    g2k = replace(CPU_GEOMETRY, index_topk=2048, page_table_width=2560, num_sms=16)
    for mode in ForwardMode:
        cases.append(
            Case(f"topk2048-{mode.name}", mode, g2k, (2047, 2048, 2049, 2053, 500), (6, 1, 2, 6, 3))
        )
    g16 = DSAGeometry(page_size=16, index_topk=40, index_kpool=8, page_table_width=256, num_sms=5)
    cases.append(Case("page16-k8", VERIFY, g16, tuple(boundary_lengths(g16))))
    cases.append(Case("one-sm", VERIFY, replace(CPU_GEOMETRY, num_sms=1), (9, 700, 64)))
    cases.append(Case("idle-sms", DECODE, replace(CPU_GEOMETRY, num_sms=300), (1, 2, 65)))
    # The schedule's row search with the most SMs the fused path takes (S > rows) and with few
    # SMs (many rows per SM); bs64-* above has rows past one power-of-two block.
    lens11 = (6, 7, 64, 65, 100, 129, 200, 255, 256, 31, 17)
    for mode, sms in ((VERIFY, 1023), (DRAFT, 3)):
        g_sms = replace(CPU_GEOMETRY, page_table_width=256, num_sms=sms)
        cases.append(Case(f"sms{sms}-{mode.name}", mode, g_sms, lens11, _acc_mixed(11, 6)))
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fused_equals_ordinary(case: Case, triton_device: str):
    g, mode, bs = case.geometry, case.mode, len(case.seq_lens)
    inputs = make_forward_inputs(
        mode,
        g,
        case.seq_lens,
        accept_lens=case.accept_lens,
        req_pool_indices=case.req_pool_indices,
        seed=bs,
        device=triton_device,
    )
    # Buffers larger than this forward: only their prefixes are defined.
    expected = allocate_metadata(bs + 1, (bs + 1) * 6, g, triton_device)
    actual = allocate_metadata(bs + 1, (bs + 1) * 6, g, triton_device)
    scramble(expected, seed=1)
    scramble(actual, seed=2)
    build_metadata_ordinary(mode, inputs, expected)
    build_metadata_fused(mode, inputs, actual)
    assert_metadata_equal(actual, expected, mode, bs)


def test_fused_rebuild_overwrites_previous_forward(triton_device: str):
    """A second, shorter forward into the same buffers gives the same as a fresh build."""
    g = CPU_GEOMETRY
    out = allocate_metadata(8, 48, g, triton_device)
    fresh = allocate_metadata(8, 48, g, triton_device)
    first = make_forward_inputs(VERIFY, g, (1000, 900, 800, 700, 600), seed=3, device=triton_device)
    second = make_forward_inputs(VERIFY, g, (64, 7, 129), seed=4, device=triton_device)
    build_metadata_fused(VERIFY, first, out)
    build_metadata_fused(VERIFY, second, out)
    build_metadata_ordinary(VERIFY, second, fresh)
    assert_metadata_equal(out, fresh, VERIFY, 3)


def test_fused_writes_nothing_past_live_prefixes(triton_device: str):
    """The kernels copy live prefixes only: the undefined tail keeps its old contents."""
    g = CPU_GEOMETRY
    inputs = make_forward_inputs(DECODE, g, (64, 65, 300), device=triton_device)
    out = allocate_metadata(3, 3, g, triton_device, fill=-5)
    build_metadata_fused(DECODE, inputs, out)
    assert (out.page_table_1[0, 64:] == -5).all() and (out.page_table_1[1, 65:] == -5).all()
    assert (out.real_page_table[1, 2:] == -5).all() and (out.real_page_table[2, 5:] == -5).all()
    assert (out.page_table_1[1, :65] != -5).all()


@pytest.mark.parametrize("mode", [VERIFY, ForwardMode.DRAFT_EXTEND])
def test_fused_row_tails_of_every_length_mod_4(mode: ForwardMode, triton_device: str):
    """Row tails end at every column mod 4 (the copy takes whole groups of 4, then the rest),
    inside a span and at its edges; every live column is right and nothing past it is written."""
    g = replace(CPU_GEOMETRY, page_table_width=2048)
    lens = (6, 7, 8, 9, 1023, 1024, 1025, 1026, 1029)  # spans of 1024 columns: tails at the edge
    acc = (1, 2, 3, 4, 5, 6, 6, 3, 1)
    inputs = make_forward_inputs(mode, g, lens, accept_lens=acc, seed=5, device=triton_device)
    rows = g.rows(mode, len(lens))
    expected = allocate_metadata(len(lens), rows, g, triton_device)
    actual = allocate_metadata(len(lens), rows, g, triton_device, fill=-5)
    build_metadata_ordinary(mode, inputs, expected)
    build_metadata_fused(mode, inputs, actual)
    assert_metadata_equal(actual, expected, mode, len(lens))
    for r, live in enumerate(expected.seqlens_expanded[:rows].tolist()):
        assert (actual.page_table_1[r, live:] == -5).all(), f"row {r} written past {live}"


def test_launch_settings_are_a_function_of_shapes():
    g = DSAGeometry(page_table_width=16384)
    s = launch_settings(rows=192, bs=32, geometry=g)
    assert s == launch_settings(rows=192, bs=32, geometry=g)
    assert s.block_rows >= 192 and s.block_bs >= 33 and s.block_sms >= g.num_sms + 1
    assert s.block_cols % g.page_size == 0
    assert s.grid(32) == (META_PROGRAMS.value + 32 * s.n_spans,)
    # Every column of a row is covered by exactly one worker span.
    assert s.n_spans * s.block_cols >= g.page_table_width > (s.n_spans - 1) * s.block_cols


SETTINGS_VARIANTS = {
    "narrow-workers": dict(block_cols=64, num_warps=1),
    "long-spans": dict(block_cols=512, num_warps=8),
}


@pytest.mark.parametrize("variant", sorted(SETTINGS_VARIANTS))
@pytest.mark.parametrize("mode", list(ForwardMode), ids=lambda m: m.name)
def test_fused_equals_ordinary_under_other_launch_settings(mode, variant, triton_device):
    """Launch settings change how the work is split, never the result."""
    g = replace(CPU_GEOMETRY, num_sms=13)
    lens = tuple(boundary_lengths(g))[:12]
    bs = len(lens)
    inputs = make_forward_inputs(
        mode, g, lens, accept_lens=_acc_mixed(bs, 6), seed=5, device=triton_device
    )
    expected = allocate_metadata(bs, bs * 6, g, triton_device)
    actual = allocate_metadata(bs, bs * 6, g, triton_device)
    scramble(actual, seed=3)
    build_metadata_ordinary(mode, inputs, expected)
    rows = g.rows(mode, bs)
    settings = launch_settings(rows, bs, g, **SETTINGS_VARIANTS[variant])
    build_metadata_fused(mode, inputs, actual, settings)
    assert_metadata_equal(actual, expected, mode, bs)


@pytest.mark.parametrize("stages", [FIELDS, SCHEDULE, PAGE_TABLE])
def test_stage_bits_run_only_their_work(stages, triton_device):
    """The benchmark's ablations: a build with some stages left out writes only the others."""
    g, mode, lens = CPU_GEOMETRY, VERIFY, (700, 65, 300)
    bs, rows = len(lens), g.rows(VERIFY, len(lens))
    inputs = make_forward_inputs(mode, g, lens, seed=7, device=triton_device)
    full = allocate_metadata(bs, rows, g, triton_device)
    build_metadata_ordinary(mode, inputs, full)
    part = allocate_metadata(bs, rows, g, triton_device, fill=-5)
    settings = launch_settings(rows, bs, g, stages=stages)
    build_metadata_fused(mode, inputs, part, settings)
    groups = {
        PAGE_TABLE: {"page_table_1", "real_page_table"},
        SCHEDULE: {"paged_mqa_schedule"},
    }
    groups[FIELDS] = set(full.tensors()) - groups[PAGE_TABLE] - groups[SCHEDULE]
    lengths = defined_lengths(mode, g, bs)
    table_mask, page_mask = live_masks(g, full.seqlens_expanded)
    masks = {"page_table_1": table_mask, "real_page_table": page_mask}
    for name, t in part.tensors().items():
        if name not in groups[stages]:
            assert (t == -5).all(), f"{name} written with stages={stages}"
        elif name in masks:
            assert torch.equal(t[masks[name]], full.tensors()[name][masks[name]]), name
        else:
            n = lengths[name]
            assert torch.equal(t[:n], full.tensors()[name][:n]), name


@pytest.mark.parametrize("num_sms", [1, 2, 5, 31, 127, 132, 255])
def test_schedule_over_sm_counts(num_sms, triton_device):
    """The schedule's row search against the reference, S around powers of two, with fewer and
    more index blocks than SMs."""
    g = replace(CPU_GEOMETRY, num_sms=num_sms, page_table_width=512)
    gen = torch.Generator().manual_seed(num_sms)
    for lens in ((6, 7, 8), tuple(torch.randint(6, 513, (20,), generator=gen).tolist())):
        bs = len(lens)
        inputs = make_forward_inputs(VERIFY, g, lens, seed=num_sms, device=triton_device)
        expected = allocate_metadata(bs, bs * 6, g, triton_device)
        actual = allocate_metadata(bs, bs * 6, g, triton_device, fill=-5)
        build_metadata_ordinary(VERIFY, inputs, expected)
        build_metadata_fused(VERIFY, inputs, actual)
        assert_metadata_equal(actual, expected, VERIFY, bs)
