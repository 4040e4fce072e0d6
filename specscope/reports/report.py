"""``specscope report``'s output folder: figures, ``summary.md`` and ``report.html``; renders only.

:func:`new_report_dir` makes ``OUT/<YYYYmmdd-HHMMSS>-report`` (never an existing folder);
:func:`write_report` fills it from what the analysis returned: the inputs
(:class:`specscope.analysis.inputs.ResolvedInput`), the comparisons of the first input against
each later one (:class:`specscope.analysis.compare.Comparison`) and each input's median step
(:class:`specscope.analysis.composition.MedianStep`, None for a results-database run).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from specscope.analysis.compare import Comparison, Level
from specscope.analysis.composition import MedianStep
from specscope.analysis.inputs import ResolvedInput
from specscope.reports import html, markdown
from specscope.reports.drawing import PNGS, FigureJob, draw_all, draw_figures
from specscope.reports.prestart import Helper
from specscope.reports.style import Stamp, pretty_gap

FILES = (*PNGS, "summary.md", "report.html")


def new_report_dir(out: Path, now: dt.datetime | None = None) -> Path:
    """Create ``out/<YYYYmmdd-HHMMSS>-report`` (``-2``, ``-3``... if taken) and return it."""
    from specscope.profiler.profile import new_run_dir

    return new_run_dir(out, "report", now)


@contextlib.contextmanager
def report_folder(out: Path, now: dt.datetime | None = None) -> Iterator[Path]:
    """:func:`new_report_dir`, removed again if the block fails: a report is written whole or
    not at all (no half-written folder is left under ``out``)."""
    out_dir = new_report_dir(out, now)
    try:
        yield out_dir
    except BaseException:
        shutil.rmtree(out_dir, ignore_errors=True)
        raise


def input_facts(i: ResolvedInput, label: str, view: MedianStep | None) -> list[tuple[str, str]]:
    """Provenance of one input as (name, value) pairs, for summary.md and the page."""
    r = i.analysis
    facts = [("input", i.ref)]
    if i.run_dir is not None:
        facts.append(("run folder", str(i.run_dir)))
    if i.export is not None:
        facts.append(("export", str(i.export)))
    if i.sha256:
        facts.append(("sha256", i.sha256))
    if r.from_database:
        facts.append(("source", f"{r.source} (results database: per-step metrics only)"))
    facts += [
        ("steps", f"{r.n_steps} (after skipping {r.skipped} warm-up)"),
        ("GPU", r.gpu or "unknown"),
        ("nsys", r.nsys_version),
        ("capture mode", r.capture_mode),
    ]
    if r.spec:
        spec = {k: ", ".join(v) if isinstance(v, list) else v for k, v in r.spec.items()}
        facts.append(("step spec", "; ".join(f"{k}: {v}" for k, v in spec.items() if v)))
    if r.commit:
        facts.append(("commit", r.commit))
    if r.batch_size is not None:
        facts.append(("batch size", str(r.batch_size)))
    if i.manifest:
        m = i.manifest
        if m.get("command"):
            cmd = m["command"]
            facts.append(("profiled command", " ".join(cmd) if isinstance(cmd, list) else cmd))
        for key in ("label", "started_at", "status"):
            if m.get(key):
                facts.append((key, str(m[key])))
    if view is not None:
        facts.append(("median step", f"{view.step} (by {view.gap})"))
    return facts


def summary_markdown(
    comparisons: Sequence[Comparison],
    inputs: Sequence[ResolvedInput],
    labels: Sequence[str],
    views: Sequence[MedianStep | None],
    explanations: Sequence[str] = (),
) -> str:
    """[C]'s PR table and provenance line, why the gap changed (``specscope explain``'s text
    for each comparison), then every input's provenance."""
    md = markdown
    lines = [f"# specscope report: {md.md_text(html.page_title(labels))}", ""]
    lines.append(md.render(comparisons))
    if explanations:
        lines += ["## Why (specscope explain)", ""]
        lines += [f"```\n{text}\n```\n" for text in explanations]
    lines += ["## Inputs", ""]
    for i, label, view in zip(inputs, labels, views, strict=True):
        lines.append(f"### {md.md_text(label)}")
        lines.append("")
        lines += [f"- {k}: {md.md_code(v)}" for k, v in input_facts(i, label, view)]
        lines += [f"- note: {md.md_text(n)}" for n in i.analysis.notes]
        lines.append("")
    return "\n".join(lines)


def _warnings(comparisons: Sequence[Comparison]) -> list[str]:
    seen = []
    for c in comparisons:
        for check in c.checks:
            if check.level is Level.WARNING and check.message not in seen:
                seen.append(check.message)
    for c in comparisons:
        bad = [m for m, v in c.metrics["verdict"].items() if v.value == "inconclusive"]
        if bad:
            msg = (
                f"{len(bad)} metric(s) inconclusive in {c.labels[0]} → {c.labels[1]}: too few steps"
            )
            if msg not in seen:
                seen.append(msg)
    return seen


def figure_stamp(inputs: Sequence[ResolvedInput], labels: Sequence[str]) -> Stamp:
    """Each input's capture mode, GPU and nsys version, for the foot of every figure."""
    runs = [i.analysis for i in inputs]
    return Stamp(
        inputs=tuple(
            f"{label}: {r.capture_mode} mode, {r.gpu or 'GPU unknown'}, nsys {r.nsys_version}"
            for r, label in zip(runs, labels, strict=True)
        ),
        node=tuple(
            label for r, label in zip(runs, labels, strict=True) if r.capture_mode == "node"
        ),
    )


def _figure_list(gap: str, highlight: str | None) -> list[dict[str, str]]:
    """The page's figures in order: id, file, alt text and caption (which names `gap`)."""
    gap_name = pretty_gap(gap)
    opener = gap.partition(":")[2].partition("->")[0]
    return [
        {
            "id": "timeline",
            "file": "timeline.png",
            "alt": "timeline of the median step of each input",
            "caption": f"The median step of each input by {gap_name}, aligned at the end of "
            f"{opener}'s GPU work (x = 0), one lane per stream; shaded: anchors' GPU extents; "
            "arrows: gaps by name in µs; below: the launching thread's NVTX phases and CUDA API "
            "calls, dashed lines from each launch call to the GPU work it started"
            + (f"; marked: kernels matching /{highlight}/." if highlight else "."),
        },
        {
            "id": "distributions",
            "file": "distributions.png",
            "alt": "per-step distributions of the gaps, idle and eager memcpys",
            "caption": "Per-step values of each input: gaps, GPU idle per step, eager memcpys.",
        },
        {
            "id": "steps",
            "file": "steps.png",
            "alt": "gaps and idle over the step number",
            "caption": "Gaps and GPU idle over the step number: stability and warm-up effects.",
        },
        {
            "id": "composition",
            "file": "composition.png",
            "alt": "composition of the median step",
            "caption": "The median step's GPU window split into graph-kernel, eager-kernel, "
            "memcpy and memset busy time and idle (each instant counted once).",
        },
    ]


def _kernel_tables(
    inputs: Sequence[ResolvedInput], labels: Sequence[str], views: Sequence[MedianStep | None]
) -> list[dict]:
    """One table of the median step's operations per input (empty for a results-DB run and
    an export without CUDA activity, each saying why)."""
    return [
        {
            "label": label,
            "step": None if view is None else view.step,
            "rows": [] if view is None else html.operation_rows(view.operations),
            "missing": "no GPU work: the export has no CUDA activity (recorded without -t cuda?)"
            if i.analysis.without_cuda
            else "no operations: a results-database run keeps only per-step metrics",
        }
        for i, label, view in zip(inputs, labels, views, strict=True)
    ]


def _page_context(
    inputs: Sequence[ResolvedInput],
    labels: Sequence[str],
    comparisons: Sequence[Comparison],
    views: Sequence[MedianStep | None],
    gap: str,
    highlight: str | None,
    commands: Sequence[str],
    now: dt.datetime,
) -> dict:
    """Everything ``report.html``'s template reads (see `html.render_html`)."""
    return {
        "title": html.page_title(labels),
        "provenance": markdown.provenance(comparisons),
        "gap_name": pretty_gap(gap),
        **_stamp(now),
        "warnings": _warnings(comparisons),
        "comparisons": [
            {
                "before_label": c.labels[0],
                "after_label": c.labels[1],
                "rows": html.comparison_rows(c),
            }
            for c in comparisons
        ],
        "figures": _figure_list(gap, highlight),
        "kernel_tables": _kernel_tables(inputs, labels, views),
        "kernel_diffs": [
            {
                "before_label": c.labels[0],
                "after_label": c.labels[1],
                "rows": html.kernel_diff_rows(c),
            }
            for c in comparisons
            if c.kernels is not None
        ],
        "inputs": [
            {
                "label": label,
                "facts": input_facts(i, label, view),
                "notes": i.analysis.notes,
                "manifest": html.manifest_text(i.manifest),
            }
            for i, label, view in zip(inputs, labels, views, strict=True)
        ],
        "commands": list(commands),
    }


def write_report(
    out_dir: Path,
    inputs: Sequence[ResolvedInput],
    labels: Sequence[str],
    comparisons: Sequence[Comparison],
    views: Sequence[MedianStep | None],
    *,
    gap: str,
    highlight: str | None = None,
    commands: Sequence[str] = (),
    now: dt.datetime | None = None,
    explanations: Sequence[str] = (),
    helper: Helper | None = None,
    deferred: list[FigureJob] | None = None,
) -> dict[str, Path]:
    """Write :data:`FILES` into ``out_dir`` (an existing, empty folder); return their paths.
    ``explanations``: texts of :mod:`specscope.analysis.explain`, shown as they are;
    ``helper``: of :func:`specscope.reports.drawing.drawing_helper`, which draws the figures
    meanwhile if it can (else they are drawn here); ``deferred``: where the figures' job is put
    instead, for the caller to draw (:func:`specscope.reports.drawing.draw_all`)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    paths = {name: out_dir / name for name in FILES}
    stamp_ = figure_stamp(inputs, labels)
    frames = [i.analysis.frame for i in inputs]
    no_cuda = [i.analysis.without_cuda for i in inputs]
    job = FigureJob({n: paths[n] for n in PNGS}, frames, labels, views, highlight, stamp_, no_cuda)
    if deferred is not None:
        deferred.append(job)
    drawn = deferred is None and helper is not None
    drawn = drawn and helper.submit(functools.partial(draw_figures, job, warm=True))
    try:
        paths["summary.md"].write_text(
            summary_markdown(comparisons, inputs, labels, views, explanations)
        )
        context = _page_context(inputs, labels, comparisons, views, gap, highlight, commands, now)
        context["explanations"] = list(explanations)
        paths["report.html"].write_text(html.render_html(context))
    finally:
        drawn = drawn and helper.wait()  # the figures are in place (or not) before leaving
    if deferred is None and not drawn:
        draw_figures(job)
    return paths


def _stamp(now: dt.datetime) -> dict[str, str]:
    """When and by which specscope a page was generated (both templates' ``generated`` and
    ``version``)."""
    return {"generated": now.strftime("%Y-%m-%d %H:%M:%S UTC"), "version": html.package_version()}


def write_rank_reports(out_dir: Path, ranks: Sequence[dict]) -> None:
    """A per-rank report in ``out_dir`` (an existing, empty folder): rank ``i``'s in ``rank{i}``
    (``ranks``: the keyword arguments of :func:`write_report` for each, but the folder) and
    the index over them (:func:`write_rank_index`); every rank's figures drawn with one split
    (:func:`specscope.reports.drawing.draw_all`: one child, not one per rank)."""
    jobs: list[FigureJob] = []
    for i, one in enumerate(ranks):
        (out_dir / f"rank{i}").mkdir()
        write_report(out_dir / f"rank{i}", **one, deferred=jobs)
    draw_all(jobs)
    write_rank_index(
        out_dir, [(f"rank{i}", r["labels"], r["comparisons"]) for i, r in enumerate(ranks)]
    )


def write_rank_index(
    out_dir: Path,
    ranks: Sequence[tuple[str, Sequence[str], Sequence[Comparison]]],
    now: dt.datetime | None = None,
) -> dict[str, Path]:
    """The top of a per-rank report: ``index.html`` (each rank's PR rows, linking its
    ``report.html``) and ``summary.md`` (each rank's PR table). ``ranks``: per rank, its
    subfolder's name, its inputs' names and its comparisons."""
    now = now or dt.datetime.now(dt.timezone.utc)
    lines = ["# specscope report per rank", ""]
    page = []
    for folder, names, comparisons in ranks:
        title = html.page_title(names)
        lines += [
            f"## {folder}: {markdown.md_text(title)}",
            "",
            f"[report]({folder}/report.html)",
            "",
        ]
        lines.append(markdown.render(comparisons))
        page.append(
            {
                "folder": folder,
                "title": title,
                "comparisons": [
                    {
                        "title": f"{c.labels[0]} → {c.labels[1]}",
                        "before_label": c.labels[0],
                        "after_label": c.labels[1],
                        "rows": [r for r in html.comparison_rows(c) if r["pr"]],
                    }
                    for c in comparisons
                ],
            }
        )
    context = {
        "title": " | ".join(html.page_title(names) for _, names, _ in ranks),
        **_stamp(now),
        "ranks": page,
    }
    paths = {"index.html": out_dir / "index.html", "summary.md": out_dir / "summary.md"}
    paths["summary.md"].write_text("\n".join(lines))
    paths["index.html"].write_text(html.render_html(context, "index.html"))
    return paths
