"""Versions of the Python packages that matter, and two traps of an old nsys.

With nsys 2023.4 and 2024.2, programs using the ``nvtx`` package 0.2.12 or newer record no NVTX
ranges at all (only domain create/destroy); 0.2.11 records them (checked with 2024.2.3 on the CPU
fixture program: 80 ranges with 0.2.11, none with 0.2.12 and 0.2.17). nsys 2025.3 records every
version we tried; the releases between 2024.2 and 2025.3 were not tried, and are warned of.

An nsys traces CUDA with the newest CUPTI it bundles (``libcupti.so.X.Y`` beside it: 12.4 in
2023.4.4, 12.5 in 2024.2.3, 13.0 in 2025.3.1). Older than the driver's CUDA, 2023.4.4 recorded on
the H200 (driver 580, CUDA 13.0) every graph launch call and no replay in graph mode, without
any error (``tests/data/real/nsys2023_mixed_graph.sqlite``); its node mode and eager kernels
were whole. 2024.2.3 recorded the same programs whole in all three (``nsys2024_*``).
:func:`cupti_warning` says what may happen before recording.
"""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from specscope.profiler.discover import Nsys, parse_version

# nsys releases before this year are the "old" ones that lose ranges from nvtx >= 0.2.12 (module
# doc: 2024.2.3 is one).
FIRST_GOOD_NSYS_YEAR = 2025
LAST_GOOD_NVTX_FOR_OLD_NSYS = (0, 2, 11)

_VERSION_SNIPPET = (
    "import importlib.metadata as m, sys\n"
    "for n in sys.argv[1:]:\n"
    "    try: print(n, m.version(n))\n"
    "    except m.PackageNotFoundError: print(n, '-')\n"
)


def package_version(name: str) -> str | None:
    """The installed version of ``name`` in this interpreter, or None (never imports it)."""
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def package_versions(names: list[str], python: str | Path | None = None) -> dict[str, str | None]:
    """Versions of ``names`` in ``python`` (this interpreter if None or the same one)."""
    if python is None or Path(python).resolve() == Path(sys.executable).resolve():
        return {n: package_version(n) for n in names}
    try:
        out = subprocess.run(
            [str(python), "-c", _VERSION_SNIPPET, *names],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {n: None for n in names}
    found = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return {n: (None if found.get(n, "-") == "-" else found[n]) for n in names}


def _nums(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".")[:3] if x.isdigit())


def nvtx_warning(nsys: Nsys, nvtx_version: str | None) -> str | None:
    """A warning when an old nsys meets an ``nvtx`` that it records no ranges from; else None."""
    year = (parse_version(nsys.version) or (0,))[0]
    if nvtx_version is None or not year or year >= FIRST_GOOD_NSYS_YEAR:
        return None
    if _nums(nvtx_version) <= LAST_GOOD_NVTX_FOR_OLD_NSYS:
        return None
    return (
        f"nsys {nsys.version} records no NVTX ranges from the nvtx package {nvtx_version} "
        "(0.2.12 and newer); fix: pip install 'nvtx==0.2.11', or use nsys 2025.3 or newer"
    )


_CUPTI = re.compile(r"libcupti\.so\.(\d+)\.(\d+)$")


def newest_cupti(nsys: Nsys) -> tuple[int, int] | None:
    """The newest CUPTI (major, minor) ``nsys`` bundles: ``libcupti.so.X.Y`` beside the nsys
    binary, or in ``target-linux-x64`` beside the folder of a wrapper (``bin/``); None where
    there is none."""
    binary = Path(nsys.path).resolve()
    found = []
    for folder in (binary.parent, binary.parent.parent / "target-linux-x64"):
        if folder.is_dir():
            matches = (_CUPTI.match(f.name) for f in folder.iterdir())
            found += [(int(m[1]), int(m[2])) for m in matches if m]
    return max(found) if found else None


def cupti_warning(
    nsys: Nsys, driver_cuda: tuple[int, int] | None, cupti: tuple[int, int] | None = None
) -> str | None:
    """A warning when ``nsys`` traces CUDA with a CUPTI of an older major version than the
    driver's CUDA (module doc); else None (also where either is unknown). ``cupti``: its
    :func:`newest_cupti`, where the caller has it."""
    cupti = newest_cupti(nsys) if cupti is None else cupti
    if cupti is None or driver_cuda is None or cupti[0] >= driver_cuda[0]:
        return None
    return (
        f"nsys {nsys.version or '?'} traces CUDA with CUPTI {cupti[0]}.{cupti[1]}, older than "
        f"this driver's CUDA {driver_cuda[0]}.{driver_cuda[1]}: in graph mode it may record the "
        "graph launch calls and no replay (with CUDA 13.0, nsys 2023.4.4 recorded none, 2024.2.3 "
        "every one); fix: use an nsys as new as the driver, or record with --graph-trace node"
    )


def python_of(command: list[str]) -> str | None:
    """The Python interpreter a command runs, when it visibly is one (``python3 x.py``)."""
    import shutil

    if not command:
        return None
    name = Path(command[0]).name
    if name.startswith("python"):
        return shutil.which(command[0]) or command[0]
    return None
