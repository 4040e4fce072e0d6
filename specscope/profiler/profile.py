"""``specscope profile``: run a command under ``nsys profile``, export SQLite, write a manifest.

Each run gets a new folder ``OUT/<UTC time>-<label>/`` (a ``-2``, ``-3`` suffix if that name is
taken; never reused) holding::

    command.log      everything nsys and the command printed (also echoed to the terminal)
    report.nsys-rep  the report (report.qdrep from nsys 2021.3 and older)
    report.sqlite    its export (nsys export --type sqlite)
    export.log       what nsys export printed
    nsys-tmp/        nsys' temporary folder (TMPDIR); kept only if a .qdstrm was left there
    manifest.json    see specscope.profiler.manifest
    analysis.json, results.sqlite   with --analyze

Partial outputs are never deleted. A ``.qdstrm`` left unimported is kept and diagnosed (``ldd`` of
the importer names the missing libraries). A command that fails keeps its exit status; Ctrl-C lets
nsys finish its report and still exports it and writes the manifest (exit status 130).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from specscope.profiler import compat, discover, manifest
from specscope.profiler.errors import (
    CommandFailed,
    CommandNotFound,
    NoActivity,
    NoReport,
    OutputNotWritable,
    ProfilerError,
)
from specscope.profiler.flags import ProfileFlags, nsys_export_args, nsys_profile_args

REPORT = "report"
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
"""What ``nsys profile -o STEM`` names its report: ``STEM.nsys-rep``, or ``STEM.qdrep`` from nsys
2021.3 and older (2020.4 from Debian bullseye among them)."""


def written_report(stem: Path) -> Path | None:
    """The report ``nsys profile -o stem`` wrote (:data:`REPORT_SUFFIXES`), or None."""
    for suffix in REPORT_SUFFIXES:
        if (report := stem.with_name(stem.name + suffix)).exists():
            return report
    return None


_GENERATING = re.compile(rb"Generating '([^']+)'")
_LABEL_OK = re.compile(r"[^A-Za-z0-9._-]+")


class Interrupted(ProfilerError):
    """Ctrl-C: the folder is kept and usable; exit status 130 like the shell's."""

    exit_code = 130


@dataclass
class ExportCheck:
    """What an export holds that the analysis needs."""

    nvtx_ranges: int = 0
    cuda_api_calls: int = 0
    kernels: int = 0
    tables: list[str] = field(default_factory=list)


@dataclass
class ProfileResult:
    run_dir: Path
    manifest: dict
    export: Path | None
    check: ExportCheck | None
    notes: list[str]


def default_label(command: list[str]) -> str:
    """``python3 scripts/loop.py`` -> ``loop``; ``python -m pkg.mod`` -> ``mod``; else argv[0]."""
    name = Path(command[0]).name
    if name.startswith("python"):
        rest = command[1:]
        if len(rest) >= 2 and rest[0] == "-m":
            return rest[1].rsplit(".", 1)[-1]
        for arg in rest:
            if arg.endswith(".py"):
                return Path(arg).stem
    return name


def new_run_dir(out: Path, label: str, now: dt.datetime | None = None) -> Path:
    """Create and return ``out/<YYYYmmdd-HHMMSS>-<label>``, never an existing folder."""
    now = now or dt.datetime.now(dt.timezone.utc)
    label = _LABEL_OK.sub("_", label).strip("._") or "run"
    base = f"{now:%Y%m%d-%H%M%S}-{label}"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputNotWritable(
            f"cannot create the output folder {out} ({e.strerror}); choose another with --out"
        ) from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise OutputNotWritable(f"output folder {out} is not writable; choose another with --out")
    for n in range(1, 10_000):
        run_dir = out / (base if n == 1 else f"{base}-{n}")
        try:
            run_dir.mkdir()
            return run_dir
        except FileExistsError:
            continue
        except OSError as e:
            raise OutputNotWritable(
                f"cannot create {run_dir} ({e.strerror}); choose another folder with --out"
            ) from None
    raise OutputNotWritable(f"too many runs named {base} in {out}; choose another --label")


def resolve_command(command: list[str], env: Mapping[str, str] | None = None) -> str:
    """The executable ``command[0]`` names; CommandNotFound if there is none."""
    if not command:
        raise CommandNotFound("no command to profile; usage: specscope profile -- COMMAND [ARGS]")
    env = os.environ if env is None else env
    exe = command[0]
    if "/" in exe:
        if Path(exe).is_file() and os.access(exe, os.X_OK):
            return exe
        found = None
    else:
        found = shutil.which(exe, path=env.get("PATH", ""))
    if found is None:
        raise CommandNotFound(
            f"command not found: {exe}; check the spelling, the PATH, or give its full path"
        )
    return found


def diagnose_qdstrm(nsys: discover.Nsys, qdstrm: Path) -> str:
    """Why ``qdstrm`` was left unimported, and the fix (one line)."""
    importer = discover.find_importer(nsys)
    where = f"nsys left {qdstrm} unimported (kept)"
    if importer is None:
        return f"{where}; no QdstrmImporter found next to {nsys.path}: reinstall nsys"
    missing = discover.missing_libraries(importer)
    again = f"then import it: `{importer} -i {qdstrm}`, and rerun"
    if missing:
        return (
            f"{where}: its importer {importer} cannot load {', '.join(missing)}; fix: "
            f"{discover.missing_libraries_fix(missing)}; {again}"
        )
    return (
        f"{where}; its importer {importer} loads, so read command.log for the importer's error; "
        f"{again}"
    )


def check_export(path: Path) -> ExportCheck:
    """Count NVTX ranges, CUDA API calls and kernels in an export (absent table = zero rows)."""
    from specscope.analysis.sqlread import readonly_uri  # percent-encodes ``#``, ``?``, ``%``

    con = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        tables = sorted(
            r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")
        )

        def count(table: str, where: str = "") -> int:
            if table not in tables:
                return 0
            return con.execute(f"SELECT count(*) FROM {table} {where}").fetchone()[0]

        return ExportCheck(
            nvtx_ranges=count("NVTX_EVENTS", "WHERE eventType IN (59, 60) AND end IS NOT NULL"),
            cuda_api_calls=count("CUPTI_ACTIVITY_KIND_RUNTIME"),
            kernels=count("CUPTI_ACTIVITY_KIND_KERNEL"),
            tables=tables,
        )
    finally:
        con.close()


def _stdout_bytes(chunk: bytes) -> None:
    sys.stdout.buffer.write(chunk)
    sys.stdout.buffer.flush()


def run_logged(
    args: list[str],
    log: Path,
    env: Mapping[str, str],
    echo: Callable[[bytes], None] | None,
) -> tuple[int, float | None, bool]:
    """Run ``args``, copying its output to ``log`` and ``echo``.

    Returns (exit status, seconds until nsys said ``Generating '...qdstrm'`` (the end of
    recording), whether Ctrl-C was pressed). Ctrl-C is passed on by the terminal to nsys, which
    stops the command and writes its report: we wait for it (a second Ctrl-C terminates nsys).
    """
    t0 = time.monotonic()
    t_gen = None
    interrupted = False
    tail = b""
    with log.open("ab") as f:
        proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=dict(env)
        )
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except KeyboardInterrupt:
                if interrupted:
                    proc.terminate()
                interrupted = True
                continue
            if not chunk:
                break
            f.write(chunk)
            if echo is not None:
                echo(chunk)
            if t_gen is None:
                tail = (tail + chunk)[-4096:]
                if _GENERATING.search(tail):
                    t_gen = time.monotonic() - t0
        while True:
            try:
                rc = proc.wait()
                break
            except KeyboardInterrupt:
                interrupted = True
                proc.terminate()
    return rc, t_gen, interrupted


@dataclass
class _Setup:
    """What `profile` learns before it creates the run folder: the tools, GPUs and flags."""

    nsys: discover.Nsys
    gpus: list[manifest.Gpu]
    flags: ProfileFlags
    notes: list[str]
    packages: dict
    nvtx_warn: str | None


def _preflight(
    command: list[str],
    nsys_path: str | Path | None,
    flags: ProfileFlags,
    env: Mapping[str, str],
    warn: Callable[[str], None],
) -> _Setup:
    """Find nsys and the command, adapt `flags` to this machine and warn about every note.

    Raises a :class:`ProfilerError` before any folder exists when nsys or the command is missing.
    """
    nsys = discover.find_nsys(nsys_path, env)
    discover.check_exports_sqlite(nsys)
    resolve_command(command, env)
    gpus = manifest.gpus(env)
    flags, notes = flags.for_machine(bool(gpus))
    python = compat.python_of(command)
    packages = compat.package_versions(["torch", "triton", "nvtx"], python)
    nvtx_warn = compat.nvtx_warning(nsys, packages.get("nvtx")) if "nvtx" in flags.trace else None
    notes += [nvtx_warn] if nvtx_warn else []
    if "cuda" in flags.trace and (cupti := compat.cupti_warning(nsys, manifest.driver_cuda(env))):
        notes.append(cupti)
    for note in notes:
        warn(note)
    return _Setup(nsys, gpus, flags, notes, packages, nvtx_warn)


def _initial_manifest(
    command: list[str], run_dir: Path, env: Mapping[str, str], setup: _Setup, nsys_args: list[str]
) -> dict:
    """The manifest written before the command starts (status "running"; see `manifest`)."""
    nsys, flags = setup.nsys, setup.flags
    return {
        "command": command,
        "command_line": shlex.join(command),
        "cwd": os.getcwd(),
        "label": run_dir.name.split("-", 2)[-1],
        "env": manifest.env_flags(env),
        "git": manifest.git_state(),
        "nsys": {**asdict(nsys), "path": str(nsys.path), "args": nsys_args[1:]},
        "flags": {k: v for k, v in asdict(flags).items()},
        "mode": flags.mode,
        "notes": setup.notes,
        "gpus": [asdict(g) for g in setup.gpus],
        "host": manifest.host_info(),
        "packages": setup.packages,
        "started_at": manifest.utc_now(),
        "ended_at": None,
        "status": "running",
        "exit_status": None,
        "timings_s": {},
        "outputs": {},
    }


def _record(
    nsys_args: list[str],
    run_dir: Path,
    env: Mapping[str, str],
    echo: Callable[[bytes], None] | None,
    data: dict,
    t0: float,
) -> tuple[int, bool]:
    """Run the command under nsys (TMPDIR in ``nsys-tmp/``); record its exit status and the
    record/import timings (seconds since `t0`) in `data`. Returns (exit status, interrupted)."""
    # absolute: nsys (boost's temp_directory_path) rejects a relative TMPDIR
    rc, t_gen, interrupted = run_logged(
        nsys_args,
        run_dir / "command.log",
        {**env, "TMPDIR": str((run_dir / "nsys-tmp").absolute())},
        echo,
    )
    total = time.monotonic() - t0
    data["exit_status"] = rc
    data["timings_s"] = {
        "record": round(t_gen, 3) if t_gen is not None else round(total, 3),
        "import": round(total - t_gen, 3) if t_gen is not None else None,
    }
    return rc, interrupted


def _export_report(
    nsys: discover.Nsys, run_dir: Path, flags: ProfileFlags, env: Mapping[str, str], data: dict
) -> tuple[Path | None, ProfilerError | None]:
    """Export the report to SQLite; returns (the export, None), or (None, the error) with
    `data["status"]` saying why there is none: export-failed, qdstrm-unimported or no-report."""
    report = written_report(run_dir / REPORT)
    qdstrms = manifest.files_under(run_dir, ".qdstrm")
    if report is not None:
        export = run_dir / f"{REPORT}.sqlite"
        t1 = time.monotonic()
        erc, _, _ = run_logged(
            [str(nsys.path), *nsys_export_args(report, export)],
            run_dir / "export.log",
            env,
            None,
        )
        data["timings_s"]["export"] = round(time.monotonic() - t1, 3)
        if erc == 0 and export.exists():
            return export, None
        data["status"] = "export-failed"
        return None, NoReport(
            f"nsys export failed (status {erc}); its output is in "
            f"{run_dir / 'export.log'}; the report {report} is kept"
        )
    if qdstrms:
        data["status"] = "qdstrm-unimported"
        return None, NoReport(diagnose_qdstrm(nsys, qdstrms[0]))
    data["status"] = "no-report"
    hint = (
        "the capture range never opened: the command must call cudaProfilerStart "
        "(torch.cuda.profiler.start()), or use --capture-range none"
        if flags.capture_range != "none"
        else "nsys recorded nothing"
    )
    return None, NoReport(f"nsys wrote no report ({hint}); see {run_dir / 'command.log'}")


def _final_status(
    data: dict, error: ProfilerError | None, rc: int, interrupted: bool, run_dir: Path
) -> ProfilerError | None:
    """Settle `data["status"]` and the error to raise, in this order: Ctrl-C (interrupted), an
    unimported .qdstrm (the import needs fixing, whatever nsys exited with), the command's
    non-zero exit status (failed), else the export's own error, or none (ok)."""
    also = f" ({error})" if error is not None else ""
    if interrupted:
        data["status"] = "interrupted"
        return Interrupted(f"interrupted; what was recorded is in {run_dir}{also}")
    if data["status"] == "qdstrm-unimported":
        # nsys exits non-zero when its import fails: the import is what needs fixing
        return NoReport(f"{error}; nsys exited with status {rc}" if rc else str(error))
    if rc != 0:
        data["status"] = "failed"
        return CommandFailed(
            f"the profiled command exited with status {rc}; its output is in "
            f"{run_dir / 'command.log'}{also}",
            rc,
        )
    if error is None:
        data["status"] = "ok"
    return error


def _analyze_export(
    export: Path,
    check: ExportCheck | None,
    preset: str,
    db: Path,
    nvtx_warn: str | None,
    data: dict,
) -> NoActivity | None:
    """``--analyze``: analyse the export into `db` and record it in `data["analysis"]`; the
    error instead when the export holds no NVTX range to analyse."""
    if check is not None and check.nvtx_ranges == 0:
        return NoActivity(
            f"{export} has no NVTX ranges, nothing to analyse"
            + (f" ({nvtx_warn})" if nvtx_warn else "; was the command annotated with NVTX?")
        )
    data["analysis"] = run_analysis(export, preset, db)
    return None


def _close_run(run_dir: Path, data: dict, error: ProfilerError | None, t0: float) -> None:
    """Finish the manifest (total time, end time, error, output hashes) and write it; remove
    ``nsys-tmp/`` unless nsys left a .qdstrm there."""
    data["timings_s"]["total"] = round(time.monotonic() - t0, 3)
    tmp = run_dir / "nsys-tmp"
    if tmp.exists() and not manifest.files_under(tmp, ".qdstrm"):
        shutil.rmtree(tmp, ignore_errors=True)
    data["ended_at"] = manifest.utc_now()
    if error is not None:
        data["error"] = str(error)
    data["outputs"] = manifest.output_hashes(run_dir)
    manifest.write_manifest(run_dir, data)


def profile(
    command: list[str],
    *,
    label: str | None = None,
    out: Path = Path("runs"),
    nsys_path: str | Path | None = None,
    flags: ProfileFlags | None = None,
    analyze_preset: str | None = None,
    db: Path | None = None,
    env: Mapping[str, str] | None = None,
    echo: Callable[[bytes], None] | None = _stdout_bytes,
    warn: Callable[[str], None] = lambda m: None,
) -> ProfileResult:
    """Profile ``command`` into a new run folder under ``out``; see the module docstring.

    Raises a :class:`ProfilerError` (after writing the manifest when a folder exists) for
    every expected failure; :class:`CommandFailed` carries the command's own exit status.
    """
    env = dict(os.environ if env is None else env)
    setup = _preflight(command, nsys_path, ProfileFlags() if flags is None else flags, env, warn)
    flags = setup.flags
    run_dir = new_run_dir(Path(out), label or default_label(command))
    (run_dir / "nsys-tmp").mkdir()
    nsys_args = [str(setup.nsys.path), *nsys_profile_args(flags, run_dir / REPORT), *command]
    data = _initial_manifest(command, run_dir, env, setup, nsys_args)
    manifest.write_manifest(run_dir, data)
    error: ProfilerError | None = None
    export = None
    check = None
    t0 = time.monotonic()
    try:
        rc, interrupted = _record(nsys_args, run_dir, env, echo, data, t0)
        export, error = _export_report(setup.nsys, run_dir, flags, env, data)
        if export is not None:
            check, problem = export_problems(
                export, flags, bool(setup.gpus), setup.nvtx_warn, data, setup.notes, warn
            )
            if problem is not None:
                data["status"] = "no-cuda-activity"
                error = problem
        error = _final_status(data, error, rc, interrupted, run_dir)
        if error is None and analyze_preset is not None and export is not None:
            db = db or run_dir / "results.sqlite"
            error = _analyze_export(export, check, analyze_preset, db, setup.nvtx_warn, data)
    except ProfilerError as e:
        error = e
    except BaseException as e:  # an analysis error or a bug: record it, keep the folder
        data["status"] = data["status"] if data["status"] != "running" else "error"
        data["error"] = f"{type(e).__name__}: {e}"
        raise
    finally:
        _close_run(run_dir, data, error, t0)
    if error is not None:
        raise error
    return ProfileResult(run_dir, data, export, check, setup.notes)


def export_problems(
    export: Path,
    flags: ProfileFlags,
    has_gpu: bool,
    nvtx_warn: str | None,
    data: dict,
    notes: list[str],
    warn: Callable[[str], None],
) -> tuple[ExportCheck, NoActivity | None]:
    """Check the export holds what was traced: warn about missing NVTX ranges, and return the
    error for a GPU machine whose export has no CUDA activity."""
    check = check_export(export)
    data["export"] = {
        "path": export.name,
        "nvtx_ranges": check.nvtx_ranges,
        "cuda_api_calls": check.cuda_api_calls,
        "kernels": check.kernels,
    }
    if "nvtx" in flags.trace and check.nvtx_ranges == 0:
        note = f"{export.name} has no NVTX ranges" + (
            f": {nvtx_warn}" if nvtx_warn else " (the command opened none, or nsys lost them)"
        )
        notes.append(note)
        warn(note)
    if flags.traces_cuda and has_gpu and check.cuda_api_calls == 0 and check.kernels == 0:
        return check, NoActivity(
            f"{export} recorded no CUDA activity on this GPU machine: the --capture-range "
            "never opened around CUDA work, or the program forked (try --capture-range none, "
            "or run the CUDA work in the profiled process itself)"
        )
    return check, None


def run_analysis(export: Path, preset: str, db: Path) -> dict:
    """Analyse ``export`` with ``preset``, append it to ``db``; the summary for the manifest."""
    from specscope.analysis.run import analyze
    from specscope.analysis.spec import load_preset
    from specscope.analysis.store import append_run

    result = analyze(export, load_preset(preset))
    run_id = append_run(db, result)
    (export.parent / "analysis.json").write_text(json.dumps(result.to_json(), indent=1) + "\n")
    return {
        "preset": preset,
        "db": str(db),
        "run_id": run_id,
        "steps": result.n_steps,
        "json": "analysis.json",
    }
