"""``specscope report``: the median-step views on hand-computed synthetic steps, the figures and
pages built from synthetic and real exports (valid PNGs 1600 px wide, HTML that references only
files beside it), run-folder and results-DB inputs, new folders per run, one-line errors."""

from __future__ import annotations

import ast
import json
import re
import shutil
import struct
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from eagle_exports import EAGLE_SPEC, build_eagle
from testdata import AFTER, BEFORE, ROOT

from specscope.analysis.composition import (
    COMPOSITION,
    OpCategory,
    gap_timeline,
    median_step_view,
    parse_gap,
    step_composition,
)
from specscope.analysis.inputs import resolve
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import load_preset
from specscope.analysis.store import append_run
from specscope.cli.report import report_cmd
from specscope.errors import SpecError
from specscope.reports.markdown import render
from specscope.reports.report import FILES

GAP = "gap_us:draft_extend.replay->draft.replay"
PNGS = [f for f in FILES if f.endswith(".png")]


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the IHDR chunk; asserts the PNG signature and chunk order."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    assert data[-8:-4] == b"IEND"
    return struct.unpack(">II", data[16:24])


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.refs.append(value)


def check_folder(folder: Path, n_inputs: int) -> str:
    """Every file is there, PNGs are valid and 1600 px wide, the page refers only to them."""
    assert sorted(p.name for p in folder.iterdir()) == sorted(FILES)
    for name in PNGS:
        from PIL import Image

        w, h = png_size(folder / name)
        assert w == 1600, name
        assert 300 <= h <= 1600 + 900 * n_inputs, (name, h)
        with Image.open(folder / name) as im:
            im.verify()
    html = (folder / "report.html").read_text()
    parser = _Refs()
    parser.feed(html)
    assert set(PNGS) <= set(parser.refs)
    for ref in parser.refs:
        assert not re.match(r"^[a-z]+://|^//", ref), f"the page fetches {ref}"
        if not ref.startswith("#"):
            assert (folder / ref).is_file(), f"the page refers to a missing file {ref}"
    assert "<link" not in html and "@import" not in html  # no stylesheets fetched
    return html


def run_report(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(report_cmd, list(args))
    return r.exit_code, r.stdout, r.stderr


def only_folder(out: Path) -> Path:
    (folder,) = out.iterdir()
    return folder


# ---------------------------------------------------------------------------- views


def test_gap_timeline_on_hand_computed_steps(write_export):
    # step k: memcpy [T+700, T+800], draft [T+1500, T+2600], verify [T+3500, T+4500],
    # extend [T+5500, T+6500]; period 10 us. Gap extend(k-1) -> draft(k) = 1500 + 3500 ns.
    a = analyze(write_export(build_eagle(5)), EAGLE_SPEC, AnalyzeOptions(skip=1))
    t = gap_timeline(a, 2, GAP, lead_us=1.0, highlight="fused_metadata_copy")
    assert t.gap_us == pytest.approx(5.0)
    assert t.gap_us == pytest.approx(a.metrics.frame.loc[2, GAP])
    # view: 1 us before extend(1) ends (16 500 ns) to the first start of step 3 (30 700 ns)
    assert (t.start_us, t.end_us) == (-1.0, pytest.approx(14.2))
    ops = t.ops.drop_duplicates("name", keep="first").set_index("name")
    assert ops.loc["extend_k", "start_us"] == pytest.approx(-1.0)  # step 1's, clipped by view
    draft = t.ops[t.ops["name"] == "draft_k"].iloc[0]
    assert (draft["start_us"], draft["category"]) == (pytest.approx(5.0), "graph kernel")
    assert t.ops[t.ops["highlight"]]["name"].unique().tolist() == ["fused_metadata_copy_kernel"]
    memcpy = t.ops[t.ops["category"] == OpCategory.MEMCPY_HTOD.value]
    assert memcpy["start_us"].round(3).tolist() == [4.2]
    chosen = t.gaps[(t.gaps["metric"] == GAP) & (t.gaps["step"] == 2)]
    assert chosen[["start_us", "end_us", "gap_us"]].values.tolist() == [[0.0, 5.0, 5.0]]
    assert t.anchors["name"].tolist() == [
        "draft_extend.replay",
        "draft.replay",
        "verify.replay",
        "draft_extend.replay",
    ]
    assert t.anchors["end_us"].iloc[0] == 0.0


def test_composition_adds_up_to_the_window(write_export):
    a = analyze(write_export(build_eagle(4)), EAGLE_SPEC)
    c = step_composition(a, 1)
    assert list(c.index) == list(COMPOSITION)
    # window [T+700, T+10700]: graph 1.1 + 1.0 + 1.0 us, memcpy 0.1 us, the rest idle
    assert c.to_dict() == pytest.approx(
        {
            "graph_us": 3.1,
            "eager_kernel_us": 0.0,
            "memcpy_us": 0.1,
            "memset_us": 0.0,
            "idle_us": 6.8,
        }
    )
    assert c.sum() == pytest.approx(a.metrics.frame.loc[1, "window_us"])
    assert c["idle_us"] == pytest.approx(a.metrics.frame.loc[1, "idle_us"])


def test_composition_counts_overlaps_once_for_the_first_category(write_export):
    x = build_eagle(2)
    # an eager kernel half under draft_k (graph) and a memcpy under it: graph wins the overlap
    corr = x.api("cudaLaunchKernel", 1200, 1210)
    x.kernel("eager_k", 2400, 2800, corr)
    corr = x.api("cudaMemcpyAsync", 1220, 1230)
    x.memcpy("dtod", 8, 2450, 2550, corr)
    a = analyze(write_export(x), EAGLE_SPEC)
    c = step_composition(a, 0)
    assert c["graph_us"] == pytest.approx(3.1)
    assert c["eager_kernel_us"] == pytest.approx(0.2)  # [2600, 2800]
    assert c["memcpy_us"] == pytest.approx(0.1)  # the htod copy; the dtod one is under graph
    assert c.sum() == pytest.approx(a.metrics.frame.loc[0, "window_us"])


def test_real_median_step_view_matches_the_metrics():
    a = analyze(BEFORE, load_preset("eagle"), AnalyzeOptions(skip=1))
    v = median_step_view(a, GAP, highlight="fused_metadata_copy")
    assert a.metrics.frame[GAP].rank(method="first")[v.step] == 6  # lower middle of 11
    assert v.timeline.gap_us == pytest.approx(a.metrics.frame.loc[v.step, GAP])
    for g in v.timeline.gaps.itertuples():
        if g.step in a.metrics.frame.index:
            assert g.gap_us == pytest.approx(a.metrics.frame.loc[g.step, g.metric])
    assert v.composition.sum() == pytest.approx(a.metrics.frame.loc[v.step, "window_us"])
    assert v.composition["idle_us"] == pytest.approx(a.metrics.frame.loc[v.step, "idle_us"])
    assert v.timeline.ops["highlight"].sum() == 4  # four fused_metadata_copy kernels
    ops = v.operations
    assert ops["count"].sum() == 19 + 7 + 60  # memcpys, eager kernels, graph kernels
    assert set(ops["category"]) <= {c.value for c in OpCategory}


@pytest.mark.parametrize("bad", ["idle_us", "gap_us:a", "gap_us:->b", "cpu_gap_us:a->b"])
def test_parse_gap_refuses_non_gaps(bad):
    with pytest.raises(SpecError):
        parse_gap(bad)


def test_median_step_view_names_the_gaps_it_has():
    a = analyze(BEFORE, load_preset("eagle"), AnalyzeOptions(skip=1))
    with pytest.raises(SpecError, match="gaps of this run: gap_us:"):
        median_step_view(a, "gap_us:draft.replay->nothing")


# ---------------------------------------------------------------------------- the command


@pytest.fixture(scope="module")
def real_report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("real")
    code, stdout, stderr = run_report(
        str(BEFORE), str(AFTER), "--skip", "1", "--min-steps", "5", "--labels", "main,fused",
        "--out", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    folder = only_folder(out)
    assert stdout.strip() == str(folder / "report.html")
    assert re.fullmatch(r"\d{8}-\d{6}-report", folder.name)
    return folder


def test_real_report_folder(real_report):
    html = check_folder(real_report, 2)
    assert "specscope report: main vs fused" in html
    assert 'class="comparison' in html
    for verdict in ("improved", "no change"):
        assert f">{verdict}</span>" in html
    assert "fused_metadata_copy_kernel" in html  # kernel tables
    assert "specscope report " in html and "--skip 1 --min-steps 5" in html  # reproduce
    assert "7221cb898c19a420be26c63fd9b877132283923d257460ecd335612532471346" in html


def test_real_summary_md_is_the_compare_table_plus_provenance(real_report):
    from specscope.analysis.compare import compare_runs

    options = AnalyzeOptions(skip=1)
    runs = [resolve(p, load_preset("eagle"), options).analysis for p in (BEFORE, AFTER)]
    c = compare_runs([runs[0]], [runs[1]], labels=("main", "fused"), min_steps=5)
    md = (real_report / "summary.md").read_text()
    assert render([c]) in md
    assert md.count("- sha256: `") == 2
    assert "- median step: `11 (by gap_us:draft_extend.replay->draft.replay)`" in md


# The page's names for the gaps between the eagle preset's anchors, written out by hand.
GAP_LABELS = {
    "gap_us:draft_extend.replay->draft.replay": "Gap: draft-extend → draft",
    "gap_us:draft.replay->verify.replay": "Gap: draft → verify",
    "gap_us:verify.replay->draft_extend.replay": "Gap: verify → draft-extend",
}


class _ComparisonRows(HTMLParser):
    """``rows[metric]`` = the cell texts of the comparison table's row for `metric` (its id is
    the first cell's title): label, unit, before, n, after, n, change, change %, CI, verdict."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self._row: list[str] | None = None
        self._metric = ""

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self._row, self._metric = [], ""
        elif tag == "td" and self._row is not None:
            self._metric = self._metric or (dict(attrs).get("title") or "")
            self._row.append("")

    def handle_data(self, data):
        if self._row:
            self._row[-1] += data

    def handle_endtag(self, tag):
        if tag == "tr" and self._row and self._metric:
            self.rows[self._metric] = [cell.strip() for cell in self._row]
        if tag == "tr":
            self._row = None


def numbers(text: str) -> list[str]:
    """The numbers in a cell, in order ("−71.2 %" -> ["-71.2"]; "208 µs [198, 232]" -> 3)."""
    return re.findall(r"[-+]?\d+(?:\.\d+)?", text.replace("\u2212", "-"))


def shows(text: str, values: list[float]) -> bool:
    """`text` holds exactly `values`, each rounded to the digits it is shown with."""
    shown = numbers(text)
    if len(shown) != len(values):
        return False
    for s, v in zip(shown, values, strict=True):
        decimals = len(s.partition(".")[2])
        if abs(float(s) - v) > 0.5 * 10**-decimals * (1 + 1e-9):
            return False
    return True


def test_real_report_shows_the_library_numbers(real_report):
    """The medians, spreads and changes on the page and in summary.md are the ones the library
    computes for the two exports (to the digits shown), under the right labels."""
    runs = [analyze(p, load_preset("eagle"), AnalyzeOptions(skip=1)) for p in (BEFORE, AFTER)]
    html = (real_report / "report.html").read_text()
    parser = _ComparisonRows()
    parser.feed(html)
    rows = parser.rows
    assert set(rows) == set(runs[0].summary.index)  # one row per metric
    shown_gaps = {m: row[0] for m, row in rows.items() if m.startswith("gap_us:")}
    assert shown_gaps == GAP_LABELS
    assert "Median step chosen by <b>draft-extend → draft</b>" in html
    for metric in [*GAP_LABELS, "idle_us", "window_us", "eager_memcpy", "cpu_step_us"]:
        before, after = (a.summary.loc[metric, ["p50", "p10", "p90"]].tolist() for a in runs)
        row = rows[metric]
        assert shows(row[2], before) and shows(row[4], after), (metric, row)
        assert row[3] == row[5] == "11"
        assert shows(row[6], [after[0] - before[0]]), (metric, row)
        assert shows(row[7], [100 * (after[0] / before[0] - 1)]), (metric, row)
    md = (real_report / "summary.md").read_text()
    md_rows = {  # the PR table's names, without the capture-mode tag of gap/idle/count rows
        line.split(" | ")[0][2:].removesuffix(" [node]"): line
        for line in md.splitlines()
        if line.startswith("| ")
    }
    label_of = {row[0]: m for m, row in rows.items()}
    pr_metrics = [label_of[label] for label in md_rows if label in label_of]
    assert pr_metrics == [  # the PR table's rows, by the page's label for each metric
        "gap_us:draft_extend.replay->draft.replay",
        "gap_us:draft.replay->verify.replay",
        "idle_us",
        "kernels:fused_metadata_copy",
        "eager_memcpy",
    ]
    for metric in pr_metrics:
        before, after = (a.summary.loc[metric, "p50"] for a in runs)
        cells = md_rows[rows[metric][0]].strip("| ").split(" | ")
        assert shows(cells[1], [before]) and shows(cells[2], [after]), (metric, cells)
    version = runs[0].trace.nsys_version
    assert version == runs[1].trace.nsys_version == "2025.3.2.0"
    meta = f'<p class="meta">GPU NVIDIA H200 · nsys {version} · capture mode node · '
    assert meta in html
    assert f"\nGPU NVIDIA H200 · nsys {version} · capture mode node · " in md
    assert md.count(f"- nsys: `{version}`") == 2


def test_synthetic_report_three_inputs(eagle_export, tmp_path):
    paths = [str(eagle_export(6, period=p)) for p in (10_000, 12_000, 9_000)]
    out = tmp_path / "out"
    code, _, stderr = run_report(*paths, "--out", str(out), "--min-steps", "3", "--highlight", "")
    assert code == 0, stderr
    folder = only_folder(out)
    html = check_folder(folder, 3)
    assert html.count('class="comparison') == 2  # Before -> After 1, Before -> After 2
    assert "Before vs After 1 vs After 2" in html


def test_outputs_never_overwrite(real_report):
    import datetime as dt

    from specscope.reports.report import new_report_dir

    out = real_report.parent
    now = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    first, second = new_report_dir(out, now), new_report_dir(out, now)
    assert (first.name, second.name) == ("20250102-030405-report", "20250102-030405-report-2")
    assert sorted(p.name for p in real_report.iterdir()) == sorted(FILES)  # untouched


def test_run_folder_and_results_db_inputs(tmp_path):
    run_dir = tmp_path / "20250101-000000-after"
    run_dir.mkdir()
    shutil.copy(AFTER, run_dir / "report.sqlite")
    manifest = {
        "command": ["python3", "loop.py", "--fused"],
        "label": "after",
        "status": "ok",
        "git": {"commit": "abc1234", "dirty": False},
        "outputs": {"report.sqlite": {"bytes": 1, "sha256": "x"}},
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    a = analyze(BEFORE, load_preset("eagle"), AnalyzeOptions(skip=1))
    db = tmp_path / "results.sqlite"
    append_run(db, a)
    out = tmp_path / "out"
    code, _, stderr = run_report(
        str(db), str(run_dir), "--skip", "1", "--min-steps", "5", "--out", str(out)
    )
    assert code == 0, stderr
    assert "results-database run; no timeline" in stderr
    folder = only_folder(out)
    html = check_folder(folder, 2)
    assert "python3 loop.py --fused" in html  # the manifest and the profiled command
    assert "&#34;label&#34;: &#34;after&#34;" in html or '"label": "after"' in html
    assert "a results-database run keeps only per-step metrics" in html
    md = (folder / "summary.md").read_text()
    assert "- commit: `abc1234`" in md and "- run folder: `" in md


def test_a_report_of_exports_without_cuda(tmp_path):
    """Two exports of NVTX ranges recorded on a CPU (no CUDA activity): the report is written,
    its PR table and distributions of host metrics (the GPU's would be n/a in every row), each
    input said to have no GPU work, no story of a gap."""
    data = ROOT / "tests" / "data"
    inputs = [data / "cpu_eagle_2023.sqlite", data / "cpu_eagle_startend_2023.sqlite"]
    r = CliRunner().invoke(report_cmd, [*map(str, inputs), "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    for path in inputs:
        assert f"{path}: no GPU work in the export (recorded without -t cuda?)" in r.output
    (folder,) = tmp_path.iterdir()
    md = (folder / "summary.md").read_text()
    table = md.split("\n\n")[1]
    assert "| Host time per step |" in table and "| Host gap: draft → verify |" in table
    assert "GPU idle" not in table and "n/a | n/a" not in table
    html = (folder / "report.html").read_text()
    assert "no GPU work: the export has no CUDA activity" in html
    assert "no GPU work in the export (recorded without -t cuda, or on a machine" in r.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["{missing}", "{before}"], "Error:"),
        (["{before}", "{after}", "--gap", "idle_us"], "not a gap metric"),
        (["{before}", "{after}", "--gap", "gap_us:x->y"], "no value of 'gap_us:x->y'"),
        (["{before}", "{after}", "--labels", "a"], "--labels needs 2"),
        (["{before}"], "at least two inputs"),
        (["{before}", "{dir}"], "without manifest.json"),
        (["{before}", "{after}", "--preset", "eagle", "--step", "step"], "not both"),
    ],
)
def test_bad_input_is_one_error_line(tmp_path, args, message):
    subs = {
        "missing": str(tmp_path / "nope.sqlite"),
        "before": str(BEFORE),
        "after": str(AFTER),
        "dir": str(tmp_path),
    }
    out = tmp_path / "out"
    code, _, stderr = run_report(*[a.format(**subs) for a in args], "--out", str(out))
    assert code == 2
    assert message in stderr
    assert "Traceback" not in stderr
    assert [line for line in stderr.splitlines() if line.startswith("Error:")] == [
        next(line for line in stderr.splitlines() if message in line)
    ]
    assert not out.exists()  # nothing written before the inputs are good


def test_reports_only_render():
    """reports/ imports no loader, step finding, metrics computation or analyze()."""
    forbidden = {
        "specscope.analysis.loader",
        "specscope.analysis.steps",
        "specscope.analysis.run",
        "specscope.analysis.summary",
        "specscope.analysis.inputs",
    }
    reports = ROOT / "specscope" / "reports"
    for path in reports.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in forbidden:
                if path.name == "report.py" and node.module == "specscope.analysis.inputs":
                    continue  # the ResolvedInput type, for annotations
                pytest.fail(f"{path.name} imports {node.module}")


def test_a_failed_report_leaves_no_folder(tmp_path):
    from specscope.reports.report import report_folder

    with pytest.raises(RuntimeError):
        with report_folder(tmp_path) as out_dir:
            (out_dir / "timeline.png").write_bytes(b"half")
            raise RuntimeError("figure failed")
    assert list(tmp_path.iterdir()) == []


def test_a_prestarted_helper_draws_the_figures(tmp_path, monkeypatch):
    """With an idle CPU the figures are drawn by the helper forked before the analysis (the
    timeline in it, the distributions in its own child), and the folder is complete."""
    import os

    from specscope.reports import figures, parallel, timeline

    monkeypatch.setattr(parallel, "idle_cpu", lambda: True)
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 2)
    monkeypatch.setattr(parallel, "can_fork", lambda: hasattr(os, "fork"))
    pids = tmp_path / "pids"
    pids.mkdir()

    def spy(real):
        def draw(*args, **kw):
            (pids / f"{real.__name__} {os.getpid()}").touch()
            return real(*args, **kw)

        return draw

    monkeypatch.setattr(timeline, "timeline_figure", spy(timeline.timeline_figure))
    monkeypatch.setattr(figures, "distributions_figure", spy(figures.distributions_figure))
    out = tmp_path / "out"
    code, _, stderr = run_report(str(BEFORE), str(AFTER), "--skip", "1", "--out", str(out))
    assert code == 0, stderr
    check_folder(only_folder(out), 2)
    drawn = dict(p.name.split() for p in pids.iterdir())
    assert set(drawn) == {"timeline_figure", "distributions_figure"}
    assert str(os.getpid()) not in drawn.values()
    if hasattr(os, "fork"):
        assert drawn["timeline_figure"] != drawn["distributions_figure"]
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # no child left behind


def test_bad_input_with_a_helper_is_one_error_line(tmp_path, monkeypatch):
    import os

    from specscope.reports import parallel

    monkeypatch.setattr(parallel, "idle_cpu", lambda: True)
    monkeypatch.setattr(parallel, "usable_cpus", lambda: 2)
    monkeypatch.setattr(parallel, "can_fork", lambda: hasattr(os, "fork"))
    out = tmp_path / "out"
    code, _, stderr = run_report(str(BEFORE), str(tmp_path / "nope.sqlite"), "--out", str(out))
    assert code == 2 and stderr.startswith("Error:") and "Traceback" not in stderr
    assert not out.exists()
    with pytest.raises(ChildProcessError):
        os.waitpid(-1, os.WNOHANG)  # the helper was killed and reaped


def test_names_the_font_lacks_are_drawn_without_a_warning_per_glyph(tmp_path):
    """NVTX ranges and kernels named in CJK, Cyrillic and emoji: the report is written and its
    stderr holds no matplotlib warning for each glyph the figures' font lacks (39 lines)."""
    import subprocess
    import sys

    from specscope.analysis.synthetic import SyntheticExport

    x, t = SyntheticExport(), 0
    for _ in range(30):
        with x.nvtx("步骤 🚀", t, t + 9_000):
            with x.nvtx("准备 ✨", t + 100, t + 2_000):
                c = x.api("cudaLaunchKernel", t + 200, t + 300)
            x.kernel("核函数_κ", t + 400, t + 1_400, c)
            with x.nvtx("回放 🔁", t + 3_000, t + 5_000):
                c = x.api("cudaLaunchKernel", t + 3_100, t + 3_200)
            x.kernel("ядро", t + 3_300, t + 4_800, c)
        t += 10_000
    path = str(x.write(tmp_path / "named.sqlite"))
    spec = ["--step", "步骤 🚀", "--anchors", "准备 ✨,回放 🔁", "--out", str(tmp_path / "out")]
    r = subprocess.run([sys.executable, "-m", "specscope", "report", path, path, *spec],
                       capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "Glyph" not in r.stderr and "UserWarning" not in r.stderr
    (folder,) = (tmp_path / "out").iterdir()
    assert "准备 ✨" in (folder / "report.html").read_text()
