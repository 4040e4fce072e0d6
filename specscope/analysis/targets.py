"""Vet the files and folders specscope writes to, before any analysis runs.

An output path is refused (one-line :class:`~specscope.errors.SpecscopeError` naming the
problem and the fix) when writing it would

- overwrite an input: the same file (``os.path.samefile``) as one of the exports read;
- replace something that is not ours: ``--db`` appends only to a new or empty file or to a
  specscope results database (:func:`~specscope.analysis.store.is_results_db`), never to an
  nsys export or another SQLite or text file;
- fail half-way: a folder where a file is expected (or the reverse), a missing parent folder,
  a file or folder without write permission (SQLite also needs to create its journal beside
  the database, so the folder must be writable too).

The CLI calls these before analysing: :func:`check_db_target` (``--db``),
:func:`check_output_file` (``--junit``), :func:`check_output_dir` (``--out``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from specscope.errors import SpecscopeError

_SQLITE_MAGIC = b"SQLite format 3\x00"


def _same_as_input(path: Path, inputs: Iterable[str | Path], option: str) -> None:
    for i in inputs:
        i = Path(str(i))
        try:
            same = i.exists() and path.exists() and os.path.samefile(path, i)
        except OSError:
            same = False
        if same:
            raise SpecscopeError(
                f"{option} {path}: this is an input ({i}); an input is never written, "
                f"give {option} another path"
            )


def _writable_parent(path: Path, option: str) -> None:
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise SpecscopeError(
            f"{option} {path}: no such folder {parent}; create it first or give another path"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SpecscopeError(
            f"{option} {path}: cannot create files in {parent} (permission denied); "
            "give a path in a writable folder"
        )


def _writable_file(path: Path, option: str) -> None:
    if path.is_dir():
        raise SpecscopeError(f"{option} {path}: is a folder; give a file path inside it")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise SpecscopeError(
            f"{option} {path}: not writable (permission denied); fix its permissions or give "
            "another path"
        )
    _writable_parent(path, option)


def check_output_file(
    path: str | Path, option: str, inputs: Iterable[str | Path] = (), overwrite: bool = True
) -> None:
    """A file specscope writes whole (``--junit``): not an input, not a folder, in a writable
    folder; an existing file only with ``overwrite``."""
    path = Path(path)
    _same_as_input(path, inputs, option)
    _writable_file(path, option)
    if path.exists() and not overwrite:
        raise SpecscopeError(f"{option} {path}: exists; remove it or pass --force to overwrite it")


def check_db_target(db_path: str | Path, inputs: Iterable[str | Path] = ()) -> None:
    """A results database to append to (``--db``): a new or empty file, or a specscope results
    database (module doc)."""
    from specscope.analysis.store import is_results_db  # store imports the analysis stack

    path, option = Path(db_path), "--db"
    _same_as_input(path, inputs, option)
    _writable_file(path, option)
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb") as f:
        header = f.read(len(_SQLITE_MAGIC))
    fix = "give a new path (e.g. results.sqlite) or a results database of `specscope analyze --db`"
    if header != _SQLITE_MAGIC:
        raise SpecscopeError(f"{option} {path}: not a SQLite file; {fix}")
    if not is_results_db(path) and _has_tables(path):
        raise SpecscopeError(
            f"{option} {path}: a SQLite file but not a specscope results database (an nsys "
            f"export?); {fix}"
        )


def _has_tables(path: Path) -> bool:
    """Whether the SQLite file has any table (an empty database may become a results one)."""
    from specscope.analysis.loader import open_readonly

    con = open_readonly(path)
    try:
        return con.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchone() is not None
    except Exception:  # unreadable: treat as foreign
        return True
    finally:
        con.close()


def check_output_dir(path: str | Path, option: str, inputs: Iterable[str | Path] = ()) -> None:
    """A folder specscope creates or writes files into (``--out``): not a file, and writable
    (or its nearest existing parent, where it will be created)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise SpecscopeError(f"{option} {path}: is a file, not a folder; give a folder path")
    for i in inputs:
        if Path(str(i)).exists() and Path(str(i)).resolve() == path.resolve():
            raise SpecscopeError(f"{option} {path}: this is an input; give another folder")
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise SpecscopeError(
            f"{option} {path}: {existing} is a file, so the folder cannot be created; "
            "give another path"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise SpecscopeError(
            f"{option} {path}: cannot write in {existing} (permission denied); give a path in "
            "a writable folder"
        )
