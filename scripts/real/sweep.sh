#!/usr/bin/env bash
# Record small real exports with the nsys flags users reach for, then run every read-only
# specscope command on each: a robustness sweep over exports nobody made for specscope.
#
#   bash scripts/real/sweep.sh OUT_DIR          (on the H200; nsys 2025.3.1 unless NSYS is set)
#
# Writes OUT_DIR/sweep.log: per export and command, the exit status and the last line of stderr;
# a line with "TRACEBACK" marks a crash, which is a bug (bad input must exit 2 with one line).
# The exports themselves go into OUT_DIR/sweep_exports.tar.xz for a closer look elsewhere.
# A variant nsys refuses (an option this version lacks) is logged and skipped.
set -uo pipefail
out=${1:?usage: sweep.sh OUT_DIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH=$repo/.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH}
log=$out/sweep.log
work=$(mktemp -d)
cd "$work" || exit 1
real=$repo/scripts/real
compiled=(python3 "$real/torch_compile.py")
eager=(python3 "$real/eager_steps.py" 60 12)
procs=(python3 "$real/two_procs.py")
range=(--capture-range=cudaProfilerApi --capture-range-end=stop)

record() {  # NAME NSYS-PROFILE-ARGS... -- PROGRAM...
  local name=$1; shift
  if ! "$NSYS" profile -s none --cpuctxsw=none -o "$name" -f true "$@" >"$name.rec.log" 2>&1; then
    echo "== $name: nsys profile refused: $(grep -m1 -i 'error\|unrecognised\|unknown' "$name.rec.log")" >>"$log"
    return 0
  fi
  if ! "$NSYS" export --type sqlite -o "$name.sqlite" -f true "$name.nsys-rep" >/dev/null 2>&1; then
    echo "== $name: nsys export failed" >>"$log"
    return 0
  fi
  echo "== $name: $(du -k "$name.sqlite" | cut -f1) KiB" >>"$log"
}

record compiled_node -t cuda,nvtx --cuda-graph-trace=node "${range[@]}" "${compiled[@]}"
record compiled_pytorch_nvtx -t cuda,nvtx --pytorch=autograd-nvtx --cuda-graph-trace=graph \
  "${range[@]}" "${compiled[@]}"
record eager_events -t cuda,nvtx --cuda-event-trace=true "${range[@]}" "${eager[@]}"
record eager_backtrace -t cuda,nvtx,osrt --cudabacktrace=all "${range[@]}" "${eager[@]}"
record two_procs -t cuda,nvtx --trace-fork-before-exec=true --cuda-graph-trace=graph \
  "${procs[@]}"
record eager_cuda_only -t cuda "${range[@]}" "${eager[@]}"
# one report exported with its times moved: --ts-normalize (UTC epoch times) and --ts-shift
if [ -f two_procs.nsys-rep ]; then
  for how in "normalized --ts-normalize=true" "shifted --ts-shift=123456789"; do
    set -- $how
    "$NSYS" export --type sqlite "$2" -o "two_procs_$1.sqlite" -f true two_procs.nsys-rep \
      >/dev/null 2>&1 && echo "== two_procs_$1: exported ($2)" >>"$log"
  done
fi

for f in *.sqlite; do  # the peer's totals beside each export, as tests/data/real keeps them
  "$NSYS" stats -r cuda_gpu_kern_sum,cuda_gpu_mem_time_sum -f csv -o "${f%.sqlite}" "$f" \
    >/dev/null 2>&1
done
tar -C "$work" -cJf "$out/sweep_exports.tar.xz" $(cd "$work" && ls *.sqlite *.csv 2>/dev/null)

run() {  # EXPORT COMMAND ARGS...
  local file=$1; shift
  local err=$work/err.txt
  timeout 300 python3 -m specscope "$@" >"$work/stdout.txt" 2>"$err"
  local rc=$?
  local mark=""
  grep -q "^Traceback" "$err" && mark=" TRACEBACK"
  echo "$(basename "$file") | $* | rc $rc$mark | $(grep -v '^\s*$' "$err" | tail -n1 | cut -c1-300)" \
    >>"$log"
  [ -n "$mark" ] && sed 's/^/    /' "$err" | tail -n 25 >>"$log"
  return 0
}

for f in "$work"/*.sqlite; do
  [ -f "$f" ] || continue
  run "$f" analyze "$f"
  run "$f" analyze "$f" --format json
  run "$f" analyze "$f" --totals
  run "$f" analyze "$f" --preset eagle
  run "$f" graphs "$f"
  run "$f" ranges "$f"
  run "$f" explain "$f"
  run "$f" compare "$f" "$f"
  run "$f" report "$f" "$f" --out "$work/reports"
done
ls -la "$out" >>"$log"
