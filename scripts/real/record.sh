#!/usr/bin/env bash
# Record the exports of scripts/real/ on the H200 (nsys 2025.3.1) with their `nsys stats` CSVs:
#   bash scripts/real/record.sh OUT_DIR [NAME...]    (NAME: only these programs)
set -uo pipefail
out=${1:?usage: record.sh OUT_DIR [NAME...]}
shift
only=" $* "
repo=$(cd "$(dirname "$0")/../.." && pwd)
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH=$repo/.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
work=$(mktemp -d)
cd "$work" || exit 1
record() {  # NAME NSYS-PROFILE-ARGS... -- PROGRAM...
  local name=$1; shift
  [[ "$only" == "  " || "$only" == *" $name "* ]] || return 0
  "$NSYS" profile -s none --cpuctxsw=none -o "$name" -f true "$@" || return 1
  "$NSYS" export --type sqlite -o "$name.sqlite" -f true "$name.nsys-rep" >/dev/null || return 1
  "$NSYS" stats -r cuda_gpu_kern_sum,cuda_gpu_mem_time_sum -f csv -o "$name" \
    "$name.sqlite" >/dev/null
  cp "$name.sqlite" "$name"_cuda_gpu_*.csv "$out"/
}
mkdir -p "$out"
record hf_generate -t cuda --cuda-graph-trace=graph --capture-range=cudaProfilerApi \
  --capture-range-end=stop python3 "$repo/scripts/real/hf_generate.py"
XLA_PYTHON_CLIENT_PREALLOCATE=false record jax_loop -t cuda --cuda-graph-trace=graph \
  python3 "$repo/scripts/real/jax_loop.py"
record torch_compile -t cuda,nvtx,osrt,cublas --cuda-memory-usage=true \
  --cuda-graph-trace=graph --capture-range=cudaProfilerApi --capture-range-end=stop \
  python3 "$repo/scripts/real/torch_compile.py"
record unified_memory -t cuda --cuda-um-gpu-page-faults=true --cuda-um-cpu-page-faults=true \
  --capture-range=cudaProfilerApi --capture-range-end=stop \
  python3 "$repo/scripts/real/unified_memory.py"
ls -la "$out"
