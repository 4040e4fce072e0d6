"""``specscope demo``: analyse, compare and report the bundled example exports; no GPU, no nsys.

The examples (``examples/exports/``) are the bs 1 cell of the H200 campaign (context 8192,
index_kpool 4, 30 steps), one repetition per variant, each ``xz``-compressed byte for byte. The
demo compares the **graph-mode** exports (``bs1-graph-*``, recorded by ``specscope profile`` on
2026-12-01; their ``manifest.json`` under ``examples/manifests/`` holds the sha256 of each
decompressed export): gaps and idle are only right in graph mode, and the eager copy kernels are
counted there too. The node-mode exports of the campaign (``bs1-node-*``, whose sha256 is in
``examples/results.sqlite``) stay beside them for the kernels inside the graphs (node mode
inflates launch calls, so its gaps are not compared). They are decompressed into a temporary folder,
analysed with the ``eagle`` preset (first step dropped, as in the campaign), every variant is
compared with the first, and a ``specscope report`` folder is written.

If no example export is found (a checkout without ``examples/``), the two real H200 fixtures
under ``tests/data/`` are used instead and the output says so.
"""

from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path

from specscope.analysis.compare import Comparison, compare_runs
from specscope.analysis.compressed import xz_copy
from specscope.analysis.inputs import ResolvedInput
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import DEFAULT_PRESET, load_preset
from specscope.checksum import sha256_file
from specscope.errors import SpecscopeError

REPO = Path(__file__).resolve().parents[2]
VARIANTS = ("ordinary", "kpool_fused", "draft_alias")  # the first is the baseline
EXAMPLES = tuple((v, f"bs1-graph-{v}.sqlite.xz") for v in VARIANTS)  # what the demo compares
NODE_EXAMPLES = tuple((v, f"bs1-node-{v}.sqlite.xz") for v in VARIANTS)  # graph internals
FALLBACK = (("before", "eagle_node_before.sqlite"), ("after", "eagle_node_after.sqlite"))


@dataclass
class Demo:
    report_html: Path
    comparisons: list[Comparison]
    sources: list[Path]
    fallback: bool


def find_examples(examples: Path | None = None) -> tuple[list[tuple[str, Path]], bool]:
    """The (label, path) of the example exports, and whether they are the test fixtures."""
    folder = Path(examples) if examples is not None else REPO / "examples"
    found = [(label, folder / "exports" / name) for label, name in EXAMPLES]
    if all(p.is_file() for _, p in found):
        return found, False
    if examples is not None:
        missing = ", ".join(str(p) for _, p in found if not p.is_file())
        raise SpecscopeError(f"no example exports in {folder} (missing {missing})")
    data = REPO / "tests" / "data"
    fallback = [(label, data / name) for label, name in FALLBACK]
    if all(p.is_file() for _, p in fallback):
        return fallback, True
    raise SpecscopeError(
        f"no example exports found under {folder} or {data}; run `specscope demo` from a "
        "checkout of the repository, or pass --examples DIR"
    )


def _plain(path: Path, tmp: Path) -> Path:
    """``path`` itself, or its decompressed copy in ``tmp`` for an xz-compressed file."""
    copy = xz_copy(path, tmp)
    if copy is None:
        return path
    return copy.rename(tmp / path.name.removesuffix(".xz"))  # the export's own name


def run_demo(out: Path, examples: Path | None = None) -> Demo:
    """Analyse and compare the examples and write a report folder under ``out``."""
    from specscope.analysis.composition import median_step_view
    from specscope.analysis.explain import report_explanations
    from specscope.reports.report import new_report_dir, write_report

    found, fallback = find_examples(examples)
    spec = load_preset(DEFAULT_PRESET)
    min_steps = 5 if fallback else 20  # the fixtures hold 12 steps, the examples 30
    with tempfile.TemporaryDirectory(prefix="specscope-demo-") as d:
        inputs = []
        for _, path in found:
            plain = _plain(path, Path(d))
            a = dataclasses.replace(analyze(plain, spec, AnalyzeOptions(skip=1)), source=str(path))
            inputs.append(ResolvedInput(str(path), a, path, export_sha256=sha256_file(plain)))
        labels = [label for label, _ in found]
        comparisons = [
            compare_runs(
                [inputs[0].analysis],
                [i.analysis],
                labels=(labels[0], labels[k]),
                min_steps=min_steps,
            )
            for k, i in enumerate(inputs[1:], 1)
        ]
        shown = spec.report  # the preset's gap and highlighted kernels
        views = [median_step_view(i.analysis, shown.gap, highlight=shown.highlight) for i in inputs]
        folder = new_report_dir(Path(out))
        refs = " ".join(str(p) for _, p in found)
        commands = [
            "specscope demo",
            f"# the same by hand (xz -dk the exports first): specscope report {refs} "
            f"--labels {','.join(labels)} --skip 1",
        ]
        explanations, _ = report_explanations([i.analysis for i in inputs], labels, shown.gap)
        write_report(
            folder,
            inputs,
            labels,
            comparisons,
            views,
            gap=shown.gap,
            commands=commands,
            highlight=shown.highlight,
            explanations=explanations,
        )
    return Demo(folder / "report.html", comparisons, [p for _, p in found], fallback)
