#!/usr/bin/env bash
# The C fast paths (pagescan.c, opsums.c) against their numpy references, and the processes of
# an export two at a time against one after the other, on real exports recorded here:
#
#   bash scripts/real/check_native.sh OUT_DIR      (on the H200, from the repository root)
#
# Records what scripts/real/sweep.sh records (and runs its commands: OUT_DIR/sweep.log), plus
# an eager export of Hugging Face generate (100 calls), vLLM-shaped piecewise graphs and graphs
# replayed from a worker thread; then, per export, the output of analyze (zero-config and
# --preset eagle, JSON) and of explain with SPECSCOPE_NATIVE=0 and without: OUT_DIR/compare.log,
# a line per export and command ending "same" or "DIFFER".
set -uo pipefail
OUT=${1:?usage: check_native.sh OUT_DIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
export LD_LIBRARY_PATH=$repo/.gpu-libs PYTHONPATH=$repo SPECSCOPE_CACHE=/tmp/spc
NSYS=/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys
log=$OUT/compare.log
{ python3 -c "import numpy, pandas, sys; print('python', sys.version.split()[0], 'numpy', numpy.__version__, 'pandas', pandas.__version__)"; which cc gcc; nproc; } >"$log" 2>&1
python3 -m specscope doctor --no-probe 2>&1 | grep reader >>"$log"
timeout 330 bash "$repo/scripts/real/sweep.sh" "$OUT/sweep" >/dev/null 2>&1
cp "$OUT/sweep/sweep.log" "$OUT/sweep.log" 2>/dev/null
mkdir -p /tmp/ex && tar -C /tmp/ex -xJf "$OUT/sweep/sweep_exports.tar.xz" 2>>"$log"
rm -rf "$OUT/sweep"
cd /tmp/ex
# a larger eager export and the graph-replaying server shapes
rec() { local n=$1; shift; timeout 200 "$NSYS" profile -s none --cpuctxsw=none -o "$n" -f true "$@" >/dev/null 2>&1 && "$NSYS" export --type sqlite -o "$n.sqlite" -f true "$n.nsys-rep" >/dev/null 2>&1; echo "recorded $n: $(du -k $n.sqlite 2>/dev/null | cut -f1) KiB" >>"$log"; }
rec hf100 -t cuda --capture-range=cudaProfilerApi --capture-range-end=stop python3 $repo/scripts/real/hf_generate.py 100
rec piecewise -t cuda,nvtx --cuda-graph-trace=graph python3 $repo/scripts/real/piecewise_graphs.py
rec overlap -t cuda,osrt --cuda-graph-trace=graph python3 $repo/scripts/real/overlap_thread.py
for f in *.sqlite; do
  for mode in "analyze --format json" "analyze --preset eagle --format json" "explain"; do
    a=$(SPECSCOPE_NATIVE=0 timeout 120 python3 -m specscope $mode "$f" 2>/tmp/e0 | md5sum | cut -c1-12)
    b=$(timeout 120 python3 -m specscope $mode "$f" 2>/tmp/e1 | md5sum | cut -c1-12)
    same=DIFFER; [ "$a" = "$b" ] && cmp -s /tmp/e0 /tmp/e1 && same=same
    echo "$f | $mode | numpy $a | C $b | $same | stderr $(tail -c 120 /tmp/e1 | tr '\n' ' ')" >>"$log"
  done
done
# the processes of an export two at a time against one after the other (every export of two processes)
python3 - >>"$log" 2>&1 <<'PY'
import os, glob
from specscope.analysis import eachprocess
from specscope.analysis.auto import analyze_processes
from specscope.analysis.loader import load
from specscope.errors import SpecError
eachprocess.MIN_ROWS = 0
def out(p):
    try: return "".join(analyze_processes(load(p)).json_pieces())
    except SpecError as e: return f"error {e}"
for p in sorted(glob.glob("/tmp/ex/*.sqlite")):
    os.environ["SPECSCOPE_PROCESS_THREADS"] = "1"; a = out(p)
    os.environ["SPECSCOPE_PROCESS_THREADS"] = "2"; b = out(p)
    print("threads", os.path.basename(p), "same" if a == b else "DIFFER", len(a))
PY
for f in hf100.sqlite piecewise.sqlite; do
  for i in 1 2; do /usr/bin/time -f "$f native=1 %e s" python3 -m specscope analyze $f --format json >/dev/null 2>>"$log"; SPECSCOPE_NATIVE=0 /usr/bin/time -f "$f native=0 %e s" python3 -m specscope analyze $f --format json >/dev/null 2>>"$log"; done
done
ls -la /tmp/ex >>"$log"
