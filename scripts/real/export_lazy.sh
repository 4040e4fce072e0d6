#!/usr/bin/env bash
# The same report exported with and without --lazy=false (every table written, empty ones too),
# in graph and in node mode: the analyses must be the same.
#
#   bash scripts/real/export_lazy.sh OUT_DIR     (on the H200; nsys 2025.3.1 unless NSYS is set)
#
# Records scripts/real/mixed_batches.py 48 8 in each mode (no NVTX), exports each report twice
# (MODE.sqlite as nsys exports by default, MODE_nolazy.sqlite with --lazy=false), and writes
# OUT_DIR/export_lazy.log: per mode whether zero-config's JSON and --totals of the two exports are
# the same (the trace's name aside), then sweep_lib.sh's line per read-only command of each
# export; and OUT_DIR/export_lazy.tar.xz (the exports, their nsys stats CSVs).
set -uo pipefail
. "$(dirname "$0")/sweep_lib.sh"
sweep_setup "${1:?usage: export_lazy.sh OUT_DIR}" export_lazy.log
"$NSYS" --version >>"$log" 2>&1
for mode in graph node; do
  sweep_record "$mode" -t cuda --cuda-graph-trace=$mode --capture-range=cudaProfilerApi \
    --capture-range-end=stop python3 "$real/mixed_batches.py" 48 8
  if timeout 120 "$NSYS" export --type sqlite --lazy=false -f true -o "${mode}_nolazy.sqlite" \
    "$mode.nsys-rep" >/dev/null 2>&1; then
    tables() { python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT count(*) FROM sqlite_master WHERE type='table'\").fetchone()[0])" "$1"; }
    echo "== ${mode}_nolazy: $(du -k "${mode}_nolazy.sqlite" | cut -f1) KiB, $(tables "${mode}_nolazy.sqlite") tables ($(tables "$mode.sqlite") by default)" >>"$log"
  else
    echo "== ${mode}_nolazy: nsys export --lazy=false failed" >>"$log"
    continue
  fi
  for view in "--format json" "--totals"; do
    # shellcheck disable=SC2086
    a=$(python3 -m specscope analyze "$mode.sqlite" $view 2>&1 | sed "s#$mode.sqlite#TRACE#g")
    # shellcheck disable=SC2086
    b=$(python3 -m specscope analyze "${mode}_nolazy.sqlite" $view 2>&1 | sed "s#${mode}_nolazy.sqlite#TRACE#g")
    if [ "$a" = "$b" ]; then echo "$mode analyze $view: the same" >>"$log"
    else echo "$mode analyze $view: DIFFER" >>"$log"; diff <(echo "$a") <(echo "$b") | head -20 >>"$log"; fi
  done
done
sweep_archive export_lazy
sweep_commands 300
