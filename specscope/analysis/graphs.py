"""The CUDA graphs of an export: what was launched, the repeating launch cycles, graph roles.

Pure functions over :attr:`Trace.graph_launches` and :attr:`Trace.graph_creations`, per
launching thread (process and thread of the ``cudaGraphLaunch`` call).

**Graph id**: the export's ``graphId`` in graph mode; in node mode the graph the executable was
instantiated from (see :attr:`Trace.graph_launches`), the same number for both modes of one
program, since ids count up per process in creation order.

**Cycles** (:func:`find_cycles`): the thread's launch sequence (graph ids by launch call start),
cut greedily from the front into runs ``[ids] x repetitions``: at each position the period
that holds each graph once (it ends before the next launch of the position's graph; up to
``max_period`` launches), if it repeats at least ``min_repetitions`` times; launches in no such
run are left out. A cycle therefore starts with
the graph launched first in its run::

    launches  19 7 31 19 7 31 19 7 31 22 10 34 22 10 34
    cycles    [19, 7, 31] x 3          [22, 10, 34] x 2

**Roles** (:func:`graph_roles`): when the batch moves between batch-size buckets the ids change
but the cycle's shape does not. The graphs at the same position of cycles of the main cycle's
length are one role, positions counted from each cycle's earliest-created graph (so a cycle
that was cut at another rotation still lines up). Roles are numbered in capture order: role 1
holds the graph created first. SGLang captures every bucket of the target (verify) graphs, then
the draft ones, then the draft-extend ones: verify is role 1, draft 2, draft-extend 3, whatever
order they are launched in. Without creation events, roles follow launch order.

**Lone buckets** (:func:`with_lone_buckets`): a bucket the batch visits once, between two
others, is in no cycle (a cycle repeats), so its graphs would be in no role, and their replays
would join the step before them. A run of launches of graphs in no role joins the roles when
it lies between whole cycles (after a launch of the main cycle's last position or at the
start, before one of its first position or at the end), its length is a multiple of the main
cycle's, and the graph at each position has a median GPU time within :data:`LONE_SPREAD` times
the graphs of the role at that position (buckets of the same model, not another kind of
graph); a graph is taken only where every run it is launched in is
(``scripts/real/bucket_graphs.py`` visits the batch size 2 once in 60 steps).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from specscope.analysis.loader import Trace


@dataclass(frozen=True)
class Cycle:
    """``ids`` (in launch order) launched ``repetitions`` times in a row from launch ``first``."""

    ids: tuple[int, ...]
    repetitions: int
    first: int

    def __str__(self) -> str:
        return f"[{', '.join(map(str, self.ids))}] \u00d7 {self.repetitions}"


@dataclass(frozen=True)
class Role:
    """Graphs that play one part across buckets: ``number`` in capture order, ``position`` in
    the main cycle's launch order (0-based), ``graph_ids`` in launch order of first use."""

    number: int
    position: int
    graph_ids: tuple[int, ...]


@dataclass
class ThreadGraphs:
    """The CUDA graphs one thread launched: ``graphs`` (one row per graph id), its cycles and
    roles, and an ``--anchors`` line that makes one step of each cycle."""

    pid: int
    tid: int
    graphs: pd.DataFrame
    cycles: list[Cycle]
    roles: list[Role]
    anchors: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "pid": self.pid,
            "tid": self.tid,
            "graphs": [
                {
                    k: None if pd.isna(v) else (v.item() if hasattr(v, "item") else v)
                    for k, v in row.items()
                }
                for row in self.graphs.reset_index().to_dict("records")
            ],  # fmt: skip
            "cycles": [
                {"ids": list(c.ids), "repetitions": c.repetitions, "first_launch": c.first}
                for c in self.cycles
            ],
            "roles": [
                {"role": r.number, "position": r.position, "graph_ids": list(r.graph_ids)}
                for r in self.roles
            ],
            "anchors": self.anchors,
        }


def _next_same(seq: np.ndarray) -> np.ndarray:
    """For each position, the distance to the next launch of the same graph (0: none)."""
    n = len(seq)
    order = np.lexsort((np.arange(n), seq))  # by graph, then position
    out = np.zeros(n, dtype=np.int64)
    same = seq[order[1:]] == seq[order[:-1]]
    out[order[:-1][same]] = order[1:][same] - order[:-1][same]
    return out


def _run_lengths(x: np.ndarray) -> np.ndarray:
    """For each position, how many positions from it on hold the same value in a row."""
    n = len(x)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
    ends = np.r_[starts[1:], n]
    run_end = np.repeat(ends, ends - starts)
    return run_end - np.arange(n)


def find_cycles(seq: list[int], *, max_period: int = 1024, min_repetitions: int = 2) -> list[Cycle]:
    """The repeating runs of the launch sequence ``seq`` (see the module doc).

    A period holds each graph once, so the only period that can start at position ``i`` is
    ``p``, the distance to the next launch of ``seq[i]``; ``seq[i:i+p]`` repeats ``r`` times
    exactly when the next ``(r-1)p`` positions each see their graph again ``p`` launches
    later. One candidate per position, so the search is linear in the launches whatever
    ``max_period`` (long cycles too: vLLM's piecewise graphs launch dozens per step)."""
    ids = np.asarray(seq, dtype=np.int64)
    nxt = _next_same(ids)
    same_run = _run_lengths(nxt)  # positions in a row whose next launch is as far
    reps = np.where(nxt > 0, same_run // np.maximum(nxt, 1) + 1, 0)
    ok = (nxt > 0) & (nxt <= max_period) & (reps >= min_repetitions)
    starts = np.flatnonzero(ok)
    cycles: list[Cycle] = []
    i = 0
    while (k := int(np.searchsorted(starts, i))) < len(starts):
        i = int(starts[k])
        period, r = int(nxt[i]), int(reps[i])
        cycles.append(Cycle(tuple(seq[i : i + period]), r, i))
        i += r * period
    return cycles


def main_cycle(cycles: list[Cycle]) -> Cycle | None:
    """The cycle length covering the most launches; of that length, the longest run."""
    if not cycles:
        return None
    per_len: dict[int, int] = {}
    for c in cycles:
        per_len[len(c.ids)] = per_len.get(len(c.ids), 0) + len(c.ids) * c.repetitions
    length = max(per_len, key=lambda k: (per_len[k], -k))
    return max((c for c in cycles if len(c.ids) == length), key=lambda c: c.repetitions)


def graph_roles(cycles: list[Cycle], created: dict[int, int]) -> list[Role]:
    """Roles of the graphs of ``cycles`` (see the module doc); ``created``: id -> time."""
    main = main_cycle(cycles)
    if main is None:
        return []
    n = len(main.ids)
    inf = np.iinfo(np.int64).max

    def canonical(ids: tuple[int, ...]) -> int:  # offset of the earliest-created graph
        return min(range(n), key=lambda k: (created.get(ids[k], inf), k))

    shift = canonical(main.ids)
    members: list[list[int]] = [[] for _ in range(n)]
    for c in cycles:
        if len(c.ids) != n:
            continue
        offset = canonical(c.ids)
        for k in range(n):  # position k of main (launch order) <- same canonical position
            gid = c.ids[(offset + k - shift) % n]
            if gid not in members[k]:
                members[k].append(gid)
    order = sorted(range(n), key=lambda k: (min(created.get(g, inf) for g in members[k]), k))
    number = {k: i + 1 for i, k in enumerate(order)}
    return [Role(number[k], k, tuple(members[k])) for k in range(n)]


LONE_SPREAD = 2.0
"""How far a lone bucket's median GPU time may lie from the role's graphs' (below their
shortest / LONE_SPREAD, above their longest x LONE_SPREAD: another kind of graph)."""


def with_lone_buckets(roles: list[Role], seq: list[int], gpu_us: pd.Series) -> list[Role]:
    """``roles`` with the lone buckets of the launch sequence ``seq`` (module doc); ``gpu_us``:
    median GPU µs per launch by graph id."""
    if not roles or not seq:
        return roles
    spans = {}  # position -> the GPU µs a lone graph there may take
    for r in roles:
        times = [t for g in r.graph_ids if np.isfinite(t := float(gpu_us.get(g, np.nan)))]
        if not times:
            return roles
        spans[r.position] = (min(times) / LONE_SPREAD, max(times) * LONE_SPREAD)
    at = {g: r.position for r in roles for g in r.graph_ids}
    lone = _lone_positions(_runs_in_no_role(seq, at, spans, gpu_us), len(roles))
    if not lone:
        return roles
    first = {int(g): i for i, g in reversed(list(enumerate(seq)))}
    out = []
    for r in roles:  # (a role's own graphs as they were, then its lone ones by first launch)
        mine = sorted((g for g, k in lone.items() if k == r.position), key=first.__getitem__)
        out.append(Role(r.number, r.position, (*r.graph_ids, *mine)))
    return out


def _runs_in_no_role(
    seq: list[int], at: dict[int, int], spans: dict, gpu_us: pd.Series
) -> list[tuple[list[int], bool]]:
    """The runs of launches in ``seq`` of graphs in no role (``at``: graph -> position), each
    with whether it fits (module doc: whole cycles between whole cycles, each graph at the GPU
    time of its position's ``spans``)."""
    n = len(spans)
    ids = np.asarray(seq, dtype=np.int64)
    member = np.r_[1, np.isin(ids, np.fromiter(at, dtype=np.int64)).astype(np.int8), 1]
    edge = np.diff(member)  # -1: a run of graphs in no role starts, 1: it ends (a Python
    runs = []  # step per run, not per launch: an export launches graphs by the 100 000)
    for i, j in zip(np.flatnonzero(edge == -1), np.flatnonzero(edge == 1), strict=True):
        i, j = int(i), int(j)
        whole = (i == 0 or at[seq[i - 1]] == n - 1) and (j == len(seq) or at[seq[j]] == 0)
        fits = whole and (j - i) % n == 0
        for k, g in enumerate(seq[i:j]):
            lo, hi = spans[k % n]
            fits = fits and lo <= float(gpu_us.get(g, np.nan)) <= hi
        runs.append((seq[i:j], fits))
    return runs


def _lone_positions(runs: list[tuple[list[int], bool]], n: int) -> dict[int, int]:
    """Lone graph -> its position: the graphs of the ``runs`` that fit, where every run of a
    graph fits and puts it at one position (a run with a refused graph is refused whole, until
    nothing changes)."""
    fits = [f for _, f in runs]
    while True:
        refused = {g for (run, _), f in zip(runs, fits, strict=True) if not f for g in run}
        taken: dict[int, int] = {}
        for (run, _), f in zip(runs, fits, strict=True):
            for k, g in enumerate(run if f else ()):
                if taken.setdefault(g, k % n) != k % n:
                    refused.add(g)  # (at two positions)
        again = [f and refused.isdisjoint(run) for (run, _), f in zip(runs, fits, strict=True)]
        if again == fits:
            return taken
        fits = again


def anchors_line(roles: list[Role]) -> str | None:
    """An ``--anchors`` value naming each role ``roleN`` (capture order), in launch order."""
    if not roles:
        return None
    ids = ",".join(f"role{r.number}=graph:{'|'.join(map(str, r.graph_ids))}" for r in roles)
    return ids


def per_graph(launches: pd.DataFrame, created: dict[int, int]) -> pd.DataFrame:
    """One row per graph id of one thread: launches, GPU µs per launch (mean, p50), kernels
    per launch (node mode; NaN in graph mode), creation time (ns) and capture rank (1: created
    first among the thread's launched graphs)."""
    dur = (launches["end_ns"] - launches["start_ns"]) / 1e3
    kernels = launches["kernels"].where(launches["kernels"] >= 0)
    frame = (
        launches.assign(gpu_us=dur, kernels=kernels)
        .groupby("graph_id")
        .agg(
            launches=("gpu_us", "size"),
            gpu_us_mean=("gpu_us", "mean"),
            gpu_us_p50=("gpu_us", "median"),
            kernels_per_launch=("kernels", "mean"),
            first_launch_ns=("api_start_ns", "min"),
        )
    )
    frame["created_ns"] = [created.get(int(g)) for g in frame.index]
    frame["capture_rank"] = frame["created_ns"].rank(method="min").astype("Int64")
    return frame.sort_values("first_launch_ns", kind="stable").drop(columns="first_launch_ns")


def thread_graphs(trace: Trace) -> list[ThreadGraphs]:
    """Per launching (process, thread), in order: its graphs, cycles, roles and anchors line."""
    launches = trace.graph_launches
    creations = trace.graph_creations
    out = []
    for (pid, tid), rows in launches.groupby(["pid", "tid"], sort=True):
        rows = rows.sort_values("api_start_ns", kind="stable")
        mine = creations[creations["pid"] == pid]
        created = dict(
            zip(mine["graph_id"].astype(int), mine["created_ns"].astype(int), strict=True)
        )
        seq = rows["graph_id"].astype(int).tolist()
        cycles = find_cycles(seq)
        graphs = per_graph(rows, created)
        roles = with_lone_buckets(graph_roles(cycles, created), seq, graphs["gpu_us_p50"])
        line = anchors_line(roles)
        out.append(ThreadGraphs(int(pid), int(tid), graphs, cycles, roles, line))
    return out
