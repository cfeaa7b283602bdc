#!/usr/bin/env bash
# Runs every test executable of a build directory without ctest (the GPU
# machine has no cmake), one log per executable, and prints a summary.
#   tests/run_all.sh BUILD_DIR LOG_DIR
# Mount failures are failures here, not skips: on the GPU machine every
# backend must mount. Exit status: the number of failing executables.
set -uo pipefail
build=${1:?usage: tests/run_all.sh BUILD_DIR LOG_DIR}
logs=${2:?usage: tests/run_all.sh BUILD_DIR LOG_DIR}
mkdir -p "$logs"
export CUDAFS_TEST_REQUIRE_MOUNT=1
failed=0
for test in "$build"/*_test; do
  name=$(basename "$test")
  timeout 1200 "$test" >"$logs/$name.log" 2>&1
  status=$?
  summary=$(grep -E '^\[ +(PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$logs/$name.log" | tr '\n' ' ')
  echo "$name: exit $status; $summary"
  [ "$status" -eq 0 ] || failed=$((failed + 1))
done
echo "executables failing: $failed"
exit "$failed"
