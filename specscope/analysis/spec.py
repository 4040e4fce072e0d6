"""Step specs: which NVTX range is a decode step and which ranges are its phase anchors.

Specs are data: a TOML preset shipped under ``specscope/presets/`` (``eagle``) or the values
given on the command line. A spec names

- ``step``: the range around one decode step (its instances on one thread are the steps);
- ``anchors``: ordered ranges inside the step whose GPU work the gaps are measured between
  (for EAGLE: the three graph replays);
- ``domain``: the NVTX domain of those ranges (``None``: any domain);
- ``count_kernels``: regexes; each adds a ``kernels:PATTERN`` count per step.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from importlib import resources

from specscope.errors import SpecError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class StepSpec:
    step: str
    anchors: tuple[str, ...] = ()
    domain: str | None = None
    count_kernels: tuple[str, ...] = field(default=())

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
    data = tomllib.loads(path.read_text())
    return StepSpec(
        step=data["step"],
        anchors=tuple(data.get("anchors", ())),
        domain=data.get("domain"),
        count_kernels=tuple(data.get("count_kernels", ())),
    )
