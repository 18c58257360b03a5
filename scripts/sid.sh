#!/usr/bin/env bash
# Prepares the CPython 3.14 and 3.15 tests: a Debian sid chroot with python3.14, python3.15,
# python3.14-dbg, python3.15-dbg, pytest, CPython's own test suites and torch 2.x for 3.14 (about 2.5 GB in
# all), cached between runs at
# /var/cache/imptrace/sid (IMPTRACE_SID), as the arm64 sysroot is cached in build-aarch64/.
# The end-to-end tests run those interpreters through tests/e2e/sid_python (the chroot
# with this machine's /tmp and source tree bound at the same paths). Called by test.sh;
# any step that fails writes the reason to $IMPTRACE_SID.unavailable and the tests skip
# with it, never failing the run (making the chroot needs root and deb.debian.org).
set -uo pipefail
root="${IMPTRACE_SID:-/var/cache/imptrace/sid}"
why="$root.unavailable"
log() { echo "imptrace sid: $*" >&2; }
give_up() { log "$1: the 3.14/3.15 tests will skip"; mkdir -p "$(dirname "$why")" && echo "$1" > "$why"; exit 0; }
# What the tests need; a chroot made from another list gets the missing ones installed.
pkgs=(python3.14 python3.15 python3.14-dbg python3.15-dbg python3-pytest libpython3.14-testsuite libpython3.15-testsuite
  python3-torch)
[ -x "$root/usr/bin/python3.15" ] && [ "$(cat "$root/.imptrace-packages" 2>/dev/null)" = "${pkgs[*]}" ] \
  && { rm -f "$why"; exit 0; }
[ "$(id -u)" -eq 0 ] || give_up "making and entering a chroot needs root"
command -v unshare >/dev/null && command -v chroot >/dev/null || give_up "no unshare or chroot (util-linux, coreutils)"
if [ ! -x "$root/usr/bin/python3.15" ]; then
  if ! command -v debootstrap >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null 2>&1; } \
      || give_up "cannot install debootstrap"
  fi
  # About a minute here; made beside the cache and moved in whole, so a cut-short run
  # leaves no half chroot behind.
  rm -rf "$root.tmp" && mkdir -p "$(dirname "$root")"
  debootstrap --variant=minbase --include=python3.14,python3.15,python3-pytest sid "$root.tmp" \
      http://deb.debian.org/debian >"$root.log" 2>&1 \
    || { rm -rf "$root.tmp"; give_up "debootstrap of Debian sid failed (see $root.log)"; }
  rm -rf "$root" && mv "$root.tmp" "$root"
fi
# apt inside the chroot, /proc mounted in a mount namespace of its own (gone when it ends).
# The mirror's sid Release file can be past its validity date: not checked.
in_root() { unshare --mount --propagation private sh -c 'mount -t proc proc "$0/proc" && chroot "$0" "$@"' "$root" "$@"; }
apt_opts=(-o Acquire::Check-Valid-Until=false -y -qq --no-install-recommends)
{ in_root apt-get -o Acquire::Check-Valid-Until=false update -qq \
  && DEBIAN_FRONTEND=noninteractive in_root apt-get install "${apt_opts[@]}" "${pkgs[@]}"; } >>"$root.log" 2>&1 \
  || give_up "cannot install ${pkgs[*]} in $root (see $root.log)"
echo "${pkgs[*]}" > "$root/.imptrace-packages"
rm -f "$why"
log "chroot ready: $root"
