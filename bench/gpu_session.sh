#!/usr/bin/env bash
# Everything a session with the GPU machine checks, in a few commands (device
# time is scarce): the whole test suite with mounts required, over io_uring
# and over /dev/fuse, the device micro-benchmarks, and the mount benchmark
# with the null, host and tmpfs baselines in the same run, once per
# transport. Built beforehand on the development machine:
#   ./build.sh build    # also builds libfuse 3.18 into build/libfuse
#   cmake -S . -B build-cuda -DCMAKE_BUILD_TYPE=Release -DCUDAFS_LIBFUSE_PREFIX=$PWD/build/libfuse
#   cmake --build build-cuda -j
#   bench/bundle-tools.sh build-gpu/tools     # fio and its libraries
#   bench/bundle-libs.sh build-cuda .device-libs   # the libraries it loads
# then on the GPU machine, carrying build-cuda, build-gpu/tools.tar.gz and
# .device-libs (the unpacked bundle is too big to carry), in calls of at most
# 10 minutes each, for example:
#   export LD_LIBRARY_PATH=$PWD/.device-libs:$LD_LIBRARY_PATH
#   bench/gpu_session.sh build-cuda build-gpu/tools.tar.gz "$OUT" tests micro
#   bench/gpu_session.sh build-cuda build-gpu/tools.tar.gz "$OUT" tests-devfuse
#   bench/gpu_session.sh build-cuda build-gpu/tools.tar.gz "$OUT" bench
#   bench/gpu_session.sh build-cuda build-gpu/tools.tar.gz "$OUT" bench-devfuse
# Parts: tests, tests-devfuse (the suite with uring=on / uring=off), micro,
# bench, bench-devfuse (the mount benchmark over io_uring / /dev/fuse),
# bench-cache (bench/cache_benchmark.sh: the write-back cache on and off),
# cache-matrix (bench/cache_matrix.sh: the cache against cache=0 and the
# null backend over working sets from half to 64 times the cache),
# load (64 clients for 5 minutes), long (the model test, 1M operations).
set -uo pipefail
build=${1:?usage: bench/gpu_session.sh BUILD_DIR FIO_BUNDLE OUT_DIR [PART ...]}
tools=${2:?usage: bench/gpu_session.sh BUILD_DIR FIO_BUNDLE OUT_DIR [PART ...]}
out=${3:?usage: bench/gpu_session.sh BUILD_DIR FIO_BUNDLE OUT_DIR [PART ...]}
shift 3
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(tests micro bench)
cd "$(dirname "$0")/.."
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv >"$out/gpu.txt" 2>&1
"$build/cudafs" --list-devices >>"$out/gpu.txt" 2>&1
# FUSE over io_uring needs this on; root may set it.
uring_parameter=/sys/module/fuse/parameters/enable_uring
[ -w "$uring_parameter" ] && echo Y >"$uring_parameter"
echo "enable_uring: $(cat "$uring_parameter" 2>/dev/null || echo missing)" >>"$out/gpu.txt"

for part in "${parts[@]}"; do
  case "$part" in
    tests)
      CUDAFS_TEST_MOUNT_OPTIONS=uring=on tests/run_all.sh "$build" "$out/tests" |
        tee "$out/tests.txt"
      ;;
    tests-devfuse)
      CUDAFS_TEST_MOUNT_OPTIONS=uring=off tests/run_all.sh "$build" "$out/tests-devfuse" |
        tee "$out/tests-devfuse.txt"
      ;;
    load)  # issue 5: 64 clients for 5 minutes on the GPU
      CUDAFS_LOAD_SECONDS=300 CUDAFS_TEST_REQUIRE_MOUNT=1 "$build/mount_load_test" \
        --gtest_filter='*cuda' 2>&1 | tee "$out/load.txt"
      ;;
    long)  # issue 5: the model test for a million operations on the GPU
      CUDAFS_MODEL_OPS=1000000 CUDAFS_TEST_REQUIRE_MOUNT=1 "$build/mount_model_test" \
        --gtest_filter='*ConcurrentModelsInSeparateTrees/cuda' 2>&1 | tee "$out/long.txt"
      ;;
    micro)
      "$build/device_benchmark" --benchmark_filter=Cuda --benchmark_min_time=0.2 \
        >"$out/device_benchmark.txt" 2>&1
      ;;
    bench)
      CUDAFS="$PWD/$build/cudafs" CUDAFS_BENCH_TOOLS="$PWD/$tools" OUT_DIR="$out/bench" \
        BENCH_FIO_SECONDS=5 bench/run_benchmarks.sh \
        cudafs-cuda=cudafs:backend=cuda,uring=on cudafs-null=cudafs:backend=null,uring=on \
        cudafs-host=cudafs:backend=host,uring=on tmpfs >"$out/bench.log" 2>&1
      ;;
    bench-devfuse)
      CUDAFS="$PWD/$build/cudafs" CUDAFS_BENCH_TOOLS="$PWD/$tools" OUT_DIR="$out/bench-devfuse" \
        BENCH_FIO_SECONDS=5 bench/run_benchmarks.sh \
        cudafs-cuda-devfuse=cudafs:backend=cuda,uring=off \
        cudafs-null-devfuse=cudafs:backend=null,uring=off \
        cudafs-cuda-cached=cudafs:backend=cuda,uring=off,nodirect_io tmpfs \
        >"$out/bench-devfuse.log" 2>&1
      ;;
    bench-cache)
      mkdir -p "$out/fio-tools" && tar -xzf "$tools" -C "$out/fio-tools"
      FIO="$out/fio-tools/fio" CUDAFS="$PWD/$build/cudafs" OUT_DIR="$out/bench-cache" \
        BENCH_BUILD=0 bench/cache_benchmark.sh >"$out/bench-cache.md" 2>&1
      ;;
    cache-matrix)  # issue 16: the cache against cache=0 and the null backend
      mkdir -p "$out/fio-tools" && tar -xzf "$tools" -C "$out/fio-tools"
      FIO="$out/fio-tools/fio" CUDAFS="$PWD/$build/cudafs" OUT_DIR="$out/cache-matrix" \
        bench/cache_matrix.sh cache nocache null >"$out/cache-matrix.md" 2>"$out/cache-matrix.log"
      ;;
    *)
      echo "unknown part: $part (tests, tests-devfuse, load, long, micro, bench, bench-devfuse, bench-cache, cache-matrix)" >&2
      exit 2
      ;;
  esac
done
