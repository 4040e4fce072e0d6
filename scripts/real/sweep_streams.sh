#!/usr/bin/env bash
# A third robustness sweep: CUDA graphs over several streams or holding copies
# (scripts/real/stream_graphs.py), each shape in graph and in node mode, then every read-only
# command on each export, as scripts/real/sweep_more.sh does.
#
#   bash scripts/real/sweep_streams.sh OUT_DIR [STEPS]   (on the H200; nsys 2025.3.1 unless NSYS is set)
#
# Each shape at 8 tokens, where the host's launch calls outlast each replay's GPU work, and
# fork and overlap again at 32768 tokens (NAME_big), where the GPU work of the two streams
# (overlap: of the two graphs) overlaps. Then an eager MLP under PyTorch's own NVTX ranges
# (emit_nvtx.py: torch.autograd.profiler.emit_nvtx, a range per operator with its shapes).
#
# Writes OUT_DIR/sweep_streams.log (per export and command: exit status, "TRACEBACK" for a
# crash, the last line of stderr; then zero-config's table of each export) and
# OUT_DIR/sweep_streams_exports.tar.xz (the exports with their nsys stats CSVs).
set -uo pipefail
. "$(dirname "$0")/sweep_lib.sh"
sweep_setup "${1:?usage: sweep_streams.sh OUT_DIR [STEPS]}" sweep_streams.log
steps=${2:-40}
limit=${SWEEP_LIMIT_S:-540}
range=(--capture-range=cudaProfilerApi --capture-range-end=stop)

"$NSYS" --version >>"$log" 2>&1
for run in fork:8 overlap:8 copies:8 fork:32768 overlap:32768; do
  shape=${run%:*} tokens=${run#*:}
  for mode in graph node; do
    name=${shape}_$mode
    [ "$tokens" -gt 8 ] && name=${name}_big
    sweep_record "$name" -t cuda --cuda-graph-trace=$mode "${range[@]}" \
      python3 "$real/stream_graphs.py" $shape "$steps" "$tokens"
    grep -h "^shape" "$name.rec.log" >>"$log"
  done
done
sweep_record emit_nvtx -t cuda,nvtx "${range[@]}" python3 "$real/emit_nvtx.py" 30
grep -h "^steps" emit_nvtx.rec.log >>"$log"
sweep_archive sweep_streams_exports
sweep_commands "$limit"
sweep_tables "$limit" explain
ls -la "$out" >>"$log"
