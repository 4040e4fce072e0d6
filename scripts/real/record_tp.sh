#!/usr/bin/env bash
# Record scripts/real/tp_ranks.py on a machine of two GPUs (nsys 2025.3.1 of the H200 machines)
# in graph mode and eagerly, each with its `nsys stats` CSVs, and analyse each without options:
#   bash scripts/real/record_tp.sh OUT_DIR [STEPS] [LAYERS]
# Run so far only with TP_WORLD=1 on one H200 (2026-12-02: both recordings and analyses made,
# 0.4 MB each; one rank's all-reduce launches no NCCL kernel): no machine of two GPUs was lent
# that day, so no two-rank export is in tests/data yet.
set -uo pipefail
out=${1:?usage: record_tp.sh OUT_DIR [STEPS] [LAYERS]}
steps=${2:-30}
layers=${3:-2}
repo=$(cd "$(dirname "$0")/../.." && pwd)
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH=$repo/.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
work=$(mktemp -d)
cd "$work" || exit 1
mkdir -p "$out"
record() {  # NAME [--eager]
  local name=$1; shift
  "$NSYS" profile -s none --cpuctxsw=none -t cuda --trace-fork-before-exec=true \
    --cuda-graph-trace=graph --capture-range=cudaProfilerApi --capture-range-end=stop \
    -o "$name" -f true python3 "$repo/scripts/real/tp_ranks.py" "$steps" "$layers" "$@" || return 1
  "$NSYS" export --type sqlite -o "$name.sqlite" -f true "$name.nsys-rep" >/dev/null || return 1
  "$NSYS" stats -r cuda_gpu_kern_sum,cuda_gpu_mem_time_sum -f csv -o "$name" \
    "$name.sqlite" >/dev/null
  cp "$name.sqlite" "$name"_cuda_gpu_*.csv "$out"/
  (cd "$repo" && PYTHONPATH=$repo python3 -m specscope analyze "$out/$name.sqlite") \
    >"$out/$name.analyze.txt" 2>&1
}
record tp_ranks
record tp_ranks_eager --eager
ls -la "$out"
