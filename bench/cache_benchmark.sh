#!/usr/bin/env bash
# The write-back cache's workloads, each on a cudafs mount with the cache on
# (cache=64m, the default) and off (cache=0), and on tmpfs, in one run:
#   - 4 KiB random writes, fio psync, BENCH_FIO_JOBS jobs, each over a file
#     of each size in BENCH_FIO_MIB (default 4 MiB, which fits the default
#     cache, and 256 MiB, 32 times it) (IOPS);
#   - 1 KiB appends round-robin to 1000 files (appends/s);
#   - creating BENCH_CREATE_FILES files of 4 KiB (files/s);
#   - a CMake build of this project with its build tree on the mount
#     (seconds; BENCH_BUILD=0 skips it);
#   - the same build through ccache with CCACHE_DIR on the mount, the second
#     of two builds, from a warm cache (seconds; BENCH_CCACHE=0 skips it).
# Prints a markdown table; logs go to OUT_DIR. Run as root.
#   BACKEND=cuda bench/cache_benchmark.sh
set -uo pipefail
REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_DIR/bench/lib.sh"
CUDAFS=${CUDAFS:-$REPO_DIR/build/cudafs}
BACKEND=${BACKEND:-cuda}
OUT_DIR=${OUT_DIR:-./bench-cache-out}
FIO=${FIO:-fio}
FIO_JOBS=${BENCH_FIO_JOBS:-8}
FIO_MIB=${BENCH_FIO_MIB:-4 256}
FIO_SECONDS=${BENCH_FIO_SECONDS:-10}
CREATE_FILES=${BENCH_CREATE_FILES:-100000}
BUILD=${BENCH_BUILD:-1}
CCACHE=${BENCH_CCACHE:-$BUILD}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
mnt=$(mktemp -d /tmp/cudafs-cache-bench-XXXXXX)

timed_build() {  # timed_build NAME [CMAKE ARGS...]: configures and builds in $mnt/build
  local name=$1 start
  shift
  start=$(date +%s.%N)
  if cmake -S "$REPO_DIR" -B "$mnt/build" -DCMAKE_BUILD_TYPE=Release \
      -DCUDAFS_BUILD_BENCHMARKS=OFF "$@" >>"$OUT_DIR/$name.log" 2>&1 &&
    cmake --build "$mnt/build" -j "$(nproc)" >>"$OUT_DIR/$name.log" 2>&1; then
    "$PYTHON" -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" \
      "$start" "$(date +%s.%N)"
  else
    echo "failed"
  fi
  rm -rf "$mnt/build"
}

measure() {  # measure NAME: runs every workload in $mnt, prints a table row
  local name=$1 iops="" mib appends_rate create build_seconds="–" ccache_seconds="–"
  for mib in $FIO_MIB; do
    iops+=" $("$FIO" --name=randwrite --directory="$mnt" --rw=randwrite --bs=4k --ioengine=psync \
      --numjobs="$FIO_JOBS" --size="${mib}m" --time_based --runtime="$FIO_SECONDS" \
      --group_reporting --output-format=terse 2>>"$OUT_DIR/$name.log" | awk -F';' '{print $49}') |"
    rm -f "$mnt"/randwrite.*
  done
  appends_rate=$(appends "$mnt" 2>>"$OUT_DIR/$name.log")
  rm -f "$mnt"/a*
  create=$("$PYTHON" "$REPO_DIR/bench/smallfiles.py" --dir "$mnt/small" --count "$CREATE_FILES" \
    2>>"$OUT_DIR/$name.log" | "$PYTHON" -c 'import json,sys; print("%.0f" % json.load(sys.stdin)["create_per_second"])')
  rm -rf "$mnt/small"
  [[ $BUILD == 1 ]] && build_seconds=$(timed_build "$name")
  if [[ $CCACHE == 1 ]] && ! command -v ccache >/dev/null; then
    ccache_seconds="no ccache"
  elif [[ $CCACHE == 1 ]]; then
    export CCACHE_DIR=$mnt/ccache
    timed_build "$name" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache >/dev/null  # fills the cache
    ccache_seconds=$(timed_build "$name" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    ccache --show-stats >>"$OUT_DIR/$name.log" 2>&1
    rm -rf "$CCACHE_DIR"
    unset CCACHE_DIR
  fi
  [[ -x $CUDAFS && $name == cudafs* ]] &&
    "$CUDAFS" --stats --all "$mnt" >"$OUT_DIR/$name.stats" 2>&1
  echo "| $name |$iops $appends_rate | $create | $build_seconds | $ccache_seconds |"
}

fio_columns=""
for mib in $FIO_MIB; do fio_columns+=" 4 KiB random write, $FIO_JOBS jobs × $mib MiB (IOPS) |"; done
echo "| target |$fio_columns 1 KiB appends to 1000 files (/s) | create $CREATE_FILES × 4 KiB (files/s) | build of cudafs (s) | build from a warm ccache (s) |"
echo "|---|$(for _ in $FIO_MIB; do printf -- '---|'; done)---|---|---|---|"
for cache in 64m 0; do
  name="cudafs-$BACKEND-cache=$cache"
  if "$CUDAFS" "$mnt" -o "backend=$BACKEND,size=16g,cache=$cache" 2>"$OUT_DIR/$name.log"; then
    measure "$name"
    umount "$mnt" || umount -l "$mnt"
  else
    echo "| $name | mount failed: $(head -n 1 "$OUT_DIR/$name.log") |"
  fi
done
mount -t tmpfs -o size=16g bench-tmpfs "$mnt" && measure tmpfs && umount "$mnt"
rmdir "$mnt"
