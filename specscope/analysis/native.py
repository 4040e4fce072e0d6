"""The C fast paths (``pagescan.c``, ``opsums.c``): compiled on first use, cached, loaded by ctypes.

The numpy decoding of :mod:`.pagescan` spends most of its time gathering values (one fancy
index per column of every record); the C loop of ``pagescan.c`` reads the same cells in one
pass, 2-3x faster (the 2 M GPU operations of ``ops2m`` on one core: 0.10-0.13 s against
0.29-0.33 s; the whole read, pages and all, 0.18-0.19 s against 0.36-0.39 s), and ctypes lets
go of the GIL during the call, so the read's threads run it in parallel as they do numpy. It
decodes only the usual case (its header says which); for any other chunk it says so and the
numpy decoder, the reference, takes the chunk: results never differ
(``tests/analysis/test_pagescan_native.py``). ``opsums.c`` holds the per-step sums of the
metrics in one C loop each (:mod:`.opsums`, with their numpy references).

How it is built, each rule for a reason:

- **With the machine's C compiler, on first use** (``$CC``, else ``cc``): a source file of a
  hundred lines needs no build system, and a package installed without one still runs. Where
  no compiler runs, or its output does not load, :func:`library` is None and every read stays
  in numpy (the speed of the sessions before this module).
- **Cached per source, compiler and machine** in ``$SPECSCOPE_CACHE`` (else
  ``$XDG_CACHE_HOME/specscope``, else ``~/.cache/specscope``), under a name of their hash:
  compiled once (0.1-0.3 s), then only loaded; a changed source is a new file. Written to a
  temporary name and renamed into place, so a process that finds the file finds it whole,
  whichever of two compiling at once renames last.
- **Loaded only if it is this user's own** and no one else may write it (code run in this
  process: not a file another user put in a shared cache).
- ``SPECSCOPE_NATIVE=0`` turns it off (the numpy decoder only).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("pagescan.c")
OPSUMS = Path(__file__).with_name("opsums.c")
COMPILE_TIMEOUT_S = 20  # (gcc takes 0.1-0.3 s: a compiler that hangs is given up)
_LOCK = threading.Lock()  # (the read's threads ask at once; one compiles)
_I64 = ctypes.POINTER(ctypes.c_int64)
_U8 = ctypes.POINTER(ctypes.c_uint8)


def cache_dir() -> Path:
    """Where compiled code is kept (module doc)."""
    if own := os.environ.get("SPECSCOPE_CACHE"):
        return Path(own)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "specscope"


def enabled() -> bool:
    """Whether the C fast path may be used (``SPECSCOPE_NATIVE`` is not ``0``)."""
    return os.environ.get("SPECSCOPE_NATIVE", "1") != "0"


def library():
    """``decode_leaves`` of the compiled ``pagescan.c`` (ctypes), or None: turned off, no
    compiler, or a build or load that failed (module doc)."""
    return describe()[0]


def describe() -> tuple[object | None, str]:
    """(:func:`library`, what it is): the compiled file's path, or why there is none."""
    lib, what = built(SOURCE)
    if lib is None:
        return None, what
    try:
        fn = lib.decode_leaves
    except AttributeError as e:
        return None, str(e)
    fn.restype = ctypes.c_int64
    fn.argtypes = [_U8, _I64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
    fn.argtypes += [ctypes.c_int64, _I64, _U8, ctypes.c_int64, _I64, _U8, _I64, _I64]
    return fn, what


def built(source: Path) -> tuple[ctypes.CDLL | None, str]:
    """(the compiled ``source``, loaded, or None; its path, or why there is none): built once
    per source, compiler and machine, as the module doc says."""
    if not enabled():
        return None, "turned off (SPECSCOPE_NATIVE=0)"
    with _LOCK:
        return _library(cache_dir(), os.environ.get("CC", "cc"), source)


@functools.cache
def _library(where: Path, cc: str, source_path: Path) -> tuple[ctypes.CDLL | None, str]:
    compiler = shlex.split(cc)
    if not compiler or shutil.which(compiler[0]) is None:
        return None, f"no C compiler {cc!r} on PATH"
    try:
        source = source_path.read_bytes()  # (a package installed without it: numpy only)
        key = hashlib.sha256(
            b"\0".join([source, " ".join(compiler).encode(), platform.machine().encode()])
        ).hexdigest()[:16]
        built = where / f"{source_path.stem}-{key}.so"
        if not built.exists():
            _compile(compiler, source_path, built)
        if not _own(built):
            return None, f"{built} is not this user's own, or others may write it"
        lib = ctypes.CDLL(str(built))
    except subprocess.CalledProcessError as e:
        return None, f"{cc} failed on {source_path.name}: {_last_line(e.stderr)}"
    except (OSError, subprocess.SubprocessError) as e:
        return None, str(e)
    return lib, str(built)


def _last_line(err: bytes | None) -> str:
    lines = (err or b"").decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else "no message"


def _own(built: Path) -> bool:
    """Whether ``built`` is this user's and no one else may write it (code loaded into this
    process: not a file another user could have put in a shared cache)."""
    st = built.stat()
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _compile(compiler: list[str], source: Path, built: Path) -> None:
    """Compile ``source`` into ``built`` (a temporary file renamed into place)."""
    built.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=built.stem, suffix=".tmp", dir=built.parent)
    os.close(fd)
    try:
        subprocess.run(
            [*compiler, "-O2", "-shared", "-fPIC", "-o", tmp, str(source)],
            check=True,
            capture_output=True,
            timeout=COMPILE_TIMEOUT_S,
        )
        os.chmod(tmp, 0o755)  # (a umask of 002 would leave it group-writable: never loaded)
        os.replace(tmp, built)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _ptr(a: np.ndarray, kind):
    return a.ctypes.data_as(kind)


def decode_leaves(
    fn,
    buf: np.ndarray,
    hdr: np.ndarray,
    cells: int,
    page_size: int,
    usable: int,
    width: int,
    positions: tuple[int, ...],
    present: tuple[bool, ...],
    rowids: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None] | None:
    """The wanted columns of the leaf pages in ``buf`` (headers at ``hdr``, ``cells`` cells in
    all) by ``fn`` (:func:`library`): values ``[columns, cells] int64``, NULLs ``[columns,
    cells] bool``, NULLs per column, and the rowids (or None); None where the pages are not
    all in the usual case (``pagescan.c``), for the numpy decoder to take."""
    ncols = len(positions)
    values = np.empty((ncols, cells), dtype=np.int64)
    nulls = np.empty((ncols, cells), dtype=np.uint8)
    counts = np.empty(ncols, dtype=np.int64)
    ids = np.empty(cells, dtype=np.int64) if rowids else None
    hdr = np.ascontiguousarray(hdr, dtype=np.int64)
    pos = np.asarray(positions, dtype=np.int64)
    only_null = np.asarray(present, dtype=np.uint8)
    rows = fn(
        _ptr(buf, _U8),
        _ptr(hdr, _I64),
        len(hdr),
        page_size,
        usable,
        width,
        ncols,
        _ptr(pos, _I64),
        _ptr(only_null, _U8),
        cells,
        _ptr(values, _I64),
        _ptr(nulls, _U8),
        _ptr(counts, _I64),
        None if ids is None else _ptr(ids, _I64),
    )
    if rows != cells:  # -1: not the usual case (a count that differs cannot happen)
        return None
    return values, nulls.view(bool), counts, ids
