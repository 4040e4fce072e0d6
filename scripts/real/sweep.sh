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
. "$(dirname "$0")/sweep_lib.sh"
sweep_setup "${1:?usage: sweep.sh OUT_DIR}" sweep.log
compiled=(python3 "$real/torch_compile.py")
eager=(python3 "$real/eager_steps.py" 60 12)
procs=(python3 "$real/two_procs.py")
range=(--capture-range=cudaProfilerApi --capture-range-end=stop)

sweep_record compiled_node -t cuda,nvtx --cuda-graph-trace=node "${range[@]}" "${compiled[@]}"
sweep_record compiled_pytorch_nvtx -t cuda,nvtx --pytorch=autograd-nvtx --cuda-graph-trace=graph \
  "${range[@]}" "${compiled[@]}"
sweep_record eager_events -t cuda,nvtx --cuda-event-trace=true "${range[@]}" "${eager[@]}"
sweep_record eager_backtrace -t cuda,nvtx,osrt --cudabacktrace=all "${range[@]}" "${eager[@]}"
sweep_record two_procs -t cuda,nvtx --trace-fork-before-exec=true --cuda-graph-trace=graph \
  "${procs[@]}"
sweep_record eager_cuda_only -t cuda "${range[@]}" "${eager[@]}"
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

sweep_commands
ls -la "$out" >>"$log"
