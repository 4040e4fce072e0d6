"""``manifest.json``: what was run, where, with which nsys, and what came out.

Keys: ``command``, ``cwd``, ``label``, ``env`` (``SPECSCOPE_*`` and ``SGLANG_*`` variables),
``git`` (``commit``, ``dirty``; null outside a work tree), ``nsys`` (``path``, ``version``,
``found_by``, ``args``), ``flags`` (``trace``, ``graph_trace``, ``capture_range``), ``mode``
(node|graph|no-cuda), ``notes``, ``gpus`` (``name``, ``driver`` per GPU; empty without one),
``host`` (``hostname``, ``platform``, ``python``), ``packages`` (torch/triton/nvtx versions),
``started_at``/``ended_at`` (UTC ISO), ``status`` (running|ok|failed|interrupted|no-report|
qdstrm-unimported|export-failed), ``exit_status``, ``timings_s`` (``record``, ``import``,
``export``, ``total``), ``outputs`` (``{relative path: {"bytes", "sha256"}}``).

It is written when the run starts (status ``running``) and rewritten at the end, so a run killed
outright still leaves one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from specscope.checksum import sha256_file
from specscope.errors import SpecscopeError

MANIFEST = "manifest.json"
ENV_PREFIXES = ("SPECSCOPE_", "SGLANG_")


@dataclass(frozen=True)
class Gpu:
    name: str
    driver: str


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def env_flags(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``SPECSCOPE_*`` and ``SGLANG_*`` variables, sorted."""
    env = os.environ if env is None else env
    return {k: env[k] for k in sorted(env) if k.startswith(ENV_PREFIXES)}


def git_state(cwd: Path | None = None) -> dict[str, object] | None:
    """``{"commit", "dirty"}`` of the work tree around ``cwd``; None outside one (or no git)."""
    git = shutil.which("git")
    if git is None:
        return None

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([git, *args], cwd=cwd, capture_output=True, text=True, timeout=60)

    try:
        head = run("rev-parse", "HEAD")
        if head.returncode != 0:
            return None
        status = run("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip())}


def _nvidia_smi(args: list[str], env: Mapping[str, str] | None) -> str | None:
    """What ``nvidia-smi ARGS`` printed, or None without nvidia-smi or where it failed."""
    env = os.environ if env is None else env
    smi = shutil.which("nvidia-smi", path=env.get("PATH", ""))
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, *args], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def gpus(env: Mapping[str, str] | None = None) -> list[Gpu]:
    """The GPUs ``nvidia-smi`` lists (name, driver); empty without nvidia-smi or a GPU."""
    text = _nvidia_smi(["--query-gpu=name,driver_version", "--format=csv,noheader"], env)
    found = []
    for line in (text or "").splitlines():
        name, _, driver = line.rpartition(",")
        if name.strip():
            found.append(Gpu(name.strip(), driver.strip()))
    return found


def driver_cuda(env: Mapping[str, str] | None = None) -> tuple[int, int] | None:
    """The CUDA version the driver supports, from ``nvidia-smi``'s header (``CUDA Version:
    13.0``); None without nvidia-smi, a GPU, or that line."""
    found = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", _nvidia_smi([], env) or "")
    return (int(found[1]), int(found[2])) if found else None


def host_info() -> dict[str, str]:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def files_under(folder: Path, suffix: str = "") -> list[Path]:
    """Files under ``folder`` (ending in ``suffix``), sorted; tolerant of files and folders that
    vanish while it looks (nsys' helper processes clean their temporary files up late, and
    ``Path.rglob`` raises FileNotFoundError on a folder removed mid-walk)."""
    found = []
    for root, _dirs, names in os.walk(folder):  # os.walk ignores folders that vanished
        found += [Path(root) / n for n in names if n.endswith(suffix)]
    return sorted(found)


def output_hashes(run_dir: Path) -> dict[str, dict[str, object]]:
    """``{relative path: {"bytes", "sha256"}}`` of every file under ``run_dir`` but the manifest."""
    result = {}
    for p in files_under(run_dir):
        if p.is_file() and not p.is_symlink() and p.name != MANIFEST:
            try:
                result[str(p.relative_to(run_dir))] = {
                    "bytes": p.stat().st_size,
                    "sha256": sha256_file(p),
                }
            except OSError:  # a file that vanished or cannot be read: list it without a hash
                result[str(p.relative_to(run_dir))] = {"bytes": None, "sha256": None}
    return result


def write_manifest(run_dir: Path, data: Mapping[str, object]) -> Path:
    """Write ``data`` as ``run_dir/manifest.json`` atomically (write, then rename)."""
    path = run_dir / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(tmp, path)
    return path


def read_manifest(run_dir: Path) -> dict | None:
    """The manifest of ``run_dir``; None when the folder has no ``manifest.json``.

    An unreadable manifest, or one that is not a JSON object, is a SpecscopeError that says so.
    """
    path = Path(run_dir) / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SpecscopeError(f"{path}: unreadable manifest ({e}); fix or remove it") from None
    if not isinstance(data, dict):
        raise SpecscopeError(f"{path}: not a manifest (expected a JSON object)")
    return data


def batch_and_commit(manifest: Mapping, export: Path) -> tuple[int | None, str | None]:
    """Batch size and commit that ``manifest`` records for ``export`` (None where it does not).

    The manifest applies when its ``outputs`` list the export (or it lists no outputs).
    ``batch_size``: a top-level ``batch_size`` key or the ``SPECSCOPE_BATCH_SIZE`` variable of
    its ``env``; ``commit``: ``git.commit``, with ``-dirty`` appended when the work tree was
    dirty.
    """
    outputs = manifest.get("outputs") or {}
    if outputs and export.name not in {Path(k).name for k in outputs}:
        return None, None
    batch = manifest.get("batch_size", (manifest.get("env") or {}).get("SPECSCOPE_BATCH_SIZE"))
    git = manifest.get("git") or {}
    commit = git.get("commit")
    if commit and git.get("dirty"):
        commit += "-dirty"
    try:
        batch = int(batch) if batch is not None else None
    except (TypeError, ValueError):
        batch = None
    return batch, commit
