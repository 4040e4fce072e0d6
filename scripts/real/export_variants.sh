#!/usr/bin/env bash
# Exports of one report cut down by nsys export's expert options, then every read-only command
# on each: what a user gets who exported only a part of a capture.
#
#   bash scripts/real/export_variants.sh OUT_DIR     (on the H200; nsys 2025.3.1 unless NSYS is set)
#
# Records scripts/real/mixed_batches.py 48 8 (graph mode, no NVTX) once, then exports it as
#   full          the whole report;
#   times_mid     --times of the middle half of its GPU work (strict bounds: an event that
#                 crosses a bound is left out, a kernel's launch call too when it lies before);
#   times_two     --times of two windows with a gap between them (10-35 % and 60-85 %);
#   times_loose   the same two windows with non-strict bounds (events may cross them);
#   tables_gpu    --tables of the GPU operations, strings and target info alone (no CUDA API
#                 calls, no NVTX);
# (nsys 2025.3.1, 2026-12-03: the --times exports kept no GPU operation and 0-4 CUDA API calls,
# though the windows hold hundreds, so each is one "no GPU work" error, exit 2; the tables_gpu
# export is the whole capture as one window, its API-call counts unknown)
# and writes OUT_DIR/export_variants.log (sweep_lib.sh's lines per command, then zero-config's
# table of each export) and OUT_DIR/export_variants.tar.xz (the exports, their nsys stats CSVs).
set -uo pipefail
. "$(dirname "$0")/sweep_lib.sh"
sweep_setup "${1:?usage: export_variants.sh OUT_DIR}" export_variants.log
"$NSYS" --version >>"$log" 2>&1
sweep_record full -t cuda --cuda-graph-trace=graph --capture-range=cudaProfilerApi \
  --capture-range-end=stop python3 "$real/mixed_batches.py" 48 8
windows=$(python3 - <<'PY'
import sqlite3
con = sqlite3.connect("file:full.sqlite?mode=ro", uri=True)
lo, hi = con.execute(
    "SELECT min(start), max(end) FROM (SELECT start, end FROM CUPTI_ACTIVITY_KIND_KERNEL"
    " UNION ALL SELECT start, end FROM CUPTI_ACTIVITY_KIND_MEMCPY)").fetchone()
at = lambda f: int(lo + f * (hi - lo))
print(f"{at(.25)}/{at(.75)} {at(.10)}/{at(.35)},{at(.60)}/{at(.85)}"
      f" :{at(.10)}/{at(.35)}:,:{at(.60)}/{at(.85)}:")
PY
)
read -r mid two loose <<<"$windows"
echo "windows: mid $mid, two $two, loose $loose" >>"$log"
ex() {  # NAME EXPORT-ARGS...
  local name=$1; shift
  if timeout 120 "$NSYS" export --type sqlite -f true -o "$name.sqlite" "$@" full.nsys-rep \
    >"$name.ex.log" 2>&1; then
    echo "== $name: $(du -k "$name.sqlite" | cut -f1) KiB" >>"$log"
  else
    echo "== $name: nsys export failed: $(tail -n1 "$name.ex.log")" >>"$log"
  fi
}
ex times_mid --times="$mid"
ex times_two --times="$two"
ex times_loose --times="$loose"
ex tables_gpu --tables='CUPTI_ACTIVITY_KIND_KERNEL,CUPTI_ACTIVITY_KIND_MEMCPY,CUPTI_ACTIVITY_KIND_MEMSET,CUPTI_ACTIVITY_KIND_GRAPH_TRACE,StringIds,TARGET_INFO_.*,META_DATA_.*,ANALYSIS_DETAILS'
sweep_archive export_variants
sweep_commands 400
sweep_tables 400
