"""File checksums (specscope.checksum): hashlib's digest, each file read once per command, a
file changed since read again."""

from __future__ import annotations

import hashlib
import os

from specscope import checksum


def test_a_files_digest_read_once_and_again_once_changed(tmp_path, monkeypatch):
    path = tmp_path / "export.sqlite"
    path.write_bytes(b"x" * 3_000_000)  # (more than one block)
    reads = []
    digest = checksum._digest
    monkeypatch.setattr(checksum, "_digest", lambda p: reads.append(p) or digest(p))
    want = hashlib.sha256(path.read_bytes()).hexdigest()
    assert checksum.sha256_file(path) == checksum.sha256_file(str(path)) == want
    assert len(reads) == 1  # (every rank of one export in a --per-rank report: read once)
    path.write_bytes(b"y" * 10)
    os.utime(path, ns=(1, 1))  # (another size and time: another file)
    assert checksum.sha256_file(path) == hashlib.sha256(b"y" * 10).hexdigest()
    assert len(reads) == 2
