"""Analyse a recorded campaign folder into its results database.

Every export logged ``ok`` in ``runs.jsonl`` is analysed with the campaign's step spec (its
first ``skip`` steps dropped) and appended to ``DIR/results.sqlite`` with
:func:`specscope.analysis.store.append_run` (tables ``runs``, ``step_metrics``, ``summary``;
the ``trace`` column holds the path relative to ``DIR``). An export already in the database
(same relative path and sha256) is not appended again. One more table:

``campaign_runs``
    one row per planned run id (``pk id``), whatever its status: ``campaign, cell, bs,
    context, index_kpool, variant, mode, rep, status, error, seconds, run_dir, export,
    run_id`` (the ``runs`` row of its export), what ``specscope run --json`` wrote
    (``tokens, accept_len_mean, tok_per_s_per_request, step_ms_p50, step_ms_p90,
    step_ms_mean, draft_metadata_bytes, tokens_sha256``) and from the manifest ``gpu, driver,
    nsys_version, started_at``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import sqlite_utils

from specscope.analysis.inputs import ResolvedInput, analyze_with_provenance
from specscope.analysis.run import AnalyzeOptions
from specscope.analysis.spec import load_preset
from specscope.analysis.sqlwrite import insert_dicts, transaction
from specscope.analysis.store import append_run
from specscope.campaign.matrix import MODES, Campaign
from specscope.campaign.record import read_log
from specscope.checksum import sha256_file
from specscope.errors import SpecscopeError
from specscope.profiler.manifest import read_manifest

DB = "results.sqlite"
RUN_FIELDS = (
    "tokens",
    "accept_len_mean",
    "tok_per_s_per_request",
    "step_ms_p50",
    "step_ms_p90",
    "step_ms_mean",
    "draft_metadata_bytes",
    "tokens_sha256",
)


@dataclass
class CampaignResults:
    """What the analysis of a campaign folder produced, for the tables and reports.

    ``inputs[(cell, mode, variant)]``: the analysed exports of that triple, by repetition.
    ``rows``: the ``campaign_runs`` rows, by run id.
    """

    campaign: Campaign
    out: Path
    db: Path
    inputs: dict[tuple[str, str, str], list[ResolvedInput]] = field(default_factory=dict)
    rows: dict[str, dict] = field(default_factory=dict)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _lenient_manifest(run_dir: Path) -> dict:
    """The manifest of a recorded run folder; empty when it has none or an unreadable one."""
    try:
        return read_manifest(run_dir) or {}
    except SpecscopeError:
        return {}


def _existing_run_id(db: sqlite_utils.Database, trace: str, sha: str) -> int | None:
    if "runs" not in db.table_names():
        return None
    rows = list(db.query("SELECT id FROM runs WHERE trace = ? AND sha256 = ?", [trace, sha]))
    return rows[-1]["id"] if rows else None


def analyze_folder(
    c: Campaign, out: str | Path, *, say: Callable[[str], None] = lambda m: None
) -> CampaignResults:
    """Analyse every recorded export of ``out`` into ``out/results.sqlite`` (module doc)."""
    out = Path(out)
    entries = read_log(out)
    if not entries:
        raise SpecscopeError(f"{out}: no runs.jsonl with recorded runs; record first")
    spec = load_preset(c.preset)
    spec = spec.with_overrides(
        count_kernels=tuple(dict.fromkeys([*spec.count_kernels, *c.count_kernels]))
    )
    db_path = out / DB
    db = sqlite_utils.Database(db_path)
    res = CampaignResults(c, out, db_path)
    for run_id_text, e in entries.items():
        row = {k: e.get(k) for k in ("cell", "bs", "context", "index_kpool", "variant", "mode")}
        row.update(id=run_id_text, campaign=c.name, rep=e.get("rep"), status=e.get("status"))
        row.update(error=e.get("error"), seconds=e.get("seconds"))
        row.update(run_dir=e.get("run_dir"), export=e.get("export"), run_id=None)
        data = _read_json(out / e["json"]) if e.get("json") else {}
        row.update({k: data.get(k) for k in RUN_FIELDS})
        manifest = _lenient_manifest(out / e["run_dir"]) if e.get("run_dir") else {}
        gpus = manifest.get("gpus") or [{}]
        row.update(
            gpu=data.get("gpu") or gpus[0].get("name"),
            driver=gpus[0].get("driver"),
            nsys_version=(manifest.get("nsys") or {}).get("version"),
            started_at=e.get("started_at"),
        )
        if e.get("status") == "ok" and e.get("mode") in MODES and e.get("export"):
            export = out / e["export"]
            try:
                a = analyze_with_provenance(export, spec, AnalyzeOptions(skip=c.skip))
            except SpecscopeError as err:
                row.update(status="analysis-failed", error=str(err))
                say(f"{run_id_text}: analysis failed: {err}")
            else:
                sha = sha256_file(export)
                run_id = _existing_run_id(db, e["export"], sha)
                if run_id is None:
                    run_id = append_run(db_path, a, trace=e["export"])
                row["run_id"] = run_id
                label = f"{e['cell']}/{e['mode']}/{e['variant']}/r{e['rep']}"
                a = dataclasses.replace(a, batch_size=e.get("bs"), source=label)
                key = (e["cell"], e["mode"], e["variant"])
                res.inputs.setdefault(key, []).append(
                    ResolvedInput(str(export), a, export, out / e["run_dir"], manifest, sha)
                )
        res.rows[run_id_text] = row
    with transaction(db_path) as con:  # all rows or none (sqlwrite)
        insert_dicts(con, "campaign_runs", list(res.rows.values()), pk="id")
    ok = sum(len(v) for v in res.inputs.values())
    say(f"analysed {ok} export(s) into {db_path}")
    return res
