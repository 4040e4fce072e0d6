#!/usr/bin/env bash
# Records scripts/cpu_fixture_program.py (the NVTX shape of the EAGLE loop, no CUDA) with the
# Nsight Systems builds Debian ships besides 2023.4.4 (the CPU machines'): 2024.2.3
# (experimental), 2022.4.2 (bookworm) and 2020.4.3 (bullseye), and exports each report to
# SQLite: the fixtures of tests/data/old_nsys/ (their schemas differ from 2023.4 and 2025.3: no
# META_DATA_EXPORT in 2020.4, EXPORT_META_DATA in 2022.4; 2024.2 writes META_DATA_CAPTURE too).
#
# Usage: scripts/record_old_nsys.sh OUT_DIR
#   writes OUT_DIR/cpu_eagle_{2024,2022,2020}.sqlite (never over a file that exists); the nsys
#   builds are unpacked in a temporary folder, removed at the end.
# Needs a Debian/Ubuntu amd64 machine, python with nvtx==0.2.11 (newer nvtx records no ranges
# with these builds), and nothing else: apt runs with a private source list, the system's
# sources and packages are untouched. The 2022.4 and 2020.4 host tools need OpenSSL 1.1
# (libssl1.1, bullseye), 2024.2's Arrow and Parquet 500 (libarrow500, libparquet500 of the same
# suite); 2022.4's and 2024.2's libssh.so are links to the system's libssh.so.4, replaced by the
# real one (libssh-4).
# 2020.4 crashes on exit when it traces the OS runtime too: it records NVTX only (-t nvtx).
set -euo pipefail

out=${1:?usage: scripts/record_old_nsys.sh OUT_DIR}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
mkdir -p "$out"
out=$(cd "$out" && pwd)
for v in 2024 2022 2020; do
  [ ! -e "$out/cpu_eagle_$v.sqlite" ] || { echo "record_old_nsys: $out/cpu_eagle_$v.sqlite exists" >&2; exit 1; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/debs"
printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: experimental bookworm bullseye\nComponents: main non-free\nSigned-By: %s\n' \
  "$keyring" >"$tmp/parts/old.sources"
apt_o=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$tmp/parts"
  -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache")
apt-get "${apt_o[@]}" update >/dev/null
for pick in "nsight-systems-target/experimental nsight-systems/experimental" \
  "libarrow500/experimental libparquet500/experimental" \
  "nsight-systems-target/bookworm nsight-systems/bookworm" \
  "nsight-systems-target/bullseye nsight-systems/bullseye" "libssl1.1/bullseye libssh-4/bookworm"; do
  # shellcheck disable=SC2086
  (cd "$tmp/debs" && apt-get "${apt_o[@]}" download $pick >/dev/null 2>&1)
done
mkdir -p "$tmp/libs"
for deb in "$tmp"/debs/lib{ssl1.1,ssh-4,arrow500,parquet500}_*.deb; do dpkg -x "$deb" "$tmp/libs"; done
for v in 2024 2022 2020; do
  x=$tmp/x$v
  prefix=$tmp/nsys$v
  mkdir -p "$x" "$prefix"
  for deb in "$tmp"/debs/nsight-systems*_"$v".*.deb; do dpkg -x "$deb" "$x"; done
  mv "$x/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64" "$prefix/"
  mv "$x/usr/lib/nsight-systems/host-linux-x64" "$prefix/"
  host=$prefix/host-linux-x64
  cp -L "$tmp"/libs/usr/lib/x86_64-linux-gnu/lib{ssl,crypto}.so.1.1 "$host/"
  cp -L "$tmp"/libs/usr/lib/x86_64-linux-gnu/lib{arrow,parquet}.so.500 "$host/"
  rm -f "$host/libssh.so" "$host/libssh.so.4"
  cp -L "$tmp"/libs/usr/lib/x86_64-linux-gnu/libssh.so.4 "$host/"
  ln -s libssh.so.4 "$host/libssh.so"
  trace=nvtx,osrt
  [ "$v" = 2020 ] && trace=nvtx
  (cd "$tmp" && LD_LIBRARY_PATH=$host "$prefix/target-linux-x64/nsys" profile -t "$trace" -s none \
    --cpuctxsw=none -o "cpu_eagle_$v" python "$repo/scripts/cpu_fixture_program.py" --steps 8 \
    >/dev/null 2>&1)
  rep=$tmp/cpu_eagle_$v.nsys-rep
  [ -f "$rep" ] || rep=$tmp/cpu_eagle_$v.qdrep  # (2020.4's report format)
  LD_LIBRARY_PATH=$host "$prefix/target-linux-x64/nsys" export --type sqlite \
    -o "$tmp/cpu_eagle_$v.sqlite" "$rep" >/dev/null 2>&1
  mv "$tmp/cpu_eagle_$v.sqlite" "$out/"
  echo "$out/cpu_eagle_$v.sqlite: $("$prefix/target-linux-x64/nsys" --version)"
done
