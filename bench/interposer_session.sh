#!/usr/bin/env bash
# The allocation interposer's measurements (issue 43) on a GPU machine, in
# calls of at most 9 minutes each. Built beforehand on the development
# machine (no compiler is needed on the GPU machine):
#   cmake --build build -j2 --target cudafs cudafs_preload cuda_alloc_probe
#   mkdir -p build-interposer
#   cp build/cudafs build/libcudafs_preload.so build/cuda_alloc_probe build-interposer/
#   bench/bundle-libs.sh build-interposer .device-libs
# then on the GPU machine, as root, carrying build-interposer and .device-libs
# (3 MiB in all):
#   export LD_LIBRARY_PATH=$PWD/.device-libs:$LD_LIBRARY_PATH
#   bash bench/interposer_session.sh build-interposer "$OUT" pressure   # 6-8.5 min
#   bash bench/interposer_session.sh build-interposer "$OUT" overhead   # 1.5-4 min
# (a pressure call that ran out of time names the scenarios it skipped:
# `overhead pressure=d,e` then runs them after the overhead, in one call).
# BUILD is the build directory or its cudafs (libcudafs_preload.so and
# cuda_alloc_probe beside it). Parts:
#   pressure[=SCENARIOS]  bench/interposer_pressure.py: a mount holding 60%
#                         of the card (size= 70%), programs taking 90%, each
#                         scenario (a,b,c,d,e; default all) without and with
#                         the interposer; OUT/pressure.md, OUT/interposer_pressure.json
#   overhead              bench/interposer_overhead.py: the success path's
#                         cost; OUT/overhead.md, OUT/interposer_overhead.json
# No part named: both. Each part's tables are printed and kept in
# OUT/PART.md, its progress and errors in OUT/PART.log; a part that fails or
# runs out of time keeps what it measured (the JSON is rewritten after every
# run, and runs that would end past the part's deadline are skipped, saying
# so). Deadlines, in seconds from the part's start: INTERPOSER_PRESSURE_DEADLINE
# (450), INTERPOSER_OVERHEAD_DEADLINE (240), each cut to what is left of
# INTERPOSER_BUDGET (500) for the whole call, so that a call of several parts
# still ends within 9 minutes (each part is killed 50 s past its deadline).
set -uo pipefail
usage="usage: bench/interposer_session.sh BUILD_DIR|CUDAFS OUT_DIR [pressure[=a,b,c,d,e]] [overhead]"
target=${1:?$usage}
out=${2:?$usage}
shift 2
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(pressure overhead)
if [ -d "$target" ]; then build=$target; cudafs=$target/cudafs; else build=$(dirname "$target"); cudafs=$target; fi
build=$(cd "$build" && pwd) || exit 2
cudafs=$build/$(basename "$cudafs")
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$out"
out=$(cd "$out" && pwd)
python=${PYTHON:-python3}
mount=/mnt/cudafs-interposer
status=0
budget=${INTERPOSER_BUDGET:-500}

# deadline DEFAULT: DEFAULT, or what is left of the budget if less.
deadline() {
  local left=$((budget - SECONDS))
  if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

for file in "$cudafs" "$build/libcudafs_preload.so" "$build/cuda_alloc_probe"; do
  [ -e "$file" ] || { echo "missing: $file" >&2; exit 2; }
done
{
  date -u '+%Y-%m-%d %H:%M:%S UTC'
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv 2>&1
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv 2>&1
  "$cudafs" --version 2>&1
  "$build/cuda_alloc_probe" info 2>&1
  "$python" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__)' 2>&1 | tail -n 1
  "$python" -c 'import jax, jaxlib; print("jax", jax.__version__, "jaxlib", jaxlib.__version__)' 2>&1 | tail -n 1
} >"$out/gpu.txt"
cat "$out/gpu.txt"

# A mount an earlier, killed call left behind holds GPU memory: let it go.
cleanup() {
  if mountpoint -q "$mount" 2>/dev/null; then umount "$mount" 2>/dev/null || umount -l "$mount"; fi
}
cleanup
trap cleanup EXIT

for part in "${parts[@]}"; do
  case "$part" in
    pressure | pressure=*)
      scenarios=a,b,c,d,e
      [ "$part" = pressure ] || scenarios=${part#pressure=}
      deadline=$(deadline "${INTERPOSER_PRESSURE_DEADLINE:-450}")
      [ "$deadline" -ge 60 ] || { echo "pressure: no time left in the budget"; status=1; continue; }
      command=("$python" bench/interposer_pressure.py --cudafs "$cudafs" --mount "$mount"
        --out "$out" --scenarios "$scenarios" --fill 0.6 --size 0.7 --take 0.9 --deadline "$deadline")
      printf '\n$'; printf ' %q' "${command[@]}"; printf '\n\n'
      timeout -k 20 $((deadline + 50)) "${command[@]}" 2>"$out/pressure.log" | tee "$out/pressure.md"
      rc=${PIPESTATUS[0]}
      skipped=$("$python" -c 'import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
print(",".join(sorted({r["scenario"] for r in runs if "skipped" in r})))' "$out/interposer_pressure.json" 2>/dev/null)
      [ -z "$skipped" ] || echo "skipped for want of time: $skipped; run them with: bash bench/interposer_session.sh BUILD OUT overhead pressure=$skipped"
      [ "$rc" -eq 0 ] || { status=1; echo "pressure: exit status $rc; last lines of $out/pressure.log:"; tail -n 5 "$out/pressure.log"; }
      ;;
    overhead)
      deadline=$(deadline "${INTERPOSER_OVERHEAD_DEADLINE:-240}")
      [ "$deadline" -ge 30 ] || { echo "overhead: no time left in the budget"; status=1; continue; }
      command=("$python" bench/interposer_overhead.py --cudafs "$cudafs" --out "$out" --deadline "$deadline")
      printf '\n$'; printf ' %q' "${command[@]}"; printf '\n\n'
      timeout -k 20 $((deadline + 50)) "${command[@]}" 2>"$out/overhead.log" | tee "$out/overhead.md"
      rc=${PIPESTATUS[0]}
      [ "$rc" -eq 0 ] || { status=1; echo "overhead: exit status $rc; last lines of $out/overhead.log:"; tail -n 5 "$out/overhead.log"; }
      ;;
    *)
      echo "unknown part: $part ($usage)" >&2
      exit 2
      ;;
  esac
done
exit $status
