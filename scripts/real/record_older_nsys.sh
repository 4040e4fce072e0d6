#!/usr/bin/env bash
# An nsys older than the H200's CUDA driver, run on the H200: what a user gets who records with
# such a build. Debian's 2023.4.4 (the CPU machines', CUPTI 12.4) and 2024.2.3 (Debian
# experimental's, CUPTI 12.5) were recorded so.
#
#   bash scripts/real/record_older_nsys.sh OUT_DIR TARBALL
#
# TARBALL holds target-linux-x64 of an install (scripts/install_nsys.sh's for 2023.4.4; for
# 2024.2.3, `apt-get download nsight-systems-target nsight-systems` from experimental/non-free,
# laid out as shared/NSYS.md says) without what CUDA tracing needs not (19 MB with xz, under the
# device's 64 MiB carry), made on the CPU machine by
#   (cd PREFIX && ls target-linux-x64 | grep -v "libcupti.so.1[01]\|\
#    CollectX\|libnvperf_grfx_host\|GpuMetrics\|vulkan-layers\|reports\|rules\|python\|\
#    PythonNvtx\|PythonFunctionsTrace\|sqlite3\|nvgpucs\|NvTraceFormat" \
#    | sed 's#^#target-linux-x64/#' | tar -cf - -T -) | xz -6 > .gpu-old/nsysYYYY.tar.xz
# The host tools are not carried: the .qdstrm each recording leaves is copied to OUT_DIR, to be
# imported on the CPU machine (``QdstrmImporter -i FILE.qdstrm`` of the same install, with its
# host-linux-x64 on LD_LIBRARY_PATH, then ``nsys export --type sqlite``).
# Records scripts/real/eager_steps.py 30 30 (30 NVTX steps of a copy and 30 kernels) with
# `-t cuda,nvtx --capture-range=cudaProfilerApi --capture-range-end=stop` (eager_YYYY.qdstrm,
# YYYY the build's year), and the same with nsys 2025.3.1 into OUT_DIR/eager_2025.sqlite (what
# the GPU ran); then scripts/real/mixed_batches.py 48 8 with `-t cuda
# --cuda-graph-trace=graph|node` and the same capture range (mixed_graph.qdstrm,
# mixed_node.qdstrm); and writes OUT_DIR/log.txt.
set -uo pipefail
out=$(mkdir -p "$1" && cd "$1" && pwd)
tarball=$(readlink -f "$2")
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
cd "$work" || exit 1
tar -xJf "$tarball"
NEW=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH=$repo/.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
args=(-t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi --capture-range-end=stop)
year=$(./target-linux-x64/nsys --version | grep -o ' 20[0-9][0-9]\.' | tr -d ' .')
{
  ./target-linux-x64/nsys --version
  mkdir -p tmp
  TMPDIR=$work/tmp timeout 180 ./target-linux-x64/nsys profile "${args[@]}" -o "eager_$year" \
    python3 "$repo/scripts/real/eager_steps.py" 30 30 2>&1 | tail -n 8
  ls -la "$work" "$work/tmp"
  for mode in graph node; do  # (graph mode: nsys 2023.4.4 recorded no replay on the H200)
    TMPDIR=$work/tmp timeout 180 ./target-linux-x64/nsys profile -t cuda -s none \
      --cpuctxsw=none --cuda-graph-trace=$mode --capture-range=cudaProfilerApi \
      --capture-range-end=stop -o "mixed_$mode" python3 "$repo/scripts/real/mixed_batches.py" 48 8 \
      2>&1 | tail -n 2
  done
  find "$work" -name "*.qdstrm" -exec cp {} "$out/" \;
  "$NEW" --version
  timeout 180 "$NEW" profile "${args[@]}" -o eager_2025 \
    python3 "$repo/scripts/real/eager_steps.py" 30 30 2>&1 | tail -n 3
  "$NEW" export --type sqlite -o "$out/eager_2025.sqlite" eager_2025.nsys-rep 2>&1 | tail -n 1
} >"$out/log.txt" 2>&1
ls -la "$out" >>"$out/log.txt"
