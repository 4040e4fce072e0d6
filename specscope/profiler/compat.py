"""Versions of the Python packages that matter, and the old-nsys + new-nvtx trap.

With nsys 2023.4, programs using the ``nvtx`` package 0.2.12 or newer record no NVTX ranges at all
(only domain create/destroy); 0.2.11 records them. nsys 2025.3 records every version we tried.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from specscope.profiler.discover import Nsys, parse_version

# nsys releases before this year are the "old" ones that lose ranges from nvtx >= 0.2.12.
FIRST_GOOD_NSYS_YEAR = 2024
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
        "(0.2.12 and newer); fix: pip install 'nvtx==0.2.11', or use nsys 2024.1 or newer"
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
