"""Choosing the fused or the ordinary DSA metadata builder."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from specscope.kernels.ops.attention import (
    FUSION_ENV,
    DSAGeometry,
    ForwardMode,
    allocate_metadata,
    build_metadata_fused,
    build_metadata_ordinary,
    select_builder,
    unsupported_reason,
)
from specscope.kernels.ops.attention.testing import make_forward_inputs

G = DSAGeometry(page_size=64, index_topk=256, index_kpool=4, page_table_width=512, num_sms=7)
UNSUPPORTED = [
    ("kpool3", replace(G, index_kpool=3), None, "index_kpool=3"),
    ("kpool16", replace(G, index_kpool=16), None, "index_kpool=16"),
    ("page48", replace(G, page_size=48), None, "power of two"),
    ("page4-kpool8", replace(G, page_size=4, index_kpool=8), None, "multiple of index_kpool"),
    ("rows", G, 10_000, "max_rows=10000"),
    ("sms", replace(G, num_sms=5000), None, "num_sms=5000"),
]


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_supported_geometry_selects_fused(k, triton_device, monkeypatch):
    monkeypatch.delenv(FUSION_ENV, raising=False)
    assert unsupported_reason(replace(G, index_kpool=k), 768) is None
    assert select_builder(replace(G, index_kpool=k), triton_device, 768) is build_metadata_fused


@pytest.mark.parametrize(
    "geometry,max_rows,why", [u[1:] for u in UNSUPPORTED], ids=[u[0] for u in UNSUPPORTED]
)
def test_unsupported_geometry_falls_back_with_one_log_line(
    geometry, max_rows, why, triton_device, caplog, monkeypatch
):
    monkeypatch.delenv(FUSION_ENV, raising=False)
    with caplog.at_level(logging.INFO, logger="specscope.kernels"):
        builder = select_builder(geometry, triton_device, max_rows)
    assert builder is build_metadata_ordinary
    assert len(caplog.records) == 1 and why in caplog.records[0].getMessage()
    assert caplog.records[0].levelno == logging.WARNING


def test_fallback_builder_builds_unsupported_geometry(triton_device):
    g = replace(G, page_size=48, index_kpool=3, page_table_width=480)
    builder = select_builder(g, triton_device)
    inputs = make_forward_inputs(ForwardMode.DECODE, g, (1, 47, 48, 49, 480))
    out = allocate_metadata(5, 5, g, "cpu")
    builder(ForwardMode.DECODE, inputs, out)
    assert out.kpool_seqlens.tolist() == [1, 16, 16, 17, 160]
    assert out.real_page_table[:, 0].tolist() == (out.page_table_1[:, 0] // 48).tolist()
    with pytest.raises(ValueError, match="unsupported"):
        build_metadata_fused(ForwardMode.DECODE, inputs, out)


@pytest.mark.parametrize("value", ["0", " 0"])
def test_env_flag_zero_restores_ordinary_path(value, triton_device, monkeypatch):
    monkeypatch.setenv(FUSION_ENV, value)
    assert select_builder(G, triton_device) is build_metadata_ordinary


def test_env_flag_other_values_keep_fusion(triton_device, monkeypatch):
    monkeypatch.setenv(FUSION_ENV, "1")
    assert select_builder(G, triton_device) is build_metadata_fused


def test_cpu_without_interpreter_uses_ordinary_path(monkeypatch):
    monkeypatch.delenv(FUSION_ENV, raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert select_builder(G, "cpu") is build_metadata_ordinary
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert select_builder(G, "cpu") is build_metadata_fused
