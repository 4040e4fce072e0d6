#!/usr/bin/env bash
# The scripted H200 run of issue 8: record (part of) campaigns/eagle.toml into one folder and
# pack it for the trip back; the analysis runs anywhere afterwards (docs/results.md).
#
#   scripts/h200_campaign.sh DIR BUDGET_S [PACK_DIR] [-- --only PATTERN ...]
#
# DIR       the campaign folder (runs/, runs.jsonl, environment.txt, record.log)
# BUDGET_S  no run is started that would likely end after this many seconds
# PACK_DIR  if given: DIR without the .nsys-rep reports, as DIR.tar.xz (split in 15 MiB parts
#           when larger), e.g. the device tool's $OUT
# --only    passed on to `specscope campaign` (run-id patterns) to record part of the plan
#
# MATRIX and WHEELS (environment) change the matrix and the wheel folder.
# Needs on the GPU host: nsys 2025.3.1 (bundled in Nsight Compute; $NSYS overrides), libdw/libelf
# in .gpu-libs/ for its importer, and the wheels in .whl/ (nvtx; sqlite-utils for the analysis).
set -uo pipefail
dir=${1:?usage: h200_campaign.sh DIR BUDGET_S [PACK_DIR] [-- --only PATTERN ...]}
budget=${2:?usage: h200_campaign.sh DIR BUDGET_S [PACK_DIR] [-- --only PATTERN ...]}
shift 2
pack=""
if [[ $# -gt 0 && $1 != "--" ]]; then pack=$1; shift; fi
[[ $# -gt 0 && $1 == "--" ]] && shift
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
MATRIX=${MATRIX:-campaigns/eagle.toml}  # another matrix (e.g. a tiny CPU one) to test the script
WHEELS=${WHEELS-.whl}                    # empty: install no wheels
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
if [[ -n $WHEELS ]] && compgen -G "$WHEELS/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$WHEELS"/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$repo${PYTHONPATH:+:$PYTHONPATH}
export LD_LIBRARY_PATH=$repo/.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
mkdir -p "$dir"
{
  date -u +%FT%TZ
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  "$NSYS" --version
  python3 -c 'import sys, torch, triton, nvtx, importlib.metadata as m
print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda)
print("triton", triton.__version__, "nvtx", m.version("nvtx"))'
  git rev-parse HEAD 2>/dev/null || echo "git: no work tree"
} >"$dir/environment.txt" 2>&1
cat "$dir/environment.txt"
t0=$(date +%s)
timeout -k 15 $((budget + 90)) python3 -m specscope campaign "$MATRIX" \
  --out "$dir" --stage record --budget-s "$budget" --nsys "$NSYS" "$@" 2>&1 | tee -a "$dir/record.log"
echo "recorded in $(($(date +%s) - t0)) s" | tee -a "$dir/record.log"
if [[ -n $pack ]]; then
  mkdir -p "$pack"
  name=$(basename "$dir")
  tar -C "$(dirname "$dir")" --exclude='*.nsys-rep' -cf - "$name" | xz -T0 -4 >"$pack/$name.tar.xz"
  size=$(stat -c %s "$pack/$name.tar.xz")
  if ((size > 15 * 1024 * 1024)); then
    split -b 15M -d "$pack/$name.tar.xz" "$pack/$name.tar.xz.part" && rm "$pack/$name.tar.xz"
  fi
  cp "$dir/record.log" "$dir/environment.txt" "$pack/" 2>/dev/null
  ls -la "$pack"
fi
