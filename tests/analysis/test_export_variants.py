"""Details of exports written by other nsys versions and programs (issue [Z], point 6).

Each test builds a small export with :class:`SyntheticExport`, then reshapes it the way another
nsys version or program writes it: the old ``EXPORT_META_DATA`` table, unified-memory
migrations named from ``ENUM_CUDA_MEMCPY_OPER``, driver-API and per-thread-stream launches,
columns an older schema lacks, hundreds of nested range names.
"""

from __future__ import annotations

import shutil
import sqlite3
import warnings

import pandas as pd
import pytest
from testdata import DATA

from specscope.analysis.loader import load
from specscope.analysis.metrics import per_step_metrics
from specscope.analysis.spec import StepSpec
from specscope.analysis.steps import find_steps
from specscope.analysis.summary import totals
from specscope.analysis.synthetic import SyntheticExport

SPEC = StepSpec(step="step", anchors=())


def _loop(x: SyntheticExport, steps: int = 3, launch: str = "cudaLaunchKernel") -> None:
    """``steps`` NVTX steps of 1000 ns, each one kernel launched by ``launch``."""
    for k in range(steps):
        t = 10_000 + k * 1_000
        with x.nvtx("step", t, t + 900):
            corr = x.api(launch, t + 10, t + 20)
        x.kernel("k", t + 100, t + 300, corr)


def _analyse(path, spec: StepSpec = SPEC) -> pd.DataFrame:
    trace = load(path)
    return per_step_metrics(trace, find_steps(trace, spec)).frame


def test_versions_from_the_old_export_meta_data_table(tmp_path):
    path = tmp_path / "old.sqlite"
    x = SyntheticExport(nsys_version="2022.4.2.1")
    _loop(x)
    x.write(path)
    with sqlite3.connect(path) as con:  # nsys <= 2023.2 names the table EXPORT_META_DATA
        con.execute("ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA")
    trace = load(path)
    assert (trace.nsys_version, trace.schema_version) == ("2022.4.2.1", "3.20.3")


def _with_unified(path) -> None:
    """Add two unified-memory migrations (no API call)."""
    with sqlite3.connect(path) as con:
        pid = con.execute("SELECT globalPid FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchone()[0]
        con.executemany(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, 7, 0, ?, 4096, 11, NULL)",
            [(10_400, 10_450, pid), (11_400, 11_480, pid)],
        )


def _uvm_export(path, **kw):
    """Two NVTX steps of one eager H2D copy each, plus two unified-memory migrations."""
    x = SyntheticExport(**kw)
    with x.nvtx("step", 10_000, 10_900):
        corr = x.api("cudaMemcpyAsync", 10_010, 10_020)
    x.memcpy("htod", 64, 10_100, 10_200, corr)
    with x.nvtx("step", 11_000, 11_900):
        corr = x.api("cudaMemcpyAsync", 11_010, 11_020)
    x.memcpy("htod", 64, 11_100, 11_200, corr)
    x.write(path)
    _with_unified(path)
    return path


def test_memcpys_of_exports_without_the_enum_are_named_as_their_nsys_stats(tmp_path):
    # nsys before 2021.2 wrote no ENUM_CUDA_MEMCPY_OPER; its `nsys stats` said HtoD, and
    # "Unified Memory memcpy" for migrations
    path = _uvm_export(tmp_path / "old.sqlite", memcpy_enum=False, nsys_version="2020.3.1.71")
    memory = totals(load(path))["memory"]
    assert memory.loc["[CUDA Unified Memory memcpy HtoD]", "count"] == 2
    assert memory.loc["[CUDA memcpy HtoD]", "count"] == 2
    assert not any("Host-to-Device" in name for name in memory.index)
    frame = _analyse(path)
    assert frame["eager_memcpy"].tolist() == [1, 1]  # migrations are not eager copies


def test_unified_memory_migrations_are_named_as_nsys_and_not_eager_copies(tmp_path):
    path = _uvm_export(tmp_path / "uvm.sqlite")
    memory = totals(load(path))["memory"]
    assert memory.loc["[CUDA memcpy Unified Host-to-Device]", "count"] == 2
    assert memory.loc["[CUDA memcpy Unified Host-to-Device]", "total_ns"] == 50 + 80
    assert memory.loc["[CUDA memcpy Host-to-Device]", "count"] == 2
    frame = _analyse(path)
    assert frame["eager_memcpy"].tolist() == [1, 1]
    assert frame["eager_memcpy_other"].tolist() == [0, 0]
    assert frame["eager_memcpy_bytes"].tolist() == [64, 64]


@pytest.mark.parametrize(
    ("launch", "family"),
    [
        ("cuLaunchKernel", "cudaLaunchKernel"),
        ("cuLaunchKernelEx", "cudaLaunchKernel"),
        ("cudaLaunchKernel_ptsz", "cudaLaunchKernel"),
        ("cuGraphLaunch", "cudaGraphLaunch"),
        ("cudaGraphLaunch_ptsz", "cudaGraphLaunch"),
        ("cuMemcpyHtoDAsync", "cudaMemcpyAsync"),
        ("cudaMemcpyAsync_ptds", "cudaMemcpyAsync"),
    ],
)
def test_driver_api_and_per_thread_stream_calls_count_in_their_family(tmp_path, launch, family):
    path = tmp_path / "driver.sqlite"
    x = SyntheticExport()
    _loop(x, launch=launch)
    x.write(path)
    frame = _analyse(path)
    assert frame[f"api_calls:{family}"].tolist() == [1, 1, 1]
    others = {"cudaLaunchKernel", "cudaGraphLaunch", "cudaMemcpyAsync"} - {family}
    for other in others:
        assert frame[f"api_calls:{other}"].tolist() == [0, 0, 0]


def test_an_older_schema_without_optional_columns_still_loads(tmp_path):
    path = tmp_path / "lean.sqlite"
    x = SyntheticExport()
    _loop(x)
    x.write(path)
    with sqlite3.connect(path) as con:  # no shortName, no graphNodeId: an older kernel table
        con.execute(
            "CREATE TABLE k2 AS SELECT start, end, deviceId, contextId, streamId, correlationId,"
            " globalPid, demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL"
        )
        con.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
        con.execute("ALTER TABLE k2 RENAME TO CUPTI_ACTIVITY_KIND_KERNEL")
    trace = load(path)
    assert trace.ops["name"].tolist() == ["k"] * 3  # the demangled name stands in
    assert _analyse(path)["eager_kernels"].tolist() == [1, 1, 1]


def test_hundreds_of_nested_range_names_raise_no_performance_warning(tmp_path):
    path = tmp_path / "many.sqlite"
    x = SyntheticExport()
    for k in range(3):
        t = 100_000 + k * 10_000
        with x.nvtx("step", t, t + 9_000):
            for i in range(300):
                x.range(f"layer.{i}", t + 10 * i, t + 10 * i + 5)
    x.write(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pd.errors.PerformanceWarning)
        frame = _analyse(path)
    assert frame["cpu_us:layer.299"].tolist() == [0.005] * 3


def test_nvtxt_ranges_are_ranges_too(tmp_path):
    """eventType 70/71 (NVTXT push/pop, start/end), which nsys's own reports read as ranges."""
    path = tmp_path / "nvtxt.sqlite"
    x = SyntheticExport()
    _loop(x)
    x.write(path)
    with sqlite3.connect(path) as con:
        con.execute("UPDATE NVTX_EVENTS SET eventType = 70 WHERE rowid % 2 = 0")
        con.execute("UPDATE NVTX_EVENTS SET eventType = 71 WHERE rowid % 2 = 1")
    assert len(load(path).nvtx) == 3
    assert _analyse(path)["eager_kernels"].tolist() == [1, 1, 1]


def test_nvtx_without_a_text_column_or_with_blob_text(tmp_path):
    """Exports that keep every range name in textId (no ``text`` column), and a damaged one
    whose ``text`` holds a blob: ranges are still read, names as text."""
    lean, blob = tmp_path / "lean.sqlite", tmp_path / "blob.sqlite"
    for path in (lean, blob):
        x = SyntheticExport()
        _loop(x)
        x.write(path)
    with sqlite3.connect(lean) as con:
        con.execute("ALTER TABLE NVTX_EVENTS DROP COLUMN text")
    assert _analyse(lean)["eager_kernels"].tolist() == [1, 1, 1]
    with sqlite3.connect(blob) as con:
        con.execute("UPDATE NVTX_EVENTS SET text = x'73746570', textId = NULL")  # b"step"
    assert load(blob).nvtx["name"].tolist() == ["step"] * 3


def test_damaged_or_missing_tables_give_an_analysis_not_a_traceback(tmp_path):
    """Found by fuzzing the zero-config path: no CUDA API table, a blob GPU id, a huge negative
    textId, NULL names in StringIds (read before any analysis validated the export)."""
    from specscope.analysis.auto import analyze_processes
    from specscope.analysis.run import AnalyzeOptions

    damage = {
        "no_runtime": "DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME",
        "blob_gpu_id": "UPDATE TARGET_INFO_GPU SET id = x'00ff'",
        "negative_text_id": "UPDATE NVTX_EVENTS SET textId = -9223372036854775807",
        "null_string": "UPDATE StringIds SET value = NULL WHERE rowid % 2 = 0",
    }
    for name, sql in damage.items():
        path = tmp_path / f"{name}.sqlite"
        x = SyntheticExport()
        _loop(x)
        x.write(path)
        with sqlite3.connect(path) as con:
            if name == "null_string":  # the schema says NOT NULL: a damaged copy does not
                con.execute("CREATE TABLE s2 AS SELECT * FROM StringIds")
                con.execute("DROP TABLE StringIds")
                con.execute("ALTER TABLE s2 RENAME TO StringIds")
            con.execute(sql)
        assert not totals(load(path))["kernels"].empty, name
        export = analyze_processes(path, None, AnalyzeOptions())
        assert export.processes and export.processes[0].analysis.n_steps >= 1, name


@pytest.mark.parametrize("mode", ["graph", "node"])
def test_graph_launches_without_optional_columns(tmp_path, mode):
    """Found by fuzzing: the graph launch queries read globalPid, deviceId and correlationId as
    every other query does (NULL where an export lacks them), not as required columns."""
    from specscope.analysis.graphs import thread_graphs

    src = DATA / "graphs" / f"run_{mode}_nonvtx.sqlite"
    path = tmp_path / src.name
    shutil.copy(src, path)
    table = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE" if mode == "graph" else "CUPTI_ACTIVITY_KIND_KERNEL"
    with sqlite3.connect(path) as con:
        have = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        keep = ", ".join(c for c in have if c not in ("globalPid", "deviceId", "correlationId"))
        con.execute(f"CREATE TABLE t2 AS SELECT {keep} FROM {table}")
        con.execute(f"DROP TABLE {table}")
        con.execute(f"ALTER TABLE t2 RENAME TO {table}")
    assert thread_graphs(load(path))  # the launches are read, as one process (pid 0)
