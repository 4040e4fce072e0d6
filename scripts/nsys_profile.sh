#!/usr/bin/env bash
# Profile a command with specscope's standard nsys flags into runs/<time>-LABEL/ (report, SQLite
# export, manifest.json). A thin wrapper over `specscope profile`: same code, same flags.
#   scripts/nsys_profile.sh LABEL [specscope profile options] -- COMMAND [ARGS...]
#   scripts/nsys_profile.sh base --analyze eagle -- python3 loop.py --steps 30
# nsys is found via --nsys, $SPECSCOPE_NSYS, PATH and the usual install folders; the exit status
# is that of `specscope profile` (the profiled command's own when it fails).
set -euo pipefail
if [ $# -lt 3 ] || [ "${1:0:1}" = "-" ]; then
  echo "usage: $0 LABEL [specscope profile options] -- COMMAND [ARGS...]" >&2
  exit 2
fi
label=$1
shift
here=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
exec "$py" -c 'import sys
from specscope.cli.profile import profile
profile(prog_name="nsys_profile.sh")' --label "$label" "$@"
