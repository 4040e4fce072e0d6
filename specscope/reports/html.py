"""``report.html``: one page, no network fetches, figures beside it; renders only.

The page is ``templates/report.html`` (jinja2, autoescaped) filled with strings formatted here
from the frames that :mod:`specscope.analysis.compare` and
:mod:`specscope.analysis.composition` return.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from specscope.analysis.compare import Comparison
from specscope.reports.markdown import default_rows, display_name, format_change, format_value
from specscope.reports.text import signed, unit_text


def _side(p50: float, p10: float, p90: float, n: float, unit: str) -> str:
    if not n:
        return "n/a"
    return (
        f"{format_value(p50, unit)} [{format_value(p10, unit).split(' ')[0]}, "
        f"{format_value(p90, unit).split(' ')[0]}]"
    )


def comparison_rows(c: Comparison) -> list[dict]:
    """One dict of display strings per metric of ``c.metrics``; the PR table's rows first."""
    rows = []
    pr_rows = default_rows([c])
    order = [m for m in pr_rows if m in c.metrics.index]
    order += [m for m in c.metrics.index if m not in order]
    for metric in order:
        r = c.metrics.loc[metric]
        u = r["unit"]
        before = r["before_p50"] if r["before_n"] else math.nan
        after = r["after_p50"] if r["after_n"] else math.nan
        ci = (
            "n/a" if math.isnan(r["ci_low"]) else f"[{signed(r['ci_low'])}, {signed(r['ci_high'])}]"
        )
        rel = r["rel_change_pct"]
        rows.append(
            {
                "metric": metric,
                "name": display_name(metric),
                "pr": metric in pr_rows,
                "unit": unit_text(u).name,
                "before": _side(
                    r["before_p50"], r["before_p10"], r["before_p90"], r["before_n"], u
                ),
                "before_n": int(r["before_n"]),
                "after": _side(r["after_p50"], r["after_p10"], r["after_p90"], r["after_n"], u),
                "after_n": int(r["after_n"]),
                "change": signed(r["abs_change"]),
                "rel": format_change(rel, before, after),
                "rel_sort": "" if math.isnan(rel) else f"{rel:.6g}",
                "ci": ci,
                "verdict": r["verdict"].value,
                "verdict_class": r["verdict"].value.replace(" ", "-"),
            }
        )
    return rows


def kernel_diff_rows(c: Comparison, limit: int = 40) -> list[dict]:
    """The ``limit`` largest rows of ``c.kernels`` (by |Δ µs per step|), as display strings."""
    if c.kernels is None:
        return []
    rows = []
    for name, r in c.kernels.head(limit).iterrows():
        rows.append(
            {
                "name": name,
                "kind": r["kind"],
                "before": f"{r['before_per_step']:.2f}",
                "after": f"{r['after_per_step']:.2f}",
                "before_us": f"{r['before_us_per_step']:.1f}",
                "after_us": f"{r['after_us_per_step']:.1f}",
                "delta_us": signed(r["delta_us_per_step"]),
                "change": r["change"].value,
            }
        )
    return rows


def operation_rows(ops) -> list[dict]:
    """The rows of a :func:`specscope.analysis.composition.step_operations` frame, formatted."""
    return [
        {
            "name": r.name,
            "category": r.category,
            "anchor": r.anchor or "—",
            "count": int(r.count),
            "total_us": f"{r.total_us:.1f}",
            "mean_us": f"{r.mean_us:.2f}",
            "max_us": f"{r.max_us:.2f}",
        }
        for r in ops.itertuples()
    ]


def manifest_text(manifest: dict | None) -> str | None:
    return None if manifest is None else json.dumps(manifest, indent=1, default=str)


def package_version() -> str:
    try:
        return version("specscope")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def render_html(context: dict, template: str = "report.html") -> str:
    """Fill ``templates/<template>`` (the report page, or ``index.html`` of a per-rank report);
    ``context`` keys are the template's variables. (jinja2 is imported here, when the page is
    written: not before the analysis, while a helper may be drawing the figures.)"""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("specscope.reports", "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(template).render(**context)


def page_title(labels: Sequence[str]) -> str:
    return " vs ".join(labels)
