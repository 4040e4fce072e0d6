"""Plain words for one gap: what filled it, who waited for whom, and what changed.

:func:`explain_gap` takes a live analysis and a gap ``gap_us:A->B`` and tells the median step
by that gap (the step the reports draw, :func:`~specscope.analysis.summary.median_step`):

- the four numbers of :mod:`specscope.analysis.gaps` (busy, idle, host lag, launch latency)
  and who the gap waited for (:func:`bound`: GPU-, work- or host-bound; work-bound: B,
  launched after A ended, queued behind GPU work issued before it);
- the **GPU work inside the gap** ``[a, b]`` (a: last end of A's work, b: first start of B's),
  per kernel name, memcpy direction (``memcpy HtoD``), ``memset`` or graph replay: count and
  µs inside the gap (operations sticking out of it count only their part inside);
- when the host was late (``host_lag_us`` > 0), **where the host was** during the lag
  ``[a, L)`` (L: start of B's launch call) on the thread that launched B: the NVTX ranges
  open then (other than the step range), with the µs of the lag each covers, the CUDA API
  calls that started then, per name with count and µs, and where nsys traced the OS runtime
  (``-t osrt``) the OS calls that thread was in during the lag (waits on a lock, a condition,
  a socket: per name, the µs of the lag each covers)::

      CPU  launching thread  |-- draft.prepare ---------------------------|[launch B]
                                 cudaMemcpyAsync x5  cudaLaunchKernel x4
      GPU  ..[ A ]      [copy][k]                                                 [ B ..
                  ^ a                                            L ^              ^ b
                  |<----------------- host lag (phases, calls) ------>|<-latency->|

- what the numbers cannot tell (:func:`caveats`).

:func:`explain_change` sets two such explanations side by side: the medians over steps of
each number before and after, and the work and host items of the two median steps by name.
:func:`story_text` and :func:`change_text` put them in words; ``to_json`` gives the same
as data.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from specscope.analysis.composition import gap_without_values, overlapping, parse_gap
from specscope.analysis.coverage import union_coverage
from specscope.analysis.gaps import anchor_extents
from specscope.analysis.run import Analysis
from specscope.analysis.summary import median_step
from specscope.analysis.validate import LOST_WORK_SAID
from specscope.errors import SpecError

NUMBERS = ("gap_us", "gap_busy_us", "gap_idle_us", "host_lag_us", "launch_latency_us")
_COPY = {"htod": "HtoD", "dtoh": "DtoH", "dtod": "DtoD", "other": "other", "unified": "unified"}


@dataclass
class Item:
    """One line of a breakdown: a kernel, copy kind, NVTX phase or API call; ``us`` its time."""

    name: str
    count: int
    us: float


@dataclass
class GapStory:
    """One step's gap ``gap`` (module doc); ``numbers``: :data:`NUMBERS` of that step,
    ``medians``: the same over all steps; ``launch_call``: the name of B's launch call."""

    source: str
    capture_mode: str
    gap: str
    step: int
    numbers: dict[str, float]
    medians: dict[str, float]
    work: list[Item] = field(default_factory=list)
    phases: list[Item] = field(default_factory=list)
    api_calls: list[Item] = field(default_factory=list)
    os_calls: list[Item] = field(default_factory=list)
    launch_call: str | None = None
    queued_us: float = math.nan  # GPU busy from B's launch call to B's start (:func:`bound`)
    thread_has_nvtx: bool = False
    os_traced: bool = False  # the export has the OS runtime calls (OSRT_API)
    caveats: list[str] = field(default_factory=list)

    @property
    def pair(self) -> tuple[str, str]:
        return parse_gap(self.gap)

    def to_json(self) -> dict:
        data = asdict(self)
        data["numbers"] = {k: _num(v) for k, v in self.numbers.items()}
        data["medians"] = {k: _num(v) for k, v in self.medians.items()}
        data["queued_us"] = _num(self.queued_us)
        data["bound"] = bound(self.numbers, self.queued_us)
        data["text"] = story_text(self)
        return data


def _num(x: float) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), 3)


def bound(numbers: dict[str, float], queued_us: float = math.nan) -> str:
    """Who the gap waited for, from one step's :data:`NUMBERS` and ``queued_us``, the GPU's
    busy time from B's launch call L to B's start b (work issued before B, B queued behind it):

    - ``gpu``: B was issued before A's work ended (``host_lag_us`` <= 0; the gap is launch
      latency and queueing);
    - ``work``: B was issued after A's work ended, but then waited behind work issued before
      it for longer than the GPU waited for the host and longer than the GPU idled after the
      call: ``queued_us`` > the GPU's idle before the call (``host_lag_us - (gap_busy_us -
      queued_us)``) and > its idle after (``launch_latency_us - queued_us``);
    - ``host``: else, the GPU idled waiting for the host to issue B (or, where most of the
      launch latency passed with the GPU idle, for the launch itself: the text gives it);
    - ``unknown`` without B's launch call.

    Without ``queued_us`` (NaN) a step issued after A's work ended is ``host``."""
    lag = numbers["host_lag_us"]
    if math.isnan(lag):
        return "unknown"
    if lag <= 0:
        return "gpu"
    idle_before = lag - (numbers["gap_busy_us"] - queued_us)
    idle_after = numbers["launch_latency_us"] - queued_us
    return "work" if queued_us > max(idle_before, idle_after) else "host"


def normalise_gap(gap: str) -> str:
    """``A->B`` or ``gap_us:A->B`` -> ``gap_us:A->B`` (SpecError for anything else)."""
    metric = gap if gap.startswith("gap_us:") else f"gap_us:{gap}"
    parse_gap(metric)
    return metric


def _metric_names(gap: str) -> dict[str, str]:
    """Per :data:`NUMBERS` entry, its metric name for the pair of ``gap``."""
    pair = gap.partition(":")[2]
    b = parse_gap(gap)[1]
    names = {m: f"{m}:{pair}" for m in NUMBERS}
    names["launch_latency_us"] = f"launch_latency_us:{b}"
    return names


def explain_gap(a: Analysis, gap: str, step: int | None = None) -> GapStory:
    """Explain ``gap`` in ``step`` (default: the median step by the gap) of live analysis
    ``a`` (module doc); SpecError for a detached analysis or a gap without values."""
    gap = normalise_gap(gap)
    if a.steps is None or a.trace is None:
        raise SpecError(f"{a.source}: explain needs an nsys export (a results-database run "
                        "keeps no operations)")  # fmt: skip
    frame = a.metrics.frame
    if gap not in frame or frame[gap].isna().all():
        raise gap_without_values(a.source, a, gap)
    step = median_step(a.metrics, gap) if step is None else step
    names = _metric_names(gap)
    story = GapStory(
        source=a.source,
        capture_mode=a.capture_mode,
        gap=gap,
        step=int(step),
        numbers={k: float(frame.loc[step, m]) for k, m in names.items()},
        medians={k: float(frame[m].median()) for k, m in names.items()},
    )
    _fill_details(story, a)
    # a capture that lost GPU work (an nsys older than the driver): its idle is not to be read
    story.caveats = caveats(story) + [n for n in a.notes if LOST_WORK_SAID in n]
    return story


def _pair_instance(a: Analysis, gap: str, step: int) -> int:
    """Row of ``a.steps.anchors`` of B in the step's first A -> B pair (the metric's)."""
    before, after = parse_gap(gap)
    anchors = a.steps.anchors
    names = anchors["name"].to_numpy(dtype=object)
    steps = anchors["step"].to_numpy()
    for i in range(1, len(anchors)):
        if steps[i] == step and names[i] == after and names[i - 1] == before:
            return i
    raise SpecError(f"step {step} has no {gap}")


def _fill_details(story: GapStory, a: Analysis) -> None:
    """The work in the gap and the host's lag of ``story.step`` (module doc)."""
    i = _pair_instance(a, story.gap, story.step)
    ext = anchor_extents(a.steps, a.trace.launches)
    start, end = ext.loc[i - 1, "last_ns"], ext.loc[i, "first_ns"]
    launch, tid = ext.loc[i, "launch_ns"], int(ext.loc[i, "launch_tid"])
    ops = a.steps.ops
    gap = overlapping(ops, start, end) if end > start else None  # (one pass over the ops)
    story.work = gpu_work(ops, start, end, gap)
    if math.isnan(launch) or tid < 0:
        return
    story.queued_us = busy_within(ops, max(launch, start), end, gap) / 1e3  # (the queue)
    # the thread's calls that started in the gap or at the launch (no frame of every call)
    mine = a.trace.thread_api(
        a.steps.pid, tid, lambda t, _end, _corr: (t == launch) | ((t >= start) & (t < launch))
    )
    call = mine[mine["start_ns"] == launch]
    story.launch_call = str(call["name"].iloc[0]) if len(call) else None
    nvtx = a.trace.nvtx
    thread = nvtx[(nvtx["pid"] == a.steps.pid) & (nvtx["tid"] == tid)]
    story.thread_has_nvtx = not thread.empty
    story.os_traced = a.trace.has("OSRT_API")
    if launch > start:
        story.phases = host_phases(thread, start, launch, skip=a.steps.spec.step)
        story.api_calls = host_calls(mine, start, launch)
        if story.os_traced:
            calls = a.trace.os_calls(a.steps.pid, tid, (start, launch))
            story.os_calls = host_phases(calls, start, launch)


def _items(frame: pd.DataFrame) -> list[Item]:
    """``name, ns`` rows -> Items per name (count, summed µs), largest time first, then by
    name. Summed in ns, whole numbers (exact in any order), then µs: the same Items whatever
    order the export's rows are in (nsys 2025.6 no longer promises one)."""
    if frame.empty:
        return []
    g = frame.groupby("name", sort=True)["ns"].agg(["size", "sum"])
    g = g.sort_values("sum", ascending=False, kind="stable")
    return [Item(str(n), int(c), float(ns) / 1e3) for n, (c, ns) in g.iterrows()]


GRAPH_NODE = " (graph node)"
"""The mark of an operation a graph replay ran (node mode) in a breakdown: not eager work."""


def op_label(kind: str, name: str, copy_kind: str | None, in_graph: bool = False) -> str:
    """How a GPU operation is named in a breakdown: the kernel's name, ``memcpy HtoD``,
    ``memset``, ``graph N replay``; a node of a replay (``in_graph``, node mode) marked
    :data:`GRAPH_NODE` (``nvjet_... (graph node)``), as the replays of one graph overlap the
    gap after another's in a capture whose graphs run on several streams."""
    if kind == "memcpy":
        label = f"memcpy {_COPY.get(copy_kind, 'other')}"
    elif kind == "memset":
        label = "memset"
    elif kind == "graph":
        return name.strip("[]").replace("CUDA graph", "graph") + " replay"
    else:
        label = name
    return label + GRAPH_NODE if in_graph else label


def busy_within(ops: pd.DataFrame, lo: float, hi: float, rows: np.ndarray | None = None) -> float:
    """The time (ns) inside ``[lo, hi]`` covered by the operations ``ops``, overlapping work
    counted once (:func:`.coverage.union_coverage` of those that overlap it alone); 0 where
    ``hi <= lo``. ``rows``: positions among which those lie (a wider window's
    :func:`.composition.overlapping`), else every operation is looked at."""
    if not hi > lo:
        return 0.0
    rows = overlapping(ops, lo, hi) if rows is None else rows
    s = np.maximum(ops["start_ns"].to_numpy()[rows], lo).astype(np.float64)
    e = np.minimum(ops["end_ns"].to_numpy()[rows], hi).astype(np.float64)
    inside = e > s  # (a wider window's operations: those outside [lo, hi] clip to nothing)
    return float(union_coverage(s[inside], e[inside])(np.array([hi]))[0])


def gpu_work(
    ops: pd.DataFrame, start: float, end: float, rows: np.ndarray | None = None
) -> list[Item]:
    """The device's operations inside ``[start, end]`` (ns) by :func:`op_label`: count and
    µs inside the interval. ``rows``: their positions (:func:`.composition.overlapping` of
    the interval) where already known."""
    if math.isnan(start) or math.isnan(end) or end <= start:
        return []
    s, e = ops["start_ns"].to_numpy(), ops["end_ns"].to_numpy()
    # (a chunk at a time: no mask of every operation)
    sel = overlapping(ops, start, end) if rows is None else rows
    o = ops.iloc[sel]
    labels = [
        op_label(k, n, c, g)
        for k, n, c, g in zip(
            o["kind"].astype(str), o["name"].astype(str), o["copy_kind"].astype(object),
            o["in_graph"].to_numpy(), strict=True,
        )
    ]  # fmt: skip
    ns = np.minimum(e[sel], end) - np.maximum(s[sel], start)
    return _items(pd.DataFrame({"name": labels, "ns": ns}))


def host_phases(
    thread_nvtx: pd.DataFrame, start: float, end: float, skip: str | None = None
) -> list[Item]:
    """NVTX ranges (or OS runtime calls) of one thread open during ``[start, end)`` (ns), other
    than ``skip`` (the step range): per name, how many and the µs of the interval they cover."""
    r = thread_nvtx
    sel = (r["end_ns"].to_numpy() > start) & (r["start_ns"].to_numpy() < end)
    r = r[sel & (r["name"].astype(str).to_numpy() != skip)]
    ns = np.minimum(r["end_ns"].to_numpy(), end) - np.maximum(r["start_ns"].to_numpy(), start)
    return _items(pd.DataFrame({"name": r["name"].astype(str).to_numpy(), "ns": ns}))


def host_calls(thread_api: pd.DataFrame, start: float, end: float) -> list[Item]:
    """CUDA API calls of one thread that started in ``[start, end)`` (ns): per name, count
    and summed duration (µs)."""
    t = thread_api["start_ns"].to_numpy()
    c = thread_api[(t >= start) & (t < end)]
    ns = (c["end_ns"] - c["start_ns"]).to_numpy()
    return _items(pd.DataFrame({"name": c["name"].astype(str).to_numpy(), "ns": ns}))


def caveats(story: GapStory) -> list[str]:
    """What the numbers of ``story`` cannot tell."""
    out = []
    if story.capture_mode == "node":
        out.append(
            "node-mode capture (--cuda-graph-trace=node): tracing every graph node slows each "
            "graph launch call, so the gap, host lag and launch latency around replays are "
            "inflated; record with --cuda-graph-trace=graph for these numbers"
        )
    elif story.capture_mode == "graph":
        out.append(
            "graph mode: a replay is one operation, so the kernels inside A's and B's graphs "
            "(and any idle inside them) are invisible here"
        )
    lag = story.numbers["host_lag_us"]
    a, b = story.pair
    if math.isnan(lag):
        out.append(f"{b}'s launch call was not recorded: host lag and launch latency unknown")
    elif lag > 0:
        out.append("the phases say where the host was while the GPU waited, not why it was late")
        if not story.thread_has_nvtx and story.os_traced:
            out.append(
                "no NVTX ranges on the launching thread: only its CUDA API and OS runtime calls "
                "are told"
            )
        elif not story.thread_has_nvtx:
            out.append(
                "no NVTX ranges on the launching thread: only its CUDA API calls are told "
                "(record with -t osrt too to see where it waited in the OS)"
            )
    else:
        out.append(
            f"{b} was issued before {a} ended: its launch latency includes queueing behind "
            "earlier GPU work, so it is not the launch overhead alone"
        )
    return out


# ---------------------------------------------------------------- before / after


@dataclass
class GapChange:
    """Two explanations of one gap (``labels``: the sides' names)."""

    before: GapStory
    after: GapStory
    labels: tuple[str, str] = ("before", "after")

    def to_json(self) -> dict:
        m0, m1 = self.before.medians, self.after.medians
        return {
            "gap": self.before.gap,
            "labels": list(self.labels),
            "medians": {
                k: {"before": _num(m0[k]), "after": _num(m1[k]), "change": _num(m1[k] - m0[k])}
                for k in NUMBERS
            },
            "work": _item_changes(self.before.work, self.after.work),
            "phases": _item_changes(self.before.phases, self.after.phases),
            "api_calls": _item_changes(self.before.api_calls, self.after.api_calls),
            "os_calls": _item_changes(self.before.os_calls, self.after.os_calls),
            "before": self.before.to_json(),
            "after": self.after.to_json(),
            "text": change_text(self),
        }


def explain_change(
    before: Analysis, after: Analysis, gap: str, labels: tuple[str, str] = ("before", "after")
) -> GapChange:
    """:func:`explain_gap` of both sides, by the same gap."""
    return GapChange(explain_gap(before, gap), explain_gap(after, gap), labels)


def _item_changes(before: list[Item], after: list[Item]) -> list[dict]:
    """Per name in either list: count and µs on both sides (0 where absent)."""
    b, a = {i.name: i for i in before}, {i.name: i for i in after}
    zero = Item("", 0, 0.0)
    return [
        {
            "name": n,
            "before_count": b.get(n, zero).count,
            "after_count": a.get(n, zero).count,
            "before_us": round(b.get(n, zero).us, 3),
            "after_us": round(a.get(n, zero).us, 3),
        }
        for n in dict.fromkeys([*b, *a])
    ]


# ---------------------------------------------------------------- words

_SHOWN = 5  # items listed per breakdown; the rest are summed up as "N more"


def _us(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.1f} µs"


def _list(items: list[Item], calls: bool = False) -> str:
    """``4 k 13.6 µs, 15 memcpy HtoD 4.0 µs`` (calls: ``cudaLaunchKernel ×4 20.0 µs``)."""
    words = [
        f"{i.name} ×{i.count} {_us(i.us)}" if calls else f"{i.count} {i.name} {_us(i.us)}"
        for i in items[:_SHOWN]
    ]
    if len(items) > _SHOWN:
        rest = items[_SHOWN:]
        words.append(f"{sum(i.count for i in rest)} more {_us(sum(i.us for i in rest))}")
    return ", ".join(words)


def _who_waited(s: GapStory) -> str:
    a, b = s.pair
    lag, latency = s.numbers["host_lag_us"], s.numbers["launch_latency_us"]
    call = f" ({s.launch_call} to first GPU start)" if s.launch_call else ""
    verdict = bound(s.numbers, s.queued_us)
    if verdict == "unknown":
        return f"{b}'s launch call was not recorded"
    if verdict == "gpu":
        return (
            f"GPU-bound: {b} was launched {-lag:.1f} µs before {a}'s GPU work ended (the host "
            f"was ahead); launch latency {_us(latency)}{call}"
        )
    where = ""
    if s.phases:
        where = "; the host was in " + ", ".join(f"{i.name} {_us(i.us)}" for i in s.phases[:3])
    elif not s.api_calls:
        where = "; the host made no CUDA API call meanwhile"
    told = []
    if s.api_calls:
        total = sum(i.us for i in s.api_calls)
        told.append(f"CUDA API calls {_us(total)} of it: {_list(s.api_calls, calls=True)}")
    if s.os_calls:
        total = sum(i.us for i in s.os_calls)
        told.append(f"in OS runtime calls {_us(total)} of it: {_list(s.os_calls, calls=True)}")
    elif s.os_traced:  # (the thread ran: it did not block in a traced call)
        told.append("no OS runtime call traced on that thread meanwhile")
    calls = f" ({'; '.join(told)})" if told else ""
    if verdict == "work":
        return (
            f"work-bound: {b} was launched {lag:.1f} µs after {a}'s GPU work ended{where}"
            f"{calls}, then queued {_us(s.queued_us)} behind GPU work issued before it; "
            f"launch latency {_us(latency)}{call}"
        )
    return (
        f"host-bound: {b} was launched {lag:.1f} µs after {a}'s GPU work ended{where}{calls}; "
        f"launch latency {_us(latency)}{call}"
    )


def story_text(s: GapStory) -> str:
    """The explanation in words: one paragraph, the medians, then what it cannot tell."""
    a, b = s.pair
    n = s.numbers
    busy = f"{_us(n['gap_busy_us'])}"
    if s.work:
        eager = all(not i.name.endswith((" replay", GRAPH_NODE)) for i in s.work)
        busy = f"{'eager ' if eager else ''}work {busy} ({_list(s.work)})"
    else:
        busy = f"work {busy}"
    lines = [
        f"{a} → {b} {_us(n['gap_us'])} (step {s.step}, the median step by this gap): "
        f"GPU idle {_us(n['gap_idle_us'])}, {busy}; {_who_waited(s)}.",
        "medians over steps: " + _medians(s.medians),
    ]
    lines += [f"cannot tell: {c}" for c in s.caveats]
    return "\n".join(lines)


_SHORT = {"gap_us": "gap", "gap_busy_us": "GPU work", "gap_idle_us": "GPU idle",
          "host_lag_us": "host lag", "launch_latency_us": "launch latency"}  # fmt: skip


def _medians(m: dict[str, float]) -> str:
    return ", ".join(f"{_SHORT[k]} {_us(m[k])}" for k in NUMBERS)


def _arrow(x0: float, x1: float) -> str:
    if math.isnan(x0) or math.isnan(x1):
        return f"{_us(x0)} → {_us(x1)}"
    return f"{x0:.1f} → {x1:.1f} µs ({x1 - x0:+.1f})"


def _changed(rows: list[dict], calls: bool = False) -> str:
    """Items whose count or time changed by at least 0.5 µs, largest change first."""
    moved = [
        r for r in rows
        if r["before_count"] != r["after_count"] or abs(r["after_us"] - r["before_us"]) >= 0.5
    ]  # fmt: skip
    moved.sort(key=lambda r: -abs(r["after_us"] - r["before_us"]))
    words = []
    for r in moved[:_SHOWN]:
        n0, n1 = r["before_count"], r["after_count"]
        counts = "" if n0 == n1 else f" ×{n0} → ×{n1}" if calls else f" {n0} → {n1}"
        words.append(f"{r['name']}{counts} ({r['before_us']:.1f} → {r['after_us']:.1f} µs)")
    return ", ".join(words) or "no change"


def change_text(c: GapChange) -> str:
    """The change in words, then each side's own explanation."""
    a, b = c.before.pair
    m0, m1 = c.before.medians, c.after.medians
    nums = ", ".join(f"{_SHORT[k]} {_arrow(m0[k], m1[k])}" for k in NUMBERS)
    b0, b1 = (bound(x.numbers, x.queued_us) for x in (c.before, c.after))
    host = (
        f"{_changed(_item_changes(c.before.phases, c.after.phases))}; API calls: "
        f"{_changed(_item_changes(c.before.api_calls, c.after.api_calls), calls=True)}"
    )
    if c.before.os_traced or c.after.os_traced:
        host += f"; OS calls: {_changed(_item_changes(c.before.os_calls, c.after.os_calls), True)}"
    lines = [
        f"{a} → {b}, {c.labels[0]} → {c.labels[1]} (medians over steps): {nums}.",
        f"in the gap (median steps): {_changed(_item_changes(c.before.work, c.after.work))}.",
        f"host during the lag (median steps): {host}.",
        f"bound: {b0} → {b1}.",
        "",
        f"{c.labels[0]}: " + story_text(c.before),
        "",
        f"{c.labels[1]}: " + story_text(c.after),
    ]
    return "\n".join(lines)


def report_explanations(
    analyses: list[Analysis], labels: list[str], gap: str, stories: dict | None = None
) -> tuple[list[str], list[str]]:
    """The texts a report shows under "Why": :func:`change_text` of the first input against each
    other (both with operations), and the notes of those that could not be explained (a
    results-database run keeps no operations; a spec without the gap's anchors). ``stories``:
    the :func:`explain_gap` (or the error it raised) of inputs whose operations were shed
    after it, by index."""
    from specscope.errors import SpecscopeError

    made = stories or {}

    def story(i: int) -> GapStory:
        if i not in made:
            return explain_gap(analyses[i], gap)
        if isinstance(made[i], Exception):
            raise made[i]
        return made[i]

    texts, notes = [], []
    for i, (a, label) in enumerate(zip(analyses[1:], labels[1:], strict=True), 1):
        if analyses[0].from_database or a.from_database:
            notes.append(f"no explanation of {labels[0]} → {label}: a results-database run")
            continue
        try:
            texts.append(change_text(GapChange(story(0), story(i), (labels[0], label))))
        except SpecscopeError as e:
            notes.append(f"no explanation of {labels[0]} → {label}: {e}")
    return texts, notes
