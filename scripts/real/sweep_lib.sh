# What scripts/real/sweep.sh and scripts/real/sweep_more.sh share; sourced by both (bash).
#
#   sweep_setup OUT_DIR LOG_NAME   sets out (OUT_DIR, absolute), repo, real, NSYS, log
#                                  (OUT_DIR/LOG_NAME, emptied) and work (a fresh folder, the
#                                  current one from then on); exports LD_LIBRARY_PATH
#                                  (.gpu-libs first) and PYTHONPATH (this checkout first)
#   sweep_record NAME ARGS...      nsys profile ARGS (program included) into NAME.nsys-rep, then
#                                  NAME.sqlite; one log line (its size, or why there is none:
#                                  a flag this nsys refuses is logged and skipped)
#   sweep_archive NAME             nsys stats CSVs beside each work/*.sqlite (kernels, memory
#                                  operations), then OUT_DIR/NAME.tar.xz of the exports and CSVs
#   sweep_tables [LIMIT_S] [explain]  zero-config's table of each work/*.sqlite in the log
#                                  (analyze --timeline; and explain's story when "explain" is
#                                  given), for a reader of the log; stops past LIMIT_S + 40 s
#   sweep_commands [LIMIT_S]       every read-only specscope command on each work/*.sqlite:
#                                  one log line each (export | command | rc | last stderr line;
#                                  "TRACEBACK" marks a crash, its last 25 lines follow); stops
#                                  before an export once LIMIT_S seconds have passed since
#                                  sweep_setup (default: no limit)

sweep_setup() {
  out=$1
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  real=$repo/scripts/real
  NSYS=${NSYS:-/opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys}
  export LD_LIBRARY_PATH=$repo/.gpu-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH}
  log=$out/$2
  : >"$log"
  sweep_start=$(date +%s)
  work=$(mktemp -d)
  cd "$work" || exit 1
}

sweep_record() {  # NAME NSYS-PROFILE-ARGS... PROGRAM... (without -s: -s none --cpuctxsw=none)
  local name=$1; shift
  local quiet=(-s none --cpuctxsw=none)
  [[ " $* " == *" -s "* ]] && quiet=()
  if ! timeout 120 "$NSYS" profile "${quiet[@]}" -o "$name" -f true "$@" >"$name.rec.log" 2>&1
  then
    local why
    why=$(grep -m1 -i 'error\|unrecogni\|unknown\|invalid\|illegal\|cannot\|not supported' \
      "$name.rec.log" | cut -c1-200)
    [ -n "$why" ] || why=$(grep -v '^\s*$' "$name.rec.log" | tail -n 3 | tr '\n' ' ' | cut -c1-300)
    echo "== $name: nsys profile refused: $why" >>"$log"
    return 0
  fi
  if ! timeout 120 "$NSYS" export --type sqlite -o "$name.sqlite" -f true "$name.nsys-rep" \
    >/dev/null 2>&1; then
    echo "== $name: nsys export failed" >>"$log"
    return 0
  fi
  echo "== $name: $(du -k "$name.sqlite" | cut -f1) KiB" >>"$log"
}

_sweep_run() {  # EXPORT COMMAND ARGS...
  local file=$1; shift
  local err=$work/err.txt
  timeout 300 python3 -m specscope "$@" >"$work/stdout.txt" 2>"$err"
  local rc=$?
  local mark=""
  grep -q "^Traceback" "$err" && mark=" TRACEBACK"
  echo "$(basename "$file") | ${*/$file/X} | rc $rc$mark | $(grep -v '^\s*$' "$err" | tail -n1 \
    | cut -c1-300)" >>"$log"
  [ -n "$mark" ] && sed 's/^/    /' "$err" | tail -n 25 >>"$log"
  return 0
}

sweep_commands() {
  local limit=${1:-}
  local f
  for f in "$work"/*.sqlite; do
    [ -f "$f" ] || continue
    if [ -n "$limit" ] && [ $(( $(date +%s) - sweep_start )) -gt "$limit" ]; then
      echo "out of time at $f" >>"$log"
      break
    fi
    _sweep_run "$f" analyze "$f"
    _sweep_run "$f" analyze "$f" --format json
    _sweep_run "$f" analyze "$f" --totals
    _sweep_run "$f" analyze "$f" --timeline
    _sweep_run "$f" analyze "$f" --preset eagle
    _sweep_run "$f" graphs "$f"
    _sweep_run "$f" ranges "$f"
    _sweep_run "$f" explain "$f"
    _sweep_run "$f" compare "$f" "$f"
    _sweep_run "$f" check "$f" --baseline "$f" --thresholds eagle
    _sweep_run "$f" report "$f" "$f" --out "$work/reports"
  done
}

sweep_archive() {
  local f
  for f in "$work"/*.sqlite; do
    [ -f "$f" ] || continue
    "$NSYS" stats -r cuda_gpu_kern_sum,cuda_gpu_mem_time_sum -f csv -o "${f%.sqlite}" "$f" \
      >/dev/null 2>&1
  done
  (cd "$work" && tar -cJf "$out/$1.tar.xz" $(ls *.sqlite *.csv 2>/dev/null))
}

sweep_tables() {
  local limit=${1:-}
  local f
  for f in "$work"/*.sqlite; do
    [ -f "$f" ] || continue
    if [ -n "$limit" ] && [ $(( $(date +%s) - sweep_start )) -gt $(( limit + 40 )) ]; then
      break
    fi
    echo "=== $(basename "$f"): analyze (zero-config)" >>"$log"
    timeout 120 python3 -m specscope analyze "$f" --timeline >>"$log" 2>&1
    if [ "${2:-}" = explain ]; then
      echo "=== $(basename "$f"): explain (zero-config)" >>"$log"
      timeout 120 python3 -m specscope explain "$f" >>"$log" 2>&1
    fi
  done
}
