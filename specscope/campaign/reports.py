"""Write a campaign's outputs: tables in the results database, reports, ``overview.md``.

- ``results.sqlite``: ``campaign_metrics`` (:func:`tables.metric_rows`) and
  ``campaign_comparisons`` (:func:`tables.comparison_rows`), replaced for this campaign;
- ``reports/CELL-MODE/<time>-report/``: ``specscope report`` of the cell in that trace mode,
  one input per variant (its first repetition: timeline, distributions, composition) and the
  comparisons against the baseline with every repetition pooled (the tables);
- ``overview.md``: :func:`specscope.reports.overview.overview_markdown`.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from specscope.analysis.spec import load_preset
from specscope.analysis.sqlwrite import insert_dicts, transaction
from specscope.campaign import tables
from specscope.campaign.results import CampaignResults
from specscope.reports.overview import overview_markdown

OVERVIEW = "overview.md"


@dataclass
class Written:
    db: Path
    overview_md: Path
    reports: list[Path] = field(default_factory=list)


def _replace(db_path: Path, table: str, campaign: str, rows: list[dict]) -> None:
    """Replace the campaign's rows of ``table`` in one transaction (old rows or new, never
    neither)."""
    with transaction(db_path) as con:
        if con.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
            con.execute(f'DELETE FROM "{table}" WHERE campaign = ?', (campaign,))
        insert_dicts(con, table, [{"campaign": campaign, **r} for r in rows])


def provenance(res: CampaignResults) -> str:
    """GPU, driver, nsys and how many runs were analysed, from the campaign_runs rows."""
    rows = [r for r in res.rows.values() if r.get("status") == "ok"]

    def distinct(key: str) -> str:
        return " / ".join(dict.fromkeys(str(r[key]) for r in rows if r.get(key))) or "unknown"

    profiled = sum(len(v) for v in res.inputs.values())
    return (
        f"GPU {distinct('gpu')} · driver {distinct('driver')} · nsys {distinct('nsys_version')} · "
        f"{profiled} profiled runs analysed (first {res.campaign.skip} step(s) of each dropped) · "
        f"matrix `{res.campaign.path or res.campaign.name}`"
    )


def write_report_for(
    res: CampaignResults, cell: str, mode: str, comps: list, out: Path, gap: str | None = None
) -> Path:
    """One ``specscope report`` folder for ``cell`` in ``mode``; returns its report.html.
    ``gap`` and the highlighted kernels: the campaign preset's report defaults unless given."""
    from specscope.analysis.composition import median_step_view
    from specscope.reports.report import new_report_dir, write_report

    c = res.campaign
    defaults = load_preset(c.preset).report
    gap = gap or defaults.gap
    labels = [v for v in c.variants if res.inputs.get((cell, mode, v))]
    inputs = [res.inputs[(cell, mode, v)][0] for v in labels]
    comps = [x for x in comps if x.labels[1] in labels]
    views = []
    for i in inputs:
        try:
            views.append(median_step_view(i.analysis, gap, highlight=defaults.highlight))
        except Exception:  # a view that cannot be drawn must not cost the other figures
            views.append(None)
    folder = new_report_dir(out / "reports" / f"{cell}-{mode}")
    commands = [
        f"# {label}: {len(res.inputs[(cell, mode, label)])} repetition(s) pooled in the tables; "
        f"figures from {inputs[k].ref}"
        for k, label in enumerate(labels)
    ]
    for i in inputs:
        cmd = (i.manifest or {}).get("command")
        if cmd:
            commands.append(shlex.join(cmd) if isinstance(cmd, list) else str(cmd))
    write_report(
        folder,
        inputs,
        labels,
        comps,
        views,
        gap=gap,
        commands=commands,
        highlight=defaults.highlight,
    )
    return folder / "report.html"


def write_campaign_reports(
    res: CampaignResults,
    *,
    reports: bool = True,
    target_cell: str | None = None,
    say: Callable[[str], None] = lambda m: None,
) -> Written:
    """Write the tables, the reports (unless ``reports`` is False) and ``overview.md``."""
    c, out = res.campaign, res.out
    rows = tables.metric_rows(res)
    found = tables.comparisons(res)
    _replace(res.db, "campaign_metrics", c.name, rows.to_dict("records"))
    _replace(
        res.db, "campaign_comparisons", c.name, tables.comparison_rows(found).to_dict("records")
    )
    written = Written(res.db, out / OVERVIEW)
    if reports:
        for (cell, mode), comps in found.items():
            try:
                written.reports.append(write_report_for(res, cell, mode, comps, out))
            except Exception as e:  # one cell's report must not cost the others
                say(f"report of {cell} in {mode} mode failed: {type(e).__name__}: {e}")
    target_cell = target_cell or c.cells[0].id
    variant = c.variants[-1]
    target = None
    if len(c.variants) > 1:
        target = tables.targets(rows, target_cell, variant, c.baseline, load_preset(c.preset))
    text = overview_markdown(
        f"Campaign {c.name}: overview",
        provenance(res),
        tables.overview(res, rows),
        tables.inflation(res, rows),
        tables.overhead(res, rows),
        target,
        tables.not_run(res),
        baseline=c.baseline,
        variant=variant,
        target_cell=target_cell,
    )
    written.overview_md.write_text(text)
    return written
