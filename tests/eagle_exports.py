"""The EAGLE-shaped synthetic export used by the analysis tests (imported as ``eagle_exports``).

Kept out of ``conftest.py``: two conftest modules exist (here and under ``tests/kernels``), so
``from conftest import ...`` would depend on which one pytest imported first.

``write_export(x)`` writes a :class:`SyntheticExport` to a fresh file in the test's tmp dir;
``eagle_export(...)`` builds the EAGLE-shaped loop below, whose numbers the tests compute by hand.

Step k of ``eagle_export`` (times in ns, T = k * period; every launch inside the step thread)::

    CPU  |-- step [T, T+9000] ------------------------------------------------------|
            memcpy   |- draft.replay -|    |- verify.replay -|   |- draft_extend.replay -|
            api@500  [1000, 2000]           [3000, 4000]          [5000, 6000]
                     launch@1100            launch@3100           launch@5100
    GPU        [700,800] htod 64 B
                           [1500,2500] draft_k  [3500,4500] verify_k  [5500,6500] extend_k
                           [2500,2600] fused_metadata_copy_kernel

Node mode: the anchor kernels are graph nodes (one graphNodeId each); graph mode: each replay is
one CUPTI_ACTIVITY_KIND_GRAPH_TRACE row over the same extent (``[1500, 2600]`` for draft).
"""

from __future__ import annotations

from specscope.analysis.spec import StepSpec
from specscope.analysis.synthetic import SyntheticExport

EAGLE_ANCHORS = ("draft.replay", "verify.replay", "draft_extend.replay")
EAGLE_SPEC = StepSpec("step", EAGLE_ANCHORS, "specscope", ("fused_metadata_copy",))
# (anchor, its CPU range offset, launch offset, [(kernel, start, end), ...]) within a step.
_EAGLE_LAYOUT = (
    (
        "draft.replay",
        1000,
        1100,
        [("draft_k", 1500, 2500), ("fused_metadata_copy_kernel", 2500, 2600)],
    ),
    ("verify.replay", 3000, 3100, [("verify_k", 3500, 4500)]),
    ("draft_extend.replay", 5000, 5100, [("extend_k", 5500, 6500)]),
)


def build_eagle(
    n_steps: int = 3,
    *,
    mode: str = "node",
    period: int = 10_000,
    domain: str | None = "specscope",
    x: SyntheticExport | None = None,
    pid: int | None = None,
    tid: int | None = None,
    device: int = 0,
    t0: int = 0,
    **range_kw,
) -> SyntheticExport:
    """Add ``n_steps`` EAGLE steps (layout in the module doc) to ``x`` (a new export if None).

    ``range_kw`` (``style``, ``text_style``) goes to every NVTX range.
    """
    x = x or SyntheticExport()
    who = {"pid": pid, "tid": tid}
    for k in range(n_steps):
        t = t0 + k * period
        x.range("step", t, t + 9000, domain=domain, **who, **range_kw)
        corr = x.api("cudaMemcpyAsync", t + 500, t + 550, version="_v3020", **who)
        x.memcpy("htod", 64, t + 700, t + 800, corr, device=device, pid=pid)
        for node, (anchor, cpu, launch, kernels) in enumerate(_EAGLE_LAYOUT):
            x.range(anchor, t + cpu, t + cpu + 1000, domain=domain, **who, **range_kw)
            corr = x.api("cudaGraphLaunch", t + launch, t + launch + 50, version="_v10000", **who)
            if mode == "graph":
                start, end = kernels[0][1], kernels[-1][2]
                x.graph_replay(t + start, t + end, corr, graph_id=node + 1, device=device, pid=pid)
            else:
                for i, (name, start, end) in enumerate(kernels):
                    x.kernel(
                        name, t + start, t + end, corr, graph_node=10 * node + i + 1, device=device,
                        pid=pid,
                    )  # fmt: skip
    return x
