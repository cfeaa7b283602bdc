#!/usr/bin/env bash
# Builds cudafs where no CUDA toolkit can be seen and checks that the binary
# still drives NVIDIA GPUs (the CUDA device is built from our own
# alloc/devices/cuda_api.h): in a private mount namespace, an empty tmpfs
# over every /usr/local/cuda* and /opt/cuda* and over any other folder of
# the compiler's include path that holds a cuda.h; then a fresh configure
# and build in BUILD_DIR (ccache makes it cheap); then `cudafs --version`
# must name the CUDA driver API and `cudafs --list-devices`, without a GPU,
# must say why there is none rather than that the binary cannot drive one.
#
#   tests/build/build_without_toolkit.sh [BUILD_DIR [TARGET...]]
#
# BUILD_DIR defaults to build-notoolkit, TARGET to cudafs (`all`: the tests
# too, to run them on a GPU machine). Needs root (unshare -m, mount).
# CUDAFS_LIBFUSE_PREFIX: the libfuse >= 3.18 that ./build.sh built
# (default build/libfuse, where it is; empty: the system's libfuse).
# CUDAFS_CMAKE_ARGS: more arguments for CMake, split at spaces.
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=${1:-build-notoolkit}
targets=("${@:2}")
((${#targets[@]})) || targets=(cudafs)

if [[ ${CUDAFS_TOOLKIT_HIDDEN:-} != 1 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "build_without_toolkit: needs root (a private mount namespace)" >&2
    exit 2
  fi
  # Mounts made in the namespace go with it: the machine's stay as they are.
  exec unshare --mount --propagation private env CUDAFS_TOOLKIT_HIDDEN=1 "$0" "$build_dir" \
    "${targets[@]}"
fi

hidden=()
hide() {
  local dir
  dir=$(realpath "$1")
  for seen in "${hidden[@]}"; do [[ $seen == "$dir" ]] && return 0; done
  mount -t tmpfs -o size=1m,mode=0755 cudafs-no-toolkit "$dir"
  hidden+=("$dir")
}
for dir in /usr/local/cuda* /opt/cuda*; do
  if [[ -d $dir ]]; then hide "$dir"; fi
done
# cuda.h anywhere else the compiler looks (a distribution's nvidia-cuda-dev).
search_path=$(c++ -E -x c++ -v /dev/null 2>&1 | sed -n '/^#include <...> search starts here:/,/^End of search list./p' |
  grep '^ ' || true)
for dir in $search_path /usr/include /usr/local/include; do
  if [[ -e $dir/cuda.h ]]; then hide "$dir"; fi
done
unset CUDAToolkit_ROOT CUDA_HOME CUDA_PATH
if echo '#include <cuda.h>' | c++ -fsyntax-only -x c++ - 2> /dev/null; then
  echo "build_without_toolkit: cuda.h is still found" >&2
  exit 1
fi
echo "build_without_toolkit: hidden: ${hidden[*]:-(no toolkit was installed)}"

libfuse_prefix=${CUDAFS_LIBFUSE_PREFIX-$PWD/build/libfuse}
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# A build tree configured with the toolkit in sight remembers where it was.
rm -f "$build_dir/CMakeCache.txt"
mkdir -p "$build_dir"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DCUDAFS_BUILD_BENCHMARKS=OFF \
  -DCUDAFS_LIBFUSE_PREFIX="$libfuse_prefix" "${launcher[@]}" ${CUDAFS_CMAKE_ARGS:-} \
  > "$build_dir/configure.log" 2>&1 ||
  { cat "$build_dir/configure.log"; exit 1; }
if grep -q "CUDAFS_TOOLKIT_INCLUDE_DIR:PATH=/" "$build_dir/CMakeCache.txt"; then
  echo "build_without_toolkit: CMake found a toolkit anyway:" >&2
  grep CUDAFS_TOOLKIT_INCLUDE_DIR "$build_dir/CMakeCache.txt" >&2
  exit 1
fi
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]}"

binary=$build_dir/cudafs
version=$("$binary" --version)
echo "build_without_toolkit: $version"
if [[ $version != *"CUDA driver API"* ]]; then
  echo "build_without_toolkit: --version does not name the CUDA driver API" >&2
  exit 1
fi
if devices=$("$binary" --list-devices 2>&1); then
  echo "build_without_toolkit: --list-devices:"
  echo "$devices"
elif [[ $devices == *"built without"* ]] ||
  ! grep -Eq 'libcuda\.so\.1|NVIDIA driver|cuInit' <<< "$devices"; then
  echo "build_without_toolkit: --list-devices does not say why there is no GPU: $devices" >&2
  exit 1
else
  echo "build_without_toolkit: no GPU here, and --list-devices says why: $devices"
fi
