"""Run a campaign's plan into one folder: profiled runs and unprofiled runs, one process each.

Layout of the campaign folder ``DIR``::

    campaign.toml                     the matrix, as given (provenance)
    runs.jsonl                        one line per attempted run (appended; the last line of an
                                      id wins): id, cell, variant, mode, rep, status, paths,
                                      seconds, error
    runs/CELL/MODE/<time>-VARIANT-rREP/   run folder of `specscope profile` (export, manifest)
    runs/CELL/MODE/VARIANT-rREP.json      what `specscope run --json` wrote (step times, tok/s,
                                          draft metadata bytes), profiled or not
    runs/CELL/unprofiled-nvtx-*/VARIANT-rREP.log   an unprofiled run's output

A profiled run is ``specscope profile --cuda-graph-trace MODE -- python -m specscope run ...``
(through :func:`specscope.profiler.profile.profile`, in this process); an unprofiled run is
``python -m specscope run ...`` alone. A run that fails is logged with its error and the rest go
on. Runs already logged ``ok`` are skipped, so recording again into the same folder resumes.
With a time budget, no run is started that would likely end after it (estimated from the runs
of its kind so far); those are logged ``not-run``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from specscope.campaign.matrix import Campaign, PlannedRun
from specscope.errors import SpecscopeError
from specscope.profiler.flags import ProfileFlags
from specscope.profiler.manifest import utc_now

RUNS_LOG = "runs.jsonl"
MATRIX_COPY = "campaign.toml"
# First guesses of a run's seconds, before one of its kind has been timed.
FIRST_GUESS_S = {"profiled": 30.0, "unprofiled": 15.0}


def read_log(out: Path) -> dict[str, dict]:
    """The last logged entry of every run id in ``out/runs.jsonl`` (empty if none)."""
    path = Path(out) / RUNS_LOG
    entries: dict[str, dict] = {}
    if not path.is_file():
        return entries
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill: the run is redone
        if isinstance(entry, dict) and "id" in entry:
            entries[entry["id"]] = entry
    return entries


def _append(out: Path, entry: dict) -> None:
    with (out / RUNS_LOG).open("a") as f:
        f.write(json.dumps(entry) + "\n")


def prepare_folder(c: Campaign, out: Path) -> None:
    """Create ``out`` and keep the matrix there; refuse a folder of a different campaign."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SpecscopeError(f"cannot create the campaign folder {out}: {e.strerror}") from None
    copy = out / MATRIX_COPY
    if copy.is_file():
        if copy.read_text() != c.source:
            raise SpecscopeError(
                f"{out} holds another matrix ({copy} differs from "
                f"{c.path or 'the given one'}); use a new --out folder"
            )
    else:
        copy.write_text(c.source)


def _entry(run: PlannedRun, **fields) -> dict:
    return {
        "id": run.id,
        "cell": run.cell.id,
        "bs": run.cell.bs,
        "context": run.cell.context,
        "index_kpool": run.cell.index_kpool,
        "variant": run.variant,
        "mode": run.mode,
        "rep": run.rep,
        **fields,
    }


def _rel(path: Path | None, out: Path) -> str | None:
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(out.resolve()))
    except ValueError:
        return str(path)


def record_profiled(run: PlannedRun, out: Path, python: str, nsys: str | None) -> dict:
    """One profiled run; returns its log fields (status ok, or raises SpecscopeError)."""
    from specscope.profiler.profile import profile

    folder = out / "runs" / run.cell.id / run.mode
    folder.mkdir(parents=True, exist_ok=True)
    json_out = folder / f"{run.variant}-r{run.rep}.json"
    command = [python, "-m", "specscope", "run", *run.run_args, "--json", str(json_out)]
    env = {**os.environ, "SPECSCOPE_BATCH_SIZE": str(run.cell.bs), "PYTHONUNBUFFERED": "1"}
    notes: list[str] = []
    result = profile(
        command,
        label=f"{run.variant}-r{run.rep}",
        out=folder,
        nsys_path=nsys,
        flags=ProfileFlags(graph_trace=run.mode),
        env=env,
        echo=None,
        warn=notes.append,
    )
    return {
        "status": "ok",
        "run_dir": _rel(result.run_dir, out),
        "export": _rel(result.export, out),
        "json": _rel(json_out, out) if json_out.is_file() else None,
        "capture_mode": result.manifest.get("mode"),
        "notes": notes,
    }


def record_unprofiled(run: PlannedRun, out: Path, python: str, timeout_s: float) -> dict:
    """One run without nsys; raises SpecscopeError if it fails."""
    folder = out / "runs" / run.cell.id / run.mode
    folder.mkdir(parents=True, exist_ok=True)
    json_out = folder / f"{run.variant}-r{run.rep}.json"
    log = folder / f"{run.variant}-r{run.rep}.log"
    command = [python, "-m", "specscope", "run", *run.run_args, "--json", str(json_out)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as f:
        try:
            rc = subprocess.run(
                command, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout_s
            ).returncode
        except subprocess.TimeoutExpired:
            raise SpecscopeError(f"timed out after {timeout_s:.0f} s; see {log}") from None
    if rc != 0 or not json_out.is_file():
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        raise SpecscopeError(f"specscope run exited with status {rc}: {tail[0]} (see {log})")
    return {"status": "ok", "json": _rel(json_out, out), "log": _rel(log, out)}


def record(
    c: Campaign,
    runs: Sequence[PlannedRun],
    out: str | Path,
    *,
    budget_s: float | None = None,
    nsys: str | None = None,
    python: str = sys.executable,
    timeout_s: float = 300.0,
    say: Callable[[str], None] = lambda m: None,
) -> list[dict]:
    """Record ``runs`` (a plan, or a selection of it) into ``out``; return this call's entries."""
    out = Path(out)
    prepare_folder(c, out)
    done = {k for k, e in read_log(out).items() if e.get("status") == "ok"}
    t0 = time.monotonic()
    timed: dict[str, list[float]] = {"profiled": [], "unprofiled": []}
    entries = []
    todo = [r for r in runs if r.id not in done]
    if len(todo) < len(runs):
        say(f"{len(runs) - len(todo)} run(s) already recorded in {out}: skipped")
    for i, run in enumerate(todo, 1):
        kind = "profiled" if run.profiled else "unprofiled"
        seen = timed[kind]
        guess = max(seen[-3:]) if seen else FIRST_GUESS_S[kind]
        elapsed = time.monotonic() - t0
        if budget_s is not None and elapsed + guess > budget_s:
            for rest in todo[i - 1 :]:
                entry = _entry(rest, status="not-run", error=f"time budget {budget_s:.0f} s spent")
                _append(out, entry)
                entries.append(entry)
            say(f"time budget spent after {elapsed:.0f} s: {len(todo) - i + 1} run(s) not run")
            break
        started = utc_now()
        t1 = time.monotonic()
        try:
            if run.profiled:
                fields = record_profiled(run, out, python, nsys)
            else:
                fields = record_unprofiled(run, out, python, timeout_s)
        except SpecscopeError as e:
            fields = {"status": "failed", "error": str(e)}
        except KeyboardInterrupt:
            entry = _entry(run, status="interrupted", started_at=started)
            _append(out, entry)
            raise
        except Exception as e:  # a bug must not cost the rest of the campaign
            fields = {"status": "error", "error": f"{type(e).__name__}: {e}"}
        seconds = round(time.monotonic() - t1, 2)
        seen.append(seconds)
        entry = _entry(run, **fields, started_at=started, seconds=seconds)
        _append(out, entry)
        entries.append(entry)
        err = f"  {entry.get('error')}" if entry["status"] != "ok" else ""
        say(f"[{i}/{len(todo)}] {run.id}: {entry['status']} in {seconds:.1f} s{err}")
    return entries
