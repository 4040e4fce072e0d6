#!/bin/bash
# Every goal of issue 19 in one sitting: the commands behind the goal tables of bench/README.md.
#
#   bash bench/goal_sitting.sh [EXPORTS]     # EXPORTS: where make_export.py wrote them (/tmp/bench)
#
# EXPORTS holds ops2m.sqlite, ops2m_nonvtx.sqlite, ops20m.sqlite and ops20m_nonvtx.sqlite
# (bench/README.md, "Running"; the 20 M ones take minutes to make), ops2m_b.sqlite for
# bench_cli.py's compare, and ranks4.sqlite and ranks8.sqlite (tensor-parallel ranks in one
# export, bench/merge_ranks.py; ranks8x20m.sqlite: 8 ranks of 2.5 M) and ops2m_el.sqlite and
# ops2m_el_nonvtx.sqlite (eager launches,
# make_export.py --launches eager), each skipped where it is not there. Run it on an otherwise
# idle machine: about 7 minutes on 2 cores. It ends with one table of every goal, met or not
# (bench/sitting_summary.py, from the rows the benchmarks appended and the output kept in a log).
set -eo pipefail
cd "$(dirname "$0")/.."
exports="${1:-/tmp/bench}"
unset PYTHONDONTWRITEBYTECODE  # (timings with bytecode cached, as users run)
if ! python -c "import specscope.analysis.loader" 2>/dev/null; then  # (pandas, numpy: every
  # benchmark runs `python -m specscope`, which without them fails only once it analyses)
  echo "goal_sitting: $(command -v python) cannot import specscope's analysis (pandas, numpy);" \
    "activate the environment README command 1 makes (. .venv/bin/activate)" >&2
  exit 2
fi
log=$(mktemp /tmp/goal_sitting.XXXXXX.log)  # (kept: bench/sitting_summary.py reads it at the end)

sitting() {
echo "=== start $(date -u +%H:%M:%S) $(git rev-parse --short HEAD) load $(cut -d' ' -f1 /proc/loadavg)"
python bench/bench_analyze.py "$exports/ops2m.sqlite"
python bench/bench_analyze.py "$exports/ops2m_nonvtx.sqlite" --preset ''
python bench/bench_scale.py "$exports/ops2m.sqlite" "$exports/ops20m.sqlite"
python bench/bench_scale.py "$exports/ops20m_nonvtx.sqlite" --preset '' --no-nsys
python bench/bench_cli.py --a "$exports/ops2m.sqlite" --b "$exports/ops2m_b.sqlite"
if [ -f "$exports/ranks4.sqlite" ] && [ -f "$exports/ranks8.sqlite" ]; then
  python bench/bench_scale.py "$exports/ranks4.sqlite" "$exports/ranks8.sqlite"
  python bench/bench_scale.py "$exports/ranks4.sqlite" --preset '' --no-nsys
fi
if [ -f "$exports/ranks8x20m.sqlite" ]; then  # (20 M GPU ops of 8 ranks: the 20 M goal's TP case)
  python bench/bench_scale.py "$exports/ranks8x20m.sqlite" --no-nsys
  python bench/bench_scale.py "$exports/ranks8x20m.sqlite" --preset '' --no-nsys  # ([Z]'s)
fi
if [ -f "$exports/ops2m_el.sqlite" ] && [ -f "$exports/ops2m_el_nonvtx.sqlite" ]; then
  python bench/bench_analyze.py "$exports/ops2m_el.sqlite"
  python bench/bench_analyze.py "$exports/ops2m_el_nonvtx.sqlite" --preset ''
fi
echo "=== end $(date -u +%H:%M:%S) load $(cut -d' ' -f1 /proc/loadavg)"
}

sitting 2>&1 | tee "$log"
echo "(this output: $log)"
python bench/sitting_summary.py "$log"  # every goal in one table, from the rows just written
