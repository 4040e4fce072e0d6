"""The timeline answers "where did the gap go": the host lane's data on a hand-computed
synthetic step, the fixed ``--span`` window, gap labels by name that never overlap (boxes from
matplotlib's renderer), one colour per anchor, the provenance stamp and node-mode warning, and
"no operations stored" for a results-database input."""

from __future__ import annotations

import dataclasses
import itertools

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from eagle_exports import EAGLE_SPEC, build_eagle
from testdata import AFTER, DATA

from specscope.analysis.composition import gap_timeline, median_step_view
from specscope.analysis.run import AnalyzeOptions, analyze
from specscope.analysis.spec import load_preset
from specscope.cli.report import report_cmd
from specscope.reports.style import ANCHOR_COLOURS, Stamp, pretty_gap, rc
from specscope.reports.timeline import NO_GPU_WORK, NO_OPERATIONS, timeline_axes

GAP = "gap_us:draft_extend.replay->draft.replay"
GRAPHS = DATA / "graphs"
KPOOL, ALIAS = GRAPHS / "run_graph_kpool_nvtx.sqlite", GRAPHS / "run_graph_alias_nvtx.sqlite"


def test_host_lane_on_hand_computed_steps(write_export):
    # graph mode, step 2: t = 0 at extend(1)'s end (16 500 ns); window [-1, 5] us.
    a = analyze(write_export(build_eagle(5, mode="graph")), EAGLE_SPEC, AnalyzeOptions(skip=1))
    t = gap_timeline(a, 2, GAP, lead_us=1.0, span_us=6.0)
    assert (t.start_us, t.end_us, t.span_us) == (-1.0, pytest.approx(5.0), 6.0)
    h = t.host
    phases = h.phases.sort_values(["start_us", "depth"])
    assert phases[["name", "depth"]].values.tolist() == [
        ["step", 0],  # step 1: [10 000, 19 000]
        ["draft_extend.replay", 1],  # [15 000, 16 000]
        ["step", 0],  # step 2 from 20 000
        ["draft.replay", 1],  # from 21 000
    ]
    assert phases["start_us"].tolist() == pytest.approx([-6.5, -1.5, 3.5, 4.5])
    # extend(1)'s launch call [15 100, 15 150] ends before the window; step 2's memcpy call
    # [20 500, 20 550] and draft's cudaGraphLaunch [21 100, 21 150] are in it
    assert h.calls[["name", "start_us"]].values.tolist() == [
        ["cudaMemcpyAsync", pytest.approx(4.0)],
        ["cudaGraphLaunch", pytest.approx(4.6)],
    ]
    links = h.links[["anchor", "step", "call", "call_start_us", "gpu_start_us"]]
    assert links.values.tolist() == [
        ["draft.replay", 2, "cudaGraphLaunch", pytest.approx(4.6), pytest.approx(5.0)]
    ]
    assert h.tid is not None
    # every operation knows its launch call: the htod copy of step 2 was issued at 4.0 us
    memcpy = t.ops[t.ops["category"] == "memcpy HtoD"]
    assert memcpy["launch_us"].tolist() == pytest.approx([4.0])


def _views(paths, **kw):
    runs = [analyze(p, load_preset("eagle"), AnalyzeOptions(skip=1)) for p in paths]
    return [median_step_view(a, GAP, **kw) for a in runs]


def _texts(fig) -> list:
    """Every visible text the figure draws outside tick labels and the legend."""
    out = [t for t in fig.texts if t.get_text()]  # the suptitle and the stamp among them
    for ax in fig.axes:
        out += [t for t in ax.texts if t.get_text() and t.get_visible()]
        out += [ax.title] if ax.get_title(loc="left") else []
    return out


@pytest.mark.parametrize("span", [400.0, None])
def test_labels_never_overlap_and_every_gap_is_named(span):
    views = _views([KPOOL, ALIAS, AFTER], span_us=span, lead_us=40.0)
    with plt.rc_context(rc()):
        fig, axes = timeline_axes(views, ["kpool", "alias", "node"], stamp_=Stamp(("x",)))
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        texts = _texts(fig)
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
        for (a, ba), (b, bb) in itertools.combinations(boxes, 2):
            assert not ba.overlaps(bb), f"{a!r} overlaps {b!r}"
        for ax, v in zip(axes, views, strict=True):
            lo, hi = ax.get_xlim()
            shown = {t.get_text() for t in ax.texts}
            crowded = next((t for t in shown if t.startswith("also in view")), "")
            for g in v.timeline.gaps.itertuples():
                if min(g.end_us, hi) > max(g.start_us, lo):
                    value = f"{g.gap_us:.1f} µs"
                    named = f"{pretty_gap(g.metric)}: {value}" in shown or value in shown
                    assert named or f"{pretty_gap(g.metric)} {value}" in crowded, g
        plt.close(fig)


def test_span_is_the_same_window_for_every_input():
    views = _views([KPOOL, ALIAS], span_us=400.0, lead_us=40.0)
    assert {(v.timeline.start_us, v.timeline.end_us) for v in views} == {(-40.0, 360.0)}
    with plt.rc_context(rc()):
        fig, axes = timeline_axes(views, ["a", "b"])
        assert {ax.get_xlim() for ax in axes} == {(-40.0, 360.0)}
        assert "400 µs from 40 µs before the end of draft_extend.replay" in fig._suptitle.get_text()
        plt.close(fig)


def test_one_colour_per_anchor_in_every_panel():
    views = _views([DATA / "eagle_node_before.sqlite", AFTER])
    with plt.rc_context(rc()):
        fig, axes = timeline_axes(views, ["a", "b"])
        colour_of: dict[str, set] = {}
        for ax, v in zip(axes, views, strict=True):
            spans = [p for p in ax.patches if p.get_zorder() == 0]  # the anchor shading
            assert len(spans) == len(v.timeline.anchors)
            for name, patch in zip(v.timeline.anchors["name"], spans, strict=True):
                colour_of.setdefault(name, set()).add(patch.get_facecolor()[:3])
        plt.close(fig)
    assert len(colour_of) == 3
    assert all(len(c) == 1 for c in colour_of.values()), colour_of
    assert len({next(iter(c)) for c in colour_of.values()}) == 3
    assert len(ANCHOR_COLOURS) >= 3


def test_host_lane_links_the_anchor_launches():
    (v,) = _views([AFTER])
    links = v.timeline.host.links
    assert set(links["anchor"]) == {"draft.replay", "verify.replay", "draft_extend.replay"}
    assert (links["gpu_start_us"] > links["call_start_us"]).all()  # launched before it ran
    assert set(links["call"]) == {"cudaGraphLaunch"}
    with plt.rc_context(rc()):
        fig, (ax,) = timeline_axes([v], ["after"])
        ticks = [t.get_text() for t in ax.get_yticklabels()]
        assert "host NVTX" in ticks and any(t.startswith("API tid ") for t in ticks)
        assert any("cudaGraphLaunch → " in t.get_text() for t in ax.texts)
        plt.close(fig)


def test_results_db_input_says_no_operations_stored():
    (v,) = _views([KPOOL])
    with plt.rc_context(rc()):
        fig, axes = timeline_axes([None, v], ["db", "after"])
        assert not axes[0].axison  # no empty 0-1 µs axis
        assert [t.get_text() for t in axes[0].texts] == [NO_OPERATIONS.format("db")]
        assert "no operations stored" in NO_OPERATIONS
        assert axes[1].get_xlim()[1] > 100  # the other input keeps its own scale
        plt.close(fig)


def test_export_without_cuda_says_no_gpu_work():
    (v,) = _views([KPOOL])
    with plt.rc_context(rc()):
        fig, axes = timeline_axes([None, v], ["cpu", "after"], no_cuda=[True, False])
        assert [t.get_text() for t in axes[0].texts] == [NO_GPU_WORK.format("cpu")]
        plt.close(fig)


def test_streams_past_max_lanes_share_the_bottom_lane(monkeypatch):
    """Past MAX_LANES streams, the busiest MAX_LANES - 1 keep a lane each and the others share
    the bottom one, labelled with their count; every operation is still drawn."""
    from specscope.reports import timeline

    (v,) = _views([AFTER])
    ops = v.timeline.ops.assign(stream_id=100 + np.arange(len(v.timeline.ops)) % 5)
    v = dataclasses.replace(v, timeline=dataclasses.replace(v.timeline, ops=ops))
    busy = ops.groupby("stream_id")["dur_us"].sum().sort_values(ascending=False, kind="stable")
    monkeypatch.setattr(timeline, "MAX_LANES", 3)
    with plt.rc_context(rc()):
        fig, (ax,) = timeline_axes([v], ["after"])
        ticks = [t.get_text() for t in ax.get_yticklabels()]
        kept = sorted(busy.index[:2])  # (top to bottom: the kept streams in order, the others)
        assert ticks[:3] == [f"stream {kept[0]}", f"stream {kept[1]}", "3 others"]
        assert sum(len(c.get_paths()) for c in ax.collections) >= len(ops)  # (every bar)
        plt.close(fig)


def _report(tmp_path, *args):
    out = tmp_path / "out"
    r = CliRunner().invoke(report_cmd, [*map(str, args), "--out", str(out)])
    assert r.exit_code == 0, r.stderr
    (folder,) = out.iterdir()
    return folder


def test_report_span_stamps_every_figure(tmp_path, monkeypatch):
    from specscope.reports import style

    stamped = []
    real = style.stamp

    def spy(fig, s, height, *, gaps=True):
        stamped.append((s, gaps))
        real(fig, s, height, gaps=gaps)

    monkeypatch.setattr("specscope.reports.timeline.stamp", spy)
    monkeypatch.setattr("specscope.reports.figures.stamp", spy)
    # every figure drawn in this process, where the spy sees it (not two in a forked child)
    monkeypatch.setattr("specscope.reports.parallel.can_fork", lambda: False)
    before = DATA / "eagle_node_before.sqlite"
    _report(tmp_path, before, AFTER, "--skip", "1", "--min-steps", "5", "--span", "400")
    assert len(stamped) == 4  # timeline, distributions, steps, composition
    s = stamped[0][0]
    assert s.inputs == (
        "Before: node mode, NVIDIA H200, nsys 2025.3.2.0",
        "After: node mode, NVIDIA H200, nsys 2025.3.2.0",
    )
    assert s.node == ("Before", "After")
    assert [gaps for _, gaps in stamped] == [True] * 4  # all four show gaps or idle


def test_node_warning_only_with_node_inputs():
    views = _views([KPOOL])
    with plt.rc_context(rc()):
        for node, warned in (((), False), (("b",), True)):
            fig, _ = timeline_axes(views, ["b"], stamp_=Stamp(("b: x",), node))
            texts = [t.get_text() for t in fig.texts]
            assert any("node-mode capture (b)" in t and "22" in t for t in texts) is warned
            assert "b: x" in texts
            plt.close(fig)


@pytest.mark.parametrize("bad", ["0", "-5"])
def test_span_must_be_positive(tmp_path, bad):
    r = CliRunner().invoke(report_cmd, [str(KPOOL), str(ALIAS), "--span", bad])
    assert r.exit_code == 2


def test_gap_panels_take_their_anchor_colour_in_every_figure(tmp_path, monkeypatch):
    """A gap's panel title in the distributions and steps figures has the colour its closing
    anchor has in the timeline (one colour per anchor in every figure)."""
    from specscope.reports import figures
    from specscope.reports.style import ANCHOR_LINES, anchor_colours

    frame = pd.DataFrame(
        {"gap_us:a->b": [1.0, 2.0], "gap_us:b->c": [3.0, 4.0], "idle_us": [5.0, 6.0]},
        index=pd.Index([0, 1], name="step"),
    )
    order = ["c", "b"]  # the timeline's order: c drawn first
    titles = {}
    real_save = figures.save_png

    def keep_titles(fig, path):
        titles.update({ax.get_title(): ax.title.get_color() for ax in fig.axes if ax.get_title()})
        return real_save(fig, path)

    monkeypatch.setattr(figures, "save_png", keep_titles)
    figures.distributions_figure([frame], ["x"], tmp_path / "d.png", anchors=order)
    colours = anchor_colours(order)
    by_title = {t: c for t, c in titles.items() if "→" in t or "->" in t}
    assert sorted(by_title.values()) == sorted(
        [ANCHOR_LINES[colours["b"]], ANCHOR_LINES[colours["c"]]]
    )


@pytest.mark.parametrize(
    "name, launch",
    [("cudaLaunchKernel", True), ("cudaLaunchKernelExC", True), ("cuLaunchKernelEx", True),
     ("cudaGraphLaunch", True), ("cuGraphLaunch", True), ("cudaMemcpyAsync", False),
     ("cudaStreamSynchronize", False), ("cuKernelGetName", False)],
)  # fmt: skip
def test_every_launch_call_is_drawn_as_one(name: str, launch: bool) -> None:
    """Launch calls of the driver API (cuBLASLt's and Triton's ``cuLaunchKernelEx``, JAX's
    ``cuGraphLaunch``) and ``cudaLaunchKernelExC`` are drawn as launch calls too."""
    from specscope.reports.timeline import _call_colour

    assert (_call_colour(name) == "#333333") == launch
