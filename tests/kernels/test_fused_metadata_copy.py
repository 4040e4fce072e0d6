"""One launch copies a metadata set into several sibling sets, live prefixes only."""

from __future__ import annotations

from dataclasses import replace

import pytest

from specscope.kernels.ops.attention import (
    DSAGeometry,
    ForwardMode,
    allocate_metadata,
    build_metadata_ordinary,
    fused_metadata_copy,
)
from specscope.kernels.ops.attention.testing import (
    assert_metadata_equal,
    live_masks,
    make_forward_inputs,
    scramble,
)

G = DSAGeometry(page_size=64, index_topk=256, index_kpool=4, page_table_width=1024, num_sms=7)


def _addresses(metas):
    return [{n: t.data_ptr() for n, t in m.tensors().items()} for m in metas]


@pytest.mark.parametrize("mode", list(ForwardMode))
def test_every_destination_equals_the_source(mode, triton_device):
    lens = (6, 64, 65, 255, 256, 257, 1024)
    src = allocate_metadata(8, 48, G, triton_device)
    dsts = [allocate_metadata(8, 48, G, triton_device) for _ in range(3)]
    for i, d in enumerate(dsts):
        scramble(d, seed=10 + i)
    before = _addresses(dsts)
    # Two forwards into the same buffers: the second (smaller) reuses the pointer table.
    for seed, n in ((1, 7), (2, 3)):
        inputs = make_forward_inputs(
            mode,
            G,
            lens[:n],
            accept_lens=(1, 6, 3, 2, 6, 5, 4)[:n],
            seed=seed,
            device=triton_device,
        )
        build_metadata_ordinary(mode, inputs, src)
        fused_metadata_copy(src, dsts, mode, bs=n)
        for d in dsts:
            assert_metadata_equal(d, src, mode, n)
    assert _addresses(dsts) == before


def test_copies_live_prefixes_only(triton_device):
    mode, bs = ForwardMode.TARGET_VERIFY, 2
    inputs = make_forward_inputs(mode, G, (70, 300), device=triton_device)
    src = allocate_metadata(bs, 12, G, triton_device)
    build_metadata_ordinary(mode, inputs, src)  # writes whole page-table rows
    dst = allocate_metadata(bs, 12, G, triton_device, fill=-5)
    fused_metadata_copy(src, [dst], mode, bs)
    tok_mask, page_mask = live_masks(G, src.seqlens_expanded.cpu())
    assert (dst.page_table_1.cpu()[~tok_mask] == -5).all()
    assert (dst.real_page_table.cpu()[~page_mask] == -5).all()
    assert (dst.page_table_1.cpu()[tok_mask] != -5).all()


def test_rejects_mismatched_destinations(triton_device):
    src = allocate_metadata(4, 24, G, triton_device)
    other = allocate_metadata(4, 24, replace(G, index_kpool=2), triton_device)
    with pytest.raises(ValueError, match="geometry"):
        fused_metadata_copy(src, [other], ForwardMode.DECODE, 4)
    small = allocate_metadata(2, 12, G, triton_device)
    with pytest.raises(ValueError, match="exceed"):
        fused_metadata_copy(src, [small], ForwardMode.TARGET_VERIFY, 4)
