"""File checksums recorded in manifests and results databases (no dependencies)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_DIGESTS: dict[tuple[int, int, int, int], str] = {}
"""Each file's digest by its identity (device, inode, size, modification time): a file read
twice in one command (one export's every rank in a ``--per-rank`` report: 8 x 1.8 GB) is
read once. A file changed since is another key."""


def _identity(path: Path) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks, once per command (:data:`_DIGESTS`)."""
    key = _identity(path)
    if key not in _DIGESTS:
        _DIGESTS[key] = _digest(path)
    return _DIGESTS[key]
