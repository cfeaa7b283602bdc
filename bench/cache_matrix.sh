#!/usr/bin/env bash
# The write-back cache against no cache, over working sets smaller and far
# larger than it: 4 KiB random reads and writes (fio, psync) with several job
# counts, each over a working set of a multiple of the cache's size, and
# 1 KiB appends round-robin to 1000 files. Each target is mounted once, in
# one run; prints a markdown table, a row per workload and a column per
# target (IOPS, appends/s), and keeps fio's logs in OUT_DIR.
#
#   bench/cache_matrix.sh [TARGET ...]
#
# TARGET is NAME=SPEC with SPEC as in run_benchmarks.sh (cudafs:OPTIONS,
# tmpfs:OPTIONS), or one of the defaults: cache (cudafs, backend=cuda,
# cache=64m), nocache (the same with cache=0), null (backend=null, cache=0:
# FUSE's own cost), tmpfs. Settings (environment):
#   BENCH_CACHE_MIB     the cache size the working sets are multiples of (64)
#   BENCH_MULTIPLES     working sets, as multiples of it ("0.5 4 64"; empty: no fio)
#   BENCH_JOBS          fio job counts ("8 16"); each job has its own file
#                       of working set / jobs, laid out with 1 MiB writes
#   BENCH_RW            fio workloads ("randread randwrite")
#   BENCH_SECONDS       seconds per fio run (5)
#   BENCH_APPENDS       1: the appends row too (1)
#   FIO, CUDAFS, OUT_DIR, MOUNT_SIZE (size= of each mount, 16g)
# Run as root.
set -uo pipefail
REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO_DIR/bench/lib.sh"
CUDAFS=${CUDAFS:-$REPO_DIR/build/cudafs}
FIO=${FIO:-fio}
PYTHON=${PYTHON:-python3}
OUT_DIR=${OUT_DIR:-./bench-cache-matrix-out}
MOUNT_SIZE=${MOUNT_SIZE:-16g}
CACHE_MIB=${BENCH_CACHE_MIB:-64}
MULTIPLES=${BENCH_MULTIPLES-0.5 4 64}
JOBS=${BENCH_JOBS:-8 16}
RW=${BENCH_RW:-randread randwrite}
SECONDS_PER_RUN=${BENCH_SECONDS:-5}
APPENDS=${BENCH_APPENDS:-1}

declare -A DEFAULT_SPECS=(
  [cache]="cudafs:backend=cuda,cache=${CACHE_MIB}m"
  [nocache]="cudafs:backend=cuda,cache=0"
  [null]="cudafs:backend=null,cache=0"
  [tmpfs]="tmpfs:"
)
DEFAULT_TARGETS=(cache nocache null tmpfs)
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
parse_targets "$@"
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
WORK_DIR=$(mktemp -d /tmp/cudafs-cache-matrix-XXXXXX)
trap cleanup EXIT

# Each job's file size in MiB for a working set of MULTIPLE × the cache.
job_mib() { awk -v c="$CACHE_MIB" -v m="$1" -v j="$2" 'BEGIN { printf "%d", c * m / j }'; }

# measure NAME SPEC DIR: one line per workload, "workload<TAB>value", in order.
measure() {
  local name=$1 spec=$2 dir=$3 multiple jobs mib rw value
  for multiple in $MULTIPLES; do
    for jobs in $JOBS; do
      mib=$(job_mib "$multiple" "$jobs")
      local common=(--name=ws --directory="$dir" --bs=4k --ioengine=psync --numjobs="$jobs"
        --size="${mib}m" --group_reporting --output-format=terse)
      "$FIO" "${common[@]}" --rw=write --bs=1m >>"$OUT_DIR/$name.log" 2>&1  # layout
      for rw in $RW; do
        value=$("$FIO" "${common[@]}" --rw="$rw" --time_based --runtime="$SECONDS_PER_RUN" \
          2>>"$OUT_DIR/$name.log" | awk -F';' -v rw="$rw" \
          '{ print (rw ~ /read/) ? $8 : $49 }')
        printf '4 KiB %s, %s jobs, working set %s× the cache (%d MiB)\t%s\n' \
          "$rw" "$jobs" "$multiple" "$((mib * jobs))" "${value:-failed}"
      done
      rm -f "$dir"/ws.*
    done
  done
  if [[ $APPENDS == 1 ]]; then
    printf '1 KiB appends round-robin to 1000 files (/s)\t%s\n' "$(appends "$dir" 2>>"$OUT_DIR/$name.log")"
    rm -f "$dir"/a*
  fi
  [[ $spec == cudafs:* ]] && "$CUDAFS" --stats --all "$dir" >"$OUT_DIR/$name.stats" 2>&1
  return 0
}

for i in "${!TARGET_NAMES[@]}"; do
  name=${TARGET_NAMES[$i]}
  mountpoint=$WORK_DIR/$name
  log "$name: ${TARGET_SPECS[$i]}"
  if mount_target "$name" "${TARGET_SPECS[$i]}" "$mountpoint" "$OUT_DIR/$name.err"; then
    measure "$name" "${TARGET_SPECS[$i]}" "$mountpoint" >"$WORK_DIR/$name.tsv"
    unmount_target "${TARGET_SPECS[$i]%%:*}" "$mountpoint"
  else
    echo "mount failed: $(head -n 1 "$OUT_DIR/$name.err")" >"$WORK_DIR/$name.tsv"
  fi
done

# The table: workloads down, targets across.
"$PYTHON" - "$WORK_DIR" "${TARGET_NAMES[@]}" <<'PY'
import sys
work, names = sys.argv[1], sys.argv[2:]
columns = [dict(line.rstrip("\n").split("\t", 1) for line in open(f"{work}/{n}.tsv") if "\t" in line)
           for n in names]
rows = list(dict.fromkeys(k for c in columns for k in c))
print("| workload | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
for row in rows:
    cells = []
    for c in columns:
        v = c.get(row, "–")
        cells.append(f"{float(v):,.0f}" if v.replace(".", "", 1).isdigit() else v)
    print(f"| {row} | " + " | ".join(cells) + " |")
PY
