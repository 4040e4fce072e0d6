#!/usr/bin/env bash
# Installs Nsight Systems 2023.4.4 from Debian's non-free archive into a user prefix, on a
# Debian/Ubuntu amd64 CPU machine, without changing the system's apt sources or packages.
# The recipe is the verified one in shared/NSYS.md.
#
# Usage: scripts/install_nsys.sh [PREFIX]
#   PREFIX defaults to ${SPECSCOPE_NSYS_PREFIX:-$HOME/.local/specscope/nsys-2023.4.4}.
# Progress goes to stderr; the last line on stdout is the path of the wrapper to run nsys with:
#   NSYS=$(scripts/install_nsys.sh) && "$NSYS" --version
# A second run with a working install only prints that path. The install is built in a temporary
# folder next to PREFIX and moved into place only once `nsys --version` works from it.
set -euo pipefail

version=2023.4.4
prefix=${1:-${SPECSCOPE_NSYS_PREFIX:-$HOME/.local/specscope/nsys-$version}}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
wrapper_name=specscope-nsys

die() {
  echo "install_nsys: error: $*" >&2
  exit 1
}
say() { echo "install_nsys: $*" >&2; }

works() { # PREFIX: true when PREFIX holds a working nsys of our version
  [ -x "$1/bin/$wrapper_name" ] && "$1/bin/$wrapper_name" --version 2>/dev/null | grep -qF "version $version"
}

case $prefix in
/*) ;;
*) prefix=$PWD/$prefix ;;
esac
prefix=${prefix%/}

if works "$prefix"; then
  say "nsys $version already installed in $prefix"
  echo "$prefix/bin/$wrapper_name"
  exit 0
fi
if [ -e "$prefix" ] && [ ! -e "$prefix/bin/$wrapper_name" ] && [ -n "$(ls -A "$prefix" 2>/dev/null)" ]; then
  die "$prefix exists and is not an nsys install made by this script; choose another PREFIX"
fi

if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
  die "needs a Debian/Ubuntu machine (apt-get and dpkg not found)"
fi
[ "$(dpkg --print-architecture)" = amd64 ] || die "needs an amd64 machine (this one is $(dpkg --print-architecture))"
[ -r "$keyring" ] || die "missing $keyring (install the debian-archive-keyring package)"

t0=$(date +%s)
parent=$(dirname "$prefix")
mkdir -p "$parent" || die "cannot create $parent"
tmp=$(mktemp -d) || die "cannot create a temporary folder"
stage=$(mktemp -d "$parent/.nsys-install.XXXXXX") || die "cannot create a temporary folder in $parent"
trap 'rm -rf "$tmp" "$stage"' EXIT

# A private source list for non-free: lists and caches live in $tmp, the system's are untouched.
mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/cache" "$tmp/debs" "$tmp/x"
printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie sid\nComponents: non-free\nSigned-By: %s\n' \
  "$keyring" >"$tmp/parts/nf.sources"
apt_private=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$tmp/parts"
  -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache")
apt_common=()
if [ "$(id -u)" = 0 ]; then
  apt_common=(-o APT::Sandbox::User=root) # _apt cannot write into our private folders
fi
log=$tmp/apt.log
last_line() { grep -v '^\s*$' "$log" | tail -n 1; }

say "reading Debian non-free package lists"
apt-get "${apt_common[@]}" "${apt_private[@]}" update >"$log" 2>&1 ||
  die "apt-get update of the private non-free list failed: $(last_line)"

say "downloading nsight-systems-target, nsight-systems, libarrow500 (about 190 MB)"
(cd "$tmp/debs" && apt-get "${apt_common[@]}" "${apt_private[@]}" download \
  nsight-systems-target nsight-systems libarrow500 >"$log" 2>&1) ||
  die "download of nsight-systems from Debian non-free failed: $(last_line)"

say "downloading libssh-4"
if ! (cd "$tmp/debs" && apt-get "${apt_common[@]}" download libssh-4 >"$log" 2>&1); then
  [ "$(id -u)" = 0 ] || die "apt-get download libssh-4 failed (run 'apt-get update' as root first): $(last_line)"
  say "apt-get download libssh-4 failed; running apt-get update for the normal sources"
  apt-get "${apt_common[@]}" update >"$log" 2>&1 || die "apt-get update failed: $(last_line)"
  (cd "$tmp/debs" && apt-get "${apt_common[@]}" download libssh-4 >"$log" 2>&1) ||
    die "apt-get download libssh-4 failed: $(last_line)"
fi

for pkg in nsight-systems-target nsight-systems; do
  compgen -G "$tmp/debs/${pkg}_$version.*.deb" >/dev/null ||
    die "Debian non-free no longer has $pkg $version (got: $(cd "$tmp/debs" && ls ${pkg}_*.deb))"
done

say "unpacking"
for deb in "$tmp"/debs/*.deb; do
  dpkg -x "$deb" "$tmp/x" || die "dpkg -x $(basename "$deb") failed"
done

# Layout: PREFIX/{target-linux-x64,host-linux-x64,bin/nsys -> ../target-linux-x64/nsys}
x=$tmp/x/usr/lib
p=$stage/p
mkdir -p "$p/bin"
[ -x "$x/x86_64-linux-gnu/nsight-systems/target-linux-x64/nsys" ] || die "unexpected package layout: no target-linux-x64/nsys"
[ -d "$x/nsight-systems/host-linux-x64" ] || die "unexpected package layout: no host-linux-x64"
mv "$x/x86_64-linux-gnu/nsight-systems/target-linux-x64" "$p/target-linux-x64"
mv "$x/nsight-systems/host-linux-x64" "$p/host-linux-x64"
ln -s ../target-linux-x64/nsys "$p/bin/nsys"

host=$p/host-linux-x64
# host-linux-x64/libssh.so* are links into /usr/lib/x86_64-linux-gnu/: use the real library instead.
rm -f "$host"/libssh.so*
cp -L "$x/x86_64-linux-gnu/libssh.so.4" "$host/libssh.so.4" || die "libssh.so.4 not found in libssh-4"
ln -s libssh.so.4 "$host/libssh.so"
compgen -G "$x/x86_64-linux-gnu/libarrow.so.500*" >/dev/null || die "libarrow.so.500 not found in libarrow500"
cp -a "$x"/x86_64-linux-gnu/libarrow.so.500* "$host/"
# Without it every `nsys stats` report fails with "No module named 'nsysstats'".
mkdir -p "$host/python/lib"
cp "$p/target-linux-x64/python/lib/nsysstats.py" "$host/python/lib/"

cat >"$p/bin/$wrapper_name" <<'EOF'
#!/bin/sh
# Runs Nsight Systems 2023.4.4 from this prefix (written by specscope's scripts/install_nsys.sh).
# The host tools (QdstrmImporter, exporter) need the libraries in host-linux-x64.
root=$(dirname "$(dirname "$(readlink -f "$0")")")
LD_LIBRARY_PATH="$root/host-linux-x64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
exec "$root/target-linux-x64/nsys" "$@"
EOF
chmod 755 "$p/bin/$wrapper_name"

works "$p" || die "the unpacked nsys does not run: $("$p/bin/$wrapper_name" --version 2>&1 | tail -n 1)"
if command -v ldd >/dev/null; then
  missing=$(LD_LIBRARY_PATH=$host ldd "$host/QdstrmImporter" 2>&1 | grep 'not found' | awk '{print $1}' | tr '\n' ' ' || true)
  [ -z "$missing" ] || die "QdstrmImporter cannot load: ${missing% }"
fi

# Move into place; a broken earlier install made by this script is replaced.
if [ -e "$prefix" ]; then
  mv "$prefix" "$stage/old" || die "cannot move the old $prefix aside"
fi
mv "$p" "$prefix" || die "cannot move the install into $prefix"
say "installed nsys $version in $prefix in $(($(date +%s) - t0)) s: $("$prefix/bin/$wrapper_name" --version)"
echo "$prefix/bin/$wrapper_name"
