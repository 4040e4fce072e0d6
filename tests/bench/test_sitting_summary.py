"""``bench/sitting_summary.py``: one table of issue 19's goals from a sitting's log and rows."""

from __future__ import annotations

import json
import sqlite3

from testdata import bench_module

SHA = "856e8cd08b8761898dc64a04c568d8955446ec63"


def _bench():
    return bench_module("sitting_summary")


def _analyze_row(date: str, path: str, ops: int, best: float, floor: float, sha: str = SHA):
    return {
        "date": date,
        "git_sha": sha,
        "export": {"path": path, "ops": ops},
        "floor": {"best_s": floor, "median_s": floor},
        "analyze": {
            "cmd": f"python -m specscope analyze {path} --preset eagle --format json",
            "best_s": best,
            "median_s": best * 1.2,
            "peak_rss_bytes": 200 << 20,
        },
    }


def _scale_line(path: str, ratio: float, rss: int) -> str:
    row = {
        "export": path,
        "analyze_cmd": f"python -m specscope analyze {path} --format json",
        "analyze": {"best": {"wall_s": 5.0 * ratio}, "median_s": 5.0 * ratio, "rss_max": rss},
        "ratio_wall": ratio,
        "ratio_median": ratio,
        "nsys_stats": {"best": {"wall_s": 40.0}},
    }
    return json.dumps(row)


def _cli_row(date: str, small: float) -> dict:
    def row(name: str, best: float) -> dict:
        return {"name": name, "best_s": best, "median_s": best, "peak_rss_mib": 80.0}

    return {
        "date": date,
        "git_sha": SHA,
        "goals": {"help_s": 0.1, "small_analyze_s": 0.35, "report_s": 1.5, "compare_ratio": 2.5},
        "startup": {
            "rows": [
                row("import pandas", 0.48),
                row("specscope --help", 0.06),
                row("analyze a.sqlite", 0.30),
                row("analyze b.sqlite", small),
            ]
        },
        "report": {"rows": [row("report before after", 1.2)]},
        "compare": {"rows": [row("analyze A (json)", 0.9), row("compare A B", 1.5)]},
    }


def _export(path, kernels: int) -> str:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER)")
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (rowid, start) VALUES (?, 0)", (kernels,))
    con.commit()
    con.close()
    return str(path)


def _write(tmp_path, log_lines, rows, cli_rows):
    log = tmp_path / "sitting.log"
    log.write_text("\n".join(log_lines) + "\n")
    results, results_cli = tmp_path / "r.jsonl", tmp_path / "c.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    results_cli.write_text("".join(json.dumps(r) + "\n" for r in cli_rows))
    return log, results, results_cli


def test_each_goal_judged_from_the_sittings_rows_only(tmp_path):
    bench = _bench()
    big = _export(tmp_path / "big.sqlite", 20_000_000)  # (the last rowid: 20 M ops, no scan)
    log_lines = [
        "=== start 09:55:14 856e8cd load 0.06",
        "export   /tmp/x.sqlite ...",
        _scale_line(big, 1.1, 1200 << 20),  # within 2x but over 1 GiB: not met
        "=== end 10:01:17 load 1.53",
    ]
    rows = [
        _analyze_row("2026-12-03T09:55:21+00:00", "/tmp/ops2m.sqlite", 2_000_000, 0.84, 0.80),
        _analyze_row("2026-12-03T09:56:00+00:00", "/tmp/slow.sqlite", 2_000_000, 1.7, 1.0),
        # another sitting's: an earlier time, and another commit
        _analyze_row("2026-12-03T09:20:00+00:00", "/tmp/old.sqlite", 2_000_000, 9.0, 1.0),
        _analyze_row("2026-12-03T09:57:00+00:00", "/tmp/other.sqlite", 2, 9.0, 1.0, sha="abc"),
        # an analysis that failed: a row that says so, never a figure
        _analyze_row("2026-12-03T09:58:00+00:00", "/tmp/broken.sqlite", 2, 0.1, 1.0),
    ]
    rows[-1]["analyze"] = {"cmd": "python -m specscope analyze /tmp/broken.sqlite", "rc": 1}
    cli = [_cli_row("2026-12-03T09:58:00+00:00", 0.44), _cli_row("2026-12-03T08:00:00+00:00", 9)]
    out = bench.summary(*_write(tmp_path, log_lines, rows, cli))
    assert out[0].startswith("Sitting of 856e8cd, 09:55:14-10:01:17")
    table = out[2:]
    by = {line.split(" | ")[1].split(" (")[0]: line for line in table[2:]}
    assert "old.sqlite" not in "".join(table) and "other.sqlite" not in "".join(table)
    assert by["ops2m.sqlite"].endswith("| yes |") and "1.05x" in by["ops2m.sqlite"]
    assert by["slow.sqlite"].endswith("| **no** |") and "1.70x" in by["slow.sqlite"]
    assert "20.0 M ops" in by["big.sqlite"] and "<= 2.0x, <= 1 GiB" in by["big.sqlite"]
    assert by["big.sqlite"].endswith("| **no** |") and "nsys stats 40.0 s" in by["big.sqlite"]
    assert by["specscope --help"].endswith("| yes |")
    failed = "| - | broken.sqlite | analyze failed (exit 1) | - | - | - | **no** |"
    assert by["broken.sqlite"] == failed
    small = next(line for line in table if "small analyze" in line)
    assert "b.sqlite" in small and "0.440" in small and small.endswith("| **no** |")
    assert "import pandas alone 0.480 s" in small
    assert next(line for line in table if "report" in line).endswith("| yes |")
    compare = next(line for line in table if "compare" in line)
    assert "1.67x analyze" in compare and compare.endswith("| yes |")


def test_a_log_that_is_not_a_sittings_is_a_one_line_error(tmp_path, capsys):
    bench = _bench()
    log, results, results_cli = _write(tmp_path, ["hello"], [], [])
    assert bench.main([str(log), "--results", str(results), "--results-cli", str(results_cli)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no '=== start" in err
    log.write_text("=== start 09:55:14 856e8cd load 0.06\n")  # a sitting without figures
    assert bench.main([str(log), "--results", str(results), "--results-cli", str(results_cli)]) == 2
    assert "no figure of commit 856e8cd" in capsys.readouterr().err
    missing = tmp_path / "missing.log"
    assert bench.main([str(missing)]) == 2
    assert "missing.log" in capsys.readouterr().err
