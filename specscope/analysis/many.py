"""Analyse many exports (one per rank, or a campaign's worth) in parallel processes or on Dask.

One export is one task: :func:`analyze_export` loads it, computes its steps, per-step metrics
and summary, and returns a :class:`ExportResult` holding the detached :class:`Analysis`
(:meth:`Analysis.detach`: provenance and per-step numbers, no SQLite connection and no
GPU-operation frame), so results pickle cheaply back to the parent. A failure of one export
(missing, corrupt, no steps, or a worker process that died) is that export's one-line
``error``; the others complete.

- :func:`analyze_many` runs the tasks in a ``concurrent.futures.ProcessPoolExecutor``
  (``jobs`` processes; ``jobs=1`` runs them in this process).
- :func:`analyze_on_dask` sends the same tasks to an existing Dask cluster through
  ``distributed.Client(address)`` (``pip install 'specscope[dask]'``); every worker must see the
  exports under the same paths (a shared file system). Results come back to this process.
- :func:`store_results` appends every analysed export to one results database (one writer:
  this process), as ``analyze --db`` does for one export.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from specscope.analysis.parallel import usable_cpus
from specscope.analysis.run import DEFAULT_OPTIONS, Analysis, AnalyzeOptions
from specscope.analysis.spec import StepSpec
from specscope.errors import SpecscopeError


@dataclass
class ExportResult:
    """One export's outcome: ``analysis`` (detached) or a one-line ``error``."""

    path: Path
    analysis: Analysis | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def rank_labels(paths: Sequence[Path]) -> list[str]:
    """A short label per export: its file stem, or its path where stems repeat."""
    stems = [p.stem for p in paths]
    if len(set(stems)) == len(stems):
        return stems
    return [str(p) for p in paths]


def analyze_export(
    path: str | Path, spec: StepSpec | None, options: AnalyzeOptions
) -> ExportResult:
    """Analyse one export (``spec=None``: zero-config, :func:`.inputs.analyze_export`); every
    failure becomes the result's one-line ``error``."""
    from specscope.analysis.inputs import analyze_export as analyze

    path = Path(path)
    try:
        result = analyze(path, spec, options)
        detached = result.detach()
        result.trace.con.close()
        return ExportResult(path, detached)
    except SpecscopeError as e:
        return ExportResult(path, error=str(e))
    except Exception as e:  # anything else is still this export's error, never a traceback
        return ExportResult(path, error=_one_line(path, e))


def _one_line(path: Path, e: BaseException) -> str:
    text = str(e).strip().splitlines()
    detail = f": {text[0]}" if text else ""
    message = f"{type(e).__name__}{detail}"
    return message if str(path) in message else f"{path}: {message}"


DASK_CONNECT_TIMEOUT = "10s"


def _init_worker(read_threads: int) -> None:
    # each worker reads with fewer threads, so jobs x threads stays near the CPU count
    os.environ["SPECSCOPE_READ_THREADS"] = str(read_threads)


def default_jobs(n_exports: int) -> int:
    return max(1, min(n_exports, usable_cpus()))


def analyze_many(
    paths: Sequence[str | Path],
    spec: StepSpec | None,
    options: AnalyzeOptions = DEFAULT_OPTIONS,
    *,
    jobs: int | None = None,
    on_result: Callable[[ExportResult], None] | None = None,
) -> list[ExportResult]:
    """Analyse each export in its own task on ``jobs`` processes; results in input order.

    ``on_result`` is called in this process as each export finishes (progress, warnings).
    """
    paths = [Path(p) for p in paths]
    jobs = default_jobs(len(paths)) if jobs is None else max(1, jobs)
    results: list[ExportResult | None] = [None] * len(paths)
    if jobs == 1 or len(paths) == 1:
        for i, p in enumerate(paths):
            results[i] = analyze_export(p, spec, options)
            if on_result is not None:
                on_result(results[i])
        return cast("list[ExportResult]", results)
    threads = max(1, default_jobs(1 << 16) // jobs)
    with ProcessPoolExecutor(jobs, initializer=_init_worker, initargs=(threads,)) as pool:
        futures = {pool.submit(analyze_export, p, spec, options): i for i, p in enumerate(paths)}
        for fut in as_completed(futures):
            i = futures[fut]
            try:
                results[i] = fut.result()
            except Exception as e:  # the worker died (killed, out of memory): this export's error
                results[i] = ExportResult(paths[i], error=_one_line(paths[i], e))
            if on_result is not None:
                on_result(results[i])
    return cast("list[ExportResult]", results)


def analyze_on_dask(
    address: str,
    paths: Sequence[str | Path],
    spec: StepSpec | None,
    options: AnalyzeOptions = DEFAULT_OPTIONS,
    *,
    on_result: Callable[[ExportResult], None] | None = None,
    timeout: str | None = None,
) -> list[ExportResult]:
    """Like :func:`analyze_many`, one task per export on the Dask scheduler at ``address``."""
    try:
        from distributed import Client
        from distributed import as_completed as dask_completed
    except ImportError:
        raise SpecscopeError(
            "--dask-scheduler needs Dask's distributed scheduler: pip install 'specscope[dask]'"
        ) from None
    paths = [Path(p).resolve() for p in paths]
    try:
        client = Client(address, timeout=timeout or DASK_CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as e:
        raise SpecscopeError(f"cannot reach the Dask scheduler at {address} ({e})") from None
    results: list[ExportResult | None] = [None] * len(paths)
    try:
        futures = [client.submit(analyze_export, p, spec, options, pure=False) for p in paths]
        index = {f.key: i for i, f in enumerate(futures)}
        for fut in dask_completed(futures):
            i = index[fut.key]
            try:
                results[i] = fut.result()
            except Exception as e:  # the task failed on the worker (worker lost, ...)
                results[i] = ExportResult(paths[i], error=_one_line(paths[i], e))
            if on_result is not None:
                on_result(results[i])
    finally:
        client.close()
    return cast("list[ExportResult]", results)


def store_results(db: str | Path, results: Iterable[ExportResult]) -> list[int]:
    """Append every analysed export to the results database ``db``; return the run ids."""
    from specscope.analysis.store import append_run

    ids = []
    for r in results:
        if r.ok and r.analysis is not None:
            ids.append(append_run(db, r.analysis))
    return ids
