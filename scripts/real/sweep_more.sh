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
out=${1:?usage: sweep_more.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH=$repo/.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH}
log=$out/sweep_more.log
start=$(date +%s)
limit=${SWEEP_LIMIT_S:-540}  # (seconds; the commands stop early past it: a call has 600)
: >"$log"
work=$(mktemp -d)
cd "$work" || exit 1
real=$repo/scripts/real
range=(--capture-range=cudaProfilerApi --capture-range-end=stop)
eager=(python3 "$real/eager_steps.py" 60 12)

record() {  # NAME NSYS-PROFILE-ARGS... PROGRAM... (no -s given: -s none --cpuctxsw=none first)
  local name=$1; shift
  local quiet=(-s none --cpuctxsw=none)
  [[ " $* " == *" -s "* ]] && quiet=()
  if ! timeout 120 "$NSYS" profile "${quiet[@]}" -o "$name" -f true "$@" >"$name.rec.log" 2>&1
  then
    echo "== $name: nsys profile refused: $(grep -m1 -i 'error\|unrecogni\|unknown\|invalid' \
      "$name.rec.log" | cut -c1-200)" >>"$log"
    return 0
  fi
  if ! timeout 120 "$NSYS" export --type sqlite -o "$name.sqlite" -f true "$name.nsys-rep" \
    >/dev/null 2>&1; then
    echo "== $name: nsys export failed" >>"$log"
    return 0
  fi
  echo "== $name: $(du -k "$name.sqlite" | cut -f1) KiB" >>"$log"
}

"$NSYS" --version >>"$log" 2>&1
"$NSYS" profile --help 2>&1 | grep -E -A1 -- '--(pytorch|python-sampling|gpu-metrics-devices|cuda-trace-all-apis)[ =]' \
  | cut -c1-160 >>"$log"
record server_procs -t cuda,nvtx --trace-fork-before-exec=true --cuda-graph-trace=graph \
  python3 "$real/server_procs.py" 60
record partial_capture -t cuda,nvtx "${range[@]}" python3 "$real/partial_capture.py" 40 16
record conv_net -t cuda,cudnn,cublas "${range[@]}" python3 "$real/conv_net.py" 30
record node_overlap -t cuda,osrt --cuda-graph-trace=node "${range[@]}" \
  python3 "$real/overlap_thread.py" 30
record pytorch_functions -t cuda,nvtx --pytorch=functions-trace --cuda-graph-trace=graph \
  "${range[@]}" python3 "$real/torch_compile.py"
record sampled -t cuda,nvtx -s process-tree --python-sampling=true "${range[@]}" "${eager[@]}"
record gpu_metrics -t cuda,nvtx --gpu-metrics-devices=all "${range[@]}" "${eager[@]}"
record all_apis -t cuda,nvtx --cuda-trace-all-apis=true "${range[@]}" "${eager[@]}"
for f in *.sqlite; do
  "$NSYS" stats -r cuda_gpu_kern_sum,cuda_gpu_mem_time_sum -f csv -o "${f%.sqlite}" "$f" \
    >/dev/null 2>&1
done
tar -C "$work" -cJf "$out/sweep_more_exports.tar.xz" $(ls *.sqlite *.csv 2>/dev/null)

run() {  # EXPORT COMMAND ARGS...
  local file=$1; shift
  local err=$work/err.txt
  timeout 300 python3 -m specscope "$@" >"$work/stdout.txt" 2>"$err"
  local rc=$?
  local mark=""
  grep -q "^Traceback" "$err" && mark=" TRACEBACK"
  echo "$(basename "$file") | ${*/$file/X} | rc $rc$mark | $(grep -v '^\s*$' "$err" | tail -n1 \
    | cut -c1-300)" >>"$log"
  [ -n "$mark" ] && sed 's/^/    /' "$err" | tail -n 25 >>"$log"
  return 0
}

for f in "$work"/*.sqlite; do
  [ -f "$f" ] || continue
  if [ $(( $(date +%s) - start )) -gt "$limit" ]; then echo "out of time at $f" >>"$log"; break; fi
  run "$f" analyze "$f"
  run "$f" analyze "$f" --format json
  run "$f" analyze "$f" --totals
  run "$f" analyze "$f" --timeline
  run "$f" analyze "$f" --preset eagle
  run "$f" graphs "$f"
  run "$f" ranges "$f"
  run "$f" explain "$f"
  run "$f" compare "$f" "$f"
  run "$f" check "$f" --baseline "$f"
  run "$f" report "$f" "$f" --out "$work/reports"
done
for f in "$work"/*.sqlite; do  # what zero-config makes of each, for a reader of the log
  [ $(( $(date +%s) - start )) -gt $(( limit + 40 )) ] && break
  echo "=== $(basename "$f"): analyze (zero-config)" >>"$log"
  timeout 120 python3 -m specscope analyze "$f" --timeline >>"$log" 2>&1
done
ls -la "$out" >>"$log"
