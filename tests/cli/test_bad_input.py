"""Every bad input through the CLI: exit 2, one ``Error:`` line naming the problem, no traceback.

Also: analysing an export never modifies it and leaves no ``-journal``/``-wal`` file beside it.
"""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from specscope.analysis.synthetic import SyntheticExport
from specscope.cli import cli

PAGE = 4096  # page size of the exports SyntheticExport writes


def cut_in_half(path: Path) -> Path:
    data = path.read_bytes()
    out = path.with_name("truncated.sqlite")
    out.write_bytes(data[: len(data) // 2])
    return out


def corrupt_middle_pages(path: Path) -> Path:
    """Overwrite every page but the first (schema) and the last with random bytes."""
    data = bytearray(path.read_bytes())
    rng = random.Random(0)
    n = len(data) // PAGE
    assert n >= 4, "the export is too small to corrupt its middle"
    for p in range(1, n - 1):
        data[p * PAGE : (p + 1) * PAGE] = rng.randbytes(PAGE)
    out = path.with_name("corrupt.sqlite")
    out.write_bytes(bytes(data))
    return out


def corrupt_one_page(path: Path) -> Path:
    data = bytearray(path.read_bytes())
    p = len(data) // PAGE // 2
    data[p * PAGE : (p + 1) * PAGE] = b"\xff" * PAGE
    out = path.with_name("one_bad_page.sqlite")
    out.write_bytes(bytes(data))
    return out


def schema_not_utf8(path: Path) -> Path:
    """A byte of the schema (``sqlite_master``) that is not UTF-8, where the table's columns
    begin: SQLite cannot parse it, and its message quotes the byte."""
    data = bytearray(path.read_bytes())
    start = data.index(b"CREATE TABLE")
    data[data.index(b"(", start)] = 0xFF
    out = path.with_name("bad_schema.sqlite")
    out.write_bytes(bytes(data))
    return out


def empty_dir(tmp: Path) -> Path:
    (tmp / "empty").mkdir()
    return tmp / "empty"


def text_file(tmp: Path) -> Path:
    (tmp / "notes.sqlite").write_text("step,draft\n1,2\n")
    return tmp / "notes.sqlite"


def nsys_rep(tmp: Path) -> Path:
    (tmp / "run.nsys-rep").write_bytes(b"\x00\x01NSYS" * 100)
    return tmp / "run.nsys-rep"


def empty_file(tmp: Path) -> Path:
    (tmp / "empty.sqlite").write_bytes(b"")
    return tmp / "empty.sqlite"


def other_sqlite(tmp: Path) -> Path:
    con = sqlite3.connect(tmp / "todo.sqlite")
    with con:
        con.execute("CREATE TABLE todo (id INTEGER PRIMARY KEY, title TEXT)")
        con.execute("INSERT INTO todo (title) VALUES ('profile')")
    con.close()
    return tmp / "todo.sqlite"


def no_nvtx(tmp: Path) -> Path:
    x = SyntheticExport()
    x.kernel("k", 100, 200, x.api("cudaLaunchKernel", 0, 10))
    return x.write(tmp / "cuda_only.sqlite")


# id: (make(tmp, eagle) -> (trace, extra args), fragments the one error line must contain)
CASES = {
    "missing path": (lambda t, e: (t / "nope.sqlite", []), ["nope.sqlite", "no such file"]),
    "a folder without exports": (lambda t, e: (empty_dir(t), []), ["folder without *.sqlite"]),
    "a text file": (lambda t, e: (text_file(t), []), ["not a SQLite file"]),
    "an empty file": (lambda t, e: (empty_file(t), []), ["not a SQLite file"]),
    ".nsys-rep not exported": (
        lambda t, e: (nsys_rep(t), []),
        ["not a SQLite file", "nsys export --type sqlite", "run.nsys-rep"],
    ),
    "truncated SQLite": (lambda t, e: (cut_in_half(e), []), ["truncated"]),
    "corrupt SQLite": (lambda t, e: (corrupt_middle_pages(e), []), ["corrupt"]),
    "one garbage page": (lambda t, e: (corrupt_one_page(e), []), ["corrupt"]),
    "a schema that is not UTF-8": (lambda t, e: (schema_not_utf8(e), []), ["corrupt"]),
    "SQLite, not an nsys export": (lambda t, e: (other_sqlite(t), []), ["not an nsys export"]),
    "no range matches the step": (
        lambda t, e: (e, ["--step", "stpe"]),
        ["no NVTX range named 'stpe'", "closest names", "'step'"],
    ),
    "no NVTX ranges at all, a preset given": (
        lambda t, e: (no_nvtx(t), ["--preset", "eagle"]),
        ["no NVTX range named 'step'", "the trace has no NVTX ranges"],
    ),
    "step only in another domain": (
        lambda t, e: (e, ["--step", "step", "--domain", "sglang"]),
        ["'step'", "domain 'sglang'", "'specscope'", "--domain"],
    ),
    "zero steps after --skip": (
        lambda t, e: (e, ["--skip", "3"]),
        ["zero steps left after --skip 3", "3 'step' steps"],
    ),
    "unknown preset": (
        lambda t, e: (e, ["--preset", "medusa"]),
        ["unknown preset 'medusa'", "eagle"],
    ),
    "--median-by unknown (with --timeline)": (
        lambda t, e: (e, ["--timeline", "--median-by", "idle"]),
        ["--median-by", "idle"],
    ),
    "--median-by unknown": (lambda t, e: (e, ["--median-by", "idle"]), ["--median-by", "idle"]),
}


@pytest.fixture
def eagle_file(tmp_path, write_export):
    """A valid 3-step EAGLE export (several pages, so its middle can be corrupted)."""
    from eagle_exports import build_eagle

    return write_export(build_eagle(3))


def assert_one_error_line(result, fragments: list[str]) -> str:
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith(("Error:", "error:")), line
    for fragment in fragments:
        assert fragment in line
    return line


@pytest.mark.parametrize("make, fragments", CASES.values(), ids=CASES.keys())
def test_bad_input_is_one_error_line(tmp_path, eagle_file, make, fragments):
    trace, extra = make(tmp_path, eagle_file)
    result = CliRunner().invoke(cli, ["analyze", str(trace), *extra])
    assert_one_error_line(result, fragments)


@pytest.mark.parametrize("make", [lambda t, e: cut_in_half(e), lambda t, e: other_sqlite(t)])
def test_ranges_bad_input(tmp_path, eagle_file, make):
    result = CliRunner().invoke(cli, ["ranges", str(make(tmp_path, eagle_file))])
    assert_one_error_line(result, [])


def test_no_traceback_from_a_real_process(tmp_path, eagle_file):
    """Through ``python -m specscope``: stderr is the one error line, nothing else."""
    trace = corrupt_middle_pages(eagle_file)
    proc = subprocess.run(
        [sys.executable, "-m", "specscope", "analyze", str(trace)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith(("Error:", "error:"))
    assert proc.stdout == ""


def snapshot(path: Path) -> tuple[bytes, int, list[str]]:
    return path.read_bytes(), path.stat().st_mtime_ns, sorted(os.listdir(path.parent))


@pytest.mark.parametrize(
    "args",
    [
        ["analyze", "{trace}", "--totals", "--timeline", "--count-kernels", "draft"],
        ["analyze", "{trace}", "--format", "json", "--db", "{db}"],
        ["analyze", "{trace}", "--skip", "5"],  # fails after opening the file
        ["ranges", "{trace}"],
    ],
    ids=["analyze", "analyze --db", "analyze failing", "ranges"],
)
def test_input_is_never_modified(tmp_path_factory, eagle_file, args):
    before = snapshot(eagle_file)
    assert not any(n.endswith(("-journal", "-wal", "-shm")) for n in before[2])
    db = tmp_path_factory.mktemp("results") / "db.sqlite"
    argv = [a.format(trace=eagle_file, db=db) for a in args]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code in (0, 2), result.output
    after = snapshot(eagle_file)
    assert after[0] == before[0], "the export's bytes changed"
    assert after[1] == before[1], "the export's mtime changed"
    assert after[2] == before[2], "files appeared next to the export"


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["compare", "only-one.sqlite"], "at least two inputs"),
        (["analyze"], "Missing argument"),
        (["analyze", "x.sqlite", "--bogus"], "--bogus"),
        (["--bogus"], "--bogus"),
        (["nosuch"], "nosuch"),
        (["compare", "a", "b", "--format", "xx"], "--format"),
    ],
)
def test_usage_errors_are_one_line(argv, fragment):
    """Not click's Usage / Try / blank / Error block: one ``Error:`` line, exit 2."""
    result = CliRunner().invoke(cli, argv)
    assert_one_error_line(result, [fragment])


@pytest.mark.parametrize(
    "argv",
    [
        ["analyze", "{b}"],
        ["compare", "{b}", "{a}", "--format", "markdown"],
        ["report", "{b}", "{a}", "--out", "{out}"],
    ],
    ids=["analyze", "compare markdown", "report"],
)
def test_misspelled_anchor_is_one_error_naming_it(tmp_path, argv):
    """It was a warning and exit 0 (analyze), every gap row silently dropped (compare), an
    error that did not name it (report)."""
    from testdata import DATA

    files = {"b": DATA / "eagle_node_before.sqlite", "a": DATA / "eagle_node_after.sqlite"}
    argv = [x.format(**files, out=tmp_path / "out") for x in argv]
    anchors = ["--anchors", "draft.replay,verfy.replay,draft_extend.replay", "--skip", "1"]
    result = CliRunner().invoke(cli, [*argv, *anchors])
    line = assert_one_error_line(result, ["'verfy.replay'"])
    assert "closest: 'verify.replay'" in line


def test_anchor_graph_never_launched_is_one_error_naming_it():
    from testdata import DATA

    trace = DATA / "graphs" / "run_graph_nonvtx.sqlite"
    anchors = "r1=graph:1,r2=graph:4,r3=graph:77"
    result = CliRunner().invoke(
        cli, ["analyze", str(trace), "--anchors", anchors, "--step", "kernel:."]
    )
    assert_one_error_line(result, ["'r3' never launched"])
