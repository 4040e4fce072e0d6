#!/usr/bin/env bash
# More exports nobody made for specscope, then every read-only command on each: a second
# robustness sweep beside scripts/real/sweep.sh, over program shapes and nsys flags it lacks.
#
#   bash scripts/real/sweep_more.sh OUT_DIR     (on the H200; nsys 2025.3.1 unless NSYS is set)
#
# Records: a server's CPU-only front end beside its GPU worker (server_procs.py), a capture
# range that starts and ends inside a step (partial_capture.py), cuDNN convolutions with the
# cudnn and cublas traces (conv_net.py), a worker thread's graphs in node mode with OS runtime
# calls (overlap_thread.py), and the flags --pytorch=functions-trace, CPU and Python
# sampling, GPU metrics and --cuda-trace-all-apis where this nsys has them (a flag it refuses
# is logged and skipped). Writes OUT_DIR/sweep_more.log (per export and command: exit status,
# "TRACEBACK" for a crash, the last line of stderr; then zero-config's table of each export)
# and OUT_DIR/sweep_more_exports.tar.xz.
set -uo pipefail
. "$(dirname "$0")/sweep_lib.sh"
sweep_setup "${1:?usage: sweep_more.sh OUT_DIR}" sweep_more.log
limit=${SWEEP_LIMIT_S:-540}  # (seconds; the commands stop early past it: a call has 600)
range=(--capture-range=cudaProfilerApi --capture-range-end=stop)
eager=(python3 "$real/eager_steps.py" 60 12)

"$NSYS" --version >>"$log" 2>&1
flags='--(pytorch|python-sampling|gpu-metrics-devices|cuda-trace-all-apis)[ =]'
"$NSYS" profile --help 2>&1 | grep -E -A1 -- "$flags" | cut -c1-160 >>"$log"
sweep_record server_procs -t cuda,nvtx --trace-fork-before-exec=true --cuda-graph-trace=graph \
  python3 "$real/server_procs.py" 60
sweep_record partial_capture -t cuda,nvtx "${range[@]}" python3 "$real/partial_capture.py" 40 16
sweep_record conv_net -t cuda,cudnn,cublas "${range[@]}" python3 "$real/conv_net.py" 30
sweep_record node_overlap -t cuda,osrt --cuda-graph-trace=node "${range[@]}" \
  python3 "$real/overlap_thread.py" 30
sweep_record pytorch_functions -t cuda,nvtx --pytorch=functions-trace --cuda-graph-trace=graph \
  "${range[@]}" python3 "$real/torch_compile.py"
sweep_record sampled -t cuda,nvtx -s process-tree --python-sampling=true "${range[@]}" "${eager[@]}"
sweep_record gpu_metrics -t cuda,nvtx --gpu-metrics-devices=all "${range[@]}" "${eager[@]}"
sweep_record all_apis -t cuda,nvtx --cuda-trace-all-apis=true "${range[@]}" "${eager[@]}"
sweep_archive sweep_more_exports
sweep_commands "$limit"
sweep_tables "$limit"
ls -la "$out" >>"$log"
