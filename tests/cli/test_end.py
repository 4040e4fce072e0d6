"""The ``specscope`` process ends as soon as its command has (:func:`specscope.cli.end`):
its output whole, its exit code, its temporary files removed, as with the interpreter's own
exit."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
from testdata import ROOT

import specscope.cli as cli_module

XZ = ROOT / "examples" / "exports" / "bs1-graph-draft_alias.sqlite.xz"


def _specscope(*args: str, tmp: Path, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "TMPDIR": str(tmp)}
    return subprocess.run(
        [sys.executable, "-m", "specscope", *args], env=env, capture_output=True, **kwargs
    )


def test_a_command_ends_with_its_output_whole_and_its_temporary_files_removed(tmp_path):
    done = _specscope("analyze", str(XZ), "--preset", "eagle", "--format", "csv", tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.decode().splitlines()
    assert lines[0].startswith("step,") and len(lines) > 10
    assert all(line.count(",") == lines[0].count(",") for line in lines)  # no line cut short
    assert not list(tmp_path.glob("specscope-*"))  # the decompressed copy is gone


def test_errors_keep_their_exit_code_and_line(tmp_path):
    done = _specscope("analyze", str(tmp_path / "missing.sqlite"), tmp=tmp_path)
    assert done.returncode == 2
    assert done.stderr.decode().count("\n") == 1 and "no such file" in done.stderr.decode()
    assert _specscope("--no-such-flag", tmp=tmp_path).returncode == 2


def test_output_into_a_closed_pipe_ends_as_it_did(tmp_path):
    """``specscope … | head -c 10``: the process ends (no hang, no traceback of ours)."""
    script = f"{sys.executable} -m specscope analyze {XZ} --format json | head -c 10"
    done = subprocess.run(["bash", "-c", script], capture_output=True, timeout=120)
    assert done.stdout.decode() == '{"trace": '
    assert "Traceback" not in done.stderr.decode()


class _Exited(Exception):
    pass


@pytest.mark.parametrize(
    ("code", "status", "printed"),
    [(None, 0, ""), (0, 0, ""), (2, 2, ""), (True, 1, ""), ("stopped", 1, "stopped\n")],
)
def test_end_exits_with_the_status_sys_exit_gives(code, status, printed, monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(cli_module.atexit, "_run_exitfuncs", lambda: ran.append(True))

    def exit_now(s: int):
        raise _Exited(s)

    monkeypatch.setattr(cli_module.os, "_exit", exit_now)
    with pytest.raises(_Exited) as e:
        cli_module.end(code)
    assert e.value.args == (status,) and ran == [True]
    assert capsys.readouterr().err == printed


@pytest.mark.parametrize(
    ("argv", "env", "quick"),
    [
        (["analyze", "--help"], {}, True),
        (["--help"], {}, True),
        (["report", "--help"], {}, True),
        (["run", "--help"], {}, False),  # a workload: a profiler may be writing from atexit
        (["profile", "--help"], {}, False),
        (["analyze", "--help"], {"LD_PRELOAD": "libinjected.so"}, False),
        (["analyze", "--help"], {"NVTX_INJECTION64_PATH": "/x/libnvtx.so"}, False),
    ],
)
def test_only_commands_that_read_exports_end_without_the_teardown(
    argv, env, quick, monkeypatch, capsys
):
    for name in cli_module._INJECTED:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["specscope", *argv])

    def end(code):
        raise _Exited(code)

    monkeypatch.setattr(cli_module, "end", end)
    with pytest.raises(_Exited if quick else SystemExit) as e:
        cli_module.main()
    assert (e.value.args[0] if quick else e.value.code) == 0
    assert "Usage:" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("command", "given", "seen"),
    [("analyze", None, "1"), ("analyze", "4", "4"), ("doctor", None, None)],
    ids=["reading-command", "user-set", "workload-command"],
)
def test_commands_that_only_read_start_no_blas_threads(command, given, seen, tmp_path):
    """The commands that read exports run numpy with one OpenBLAS thread (unless the user
    chose); those that may run a workload leave the variable alone."""
    env = {k: v for k, v in os.environ.items() if k != cli_module.BLAS_THREADS}
    if given is not None:
        env[cli_module.BLAS_THREADS] = given
    code = (
        "import atexit, os, sys; "
        f"atexit.register(lambda: print('BLAS', os.environ.get({cli_module.BLAS_THREADS!r}), "
        "file=sys.stderr)); sys.argv = ['specscope', *sys.argv[1:]]; "
        "from specscope.cli import main; main()"
    )
    args = [command, "--help"]
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr
    assert f"BLAS {seen}" in done.stderr.decode()


@pytest.mark.parametrize(
    ("command", "quick"), [("analyze", True), ("doctor", False)], ids=["reading", "workload"]
)
def test_commands_that_only_read_collect_cycles_less_often(command, quick):
    """The commands that read exports raise the cyclic collector's thresholds (pandas' import
    is walked less often); those that may run a workload keep Python's."""
    code = (
        "import atexit, gc, sys; before = gc.get_threshold(); "
        "atexit.register(lambda: print('GC', before, gc.get_threshold(), file=sys.stderr)); "
        "sys.argv = ['specscope', *sys.argv[1:]]; from specscope.cli import main; main()"
    )
    done = subprocess.run([sys.executable, "-c", code, command, "--help"], capture_output=True)
    assert done.returncode == 0, done.stderr
    before, after = done.stderr.decode().split("GC ")[1].strip().split(") (")
    assert (after.strip("()") == str(cli_module.GC_THRESHOLDS).strip("()")) is quick
    assert (before.strip("()") == after.strip("()")) is not quick


@pytest.mark.parametrize(
    ("command", "arenas"), [("analyze", "[1]"), ("doctor", "[]")], ids=["reading", "workload"]
)
def test_commands_that_only_read_keep_one_malloc_arena(command, arenas):
    """The commands that read exports ask glibc for one malloc arena before any thread
    allocates; those that may run a workload leave malloc alone."""
    code = (
        "import atexit, sys; import specscope.cli as c; asked = []; "
        "limit = c._limit_malloc_arenas; "
        "c._limit_malloc_arenas = lambda n: asked.append(n) or limit(n); "
        "atexit.register(lambda: print('ARENAS', asked, file=sys.stderr)); "
        "sys.argv = ['specscope', *sys.argv[1:]]; c.main()"
    )
    done = subprocess.run([sys.executable, "-c", code, command, "--help"], capture_output=True)
    assert done.returncode == 0, done.stderr
    assert f"ARENAS {arenas}" in done.stderr.decode()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_malloc_arenas_limited_unless_the_user_chose(monkeypatch):
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert cli_module._limit_malloc_arenas(cli_module.MALLOC_ARENAS)
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")  # (glibc read it at the start: theirs)
    assert not cli_module._limit_malloc_arenas(cli_module.MALLOC_ARENAS)
