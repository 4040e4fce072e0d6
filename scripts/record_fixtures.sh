#!/usr/bin/env bash
# Records the real-export test fixtures on a GPU host (we use an H200 with nsys 2025.3.1).
# Usage: scripts/record_fixtures.sh OUTDIR [NSYS]
# Writes, for each fixture NAME: NAME.sqlite (the export the tests read) and the `nsys stats`
# CSVs made from that same file (NAME_cuda_gpu_kern_sum.csv, NAME_cuda_gpu_mem_time_sum.csv), which
# tests/analysis/test_real_exports.py uses as the oracle for our totals.
set -euo pipefail
out=${1:?usage: record_fixtures.sh OUTDIR [NSYS]}
nsys=${2:-${SPECSCOPE_NSYS:-nsys}}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
common=(-t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi --capture-range-end=stop --force-overwrite=false)

record() {  # NAME GRAPH_TRACE_MODE PROGRAM_ARGS...
  local name=$1 mode=$2; shift 2
  local t0=$(date +%s)
  "$nsys" profile "${common[@]}" --cuda-graph-trace="$mode" -o "$out/$name" \
    python3 "$here/fixture_program.py" "$@"
  local t1=$(date +%s)
  "$nsys" export --type sqlite -o "$out/$name.sqlite" "$out/$name.nsys-rep"
  local t2=$(date +%s)
  "$nsys" stats -r cuda_gpu_kern_sum,cuda_gpu_mem_time_sum -f csv -o "$out/$name" "$out/$name.sqlite"
  echo "$name: record+import $((t1 - t0)) s, export $((t2 - t1)) s"
}

record eagle_node_before node --steps 12 --copy-kernels 4 --eager-copies 6
record eagle_node_after node --steps 12 --copy-kernels 0 --eager-copies 2 --step-style startend
record eagle_graph_before graph --steps 12 --copy-kernels 4 --eager-copies 6
ls -la "$out"
