#!/usr/bin/env bash
# Everything a session with the GPU machine checks, in one command (device
# time is scarce): the whole test suite with mounts required, the device
# micro-benchmarks, and the mount benchmark with the null, host and tmpfs
# baselines in the same run. Built beforehand on the development machine:
#   ./build.sh build    # also builds libfuse 3.18 into build/libfuse
#   cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DCUDAFS_LIBFUSE_PREFIX=$PWD/build/libfuse
#   cmake --build build-cuda -j
#   bench/bundle-tools.sh build-gpu/tools     # fio and its libraries
#   ../shared/gpu/bundle-libs build-cuda .device-libs
# then on the GPU machine, carrying build-cuda, build-gpu/tools.tar.gz and
# .device-libs (the unpacked bundle is too big to carry), in two calls since
# one call may run 10 minutes ("tests micro", then "bench"):
#   export LD_LIBRARY_PATH=$PWD/.device-libs:$LD_LIBRARY_PATH
#   bench/gpu_session.sh build-cuda build-gpu/tools.tar.gz "$OUT" tests micro
set -uo pipefail
build=${1:?usage: bench/gpu_session.sh BUILD_DIR FIO_BUNDLE OUT_DIR [tests|micro|bench ...]}
tools=${2:?usage: bench/gpu_session.sh BUILD_DIR FIO_BUNDLE OUT_DIR [tests|micro|bench ...]}
out=${3:?usage: bench/gpu_session.sh BUILD_DIR FIO_BUNDLE OUT_DIR [tests|micro|bench ...]}
shift 3
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(tests micro bench)
cd "$(dirname "$0")/.."
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv >"$out/gpu.txt" 2>&1
"$build/cudafs" --list-devices >>"$out/gpu.txt" 2>&1

for part in "${parts[@]}"; do
  case "$part" in
    tests)
      tests/run_all.sh "$build" "$out/tests" | tee "$out/tests.txt"
      ;;
    micro)
      "$build/device_benchmark" --benchmark_filter=Cuda --benchmark_min_time=0.2 \
        >"$out/device_benchmark.txt" 2>&1
      ;;
    bench)
      CUDAFS="$PWD/$build/cudafs" CUDAFS_BENCH_TOOLS="$PWD/$tools" OUT_DIR="$out/bench" \
        bench/run_benchmarks.sh cudafs-cuda=cudafs:backend=cuda,direct_io \
        cudafs-cuda-cached=cudafs:backend=cuda cudafs-null=cudafs:backend=null,direct_io \
        cudafs-host=cudafs:backend=host,direct_io tmpfs >"$out/bench.log" 2>&1
      ;;
    *)
      echo "unknown part: $part (tests, micro or bench)" >&2
      exit 2
      ;;
  esac
done
