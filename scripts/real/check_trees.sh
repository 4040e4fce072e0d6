#!/usr/bin/env bash
# This checkout's code against another tree's on real exports recorded here (the H200):
#
#   bash scripts/real/check_trees.sh BASE_TREE OUT_DIR     (from the repository root)
#
# BASE_TREE holds the other code's specscope/ (e.g. `git archive REV specscope | tar -x -C
# BASE_TREE`). Runs scripts/real/check_native.sh (OUT_DIR/native: it records the exports in
# /tmp/ex, and compares the C fast paths with numpy), then per export the output (stdout and
# stderr) of analyze (zero-config and --preset eagle, JSON), explain and analyze --timeline with
# each tree, and two reports with each (their files compared, but the report.html lines
# stamped with the time and the output folder): OUT_DIR/trees.log, a line each ending "same"
# or "DIFFER", with each report's time.
set -uo pipefail
BASE=$(cd "${1:?usage: check_trees.sh BASE_TREE OUT_DIR}" && pwd)
OUT=${2:?usage: check_trees.sh BASE_TREE OUT_DIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo" || exit 1
export LD_LIBRARY_PATH=$repo/.gpu-libs SPECSCOPE_CACHE=/tmp/spc
start=$(date +%s)
timeout 420 bash scripts/real/check_native.sh "$OUT/native" >/dev/null 2>&1
echo "check_native done after $(( $(date +%s) - start )) s" >"$OUT/trees.log"
cd /tmp/ex || exit 0
log=$OUT/trees.log
for f in *.sqlite; do
  for mode in "analyze --format json" "analyze --preset eagle --format json" "explain" "analyze --timeline"; do
    a=$(PYTHONPATH=$BASE timeout 60 python3 -m specscope $mode "$f" 2>/tmp/e0 | md5sum | cut -c1-12)
    b=$(PYTHONPATH=$repo timeout 60 python3 -m specscope $mode "$f" 2>/tmp/e1 | md5sum | cut -c1-12)
    same=DIFFER; [ "$a" = "$b" ] && cmp -s /tmp/e0 /tmp/e1 && same=same
    echo "$f | $mode | base $a | new $b | $same" >>"$log"
  done
  [ $(( $(date +%s) - start )) -gt 540 ] && { echo "out of time at $f" >>"$log"; break; }
done
# reports: base against new, each pair of exports with NVTX anchors and the eager one
for pair in "piecewise.sqlite piecewise.sqlite" "hf100.sqlite hf100.sqlite"; do
  set -- $pair
  [ -f "$1" ] && [ -f "$2" ] || continue
  for t in base new; do
    p=$repo; [ $t = base ] && p=$BASE
    s=$(date +%s.%N)
    PYTHONPATH=$p timeout 60 python3 -m specscope report "$1" "$2" --out /tmp/rep_$t/$1 >/dev/null 2>/tmp/r_$t
    echo "report $1 $2 $t: rc $? $(echo "$(date +%s.%N) - $s" | python3 -c 'import sys; print(round(eval(sys.stdin.read()),2))') s" >>"$log"
  done
  a=$(ls -d /tmp/rep_base/$1/*/ 2>/dev/null); b=$(ls -d /tmp/rep_new/$1/*/ 2>/dev/null)
  for x in $(ls "$a" 2>/dev/null); do
    if [ "$x" = report.html ]; then
      diff <(grep -v 'generated 20\|--out /tmp' "$a/$x") <(grep -v 'generated 20\|--out /tmp' "$b/$x") >/dev/null && r=same || r=DIFFER
    else cmp -s "$a/$x" "$b/$x" && r=same || r=DIFFER; fi
    echo "report $1 $2 | $x | $r" >>"$log"
  done
done
ls -la /tmp/ex >>"$log"
echo "all done after $(( $(date +%s) - start )) s" >>"$log"
