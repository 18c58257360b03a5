# Sourced by test.sh and demo.sh: installs the Debian packages imptrace needs, only when
# one is missing (idempotent; apt-get update runs at most once).
IMPTRACE_DEBS=(cmake g++ make libgtest-dev protobuf-compiler python3 python3-pytest pybind11-dev python3.11-dev
  python3-pytest-xdist python3-six python3-lazy-loader python3-torch python3.11-dbg clang zlib1g-dev libdw-dev libelf-dev
  g++-aarch64-linux-gnu qemu-user-static chromium-headless-shell python3-scipy python3-sympy python3-yaml python3-pygments
  python3-pandas python3-matplotlib debootstrap)

imptrace_ensure_packages() {
  local missing=()
  for p in "${IMPTRACE_DEBS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "imptrace: installing missing Debian packages: ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

imptrace_build() {
  # The tracer's profile is trained on every interpreter the tests run (tracer/CMakeLists.txt,
  # IMPTRACE_PGO); Debian's first, which also runs the training script.
  local pythons="" p
  for p in /usr/bin/python3 /root/.pyenv/versions/3.{8,9,10,11,12,13}*/bin/python; do
    [ -x "$p" ] && pythons+="${pythons:+;}$p"
  done
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${pythons:+"-DIMPTRACE_PGO_PYTHONS=$pythons"} >/dev/null
  cmake --build build -j2
}
