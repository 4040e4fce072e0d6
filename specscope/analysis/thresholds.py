"""Regression thresholds: TOML rules on per-step metric statistics, and their evaluation.

A thresholds file holds one ``[[rule]]`` table per rule::

    [[rule]]
    metric = "idle_us"        # any per-step metric name (see specscope.analysis.metrics)
    stat = "p50"              # n, mean, p10, p50, p90, min, max   (default p50)
    max = 700                 # absolute limits, in the metric's unit: stat <= max, stat >= min
    min = 0
    max_change_pct = 5        # relative to the baseline's same stat: change <= +5 %
    min_change_pct = -5       # change >= -5 % (for higher-is-better metrics)
    min_steps = 20            # the run must have at least 20 steps with a value
    severity = "fail"         # "fail" (default: a failure exits 1) or "warn" (reported only)
    name = "GPU idle"         # optional label

Each limit of a rule is one :class:`Result`: measured value, limit, and :class:`Status`.
``change = 100 * (stat - baseline stat) / |baseline stat|`` (+inf when the baseline is 0 and the
value is not). A change limit without a baseline is ``skipped``; a metric with no value in the
run (unavailable, e.g. kernels in graph mode) fails its limits. A failing ``warn`` rule reports
``warn`` and does not fail the check.
"""

from __future__ import annotations

import difflib
import enum
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from xml.etree import ElementTree as ET

import pandas as pd

from specscope.analysis.catalog import unit
from specscope.analysis.metrics import StepMetrics
from specscope.analysis.summary import STATS, summarize
from specscope.errors import SpecscopeError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ThresholdsError(SpecscopeError):
    """The thresholds file is missing, not TOML, or holds an invalid rule."""


class Severity(str, enum.Enum):
    FAIL = "fail"
    WARN = "warn"


class Status(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"  # a failing rule of severity "warn"
    SKIPPED = "skipped"  # a change limit without --baseline


LIMITS = ("min_steps", "max", "min", "max_change_pct", "min_change_pct")
_KEYS = {"metric", "stat", "severity", "name", *LIMITS}


@dataclass(frozen=True)
class Rule:
    metric: str
    stat: str = "p50"
    max: float | None = None
    min: float | None = None
    max_change_pct: float | None = None
    min_change_pct: float | None = None
    min_steps: int | None = None
    severity: Severity = Severity.FAIL
    name: str | None = None

    @property
    def label(self) -> str:
        return self.name or f"{self.metric} {self.stat}"


@dataclass(frozen=True)
class Result:
    """One limit of one rule, evaluated."""

    rule: Rule
    limit_kind: str  # one of LIMITS
    measured: float
    limit: float
    status: Status
    message: str = ""

    @property
    def test_name(self) -> str:
        """E.g. ``idle_us p50 <= 700 us`` or ``idle_us p50 change <= +5 %``."""
        r, u = self.rule, unit(self.rule.metric)
        u = "" if u == "count" else f" {u}"
        return {
            "min_steps": f"{r.metric} steps >= {self.limit:g}",
            "max": f"{r.label} <= {self.limit:g}{u}",
            "min": f"{r.label} >= {self.limit:g}{u}",
            "max_change_pct": f"{r.label} change <= {self.limit:+g} %",
            "min_change_pct": f"{r.label} change >= {self.limit:+g} %",
        }[self.limit_kind]


def _number(value, key: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ThresholdsError(f"{where}: {key} must be a number, not {value!r}")
    return float(value)


def parse_rules(data: dict, source: str = "thresholds") -> list[Rule]:
    """Validate the parsed TOML ``data`` into rules; ThresholdsError naming the bad entry."""
    unknown = set(data) - {"rule"}
    if unknown:
        raise ThresholdsError(
            f"{source}: unknown top-level key(s) {', '.join(sorted(unknown))}; "
            "write each rule as a [[rule]] table"
        )
    tables = data.get("rule", [])
    if not isinstance(tables, list) or not tables:
        raise ThresholdsError(f"{source}: no rules; add at least one [[rule]] table")
    rules = []
    for i, t in enumerate(tables, 1):
        where = f"{source}: rule {i}"
        bad = set(t) - _KEYS
        if bad:
            raise ThresholdsError(
                f"{where}: unknown key(s) {', '.join(sorted(bad))}; "
                f"known: {', '.join(sorted(_KEYS))}"
            )
        if not isinstance(t.get("metric"), str) or not t["metric"]:
            raise ThresholdsError(f'{where}: needs metric = "NAME" (e.g. "idle_us")')
        stat = t.get("stat", "p50")
        if stat not in STATS:
            raise ThresholdsError(f"{where}: stat {stat!r} is not one of {', '.join(STATS)}")
        if not any(k in t for k in LIMITS):
            raise ThresholdsError(f"{where}: no limit; give max, min, max_change_pct, ...")
        try:
            severity = Severity(t.get("severity", "fail"))
        except ValueError:
            raise ThresholdsError(f'{where}: severity must be "fail" or "warn"') from None
        limits = {k: _number(t[k], k, where) for k in LIMITS if k in t}
        if "min_steps" in limits:
            if limits["min_steps"] < 0 or not limits["min_steps"].is_integer():
                raise ThresholdsError(f"{where}: min_steps must be a whole number >= 0")
            limits["min_steps"] = int(limits["min_steps"])
        name = t.get("name")
        rules.append(Rule(t["metric"], stat, severity=severity, name=name, **limits))
    return rules


def load_rules(path: str | Path) -> list[Rule]:
    """Read a thresholds TOML file.

    ``path`` may also name a shipped example: ``eagle`` is ``presets/eagle_thresholds.toml``.
    """
    p = Path(path)
    if not p.exists() and p.suffix == "" and "/" not in str(path):
        shipped = resources.files("specscope") / "presets" / f"{path}_thresholds.toml"
        if shipped.is_file():
            return parse_rules(tomllib.loads(shipped.read_text()), f"{path} (shipped)")
    if not p.is_file():
        raise ThresholdsError(f"{p}: no such thresholds file; see docs/ci.md for the format")
    try:
        data = tomllib.loads(p.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise ThresholdsError(f"{p}: cannot read ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise ThresholdsError(f"{p}: not valid TOML ({e})") from None
    return parse_rules(data, str(p))


def pooled_summary(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """:func:`~specscope.analysis.summary.summarize` of the steps of all ``frames`` together."""
    frame = pd.concat(list(frames), ignore_index=True) if frames else pd.DataFrame()
    return summarize(StepMetrics(frame))


def _known(metric: str, summary: pd.DataFrame, what: str) -> None:
    if metric not in summary.index:
        close = difflib.get_close_matches(metric, list(summary.index), n=3, cutoff=0.4)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ThresholdsError(f"rule metric {metric!r} is not a metric of the {what}{hint}")


def _collector(rule: Rule, out: list[Result]):
    bad = Status.FAIL if rule.severity is Severity.FAIL else Status.WARN

    def result(kind: str, measured: float, limit: float, ok: bool, msg: str = "") -> None:
        out.append(Result(rule, kind, measured, limit, Status.PASS if ok else bad, msg))

    return result


def evaluate(
    rules: Sequence[Rule],
    summary: pd.DataFrame,
    baseline: pd.DataFrame | None = None,
    unavailable: Mapping[str, str] | None = None,
) -> list[Result]:
    """Evaluate every limit of every rule against ``summary`` (and ``baseline``), in order.

    ``summary``/``baseline``: frames indexed by metric with the columns of
    :data:`specscope.analysis.summary.STATS` (``summarize`` or :func:`pooled_summary`).
    ``unavailable``: why the run has no value of a metric (:attr:`.StepMetrics.unavailable`),
    said where a limit fails for want of one. ThresholdsError if a rule names a metric the run
    does not have.
    """
    out = []
    for rule in rules:
        _known(rule.metric, summary, "run")
        row = summary.loc[rule.metric]
        n, value = float(row["n"]), float(row[rule.stat])
        result = _collector(rule, out)
        if rule.min_steps is not None:
            result("min_steps", n, rule.min_steps, n >= rule.min_steps)
        why = (unavailable or {}).get(rule.metric, "the metric is unavailable in this run")
        missing = f"no value: {why}" if math.isnan(value) else ""
        if rule.max is not None:
            result("max", value, rule.max, not missing and value <= rule.max, missing)
        if rule.min is not None:
            result("min", value, rule.min, not missing and value >= rule.min, missing)
        for kind in ("max_change_pct", "min_change_pct"):
            limit = getattr(rule, kind)
            if limit is None:
                continue
            if baseline is None:
                out.append(
                    Result(rule, kind, math.nan, limit, Status.SKIPPED, "no --baseline given")
                )
                continue
            _known(rule.metric, baseline, "baseline")
            base = float(baseline.loc[rule.metric, rule.stat])
            if missing or math.isnan(base):
                result(kind, math.nan, limit, False, missing or "no value in the baseline")
                continue
            if base != 0:
                change = 100 * (value - base) / abs(base)
            else:
                change = 0.0 if value == 0 else math.copysign(math.inf, value)
            ok = change <= limit if kind == "max_change_pct" else change >= limit
            result(kind, change, limit, ok, f"baseline {base:g}")
    return out


def exit_code(results: Sequence[Result]) -> int:
    """0 when no rule of severity ``fail`` failed, else 1."""
    return 1 if any(r.status is Status.FAIL for r in results) else 0


def junit_xml(results: Sequence[Result], *, suite: str = "specscope check") -> str:
    """JUnit XML: one ``<testcase>`` per limit; failures as ``<failure>``, skips as ``<skipped>``,
    warnings as passing cases with the message in ``<system-out>``."""
    failures = sum(r.status is Status.FAIL for r in results)
    skipped = sum(r.status is Status.SKIPPED for r in results)
    root = ET.Element("testsuites", tests=str(len(results)), failures=str(failures))
    ts = ET.SubElement(
        root,
        "testsuite",
        name=suite,
        tests=str(len(results)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    for r in results:
        case = ET.SubElement(
            ts, "testcase", classname=f"specscope.check.{r.rule.metric}", name=r.test_name
        )
        text = describe(r)
        if r.status is Status.FAIL:
            ET.SubElement(case, "failure", message=text, type=r.limit_kind).text = text
        elif r.status is Status.SKIPPED:
            ET.SubElement(case, "skipped", message=text)
        elif r.status is Status.WARN:
            ET.SubElement(case, "system-out").text = f"warning: {text}"
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def describe(r: Result) -> str:
    """One line: the limit, what was measured, and any note (the status is not included)."""
    measured = "n/a" if math.isnan(r.measured) else f"{r.measured:.6g}"
    if r.limit_kind.endswith("_pct") and measured != "n/a":
        measured = f"{r.measured:+.1f} %"
    text = f"{r.test_name}: measured {measured}"
    return f"{text} ({r.message})" if r.message else text
