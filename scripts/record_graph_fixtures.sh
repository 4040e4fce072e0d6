#!/usr/bin/env bash
# Records the fixtures of traces nobody instrumented (issue [Z]) on a GPU host (H200, nsys 2025.3.1).
# Usage: scripts/record_graph_fixtures.sh OUTDIR [NSYS]
# Each fixture NAME: NAME.sqlite plus the `nsys stats` CSVs of that file (the oracle of --totals).
#   run_graph_{kpool,alias}_nvtx  `specscope run` (kpool_fused / draft_alias), graph mode, NVTX on
#   run_{graph,node}_nonvtx       `specscope run --nvtx off` (draft_alias), graph / node mode
#   cycle_{graph,node}_*          scripts/graph_cycle_program.py: the batch moves between buckets
#                                 4 and 8, one graph per bucket and role (SGLang's capture order)
#   two_proc_graph                two processes of graph_cycle_program.py under one nsys session
#   eager_nonvtx                  graph_cycle_program.py --no-graphs --nvtx off (an eager loop)
set -uo pipefail
out=${1:?usage: record_graph_fixtures.sh OUTDIR [NSYS]}
nsys=${2:-${SPECSCOPE_NSYS:-nsys}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
common=(-t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi
  --capture-range-end=stop --force-overwrite=true)
"$nsys" --version

record() {  # NAME MODE COMMAND...
  local name=$1 mode=$2; shift 2
  local t0=$SECONDS
  "$nsys" profile "${common[@]}" --cuda-graph-trace="$mode" -o "$out/$name" "$@" \
    >"$out/$name.log" 2>&1 || { echo "$name: nsys profile failed"; tail -5 "$out/$name.log"; }
  "$nsys" export --type sqlite -o "$out/$name.sqlite" "$out/$name.nsys-rep" >/dev/null 2>&1
  "$nsys" stats -r cuda_gpu_kern_sum,cuda_gpu_mem_time_sum -f csv -o "$out/$name" \
    "$out/$name.sqlite" >/dev/null 2>&1
  echo "$name: $((SECONDS - t0)) s, $(du -h "$out/$name.sqlite" | cut -f1)"
}

run=(python3 -m specscope run --bs 1 --steps 10 --warmup 4 --context 2048)
record run_graph_kpool_nvtx graph "${run[@]}" --variant kpool_fused --nvtx on
record run_graph_alias_nvtx graph "${run[@]}" --variant draft_alias --nvtx on
record run_graph_nonvtx graph "${run[@]}" --variant draft_alias --nvtx off
record run_node_nonvtx node "${run[@]}" --variant draft_alias --nvtx off
cyc=(python3 "$here/graph_cycle_program.py" --schedule 3x6,8x6)
record cycle_graph_nvtx graph "${cyc[@]}" --nvtx on
record cycle_graph_nonvtx graph "${cyc[@]}" --nvtx off
record cycle_node_nonvtx node "${cyc[@]}" --nvtx off
record two_proc_graph graph --trace-fork-before-exec=true "${cyc[@]}" --nvtx on --procs 2
record eager_nonvtx graph "${cyc[@]}" --nvtx off --no-graphs
ls -la "$out"
