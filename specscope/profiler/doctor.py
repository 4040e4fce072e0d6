"""``specscope doctor``: can this machine record and export what specscope analyses?

One :class:`Check` per line, each with the fix when it fails:

- ``nsys``      found (path, version, how it was found) — or where we looked;
- ``sqlite``    this nsys offers ``nsys export --type sqlite``;
- ``importer``  its ``QdstrmImporter`` loads (``ldd``: missing libraries named);
- ``nvtx``      the old-nsys + ``nvtx>=0.2.12`` trap (no ranges recorded);
- ``cupti``     nsys's newest bundled CUPTI against the driver's CUDA (an older major: graph
  replays may go unrecorded, :func:`.compat.cupti_warning`);
- ``export``    a tiny NVTX-only profile of a Python one-liner, exported and read back: its ranges
  really are in the export;
- ``gpu``       GPU names and driver (none: ``specscope profile`` drops ``cuda`` from ``-t``);
- ``packages``  torch, triton, nvtx versions;
- ``mode``      the CUDA-graph trace mode ``specscope profile`` will record with by default;
- ``reader``    whether the page scan runs its C fast path here (:mod:`specscope.analysis.native`)
  or numpy only (a warning: the same results, the read 2x slower).
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from specscope.profiler import compat, discover, manifest
from specscope.profiler.errors import ProfilerError
from specscope.profiler.flags import ProfileFlags, nsys_export_args, nsys_profile_args

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"
# The one-liner of the export check: 3 ranges in our domain around a short sleep.
_PROBE = (
    "import time, nvtx\n"
    "for i in range(3):\n"
    "    nvtx.push_range('doctor.probe', domain='specscope'); time.sleep(0.002)\n"
    "    nvtx.pop_range(domain='specscope')\n"
)
PROBE_RANGES = 3


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | FAIL | skip
    detail: str
    fix: str = ""

    def line(self) -> str:
        fix = f"  fix: {self.fix}" if self.fix else ""
        return f"{self.status:<4}  {self.name:<9} {self.detail}{fix}"


def export_probe(
    nsys: discover.Nsys, python: str = sys.executable, workdir: Path | None = None
) -> Check:
    """Profile the NVTX one-liner with ``nsys``, export it, and count its ranges."""
    from specscope.profiler.profile import (
        check_export,
        diagnose_qdstrm,
        run_logged,
        written_report,
    )

    with tempfile.TemporaryDirectory(prefix="specscope-doctor-", dir=workdir) as d:
        tmp = Path(d)
        flags = ProfileFlags(trace=("nvtx",), capture_range="none")
        args = [str(nsys.path), *nsys_profile_args(flags, tmp / "probe"), python, "-c", _PROBE]
        env = {**os.environ, "TMPDIR": str(tmp)}
        rc, _, _ = run_logged(args, tmp / "probe.log", env, None)
        log = (tmp / "probe.log").read_text(errors="replace").strip().splitlines()
        last = log[-1] if log else ""
        report = written_report(tmp / "probe")
        if report is None:
            qdstrms = manifest.files_under(tmp, ".qdstrm")
            if qdstrms:
                return Check("export", FAIL, "no report", diagnose_qdstrm(nsys, qdstrms[0]))
            return Check(
                "export",
                FAIL,
                f"nsys profile wrote no report (status {rc}): {last}",
                "run `nsys profile -t nvtx python -c pass` by hand to see why",
            )
        rc, _, _ = run_logged(
            [str(nsys.path), *nsys_export_args(report, tmp / "probe.sqlite")],
            tmp / "export.log",
            os.environ,
            None,
        )
        if rc != 0 or not (tmp / "probe.sqlite").exists():
            return Check(
                "export",
                FAIL,
                f"nsys export failed (status {rc})",
                "run `nsys export --type sqlite REPORT` by hand to see why",
            )
        found = check_export(tmp / "probe.sqlite").nvtx_ranges
    if found < PROBE_RANGES:
        return Check(
            "export",
            FAIL,
            f"exported, but {found} of {PROBE_RANGES} NVTX ranges in it",
            "pip install 'nvtx==0.2.11' for nsys 2023.x, or a newer nsys",
        )
    return Check("export", OK, f"profiled, exported and read back {found} NVTX ranges")


def _nsys_check(nsys_path: str | Path | None) -> tuple[discover.Nsys | None, Check]:
    """``nsys``: found (path, version, how), or FAIL with the install hint; the nsys found."""
    try:
        nsys = discover.find_nsys(nsys_path)
    except ProfilerError as e:
        return None, Check("nsys", FAIL, str(e).split("; ")[0], discover.INSTALL_HINT)
    found = f"{nsys.path} (version {nsys.version or '?'}, found by {nsys.found_by})"
    return nsys, Check("nsys", OK, found)


def _sqlite_check(nsys: discover.Nsys) -> Check:
    """``sqlite``: this nsys offers ``nsys export --type sqlite``."""
    try:
        discover.check_exports_sqlite(nsys)
    except ProfilerError as e:
        return Check("sqlite", FAIL, str(e).split("; ")[0], discover.INSTALL_HINT)
    return Check("sqlite", OK, "nsys export --type sqlite is available")


def _importer_check(nsys: discover.Nsys) -> Check:
    """``importer``: its QdstrmImporter exists and ``ldd`` finds every library it needs."""
    importer = discover.find_importer(nsys)
    if importer is None:
        return Check(
            "importer",
            WARN,
            f"no QdstrmImporter found near {nsys.path}",
            "reinstall nsys if reports are not generated",
        )
    missing = discover.missing_libraries(importer)
    if missing is None:
        return Check("importer", SKIP, f"{importer} (ldd not available)")
    if missing:
        return Check(
            "importer",
            FAIL,
            f"{importer} cannot load {', '.join(missing)}",
            discover.missing_libraries_fix(missing),
        )
    return Check("importer", OK, f"{importer} loads")


def _nvtx_check(nsys: discover.Nsys, packages: dict[str, str | None]) -> Check:
    """``nvtx``: WARN on the old-nsys + new-nvtx trap (no ranges recorded)."""
    warning = compat.nvtx_warning(nsys, packages.get("nvtx"))
    if warning:
        return Check("nvtx", WARN, warning.split("; fix: ")[0], warning.split("; fix: ")[-1])
    nvtx = packages.get("nvtx") or "not installed"
    return Check("nvtx", OK, f"nvtx {nvtx} with nsys {nsys.version or '?'}")


def _cupti_check(nsys: discover.Nsys, driver_cuda: tuple[int, int] | None) -> Check:
    """``cupti``: WARN where nsys traces with a CUPTI older than the driver's CUDA (graph
    replays may go unrecorded: :func:`.compat.cupti_warning`)."""
    cupti = compat.newest_cupti(nsys)
    warning = compat.cupti_warning(nsys, driver_cuda, cupti)
    if warning:
        return Check("cupti", WARN, warning.split("; fix: ")[0], warning.split("; fix: ")[-1])
    have = f"CUPTI {cupti[0]}.{cupti[1]}" if cupti else "no bundled CUPTI found"
    cuda = f"the driver's CUDA {driver_cuda[0]}.{driver_cuda[1]}" if driver_cuda else "no driver"
    return Check("cupti", OK, f"nsys {nsys.version or '?'}: {have}; {cuda}")


def _export_check(
    nsys: discover.Nsys, probe: bool, packages: dict[str, str | None], python: str
) -> Check:
    """``export``: the probe profile (`export_probe`), skipped by --no-probe or without nvtx."""
    if not probe:
        return Check("export", SKIP, "not run (--no-probe)")
    if packages.get("nvtx") is None:
        return Check(
            "export", SKIP, f"the nvtx package is not installed in {python}", "pip install nvtx"
        )
    return export_probe(nsys, python)


def _machine_checks(gpus: list[manifest.Gpu], packages: dict[str, str | None]) -> list[Check]:
    """``gpu``, ``packages`` and ``mode``: what `specscope profile` will record on this machine."""
    if gpus:
        names = "; ".join(f"{g.name} (driver {g.driver})" for g in gpus)
        gpu = Check("gpu", OK, f"{len(gpus)} GPU(s): {names}")
    else:
        gpu = Check(
            "gpu", OK, "none found (nvidia-smi): `specscope profile` traces nvtx only, cuda dropped"
        )
    versions = Check("packages", OK, ", ".join(f"{k} {v or '-'}" for k, v in packages.items()))
    flags, _ = ProfileFlags().for_machine(bool(gpus))
    mode = Check(
        "mode",
        OK,
        f"profile records with -t {','.join(flags.trace)}, "
        f"CUDA graph trace mode {flags.mode}, capture range "
        f"{flags.capture_range} (override: --graph-trace, --trace, "
        "--capture-range)",
    )
    return [gpu, versions, mode, reader_check()]


def reader_check() -> Check:
    """``reader``: the C fast paths (the page scan's, the per-step sums', the per-step JSON's)
    built and loaded here, or why not."""
    from specscope.analysis import jsonrows, native

    fn, what = native.describe()
    sums, sums_what = native.built(native.OPSUMS)
    rows, rows_what = native.built(jsonrows.SOURCE)
    if rows is not None and not jsonrows.available():
        rows, rows_what = None, f"{rows_what} writes a value otherwise than this pandas"
    if fn is not None and sums is not None and rows is not None:
        return Check(
            "reader",
            OK,
            "exports are page-scanned, summed and their steps written as JSON with the C fast "
            f"paths ({what}, {sums_what}, {rows_what})",
        )
    why = what if fn is None else sums_what if sums is None else rows_what
    return Check(
        "reader",
        WARN,
        "exports are page-scanned, summed or written as JSON in numpy and pandas only (the "
        f"same results, slower): {why}",
        "install a C compiler (gcc), set CC, or unset SPECSCOPE_NATIVE",
    )


def run_checks(
    nsys_path: str | Path | None = None, probe: bool = True, python: str = sys.executable
) -> list[Check]:
    """All checks, in order; later ones that need nsys are skipped when it is missing."""
    packages = compat.package_versions(["torch", "triton", "nvtx"], python)
    gpus = manifest.gpus()
    nsys, found = _nsys_check(nsys_path)
    checks = [found]
    if nsys is not None:
        checks += [
            _sqlite_check(nsys),
            _importer_check(nsys),
            _nvtx_check(nsys, packages),
            _cupti_check(nsys, manifest.driver_cuda() if gpus else None),
            _export_check(nsys, probe, packages, python),
        ]
    return checks + _machine_checks(gpus, packages)
