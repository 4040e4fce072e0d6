#!/usr/bin/env bash
# nsys 2025's hardware-based CUDA trace (`-t cuda-hw`: kernel times from the GPU's own timestamps,
# where the GPU and driver allow it), on the H200: what its exports hold and how every command
# reads them.
#
#   bash scripts/real/sweep_hw.sh OUT_DIR     (on the H200; nsys 2025.3.1 unless NSYS is set)
#
# Logs what `nsys profile --help` says of cuda-hw, then records scripts/real/eager_steps.py 30 30
# (`-t cuda-hw,nvtx`) and scripts/real/mixed_batches.py 48 8 in graph and node mode (`-t
# cuda-hw`), each between cudaProfilerStart/Stop, and the eager loop again with `-t cuda,nvtx`
# (the software trace, for comparison); then sweep_lib.sh's table and line per read-only command
# of each export into OUT_DIR/sweep_hw.log, and OUT_DIR/sweep_hw.tar.xz (exports, nsys stats CSVs).
# On the H200 (driver 580.159.04, nsys 2025.3.1) on 2026-12-04 nsys refused all three: "Illegal
# --trace argument 'cuda-hw' / One or more GPUs cannot be configured to collect a CUDA hardware
# trace." No cuda-hw export could be recorded there; the software trace's reads as every other.
set -uo pipefail
. "$(dirname "$0")/sweep_lib.sh"
sweep_setup "${1:?usage: sweep_hw.sh OUT_DIR}" sweep_hw.log
{
  "$NSYS" --version
  "$NSYS" profile --help | grep -i -B2 -A6 "cuda-hw" | head -40
} >>"$log" 2>&1
range=(--capture-range=cudaProfilerApi --capture-range-end=stop)
sweep_record hw_eager -t cuda-hw,nvtx "${range[@]}" python3 "$real/eager_steps.py" 30 30
sweep_record sw_eager -t cuda,nvtx "${range[@]}" python3 "$real/eager_steps.py" 30 30
for mode in graph node; do
  sweep_record "hw_$mode" -t cuda-hw --cuda-graph-trace=$mode "${range[@]}" \
    python3 "$real/mixed_batches.py" 48 8
done
for f in "$work"/*.sqlite; do  # (which tables the hardware trace writes)
  echo "== tables of $(basename "$f"): $(python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(' '.join(f'{n}:{c.execute(f\"SELECT count(*) FROM [{n}]\").fetchone()[0]}' for (n,) in c.execute(\"SELECT name FROM sqlite_master WHERE type='table' AND (name LIKE 'CUPTI%' OR name LIKE '%CUDA%' OR name LIKE 'NVTX%')\")))" "$f")" >>"$log"
done
sweep_archive sweep_hw
sweep_tables 200
sweep_commands 420
