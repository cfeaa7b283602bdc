#!/usr/bin/env bash
# One entry point for a fresh Debian/Ubuntu clone:
#   ./build.sh mount MOUNTPOINT [cudafs options...]   install deps, build, mount
#   ./build.sh test                                   install deps, build, run every test
#   ./build.sh build                                  install deps, build
# Installing packages needs root (or sudo). The build goes to ./build.
set -euo pipefail
cd "$(dirname "$0")"

packages=(build-essential cmake pkg-config libfuse3-dev fuse3 libabsl-dev libgtest-dev
          libbenchmark-dev git tar)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_dependencies() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "build.sh: installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

build() {
  install_dependencies
  cmake -S . -B build -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" ${CMAKE_ARGS:-}
  cmake --build build -j "$(nproc)"
}

command=${1:-}
case "$command" in
  build)
    build
    ;;
  mount)
    mountpoint=${2:?usage: ./build.sh mount MOUNTPOINT [cudafs options...]}
    shift 2
    build
    mkdir -p "$mountpoint"
    as_root ./build/cudafs "$mountpoint" "$@"
    echo "build.sh: cudafs mounted on $mountpoint (unmount: umount $mountpoint)"
    ;;
  test)
    build
    cd build
    ctest --output-on-failure -j "$(nproc)"
    ;;
  *)
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
