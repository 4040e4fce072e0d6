"""Step specs: which NVTX range is a decode step and which ranges are its phase anchors.

Specs are data: a TOML preset shipped under ``specscope/presets/`` (``eagle``) or the values
given on the command line. A spec names

- ``step``: the range around one decode step (its instances on one thread are the steps);
- ``anchors``: ordered ranges inside the step whose GPU work the gaps are measured between
  (for EAGLE: the three graph replays);
- ``domain``: the NVTX domain of those ranges (``None``: any domain);
- ``count_kernels``: regexes; each adds a ``kernels:PATTERN`` count per step.

A preset may also carry a ``[report]`` table, what reports show by default for it
(:class:`ReportDefaults`): ``gap`` (the gap metric that picks the median steps and aligns the
timeline), ``rows`` (the rows of the PR table), ``highlight`` (regex of kernel names marked on
the timeline) and ``[report.names]`` (PR names of single metrics, e.g. one gap). A spec matches
a preset when its step, anchors and domain are the preset's (so a spec given by hand or read
back from a results database gets the preset's defaults too). Otherwise, and for every key a
``[report]`` table leaves out, the defaults are derived from the spec (:func:`derived_report`):

- ``gap``: the last anchor -> the first anchor (the cross-step pair; none without anchors);
- ``rows``: every ``gap_us:A->B`` of the anchors, ``idle_us``, ``kernels:P`` for each counted
  kernel pattern, ``eager_memcpy``;
- ``highlight``: the counted kernel patterns joined with ``|`` (none without any);
- ``names``: none (metrics show the catalog's label or their own name).

**Without NVTX** (:mod:`specscope.analysis.launch_steps` defines the steps these give): an
anchor may be ``NAME=SOURCE``, where SOURCE is a GPU launch instead of a range --

- ``graph:ID[|ID...]``: the launches of these CUDA graphs (several ids: one role across
  batch-size buckets; ``specscope graphs TRACE`` lists the ids);
- ``graph-role:N``: the graphs of the N-th role in capture order (1: captured first; roles as
  ``specscope graphs`` groups them), for presets that cannot know the ids;
- ``kernel:REGEX``: the launches of kernels whose name matches REGEX.

With such anchors ``step`` is empty (:data:`CYCLE`): a step is one cycle of the anchors.
``step`` may itself be a source (``kernel:REGEX``, ``graph:ID``): each such launch starts a step.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources

from specscope.errors import SpecError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


DEFAULT_PRESET = "eagle"  # the spec of the CLI when none is given


def anchor_pairs(anchors: tuple[str, ...]) -> list[str]:
    """The expected ``A->B`` pairs of a cyclic anchor list (wrap-around pair included)."""
    if len(anchors) < 2:
        return [f"{anchors[0]}->{anchors[0]}"] if anchors else []
    return [f"{a}->{b}" for a, b in zip(anchors[-1:] + anchors[:-1], anchors, strict=True)]


@dataclass(frozen=True)
class ReportDefaults:
    """What reports show for a spec unless told otherwise (module doc)."""

    gap: str | None  # e.g. gap_us:A->B; None: the spec has no anchors
    rows: tuple[str, ...]
    highlight: str | None
    names: Mapping[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class StepSpec:
    step: str
    anchors: tuple[str, ...] = ()
    domain: str | None = None
    count_kernels: tuple[str, ...] = field(default=())

    @property
    def anchor_names(self) -> tuple[str, ...]:
        """The anchors' names (``NAME`` of ``NAME=SOURCE``)."""
        return tuple(split_anchor(a)[0] for a in self.anchors)

    @property
    def anchor_markers(self) -> tuple[Marker | None, ...]:
        """Per anchor its launch :class:`Marker`, None for an NVTX range."""
        return tuple(split_anchor(a)[1] for a in self.anchors)

    @property
    def step_marker(self) -> Marker | None:
        """The launch that starts each step (``--step kernel:REGEX``), else None."""
        return parse_marker(self.step)

    @property
    def needs_graph_launches(self) -> bool:
        """Whether finding these steps reads the CUDA graph launches (a launch cycle, or a
        ``graph:``/``graph-role:`` step or anchor)."""
        markers = (self.step_marker, *self.anchor_markers)
        return self.step == CYCLE or any(m is not None and m.kind != "kernel" for m in markers)

    @property
    def from_launches(self) -> bool:
        """Whether steps come from GPU launches (markers), not NVTX ranges."""
        return self.step == CYCLE or self.step_marker is not None

    def with_overrides(self, **changes) -> StepSpec:
        """A copy with the non-None values of ``changes`` applied."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "anchors": list(self.anchors),
            "domain": self.domain,
            "count_kernels": list(self.count_kernels),
        }

    @property
    def report(self) -> ReportDefaults:
        """The report defaults of this spec: its preset's ``[report]``, else derived."""
        return report_defaults(self)


def reads_graph_launches(spec: StepSpec | None) -> bool:
    """Whether finding steps with ``spec`` reads the CUDA graph launches: zero-config (``None``)
    looks for launch cycles; a spec does where it has graph markers
    (:attr:`StepSpec.needs_graph_launches`). Where it does, the GPU operations are read with
    their exec ids (:attr:`.loader.Trace.graph_execs`)."""
    return spec is None or spec.needs_graph_launches


def spec_from_dict(data: Mapping) -> StepSpec | None:
    """The spec of :meth:`StepSpec.to_dict` (e.g. a run's), or None without a step (a spec of
    launch anchors has the step :data:`CYCLE`, '')."""
    if not data or not (data.get("step") or data.get("anchors")):
        return None
    return StepSpec(
        step=data["step"],
        anchors=tuple(data.get("anchors") or ()),
        domain=data.get("domain"),
        count_kernels=tuple(data.get("count_kernels") or ()),
    )


def derived_report(spec: StepSpec | None) -> ReportDefaults:
    """The report defaults derived from ``spec`` alone (module doc); generic for None."""
    if spec is None:
        return ReportDefaults(None, ("idle_us", "eager_memcpy"), None)
    pairs = anchor_pairs(spec.anchor_names)
    return ReportDefaults(
        gap=f"gap_us:{pairs[0]}" if pairs else None,
        rows=(
            *(f"gap_us:{p}" for p in pairs),
            "idle_us",
            *(f"kernels:{k}" for k in spec.count_kernels),
            "eager_memcpy",
        ),
        highlight="|".join(spec.count_kernels) or None,
    )


def report_defaults(spec: StepSpec | None) -> ReportDefaults:
    """The ``[report]`` table of the preset ``spec`` matches, completed by
    :func:`derived_report`; that alone when it matches none."""
    derived = derived_report(spec)
    if spec is None:
        return derived
    for name in presets():
        preset, table = _preset(name)
        if (preset.step, preset.anchors, preset.domain) == (spec.step, spec.anchors, spec.domain):
            return replace(derived, **table)
    return derived


@cache
def known_names() -> Mapping[str, str]:
    """The PR names of metrics from every shipped preset's ``[report.names]``."""
    names: dict[str, str] = {}
    for name in presets():
        names.update(_preset(name)[1].get("names", {}))
    return names


def presets() -> list[str]:
    """Names of the presets that ship with the package."""
    files = resources.files("specscope") / "presets"
    return sorted(
        p.name[:-5]
        for p in files.iterdir()
        if p.name.endswith(".toml") and not p.name.endswith("_thresholds.toml")
    )


def load_preset(name: str) -> StepSpec:
    """The preset ``name`` (e.g. ``eagle``); SpecError listing the presets if unknown."""
    path = resources.files("specscope") / "presets" / f"{name}.toml"
    if name not in presets() or not path.is_file():
        raise SpecError(f"unknown preset {name!r}; known presets: {', '.join(presets())}")
    return _preset(name)[0]


def spec_from_cli(
    preset: str | None, step: str | None, anchors: str | None, domain: str | None
) -> StepSpec:
    """The spec of the command line's ``--preset/--step/--anchors/--domain``: the preset
    (:data:`DEFAULT_PRESET` when neither it nor ``step`` is given) or a spec of ``step``;
    ``anchors`` (comma-separated) replace its anchors (launch anchors without ``step`` make a
    step one cycle of them); ``domain`` replaces its domain (``""``: any domain)."""
    if preset and step:
        raise SpecError("give either --preset or --step (with --anchors), not both")
    spec = load_preset(preset or DEFAULT_PRESET) if step is None else StepSpec(step=step)
    if anchors is not None:
        spec = spec.with_overrides(anchors=tuple(a.strip() for a in anchors.split(",") if a))
        if step is None and any(spec.anchor_markers):  # graph/kernel anchors: cycles
            spec = spec.with_overrides(step=CYCLE)
    if domain is not None:
        spec = StepSpec(spec.step, spec.anchors, domain or None, spec.count_kernels)
    return spec


_REPORT_KEYS = {"gap": str, "rows": list, "highlight": str, "names": dict}


@cache
def _preset(name: str) -> tuple[StepSpec, dict]:
    """The spec of the shipped preset ``name`` and its ``[report]`` values (rows a tuple)."""
    path = resources.files("specscope") / "presets" / f"{name}.toml"
    data = tomllib.loads(path.read_text())
    spec = StepSpec(
        step=data["step"],
        anchors=tuple(data.get("anchors", ())),
        domain=data.get("domain"),
        count_kernels=tuple(data.get("count_kernels", ())),
    )
    table = dict(data.get("report", {}))
    for key, value in table.items():
        if not isinstance(value, _REPORT_KEYS.get(key, ())):
            raise SpecError(f"preset {name!r}: [report] {key} is unknown or of the wrong type")
    if "rows" in table:
        table["rows"] = tuple(table["rows"])
    return spec, table


CYCLE = ""  # the step of a spec whose anchors are launches: one cycle of the anchors
_MARKER = re.compile(r"^(graph|graph-role|kernel):(.+)$")


@dataclass(frozen=True)
class Marker:
    """A GPU launch that marks an anchor or a step without NVTX (see the module doc).

    ``kind``: ``graph`` (``graph_ids``), ``graph-role`` (``role``, 1-based in capture order) or
    ``kernel`` (``pattern``, a regex searched in the kernel's short and demangled names).
    """

    kind: str
    graph_ids: tuple[int, ...] = ()
    role: int = 0
    pattern: str = ""


def parse_marker(text: str) -> Marker | None:
    """``graph:7|10``, ``graph-role:2`` or ``kernel:REGEX`` as a Marker; None for anything else
    (an NVTX range name); SpecError for a malformed id list or regex."""
    m = _MARKER.match(text.strip())
    if m is None:
        return None
    kind, arg = m.groups()
    if kind == "kernel":
        try:
            re.compile(arg)
        except re.error as e:
            raise SpecError(f"bad regex in {text!r}: {e}") from None
        return Marker(kind, pattern=arg)
    try:
        ids = tuple(int(i) for i in arg.split("|"))
    except ValueError:
        raise SpecError(
            f"bad {kind} id list in {text!r}: give integers separated by '|' "
            "(`specscope graphs TRACE` lists them)"
        ) from None
    if kind == "graph-role":
        if len(ids) != 1 or ids[0] < 1:
            raise SpecError(f"bad role in {text!r}: give one number from 1 (captured first)")
        return Marker(kind, role=ids[0])
    return Marker(kind, graph_ids=ids)


SELF_ANCHOR = "step"
"""The name of a step marker's launches as their steps' one anchor (:func:`self_anchored`)."""


def self_anchored(spec: StepSpec) -> StepSpec | None:
    """``spec``, whose steps have no anchors, with each step as its one anchor, so that the gap
    from one step's GPU work to the next one's is measured and explained (``step->step``):
    NVTX steps get their range as the anchor, steps that a launch starts (``kernel:REGEX``,
    ``graph:ID``) that launch, named :data:`SELF_ANCHOR`. None where ``spec`` has anchors
    already, or its range's name cannot be an anchor's (``=``, ``,`` or ``->`` in it)."""
    if spec.anchors or spec.step == CYCLE:
        return None
    if spec.step_marker is not None:
        return replace(spec, anchors=(f"{SELF_ANCHOR}={spec.step}",))
    if any(c in spec.step for c in ("=", ",", "->")) or not spec.step.strip():
        return None
    return replace(spec, anchors=(spec.step,))


def split_anchor(anchor: str) -> tuple[str, Marker | None]:
    """``NAME=SOURCE`` -> (NAME, its Marker); a plain NVTX range name -> (name, None)."""
    name, eq, source = anchor.partition("=")
    if not eq:
        return anchor, None
    marker = parse_marker(source)
    if marker is None or not name.strip():
        raise SpecError(
            f"bad anchor {anchor!r}: give NAME=graph:ID[|ID...], NAME=graph-role:N or "
            "NAME=kernel:REGEX"
        )
    return name.strip(), marker


def check_regexes(options: dict[str, str | Iterable[str] | None]) -> None:
    """Compile every user-supplied regex up front: ``options`` maps an option name
    (``--count-kernels``, ``--highlight``, ``--collective``, ``--anchors``/``--step``) to its
    value(s); None or empty values are skipped. For ``--anchors``/``--step`` only ``kernel:``
    markers are regexes (NVTX names are matched literally). SpecError naming the option and
    the pattern for the first that does not compile.
    """
    for option, values in options.items():
        if not values:
            continue
        for value in [values] if isinstance(values, str) else values:
            if option in ("--anchors", "--step"):
                try:
                    parse_marker(value)
                except SpecError as e:
                    raise SpecError(f"{option}: {e}") from None
                continue
            try:
                re.compile(value)
            except re.error as e:
                raise SpecError(f"{option} {value!r}: not a valid regex ({e})") from None
