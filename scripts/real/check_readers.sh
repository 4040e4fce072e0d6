#!/usr/bin/env bash
# On the GPU machine: record scripts/real/eager_steps.py (1 M GPU operations) with its nsys,
# then read the export every way and compare (bench/README.md, eighth session):
#   bash scripts/real/check_readers.sh OUT_DIR [STEPS] [KERNELS]
# - bench/bench_read.py: the page scan with its C fast path, numpy only, and SQL (sqlite3): the
#   arrays must be the same (exit 1 otherwise), with the time of each;
# - analyze with the C fast path and with numpy only (SPECSCOPE_NATIVE=0), zero-config and
#   --step step: the outputs must be the same bytes.
set -uo pipefail
out=${1:?usage: check_readers.sh OUT_DIR [STEPS] [KERNELS]}
repo=$(cd "$(dirname "$0")/../.." && pwd)
NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
export LD_LIBRARY_PATH=$repo/.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH} SPECSCOPE_CACHE=${SPECSCOPE_CACHE:-$out/cache}
mkdir -p "$out"
work=$(mktemp -d)
cd "$work" || exit 1
echo "cc: $(command -v cc || echo none); $(python3 -c 'import numpy, sys; print("python", sys.version.split()[0], "numpy", numpy.__version__)')"
python3 -c "from specscope.profiler.doctor import reader_check; print(reader_check().line())"
start=$(date +%s)
"$NSYS" profile -t cuda,nvtx -s none --cpuctxsw=none --capture-range=cudaProfilerApi \
  --capture-range-end=stop -o eager -f true python3 "$repo/scripts/real/eager_steps.py" "${2:-5000}" "${3:-200}" || exit 1
"$NSYS" export --type sqlite -o eager.sqlite -f true eager.nsys-rep >/dev/null || exit 1
echo "recorded and exported in $(( $(date +%s) - start )) s: $(stat -c %s eager.sqlite) bytes"
python3 "$repo/bench/bench_read.py" eager.sqlite --readers pages,numpy,sqlite3 --repeat 3
rc=$?
for args in "" "--step step"; do
  for native in 1 0; do
    SPECSCOPE_NATIVE=$native python3 -m specscope analyze eager.sqlite $args --format json \
      > "analyze$native.json" 2> "analyze$native.err"
    echo "analyze $args (SPECSCOPE_NATIVE=$native): exit $?, $(stat -c %s "analyze$native.json") bytes"
  done
  if cmp -s analyze1.json analyze0.json; then echo "  the same bytes"; else echo "  DIFFER"; rc=1; fi
  head -c 600 analyze1.json; echo; head -3 analyze1.err
done
exit $rc
