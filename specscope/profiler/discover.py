"""Find nsys, read its version, and check that its importer can load.

Search order (the first hit wins; :func:`find_nsys` says where it looked when none does):

1. ``--nsys PATH`` (``explicit``), then ``$SPECSCOPE_NSYS``: used as given, an error if unusable;
2. ``nsys`` on ``PATH``;
3. ``/opt/nvidia/nsight-systems*/bin/nsys`` and ``/opt/nvidia/nsight-systems/*/bin/nsys``;
4. ``/usr/local/cuda*/bin/nsys``;
5. ``/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys`` (the copy bundled in Nsight Compute);
6. the prefix of ``scripts/install_nsys.sh``:
   ``${SPECSCOPE_NSYS_PREFIX:-~/.local/specscope/nsys-2023.4.4}/bin/specscope-nsys``, then any
   ``~/.local/specscope/nsys-*/bin/specscope-nsys``.

Within one glob the newest-looking path (highest version in its name) comes first.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from specscope.profiler.errors import NsysNotFound, NsysTooOld

INSTALL_VERSION = "2023.4.4"
WRAPPER_NAME = "specscope-nsys"
INSTALL_HINT = (
    "install it: `NSYS=$(bash scripts/install_nsys.sh)` (CPU machine, Debian/Ubuntu) or Nsight "
    "Systems from https://developer.nvidia.com/nsight-systems, then pass --nsys PATH or set "
    "SPECSCOPE_NSYS"
)
_VERSION = re.compile(r"(\d{4})\.(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Nsys:
    """An nsys executable and what ``nsys --version`` said."""

    path: Path
    version: str  # e.g. "2023.4.4.54"; "" if unknown
    found_by: str  # "--nsys", "SPECSCOPE_NSYS", "PATH", or the glob that matched


def parse_version(text: str) -> tuple[int, ...]:
    """``"... version 2023.4.4.54-23443v0"`` -> ``(2023, 4, 4, 54)``; ``()`` if none."""
    m = _VERSION.search(text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else ()


def _executable(p: Path) -> bool:
    return p.is_file() and os.access(p, os.X_OK)


def _version_key(p: Path) -> tuple:
    return tuple(int(n) for n in re.findall(r"\d+", str(p)))


def install_prefix(env: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """Where ``scripts/install_nsys.sh`` installs by default."""
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    default = home / ".local" / "specscope" / f"nsys-{INSTALL_VERSION}"
    return Path(env.get("SPECSCOPE_NSYS_PREFIX") or default)


def search_locations(
    env: Mapping[str, str] | None = None, home: Path | None = None, root: Path = Path("/")
) -> list[tuple[str, list[Path]]]:
    """The places searched after ``--nsys``/``$SPECSCOPE_NSYS``, in order, with what exists there.

    ``root`` prefixes the absolute system globs (tests point it at a fake tree).
    """
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    places: list[tuple[str, list[Path]]] = []
    on_path = shutil.which("nsys", path=env.get("PATH", ""))
    places.append(("PATH", [Path(on_path)] if on_path else []))
    for pattern in (
        "opt/nvidia/nsight-systems*/bin/nsys",
        "opt/nvidia/nsight-systems/*/bin/nsys",
        "usr/local/cuda*/bin/nsys",
        "opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
    ):
        hits = sorted(root.glob(pattern), key=_version_key, reverse=True)
        places.append(("/" + pattern, [p for p in hits if _executable(p)]))
    prefix = install_prefix(env, home) / "bin" / WRAPPER_NAME
    places.append((str(prefix), [prefix] if _executable(prefix) else []))
    others = sorted(
        (home / ".local" / "specscope").glob(f"nsys-*/bin/{WRAPPER_NAME}"),
        key=_version_key,
        reverse=True,
    )
    places.append(
        (
            str(home / ".local/specscope/nsys-*/bin" / WRAPPER_NAME),
            [p for p in others if _executable(p)],
        )
    )
    return places


def nsys_version(path: Path, timeout: float = 60) -> str:
    """The version ``path --version`` prints (``"2023.4.4.54"``), or "" if it prints none."""
    try:
        out = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=timeout
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    m = _VERSION.search(out.stdout + out.stderr)
    return m.group(0) if m else ""


def find_nsys(
    explicit: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    root: Path = Path("/"),
) -> Nsys:
    """The nsys to use (search order in the module docstring); NsysNotFound says where it looked."""
    env = os.environ if env is None else env
    for source, value in (("--nsys", explicit), ("SPECSCOPE_NSYS", env.get("SPECSCOPE_NSYS"))):
        if value:
            p = Path(value).expanduser()
            if p.is_dir():
                p = p / "nsys" if _executable(p / "nsys") else p / "bin" / "nsys"
            if not _executable(p):
                raise NsysNotFound(
                    f"{source} {value}: not an executable nsys; give the path of the nsys binary "
                    f"(or the wrapper printed by scripts/install_nsys.sh), or unset it to search"
                )
            return Nsys(p, nsys_version(p), source)
    looked = []
    for where, hits in search_locations(env, home, root):
        if hits:
            return Nsys(hits[0], nsys_version(hits[0]), where)
        looked.append(where)
    raise NsysNotFound(f"nsys not found (looked in {', '.join(looked)}); {INSTALL_HINT}")


def check_exports_sqlite(nsys: Nsys, timeout: float = 60) -> None:
    """Raise NsysTooOld unless ``nsys export --help`` offers the sqlite type."""
    try:
        out = subprocess.run(
            [str(nsys.path), "export", "--help"], capture_output=True, text=True, timeout=timeout
        )
        text = (out.stdout + out.stderr).lower()
    except (OSError, subprocess.TimeoutExpired) as e:
        text = str(e)
    if "sqlite" not in text:
        raise NsysTooOld(
            f"{nsys.path} (nsys {nsys.version or 'of unknown version'}) cannot export SQLite "
            f"(`nsys export --help` offers no sqlite type); use a newer nsys: {INSTALL_HINT}"
        )


def find_importer(nsys: Nsys) -> Path | None:
    """The ``QdstrmImporter`` that turns nsys' raw ``.qdstrm`` into a report, if found."""
    real = nsys.path.resolve()
    bases = [real.parent, real.parent.parent, nsys.path.parent.parent]
    for base in dict.fromkeys(bases):
        for cand in (base / "QdstrmImporter", base / "host-linux-x64" / "QdstrmImporter"):
            if _executable(cand):
                return cand
        for cand in sorted(base.glob("*/QdstrmImporter")):
            if _executable(cand):
                return cand
    return None


def missing_libraries(binary: Path, env: Mapping[str, str] | None = None) -> list[str] | None:
    """Shared libraries ``ldd`` reports ``not found`` for ``binary`` (None if ldd is unavailable).

    The binary's own folder is put first on ``LD_LIBRARY_PATH``, as nsys does for its tools.
    """
    env = dict(os.environ if env is None else env)
    ldd = shutil.which("ldd", path=env.get("PATH", ""))
    if ldd is None:
        return None
    lib_path = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = str(binary.parent) + (f":{lib_path}" if lib_path else "")
    try:
        out = subprocess.run(
            [ldd, str(binary)], capture_output=True, text=True, env=env, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [line.split()[0] for line in out.stdout.splitlines() if "not found" in line]


def missing_libraries_fix(missing: list[str]) -> str:
    """How to make the importer load (shared/NSYS.md: libdw/libelf on the H200 hosts)."""
    pkgs = {"libdw.so.1": "libdw1", "libelf.so.1": "libelf1", "libssh.so.4": "libssh-4"}
    debs = " ".join(dict.fromkeys(pkgs.get(m, m) for m in missing))
    return (
        f"put {', '.join(missing)} on LD_LIBRARY_PATH (e.g. `apt-get download {debs}`, "
        "`dpkg -x` each into DIR, `export LD_LIBRARY_PATH=DIR/usr/lib/x86_64-linux-gnu`)"
    )
