"""A repeating eager kernel pattern: the kernel that marks each step of a loop nobody annotated.

nsys's pace recipes take a kernel name launched once per iteration and call each of its launches
the start of one iteration; :func:`find_step_kernel` finds such a kernel itself, so that
``--step kernel:^NAME$`` (:mod:`specscope.analysis.launch_steps`) can cut the loop into steps.

**The rule.** Take one launching thread's eager kernel launches (kernels outside CUDA graphs, by
the start of their launch call) as a sequence of short names. For a name K launched n times, the
n - 1 *periods* are the launches from one K up to (not including) the next. A period *repeats*
when it equals the period before it (the same names in the same order)::

    launches   K a b c  K a b c  K a b c  K a d c  K a d c  K
    periods    |K a b c|K a b c|K a b c|K a d c|K a d c|       5 periods, 3 repeats
                         repeat  repeat           repeat       (a batch-size change between)

K is a **step kernel** when

- its periods repeat at least ``min_periods - 1`` times (so at least ``min_periods`` periods,
  default 3),
- at least ``min_share`` of them repeat (default 0.75: a few irregular iterations, e.g. at a
  batch-size change, are tolerated; a kernel launched at several places of one step has
  periods that differ from the one before and fails here),
- its median period is at least ``min_length`` launches long (default 2: a kernel repeated on
  its own is no loop structure), and
- the periods that repeat or are repeated cover at least ``min_coverage`` of the thread's eager
  kernel launches (default 0.3: the loop is a large part of what the thread does).

Of the step kernels, the one with the **longest median period** wins (a kernel launched once per
layer repeats too, but a step holds many layers), then the one **covering the most launches**,
then the one whose launches follow the **longest host pause** (median time from the previous
kernel launch call's start to its own: a step boundary is where the host does its own work, e.g.
scheduling or a sync), then the one launched first. Names that are also launched inside graphs
(node mode) are never step kernels. Periods are compared by an order-sensitive hash of their
names (two 64-bit sums over the period), so the search is linear in the number of launches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from specscope.analysis.loader import KINDS, Trace
from specscope.analysis.memory import CHUNK_ROWS, dense, few_distinct, increasing, one_valued


@dataclass(frozen=True)
class StepKernel:
    """A kernel launched once per period of a repeating launch sequence on one thread.

    ``period``: median launches per period; ``periods``: periods (launches - 1); ``covered``:
    launches in periods that repeat or are repeated; ``launches``: the thread's eager kernel
    launches; ``pause_us``: the median host pause before the kernel's launches (module doc).
    """

    name: str
    pid: int
    tid: int
    period: int
    periods: int
    covered: int
    launches: int
    pause_us: float

    @property
    def step(self) -> str:
        """The ``--step`` value that makes each launch of this kernel a step."""
        return f"kernel:^{re.escape(self.name)}$"

    def __str__(self) -> str:
        return (
            f"kernel {self.name!r} launched once per ~{self.period} kernel launches, "
            f"{self.periods + 1} times ({self.covered} of {self.launches} launches repeat)"
        )


_SEED = 0x5EC5C0DE  # fixed: the hash weights (and so the result) never change between runs


def _period_hashes(codes: np.ndarray, n_names: int) -> tuple[np.ndarray, np.ndarray]:
    """Prefix sums (length n + 1, uint64, wrapping) for the order-sensitive hash of any slice
    ``[a, b)``: ``(S1[b] - S1[a], S2[b] - S2[a] - a * (S1[b] - S1[a]))``.

    Built in place a chunk at a time, with no temporary of every launch's: ``np.take`` into an
    ``out`` buffers the whole result unless told it need not check the indices (``clip``: the
    codes are in range), and a cumulative sum into its own input copies that input first (20 M
    launches: 290 MB of temporaries)."""
    w = np.random.default_rng(_SEED).integers(1, 2**63, size=n_names, dtype=np.uint64)
    n = len(codes)
    s1, s2 = np.empty(n + 1, dtype=np.uint64), np.empty(n + 1, dtype=np.uint64)
    s1[0] = s2[0] = 0
    carry1 = carry2 = np.uint64(0)
    for lo in range(0, n, CHUNK_ROWS):
        hi = min(lo + CHUNK_ROWS, n)
        w1, w2 = s1[1 + lo : 1 + hi], s2[1 + lo : 1 + hi]
        np.take(w, codes[lo:hi], out=w1, mode="clip")  # each launch's weight
        np.multiply(w1, np.arange(lo, hi, dtype=np.uint64), out=w2)  # ... times its position
        w1[:] = np.cumsum(w1)  # (a chunk's temporary), then the chunks before it added
        w2[:] = np.cumsum(w2)
        w1 += carry1
        w2 += carry2
        carry1, carry2 = w1[-1], w2[-1]
    return s1, s2


def _distinct(names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(names, return_inverse=True)``: the distinct names in order and each
    launch's index among them. Codes of a few hundred kernel names (:func:`_kernel_codes`) by a
    table indexed by code, one pass each way (a sort of 1.9 M launches took 0.23 s)."""
    if names.dtype.kind in "iu" and len(names) and names.min() >= 0:
        span = int(names.max()) + 1
        if dense(span, len(names)):
            uniq = np.flatnonzero(np.bincount(names, minlength=span))
            index = np.zeros(span, dtype=_code_type(len(uniq)))
            index[uniq] = np.arange(len(uniq))
            return uniq.astype(names.dtype, copy=False), index[names]
    uniq, codes = np.unique(names, return_inverse=True)
    return uniq, codes.astype(_code_type(len(uniq)))


def _code_type(n_codes: int) -> np.dtype:
    """The dtype of codes ``0 .. n_codes - 1``: 16 bits for the few hundred kernel names of a
    thread (2 bytes per launch, and sorted by radix: :func:`_by_code`), else 64."""
    return np.dtype(np.uint16 if n_codes <= np.iinfo(np.uint16).max else np.int64)


def _by_code(codes: np.ndarray, n_codes: int) -> np.ndarray:
    """``np.argsort(codes, kind="stable")``, sorting the codes as 16-bit keys where they fit
    (numpy's radix sort: a pass per byte, 3x faster than merging 64-bit ones); int32 where the
    launches are fewer than 2**31 (20 M launches: 80 MB less held through the search)."""
    if n_codes <= np.iinfo(np.uint16).max:
        order = np.argsort(codes.astype(np.uint16, copy=False), kind="stable")
    else:
        order = np.argsort(codes, kind="stable")
    return order.astype(_row_type(len(codes)), copy=False)


def _row_type(n: int) -> np.dtype:
    """The dtype of positions ``0 .. n - 1``: int32 where they fit, else int64."""
    return np.dtype(np.int32 if n < np.iinfo(np.int32).max else np.int64)


def _repeats(pos: np.ndarray, s1: np.ndarray, s2: np.ndarray) -> tuple[int, int, int, float]:
    """(repeats, launches covered, periods, median period length) of the launches ``pos`` of
    one name (module doc). The periods' hashes a chunk at a time: a name launched millions of
    times took 160 MB of them at once."""
    periods = len(pos) - 1
    same = np.zeros(max(periods - 1, 0), dtype=bool)  # period i + 1 equals period i
    last = None  # (length, h1, h2) of the chunk before's last period
    for lo in range(0, periods, CHUNK_ROWS):
        hi = min(lo + CHUNK_ROWS, periods)
        a, b = pos[lo:hi], pos[lo + 1 : hi + 1]
        h1 = s1[b] - s1[a]
        h2 = s2[b] - s2[a] - a.astype(np.uint64) * h1
        length = b - a
        if last is not None:
            same[lo - 1] = last == (length[0], h1[0], h2[0])
        same[lo : hi - 1] = (length[1:] == length[:-1]) & (h1[1:] == h1[:-1]) & (h2[1:] == h2[:-1])
        last = (length[-1], h1[-1], h2[-1])
    part = np.zeros(periods, dtype=bool)  # periods that repeat or are repeated
    part[1:] |= same
    part[:-1] |= same
    length = np.diff(pos)
    return int(same.sum()), int(length[part].sum()), periods, float(np.median(length))


def _pauses(starts: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The host pause before each launch ``pos`` (but the first of all): from the launch
    before's call start to its own, float ns, NaN left out."""
    pos = pos[pos > 0]
    p = starts[pos].astype(np.float64) - starts[pos - 1].astype(np.float64)
    return p[~np.isnan(p)]


def thread_step_kernel(
    names: np.ndarray,
    starts: np.ndarray,
    *,
    excluded: frozenset = frozenset(),
    min_periods: int = 3,
    min_share: float = 0.75,
    min_length: int = 2,
    min_coverage: float = 0.3,
) -> tuple[str, int, int, int, float] | None:
    """The step kernel of one thread's launch sequence (module doc): ``names`` (names, or any
    codes standing for them) and the launch calls' ``starts`` (ns, sorted); ``excluded``: names
    never chosen. Returns (name, period, periods, covered, pause_us) or None."""
    n = len(names)
    if n < min_length * min_periods:
        return None
    uniq, codes = _distinct(names)
    counts = np.bincount(codes, minlength=len(uniq))
    order = _by_code(codes, len(uniq))  # (before the hashes: the sort's temporaries freed)
    s1, s2 = _period_hashes(codes, len(uniq))
    del codes
    bounds = np.r_[0, np.cumsum(counts)]
    best = None
    for c in np.flatnonzero(counts > min_periods):
        if uniq[c] in excluded:
            continue
        pos = order[bounds[c] : bounds[c + 1]]
        repeats, covered, periods, length = _repeats(pos, s1, s2)
        if (
            repeats < min_periods - 1
            or repeats < min_share * (periods - 1)
            or length < min_length
            or covered < min_coverage * n
        ):
            continue
        p = _pauses(starts, pos)
        pause_us = float(np.median(p)) / 1e3 if len(p) else 0.0
        key = (length, covered, pause_us, -int(pos[0]))
        if best is None or key > best[0]:
            best = (key, (uniq[c], round(length), periods, covered, pause_us))
    return None if best is None else best[1]


def find_step_kernel(trace: Trace, pid: int, **thresholds) -> StepKernel | None:
    """The step kernel of process ``pid`` (module doc; ``thresholds``: the keyword arguments of
    :func:`thread_step_kernel`): over its launching threads, the one covering the most
    launches; None when no thread has a repeating pattern.

    Launches are told apart by their demangled name (the short one where an export has none):
    PyTorch launches most of its element-wise kernels under a few short names
    (``vectorized_elementwise_kernel``), so a loop of ``mul`` and ``add`` is one short name
    repeated, but two demangled names alternating. The kernel found is named by its short name
    when no other demangled name of the process's eager launches shares it, else by its
    demangled name."""
    ops = trace.ops
    # numpy masks and row numbers: no filtered copy of the whole ops frame, codes and times of
    # the eager launches only (20 M of them: 1.75 GB of temporaries became 0.9)
    kernel = ops["kind"].array.codes == KINDS.index("kernel")
    mine = np.flatnonzero(kernel & (ops["pid"].to_numpy() == pid))
    del kernel
    eager, api_start, launch_tid, in_graph = _eager_launches(
        trace, mine.astype(_row_type(len(ops)))
    )
    del mine
    excluded = frozenset(np.unique(_kernel_codes(ops, in_graph)).tolist())
    del in_graph
    codes = _kernel_codes(ops, eager)  # codes, not a string per launch
    if len(eager) and one_valued(launch_tid):  # one launching thread
        launch_tid, tids = None, [int(launch_tid[0])]
    else:
        tids = few_distinct(launch_tid)  # (a few launching threads: no sort of every launch's)
        tids = np.unique(launch_tid).tolist() if tids is None else sorted(tids)
    best = None  # (found, tid, launches) of the thread covering most launches
    for tid in tids:
        at = None if len(tids) == 1 else np.flatnonzero(launch_tid == tid)
        starts = api_start if at is None else api_start[at]
        names = codes if at is None else codes[at]
        if not increasing(starts, strict=False):  # (usually in order already: GPU order)
            order = np.argsort(starts, kind="stable")
            starts, names = starts[order], names[order]
        found = thread_step_kernel(names, starts, excluded=excluded, **thresholds)
        del starts, names
        if found is not None and (best is None or found[3] > best[0][3]):
            best = (found, int(tid), len(codes) if at is None else len(at))
    if best is None:
        return None
    (code, period, periods, covered, pause_us), tid, launches = best
    name = _kernel_name(ops, codes, code, eager)
    return StepKernel(name, pid, tid, period, periods, covered, launches, pause_us)


def _eager_launches(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, ...]:
    """Of the kernels ``rows`` of ``trace.ops``, those launched by a recorded API call: the
    eager ones (their rows, their calls' starts and threads) and the rows of those inside a
    graph. The calls are looked up :data:`CHUNK_ROWS` rows at a time (operations carry no
    launch times: 20 M eager launches' of every kernel at once took 0.3 GB more)."""
    ops = trace.ops
    pid, corr = ops["pid"].to_numpy(), ops["correlation_id"].to_numpy()
    graph = ops["in_graph"].to_numpy()
    parts: list[tuple[np.ndarray, ...]] = []
    for lo, start, tid in trace.launches_in_chunks(pid, corr, rows):
        chunk = rows[lo : lo + len(start)]
        called, in_graph = tid >= 0, graph[chunk]
        eager = called & ~in_graph
        parts.append((chunk[eager], start[eager], tid[eager], chunk[called & in_graph]))
    if not parts:
        empty = rows[:0]
        return empty, np.zeros(0), np.zeros(0, dtype=np.int32), empty
    return tuple(np.concatenate(p) for p in zip(*parts, strict=True))


def _kernel_codes(ops, rows: np.ndarray) -> np.ndarray:
    """Of the ops ``rows``: one code per distinct demangled name, per short name where a row
    has none (codes of ``full_name``, then ``len(full_name categories) + `` codes of ``name``),
    int16 where they fit (a few hundred names), else int32."""
    fcodes, scodes = ops["full_name"].array.codes[rows], ops["name"].array.codes[rows]
    n_full = len(ops["full_name"].cat.categories)
    n_codes = n_full + len(ops["name"].cat.categories)
    t = np.int16 if n_codes <= np.iinfo(np.int16).max else np.int32
    return np.where(fcodes >= 0, fcodes.astype(t), t(n_full) + scodes.astype(t))


def _kernel_name(ops, codes: np.ndarray, code: int, rows: np.ndarray) -> str:
    """The name of kernel ``code`` (:func:`_kernel_codes`) among the launches ``rows`` (whose
    codes are ``codes``): its short name when no other demangled name of those launches shares
    it, else its demangled name."""
    full, short = ops["full_name"].cat, ops["name"].cat
    if code >= len(full.categories):
        return str(short.categories[code - len(full.categories)])
    scodes = short.codes.to_numpy()[rows]
    short_code = scodes[codes == code][0]
    if short_code < 0 or len(np.unique(codes[scodes == short_code])) > 1:
        return str(full.categories[code])
    return str(short.categories[short_code])
