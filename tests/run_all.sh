#!/usr/bin/env bash
# Runs every test executable of a build directory without ctest (the GPU
# machine has no cmake), one log per executable, and prints a summary.
#   [CUDAFS_TEST_JOBS=N] tests/run_all.sh BUILD_DIR LOG_DIR
# Mount failures are failures here, not skips: on the GPU machine every
# backend must mount. With N > 1, N executables run at once, except those
# that take the whole GPU's memory on purpose, which run alone first.
# Mounts a test left behind (killed by the timeout) are unmounted at the
# end, and named. Exit status: the number of failing executables.
set -uo pipefail
build=${1:?usage: tests/run_all.sh BUILD_DIR LOG_DIR}
logs=${2:?usage: tests/run_all.sh BUILD_DIR LOG_DIR}
jobs=${CUDAFS_TEST_JOBS:-1}
mkdir -p "$logs"
export CUDAFS_TEST_REQUIRE_MOUNT=1

run_one() {  # run_one TEST LOG_DIR: prints "name: exit N; summary"
  local name status summary
  name=$(basename "$1")
  timeout 1200 "$1" >"$2/$name.log" 2>&1
  status=$?
  summary=$(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$2/$name.log" | tr '\n' ' ')
  echo "$name: exit $status; $summary"
}
export -f run_one

alone=()
shared=()
for test in "$build"/*_test; do
  case $(basename "$test") in
    cuda_device_test | arena_cuda_test | mount_cuda_test) alone+=("$test") ;;
    *) shared+=("$test") ;;
  esac
done
{
  for test in "${alone[@]}"; do run_one "$test" "$logs"; done
  printf '%s\n' "${shared[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one "$1" "$2"' _ {} "$logs"
} | tee "$logs/summary.txt"
# A test killed by the timeout leaves its mounts, and their daemons, behind.
while read -r mountpoint; do
  umount -l "$mountpoint" && echo "left mounted, now unmounted: $mountpoint" | tee -a "$logs/summary.txt"
done < <(awk '$2 ~ "^/tmp/cudafs-test-" {print $2}' /proc/self/mounts)
failed=$(grep -c ': exit [1-9]' "$logs/summary.txt")
echo "executables failing: $failed"
exit "$failed"
