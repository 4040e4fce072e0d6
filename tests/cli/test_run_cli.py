"""`specscope run` through click: output, JSON, one-line errors, help."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("triton")

from specscope.cli.run import JSON_FIELDS, run  # noqa: E402

TINY = [
    "--device", "cpu", "--variant", "ordinary", "--bs", "1", "--steps", "2", "--warmup", "1",
    "--context", "120", "--hidden", "32", "--layers", "1", "--vocab", "32", "--page-size", "16",
    "--index-topk", "16", "--nvtx", "off",
]  # fmt: skip


def test_run_prints_and_writes_json(tmp_path):
    out = tmp_path / "r.json"
    result = CliRunner().invoke(run, [*TINY, "--json", str(out)])
    assert result.exit_code == 0, result.output
    for key in JSON_FIELDS:
        assert key in result.output
    data = json.loads(out.read_text())
    assert set(JSON_FIELDS) <= set(data)
    assert data["variant"] == "ordinary" and data["graphs"] is False and data["steps"] == 2
    assert data["tokens"] == round(2 * data["accept_len_mean"])
    assert len(data["tokens_sha256"]) == 64
    again = CliRunner().invoke(run, TINY)
    assert data["tokens_sha256"] in again.output


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--accept-len", "9"], "--accept-len must be in 1..6"),
        (["--graphs"], "add --no-graphs"),
        (["--index-kpool", "3"], "--index-kpool"),
    ],
)
def test_bad_flags_are_one_error_line(extra, message):
    result = CliRunner().invoke(run, [*TINY, *extra])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and message in lines[0]


def test_unwritable_json_is_one_error_line(tmp_path):
    result = CliRunner().invoke(run, [*TINY, "--json", str(tmp_path / "no" / "r.json")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith("Error: cannot write")


def test_help_lists_the_variants():
    """Every command's help and example: tests/cli/test_cli.py."""
    result = CliRunner().invoke(run, ["--help"])
    assert result.exit_code == 0
    assert "--variant [ordinary|kpool_fused|draft_alias|draft_captured|env]" in result.output
