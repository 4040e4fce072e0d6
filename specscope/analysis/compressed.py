"""xz-compressed exports (``FILE.sqlite.xz``, as ``examples/`` ships them), read without
touching the file given.

:func:`xz_copy` decompresses one into a temporary file that the caller deletes
(:func:`specscope.analysis.loader.load` deletes it with its :class:`~.loader.Trace`). A file is
recognised by its xz magic bytes, not by its name.
"""

from __future__ import annotations

import contextlib
import lzma
import os
import shutil
import tempfile
from pathlib import Path

from specscope.errors import TraceError

XZ_MAGIC = b"\xfd7zXZ\x00"


def is_xz(path: Path) -> bool:
    """Whether ``path`` starts with the xz magic bytes (False when it cannot be read)."""
    try:
        with path.open("rb") as f:
            return f.read(len(XZ_MAGIC)) == XZ_MAGIC
    except OSError:
        return False


def xz_copy(path: Path, folder: Path | None = None) -> Path | None:
    """The decompressed copy of an xz-compressed ``path``: a new file in ``folder`` (default:
    the system's temporary folder) that the caller deletes; None for any other file. TraceError
    (saying how to decompress it by hand) when it cannot be decompressed."""
    if not is_xz(path):
        return None
    fd, name = tempfile.mkstemp(prefix="specscope-", suffix=".sqlite", dir=folder)
    try:
        with lzma.open(path) as src, os.fdopen(fd, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except (OSError, lzma.LZMAError, EOFError) as e:
        remove_quietly(Path(name))
        raise TraceError(
            f"{path}: xz-compressed and cannot be decompressed here ({e}); run `xz -dk {path}` "
            "and give the .sqlite"
        ) from None
    return Path(name)


def remove_quietly(path: Path) -> None:
    """Delete ``path`` if it is still there."""
    with contextlib.suppress(OSError):
        path.unlink()
