"""Unit tests of specscope.profiler with fake nsys/ldd/nvidia-smi scripts on a temporary PATH.

The fake nsys understands ``--version``, ``export --help``, ``profile ... -o OUT CMD...`` (runs
CMD, then writes OUT.nsys-rep, or leaves a .qdstrm in $TMPDIR when FAKE_NSYS_IMPORT=fail) and
``export ... -o OUT REPORT`` (copies a real 2023 export from tests/data to OUT).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from testdata import DATA

from specscope.cli.doctor import doctor
from specscope.cli.profile import profile
from specscope.profiler import compat, discover
from specscope.profiler.errors import (
    NoActivity,
    NsysNotFound,
    NsysTooOld,
    OutputNotWritable,
)
from specscope.profiler.flags import ProfileFlags, nsys_profile_args
from specscope.profiler.profile import default_label, new_run_dir
from specscope.profiler.profile import profile as run_profile

CPU_EXPORT = DATA / "cpu_eagle_2023.sqlite"

FAKE_NSYS = r"""#!/usr/bin/env python3
import os, shutil, subprocess, sys
args = sys.argv[1:]
version = os.environ.get("FAKE_NSYS_VERSION", "2023.4.4.54-234433681190v0")
if args == ["--version"]:
    print(f"NVIDIA Nsight Systems version {version}")
    sys.exit(0)
if args[:2] == ["export", "--help"]:
    print(os.environ.get("FAKE_NSYS_EXPORT_HELP", "--type= sqlite, hdf, text, json"))
    sys.exit(0)
out = args[args.index("-o") + 1]
if args[0] == "export":
    shutil.copy(os.environ["FAKE_NSYS_EXPORT"], out)
    sys.exit(0)
if not os.path.isabs(os.environ.get("TMPDIR", "/tmp")):  # as the real nsys 2023.4 does
    print("boost::filesystem::temp_directory_path: Not a directory")
    sys.exit(1)
with open(os.path.join(os.path.dirname(out), "nsys-args.txt"), "w") as f:
    f.write("\n".join(args))
cmd = args[args.index("-o") + 2:]
rc = subprocess.call(cmd)
qdstrm = os.path.join(os.environ.get("TMPDIR", "/tmp"), "nsys-report-abcd.qdstrm")
print(f"Generating '{qdstrm}'", flush=True)
if os.environ.get("FAKE_NSYS_IMPORT") == "fail":
    open(qdstrm, "w").write("raw")
    print("Importer error status: Importation failed.")
    sys.exit(1)
if os.environ.get("FAKE_NSYS_IMPORT") != "none":
    open(out + os.environ.get("FAKE_NSYS_SUFFIX", ".nsys-rep"), "w").write("report")
sys.exit(rc)
"""


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def fake_env(tmp_path, monkeypatch):
    """PATH = fake bin (nsys, no nvidia-smi) + python's folder + /usr/bin:/bin; HOME empty."""
    bin_ = tmp_path / "bin"
    _script(bin_ / "nsys", FAKE_NSYS.replace("/usr/bin/env python3", sys.executable))
    path = f"{bin_}:{Path(sys.executable).parent}:/usr/bin:/bin"
    monkeypatch.setenv("PATH", path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FAKE_NSYS_EXPORT", str(CPU_EXPORT))
    for var in ("SPECSCOPE_NSYS", "SPECSCOPE_NSYS_PREFIX", "FAKE_NSYS_IMPORT", "FAKE_NSYS_SUFFIX"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _py(*code: str) -> list[str]:
    return [sys.executable, "-c", "\n".join(code)]


# --- discovery --------------------------------------------------------------------------------


def test_discovery_order(tmp_path):
    home, root = tmp_path / "home", tmp_path / "root"
    fake = FAKE_NSYS.replace("/usr/bin/env python3", sys.executable)
    on_path = _script(tmp_path / "pathbin" / "nsys", fake)
    explicit = _script(tmp_path / "explicit" / "nsys", fake)
    env_nsys = _script(tmp_path / "envnsys" / "nsys", fake)
    opt_old = _script(root / "opt/nvidia/nsight-systems/2023.1.1/bin/nsys", fake)
    opt_new = _script(root / "opt/nvidia/nsight-systems/2025.3.1/bin/nsys", fake)
    cuda = _script(root / "usr/local/cuda-13.0/bin/nsys", fake)
    ncu = _script(root / "opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys", fake)
    prefix = _script(home / ".local/specscope/nsys-2023.4.4/bin/specscope-nsys", fake)
    env = {"PATH": str(on_path.parent), "SPECSCOPE_NSYS": str(env_nsys)}

    def found(**kw):
        return discover.find_nsys(env=env, home=home, root=root, **kw)

    assert found(explicit=explicit).path == explicit
    assert found(explicit=explicit).found_by == "--nsys"
    assert found().path == env_nsys and found().found_by == "SPECSCOPE_NSYS"
    del env["SPECSCOPE_NSYS"]
    assert found().path == on_path and found().version == "2023.4.4.54"
    env["PATH"] = str(tmp_path / "nowhere")
    assert found().path == opt_new  # newest version of the glob first
    for p in (opt_new, opt_old):
        p.unlink()
    assert found().path == cuda
    cuda.unlink()
    assert found().path == ncu
    ncu.unlink()
    assert found().path == prefix
    prefix.unlink()
    with pytest.raises(NsysNotFound) as e:
        found()
    msg = str(e.value)
    assert "PATH" in msg and "/opt/nvidia/nsight-systems*/bin/nsys" in msg
    assert "/usr/local/cuda*/bin/nsys" in msg and "nsight-compute" in msg
    assert str(home / ".local/specscope/nsys-2023.4.4/bin/specscope-nsys") in msg
    assert "install_nsys.sh" in msg and "\n" not in msg


def test_install_prefix_follows_env(tmp_path):
    fake = FAKE_NSYS.replace("/usr/bin/env python3", sys.executable)
    w = _script(tmp_path / "custom/bin/specscope-nsys", fake)
    env = {"PATH": "", "SPECSCOPE_NSYS_PREFIX": str(tmp_path / "custom")}
    assert discover.find_nsys(env=env, home=tmp_path, root=tmp_path / "r").path == w


def test_explicit_nsys_that_is_not_executable(tmp_path):
    with pytest.raises(NsysNotFound, match="--nsys .*not an executable nsys"):
        discover.find_nsys(explicit=tmp_path / "nope", env={"PATH": ""})
    with pytest.raises(NsysNotFound, match="SPECSCOPE_NSYS"):
        discover.find_nsys(env={"SPECSCOPE_NSYS": str(tmp_path / "nope")})


def test_parse_version():
    assert discover.parse_version("NVIDIA Nsight Systems version 2023.4.4.54-2344v0") == (
        2023,
        4,
        4,
        54,
    )
    assert discover.parse_version("2025.3.1") == (2025, 3, 1)
    assert discover.parse_version("garbage") == ()


def test_nsys_too_old_to_export_sqlite(fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_EXPORT_HELP", "--type= text, json")
    nsys = discover.find_nsys()
    with pytest.raises(NsysTooOld, match="cannot export SQLite"):
        discover.check_exports_sqlite(nsys)
    r = CliRunner().invoke(profile, ["--", sys.executable, "-c", "pass"])
    assert r.exit_code == 2 and "cannot export SQLite" in r.output


# --- flags --------------------------------------------------------------------------------------


def test_standard_flags_with_gpu(tmp_path):
    flags, notes = ProfileFlags().for_machine(has_gpu=True)
    assert notes == []
    args = nsys_profile_args(flags, tmp_path / "report")
    assert args[:2] == ["profile", "-t"] and args[2] == "cuda,nvtx"
    for a in ("--cpuctxsw=none", "--cuda-graph-trace=graph", "--capture-range=cudaProfilerApi",
              "--capture-range-end=stop", "--trace-fork-before-exec=true"):  # fmt: skip
        assert a in args
    assert args[args.index("-s") + 1] == "none"
    assert args[-2:] == ["-o", str(tmp_path / "report")]
    assert flags.mode == "graph"


def test_flags_overrides(tmp_path):
    flags = ProfileFlags(trace=("cuda", "nvtx", "osrt"), graph_trace="graph", capture_range="none")
    args = nsys_profile_args(flags.for_machine(True)[0], tmp_path / "r")
    assert "cuda,nvtx,osrt" in args and "--cuda-graph-trace=graph" in args
    assert not any(a.startswith("--capture-range") for a in args)


def test_flags_drop_cuda_without_gpu(tmp_path):
    flags, notes = ProfileFlags().for_machine(has_gpu=False)
    args = nsys_profile_args(flags, tmp_path / "r")
    assert args[args.index("-t") + 1] == "nvtx"
    assert not any(a.startswith(("--cuda-graph-trace", "--capture-range")) for a in args)
    assert flags.mode == "no-cuda"
    assert any("dropped cuda" in n for n in notes)


# --- run folders, labels ---------------------------------------------------------------------


def test_run_folder_naming_never_reused(tmp_path):
    import datetime as dt

    now = dt.datetime(2026, 11, 29, 12, 0, 0)
    a = new_run_dir(tmp_path / "runs", "my label/x", now)
    b = new_run_dir(tmp_path / "runs", "my label/x", now)
    c = new_run_dir(tmp_path / "runs", "my label/x", now)
    assert a.name == "20261129-120000-my_label_x"
    assert b.name == a.name + "-2" and c.name == a.name + "-3"
    assert len({a, b, c}) == 3 and all(p.is_dir() for p in (a, b, c))


def test_default_label():
    assert default_label(["python3", "scripts/loop.py", "--steps", "3"]) == "loop"
    assert default_label(["python", "-m", "specscope.kernels.run"]) == "run"
    assert default_label(["/usr/bin/mybench", "-x"]) == "mybench"


def test_unwritable_out_dir(fake_env, monkeypatch):
    blocked = fake_env / "ro"
    blocked.mkdir()
    blocked.chmod(0o500)
    real_access = os.access
    # root can write anywhere: make the permission check see what an ordinary user would
    monkeypatch.setattr(
        os,
        "access",
        lambda p, mode: False if Path(p) == blocked and mode & os.W_OK else real_access(p, mode),
    )
    r = CliRunner().invoke(profile, ["--out", str(blocked), "--", sys.executable, "-c", "pass"])
    assert r.exit_code == 2
    assert r.output.splitlines()[-1].startswith("Error: ")
    assert f"cannot write in {blocked}" in r.output and "--out" in r.output
    with pytest.raises(OutputNotWritable):
        new_run_dir(blocked, "x")


def test_out_dir_under_a_file(fake_env):
    (fake_env / "afile").write_text("")
    r = CliRunner().invoke(profile, ["--out", "afile/runs", "--", sys.executable, "-c", "pass"])
    assert r.exit_code == 2
    assert "afile is a file, so the folder cannot be created" in r.output and "--out" in r.output


# --- profile ----------------------------------------------------------------------------------


def test_profile_writes_folder_and_manifest(fake_env, monkeypatch):
    monkeypatch.setenv("SPECSCOPE_SEED", "7")
    monkeypatch.setenv("SGLANG_ENABLE_X", "1")
    monkeypatch.setenv("OTHER_VAR", "no")
    cmd = _py("print('hello from the command')")
    res = run_profile(cmd, label="base", out=fake_env / "runs", echo=None)
    d = res.run_dir
    assert d.parent == fake_env / "runs" and d.name.endswith("-base")
    m = json.loads((d / "manifest.json").read_text())
    assert m["command"] == cmd and m["status"] == "ok" and m["exit_status"] == 0
    assert m["env"] == {"SGLANG_ENABLE_X": "1", "SPECSCOPE_SEED": "7"}
    assert m["nsys"]["path"] == str(fake_env / "bin" / "nsys")
    assert m["nsys"]["version"] == "2023.4.4.54" and m["nsys"]["found_by"] == "PATH"
    assert m["mode"] == "no-cuda" and m["gpus"] == []  # no nvidia-smi on the fake PATH
    assert any("dropped cuda" in n for n in m["notes"])
    assert m["host"]["hostname"] and m["started_at"] <= m["ended_at"]
    assert set(m["timings_s"]) >= {"record", "import", "export", "total"}
    assert "git" in m  # null outside a work tree
    assert set(m["outputs"]) == {
        "command.log",
        "export.log",
        "nsys-args.txt",
        "report.nsys-rep",
        "report.sqlite",
    }
    import hashlib

    for name, o in m["outputs"].items():
        data = (d / name).read_bytes()
        assert o["bytes"] == len(data) and o["sha256"] == hashlib.sha256(data).hexdigest()
    assert "hello from the command" in (d / "command.log").read_text()
    assert m["export"]["nvtx_ranges"] > 0
    assert not (d / "nsys-tmp").exists()  # nothing left in nsys' temp folder


def test_a_qdrep_report_of_an_older_nsys_is_exported(fake_env, monkeypatch):
    """nsys 2021.3 and older (2020.4 from Debian bullseye) name the report ``.qdrep``: it is
    exported and read as a ``.nsys-rep`` is (it was "no report")."""
    monkeypatch.setenv("FAKE_NSYS_SUFFIX", ".qdrep")
    monkeypatch.setenv("FAKE_NSYS_VERSION", "2020.4.3.7-10543b6")
    res = run_profile(_py("pass"), label="old", out=fake_env / "runs", echo=None)
    m = json.loads((res.run_dir / "manifest.json").read_text())
    assert m["status"] == "ok" and {"report.qdrep", "report.sqlite"} <= set(m["outputs"])
    assert m["export"]["nvtx_ranges"] > 0


def test_relative_out_gives_nsys_an_absolute_tmpdir(fake_env):
    """The default ``--out runs`` passed TMPDIR=runs/.../nsys-tmp: nsys failed with boost's
    ``temp_directory_path: Not a directory`` and the profiled command was blamed."""
    r = CliRunner().invoke(profile, ["--label", "rel", "--", *_py("pass")])
    assert r.exit_code == 0, r.output
    d = next((fake_env / "runs").glob("*-rel"))
    assert json.loads((d / "manifest.json").read_text())["status"] == "ok"


@pytest.mark.parametrize("name", ["a#b", "a?b", "a%41b"])
def test_out_with_uri_characters_is_read_back(fake_env, name):
    """``#``/``?`` in --out cut the export check's read-only URI short (0 NVTX ranges, a stray
    file created) and ``%41`` gave a traceback."""
    before = set(os.listdir(fake_env))
    res = run_profile(_py("pass"), label="x", out=fake_env / name, echo=None)
    assert res.check.nvtx_ranges > 0
    assert set(os.listdir(fake_env)) - before == {name}  # nothing beside the run folder


def test_manifest_records_git_state(fake_env):
    import subprocess

    subprocess.run(["git", "init", "-q"], check=True)
    (fake_env / "f").write_text("1")
    subprocess.run(["git", "add", "f"], check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)  # fmt: skip
    res = run_profile(_py("pass"), out=fake_env / "runs", echo=None)
    git = res.manifest["git"]
    assert len(git["commit"]) == 40 and git["dirty"] is False
    (fake_env / "f").write_text("2")
    assert run_profile(_py("pass"), out=fake_env / "runs", echo=None).manifest["git"]["dirty"]


def test_profile_with_gpu_uses_standard_flags(fake_env):
    _script(fake_env / "bin" / "nvidia-smi", "#!/bin/sh\necho 'NVIDIA H200, 580.159.04'\n")
    r = CliRunner().invoke(profile, ["--label", "g", "--", sys.executable, "-c", "pass"])
    # the CPU export holds no CUDA activity: on a GPU machine that is an error with a hint
    assert r.exit_code == 2
    assert "no CUDA activity" in r.output and "--capture-range" in r.output
    d = next((fake_env / "runs").glob("*-g"))
    args = (d / "nsys-args.txt").read_text().splitlines()
    assert "cuda,nvtx" in args and "--cuda-graph-trace=graph" in args
    assert "--trace-fork-before-exec=true" in args
    m = json.loads((d / "manifest.json").read_text())
    assert m["gpus"] == [{"name": "NVIDIA H200", "driver": "580.159.04"}]
    assert m["mode"] == "graph" and m["status"] == "no-cuda-activity"


def test_command_not_found(fake_env):
    r = CliRunner().invoke(profile, ["--", "no-such-command-xyz", "--flag"])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and "command not found: no-such-command-xyz" in r.output
    assert not (fake_env / "runs").exists()


def test_missing_nsys_says_where_it_looked(fake_env, monkeypatch):
    (fake_env / "bin" / "nsys").unlink()
    r = CliRunner().invoke(profile, ["--", sys.executable, "-c", "pass"])
    assert r.exit_code == 2 and r.output.count("\n") == 1
    assert "nsys not found (looked in PATH" in r.output and "install_nsys.sh" in r.output


def test_failing_command_keeps_exit_status_and_log(fake_env):
    r = CliRunner().invoke(
        profile, ["--label", "f", "--", *_py("print('about to fail')", "raise SystemExit(7)")]
    )
    assert r.exit_code == 7 and "exited with status 7" in r.output
    d = next((fake_env / "runs").glob("*-f"))
    assert "about to fail" in (d / "command.log").read_text()
    m = json.loads((d / "manifest.json").read_text())
    assert m["status"] == "failed" and m["exit_status"] == 7
    assert (d / "report.sqlite").exists()  # still exported: the folder is usable


def test_qdstrm_left_unimported_is_kept_and_diagnosed(fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_IMPORT", "fail")
    host = fake_env / "host-linux-x64"
    _script(host / "QdstrmImporter", "#!/bin/sh\nexit 1\n")
    _script(
        fake_env / "bin" / "ldd",
        "#!/bin/sh\necho '\tlibdw.so.1 => not found'\necho '\tlibelf.so.1 => not found'\n"
        "echo '\tlibc.so.6 => /lib/libc.so.6'\n",
    )
    r = CliRunner().invoke(profile, ["--label", "q", "--", sys.executable, "-c", "pass"])
    assert r.exit_code == 2
    line = r.output.strip().splitlines()[-1]
    assert "unimported (kept)" in line and "cannot load libdw.so.1, libelf.so.1" in line
    assert "LD_LIBRARY_PATH" in line and "QdstrmImporter -i" in line
    assert "nsys exited with status 1" in line
    d = next((fake_env / "runs").glob("*-q"))
    kept = list(d.rglob("*.qdstrm"))
    assert len(kept) == 1 and kept[0].read_text() == "raw"
    m = json.loads((d / "manifest.json").read_text())
    assert m["status"] == "qdstrm-unimported"
    assert str(kept[0].relative_to(d)) in m["outputs"]


def test_no_report_hints_at_capture_range(fake_env, monkeypatch):
    monkeypatch.setenv("FAKE_NSYS_IMPORT", "none")
    _script(fake_env / "bin" / "nvidia-smi", "#!/bin/sh\necho 'NVIDIA H200, 580.159.04'\n")
    r = CliRunner().invoke(profile, ["--", sys.executable, "-c", "pass"])
    assert r.exit_code == 2 and "no report" in r.output and "cudaProfilerStart" in r.output


def test_analyze_appends_to_results_db(fake_env):
    import sqlite_utils

    r = CliRunner().invoke(profile, ["--label", "a", "--analyze", "eagle", "--", *_py("pass")])
    assert r.exit_code == 0, r.output
    d = next((fake_env / "runs").glob("*-a"))
    m = json.loads((d / "manifest.json").read_text())
    assert m["analysis"]["steps"] > 0
    db = sqlite_utils.Database(d / "results.sqlite")
    assert db["runs"].count == 1 and db["step_metrics"].count > 0
    assert json.loads((d / "analysis.json").read_text())["steps"] == m["analysis"]["steps"]


def test_export_without_ranges_is_not_analysed(fake_env, monkeypatch, tmp_path):
    import sqlite3

    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute(
        "CREATE TABLE StringIds (id INTEGER, value TEXT)"
    ).connection.commit()
    monkeypatch.setenv("FAKE_NSYS_EXPORT", str(empty))
    r = CliRunner().invoke(profile, ["--analyze", "eagle", "--", *_py("pass")])
    assert r.exit_code == 2 and "no NVTX ranges, nothing to analyse" in r.output


# --- old nsys + new nvtx ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nsys_version", "nvtx_version", "warns"),
    [
        ("2023.4.4.54", "0.2.14", True),
        ("2023.4.4.54", "0.2.12", True),
        ("2023.4.4.54", "0.2.11", False),
        ("2023.4.4.54", None, False),
        ("2024.2.3.38", "0.2.12", True),  # (checked: compat's module doc)
        ("2024.2.3.38", "0.2.11", False),
        ("2025.3.1.90", "0.2.14", False),
    ],
)
def test_old_nsys_new_nvtx_warning(nsys_version, nvtx_version, warns):
    nsys = discover.Nsys(Path("/x/nsys"), nsys_version, "PATH")
    w = compat.nvtx_warning(nsys, nvtx_version)
    assert (w is not None) == warns
    if warns:
        assert "records no NVTX ranges" in w and "nvtx==0.2.11" in w


def test_profile_warns_on_old_nsys_new_nvtx(fake_env, monkeypatch):
    monkeypatch.setattr(compat, "package_versions", lambda names, python=None: {"nvtx": "0.2.14"})
    r = CliRunner().invoke(profile, ["--", *_py("pass")])
    assert "warning: nsys 2023.4.4.54 records no NVTX ranges from the nvtx package 0.2.14" in (
        r.output
    )


# --- doctor -------------------------------------------------------------------------------------


def test_doctor_without_nsys(fake_env):
    (fake_env / "bin" / "nsys").unlink()
    r = CliRunner().invoke(doctor, [])
    assert r.exit_code == 1
    first = r.output.splitlines()[0]
    assert first.startswith("FAIL  nsys") and "looked in" in first and "fix:" in first
    assert any(line.startswith("ok    gpu") for line in r.output.splitlines())
    assert "mode" in r.output


def test_doctor_names_missing_importer_libraries(fake_env, monkeypatch):
    monkeypatch.setattr(compat, "package_versions", lambda names, python=None: {"nvtx": "0.2.14"})
    _script(fake_env / "host-linux-x64" / "QdstrmImporter", "#!/bin/sh\n")
    _script(fake_env / "bin" / "ldd", "#!/bin/sh\necho '\tlibdw.so.1 => not found'\n")
    r = CliRunner().invoke(doctor, ["--no-probe"])
    lines = r.output.splitlines()
    assert r.exit_code == 1
    importer = next(line for line in lines if "importer" in line)
    assert importer.startswith("FAIL") and "libdw.so.1" in importer and "libdw1" in importer
    nvtx = next(line for line in lines if line.startswith("warn  nvtx"))
    assert "0.2.14" in nvtx and "nvtx==0.2.11" in nvtx


@pytest.mark.parametrize("cc", ["no-such-cc", None])
def test_doctor_says_how_exports_are_read(fake_env, monkeypatch, tmp_path, cc):
    """The C fast paths built (ok, their files) or not (a warning naming why)."""
    monkeypatch.setenv("SPECSCOPE_CACHE", str(tmp_path / "cache"))
    if cc is not None:
        monkeypatch.setenv("CC", cc)
    elif shutil.which("cc") is None:
        pytest.skip("no C compiler here")
    r = CliRunner().invoke(doctor, ["--no-probe"])
    reader = next(line for line in r.output.splitlines() if "reader" in line)
    if cc is None:
        assert reader.startswith("ok    reader") and str(tmp_path / "cache") in reader
        assert "opsums-" in reader and "pagescan-" in reader and "jsonrows-" in reader
    else:
        assert reader.startswith("warn  reader") and "no-such-cc" in reader and "fix:" in reader


def test_ctrl_c_leaves_a_usable_folder(fake_env, tmp_path):
    """Ctrl-C (SIGINT to the foreground process group) while the command runs: exit 130, one
    error line, and a run folder whose manifest says 'interrupted' and keeps the command's log."""
    import signal
    import subprocess
    import time

    marker = tmp_path / "started"
    child = f"import pathlib, time; pathlib.Path({str(marker)!r}).touch(); time.sleep(60)"
    cmd = [sys.executable, "-m", "specscope", "profile", "--label", "cc", "--out", "runs"]
    # SIGINT as a terminal gives it, even where this run inherited it ignored (a shell's
    # background job: Python then never raises KeyboardInterrupt, nor its children)
    default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    proc = subprocess.Popen(
        [*cmd, "--", sys.executable, "-c", child],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=default_sigint,
    )  # fmt: skip
    for _ in range(600):  # wait (at most 60 s) until the profiled command runs
        if marker.exists() or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert marker.exists(), proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("Error:")], err
    (run_dir,) = (fake_env / "runs").glob("*-cc")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    assert (run_dir / "command.log").is_file()


def test_files_under_tolerates_a_folder_that_vanishes(tmp_path, monkeypatch):
    """nsys' helpers delete their temporary folders late: a folder removed mid-walk is skipped
    (Path.rglob raised FileNotFoundError there)."""
    from specscope.profiler.manifest import files_under

    (tmp_path / "keep").mkdir()
    (tmp_path / "keep" / "a.qdstrm").write_text("x")
    (tmp_path / "gone").mkdir()
    (tmp_path / "gone" / "b.qdstrm").write_text("y")
    real_scandir = os.scandir

    def scandir(path):
        if str(path).endswith("gone"):
            raise FileNotFoundError(path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert files_under(tmp_path, ".qdstrm") == [tmp_path / "keep" / "a.qdstrm"]


SMI = """#!/bin/sh
if [ "$#" -gt 0 ]; then echo 'NVIDIA H200, 580.159.04'; exit 0; fi
echo '| NVIDIA-SMI 580.159.04      Driver Version: 580.159.04     CUDA Version: 13.0     |'
"""


@pytest.mark.parametrize(("cupti", "warned"), [("12.4", True), ("13.0", False), (None, False)])
def test_a_cupti_older_than_the_driver_is_said(fake_env, cupti, warned):
    """nsys traces with the newest CUPTI beside it; older than the driver's CUDA (13.0 here),
    in graph mode it recorded no replay (nsys 2023.4.4: CUPTI 12.4). ``doctor`` warns, with the
    fix, and ``profile`` says it before recording; a CUPTI as new as the driver, or none found
    beside nsys, is no warning."""
    _script(fake_env / "bin" / "nvidia-smi", SMI)
    if cupti is not None:
        for version in ("11.8", cupti):
            (fake_env / "bin" / f"libcupti.so.{version}").write_text("")
    r = CliRunner().invoke(doctor, ["--no-probe"])
    line = next(x for x in r.output.splitlines() if " cupti " in x)
    assert line.startswith("warn" if warned else "ok"), line
    if warned:
        assert "CUPTI 12.4, older than this driver's CUDA 13.0" in line and "fix:" in line
    elif cupti:
        assert "CUPTI 13.0; the driver's CUDA 13.0" in line
    with pytest.raises(NoActivity):  # (the fake's export: NVTX only, on a "GPU machine")
        run_profile(_py("pass"), label="c", out=fake_env / "runs", echo=None)
    (run,) = (fake_env / "runs").glob("*-c")
    notes = json.loads((run / "manifest.json").read_text())["notes"]
    assert bool([n for n in notes if "traces CUDA with CUPTI" in n]) == warned
