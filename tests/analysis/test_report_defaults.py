"""Report defaults come from the spec layer: a preset's ``[report]`` table, else derived from
the spec; and no module outside ``presets/`` and ``kernels/`` hard-codes EAGLE range names."""

from __future__ import annotations

import ast
from pathlib import Path

from specscope.analysis.spec import (
    StepSpec,
    derived_report,
    known_names,
    load_preset,
    report_defaults,
    spec_from_dict,
)

PACKAGE = Path(__file__).resolve().parents[2] / "specscope"


def test_eagle_preset_report_table() -> None:
    spec = load_preset("eagle")
    r = spec.report
    pairs = ["draft_extend.replay->draft.replay", "draft.replay->verify.replay"]
    assert r.gap == f"gap_us:{pairs[0]}"
    assert r.rows == (*(f"gap_us:{p}" for p in pairs), "idle_us",
                      "kernels:fused_metadata_copy", "eager_memcpy")  # fmt: skip
    assert r.highlight == "fused_metadata_copy"
    assert r.names[f"gap_us:{pairs[0]}"] == "Gap: draft-extend → draft"
    assert known_names()["kernels:fused_metadata_copy"] == "fused_metadata_copy_kernel per step"
    # a spec given by hand (or read back from a results database) with the preset's ranges
    by_hand = StepSpec("step", spec.anchors, spec.domain)
    assert by_hand.report == r
    assert spec_from_dict(spec.to_dict()).report == r


def test_derived_defaults_without_a_report_table() -> None:
    spec = StepSpec("iter", ("fwd", "bwd", "opt"), count_kernels=("nccl", "copy"))
    r = report_defaults(spec)
    assert r.gap == "gap_us:opt->fwd"  # last anchor -> first anchor
    assert r.rows == ("gap_us:opt->fwd", "gap_us:fwd->bwd", "gap_us:bwd->opt", "idle_us",
                      "kernels:nccl", "kernels:copy", "eager_memcpy")  # fmt: skip
    assert r.highlight == "nccl|copy" and dict(r.names) == {}
    bare = derived_report(StepSpec("iter"))
    assert (bare.gap, bare.rows, bare.highlight) == (None, ("idle_us", "eager_memcpy"), None)
    assert spec_from_dict({}) is None and report_defaults(None).rows == ("idle_us", "eager_memcpy")
    # the eagle spec with another domain is not the preset: derived defaults
    other = StepSpec("step", load_preset("eagle").anchors, "elsewhere")
    assert other.report.names == {} and len(other.report.rows) == 5


def _eagle_names() -> set[str]:
    spec = load_preset("eagle")
    stems = {a.split(".")[0] for a in spec.anchors}
    return {
        *spec.anchors,
        *spec.count_kernels,
        *(s for s in stems if "_" in s),
        *(f"{s}.prepare" for s in stems),
    }


def _code_strings(tree: ast.AST) -> list[str]:
    """String constants of ``tree`` that are not docstrings."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def test_no_eagle_range_names_outside_presets_and_kernels() -> None:
    names = _eagle_names()
    assert {"draft.replay", "draft_extend", "fused_metadata_copy"} <= names
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("kernels", "presets"):
            continue
        for text in _code_strings(ast.parse(path.read_text())):
            found += [f"{rel}: {name!r} in {text!r}" for name in names if name in text]
    assert found == []
