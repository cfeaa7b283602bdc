#!/usr/bin/env bash
# One entry point for a fresh Debian/Ubuntu clone:
#   ./build.sh mount MOUNTPOINT [cudafs options...]   install deps, build, mount
#   ./build.sh test                                   install deps, build, run every test
#   ./build.sh build                                  install deps, build
#   ./build.sh sanitize                               the tests again under ASan+UBSan
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

# Every test, daemon included, built with AddressSanitizer (leaks too) and
# UndefinedBehaviorSanitizer; any report fails the test that caused it.
# (ThreadSanitizer needs an abseil built with it: Debian's is not, so it
# would not see absl::Mutex and would report every guarded access.)
sanitize() {
  install_dependencies
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUDAFS_BUILD_BENCHMARKS=OFF \
    -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  cmake --build build-sanitize -j "$(nproc)"
  cd build-sanitize
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --output-on-failure -j "$(nproc)" --timeout 900
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
  sanitize)
    sanitize
    ;;
  *)
    sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
