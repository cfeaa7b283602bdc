#!/usr/bin/env bash
# Mount-level benchmarks: mounts every target at a fresh directory, runs the
# same workloads on each in one run, records JSON lines and logs, and writes
# a markdown report with a chart (bench/report.py). Needs root (mount,
# drop_caches).
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$BENCH_DIR")
# shellcheck source=bench/lib.sh
source "$BENCH_DIR/lib.sh"
# The exact invocation, with the settings it took from the environment.
COMMAND_LINE=$(
  for var in CUDAFS FIO CUDAFS_BENCH_TOOLS OUT_DIR PYTHON $(compgen -e | grep '^BENCH_' || true); do
    [[ -n ${!var+set} ]] && printf '%s=%q ' "$var" "${!var}"
  done
  printf '%q' "$0"; (($#)) && printf ' %q' "$@"; echo
)

usage() {
  cat <<'EOF'
usage: bench/run_benchmarks.sh [-h] [TARGET ...]

TARGET is NAME=SPEC, or just NAME for one of the default targets. SPEC is
  cudafs[:OPTIONS]   mount $CUDAFS with -o OPTIONS (size= added unless given)
  tmpfs[:OPTIONS]    mount -t tmpfs (size= added unless given)
  dir:PATH           an existing directory (another filesystem); not mounted
Default targets, in this order:
  cudafs-cuda=cudafs:backend=cuda  cudafs-host=cudafs:backend=host
  cudafs-null=cudafs:backend=null  tmpfs=tmpfs
A target that fails to mount is reported as n/a; the run goes on.

Environment (defaults in brackets):
  CUDAFS             cudafs binary [build/cudafs of this checkout]
  FIO                fio binary [fio on PATH, else $CUDAFS_BENCH_TOOLS/fio]
  CUDAFS_BENCH_TOOLS directory or .tar.gz made by bench/bundle-tools.sh
  OUT_DIR            results, logs, report.md, benchmarks.png [./bench-out]
  PYTHON             Python 3 for the small-file test and the report [python3]
  BENCH_SEQ_GIB      size of the sequential file [4]
  BENCH_PAR_JOBS     parallel readers/writers [8]
  BENCH_WIDE_JOBS    readers/writers of the wide workload [16]
  BENCH_WIDE_GIB     size of each wide-workload file [0.5]
  BENCH_PAR_GIB      size of each parallel file [1]
  BENCH_FIO_JOBS     fio jobs [8]
  BENCH_FIO_MIB      fio file size, per job [1024]
  BENCH_FIO_SHARED   1: all fio jobs share one file of BENCH_FIO_MIB [0]
  BENCH_FIO_SECONDS  fio runtime of each random test [10]
  BENCH_SMALL_FILES  number of 4 KiB files in the small-file test [20000]
  BENCH_SIZE         size= of each mount, e.g. 16g [what the workloads need + 1 GiB]
  BENCH_WORKLOADS    subset of "seq par wide fio small" [all]
  BENCH_TIMEOUT      seconds before one command is killed [900]
  BENCH_DD_MIB       MiB per dd read and write of the seq, par and wide workloads [1]
  BENCH_GPU_INDEX    GPU whose memory.used is recorded [0]

Quick local run:
  BENCH_SEQ_GIB=0.5 BENCH_PAR_GIB=0.125 BENCH_FIO_MIB=64 BENCH_FIO_SECONDS=3 \
    BENCH_SMALL_FILES=2000 bench/run_benchmarks.sh cudafs-host tmpfs
EOF
}

declare -A DEFAULT_SPECS=(
  [cudafs-cuda]=cudafs:backend=cuda
  [cudafs-host]=cudafs:backend=host
  [cudafs-null]=cudafs:backend=null
  [tmpfs]=tmpfs
)
readonly DEFAULT_TARGETS=(cudafs-cuda cudafs-host cudafs-null tmpfs)

CUDAFS=${CUDAFS:-$REPO_DIR/build/cudafs}
OUT_DIR=${OUT_DIR:-./bench-out}
PYTHON=${PYTHON:-python3}
SEQ_GIB=${BENCH_SEQ_GIB:-4}
PAR_JOBS=${BENCH_PAR_JOBS:-8}
PAR_GIB=${BENCH_PAR_GIB:-1}
FIO_JOBS=${BENCH_FIO_JOBS:-8}
FIO_MIB=${BENCH_FIO_MIB:-1024}
FIO_SHARED=${BENCH_FIO_SHARED:-0}
FIO_SECONDS=${BENCH_FIO_SECONDS:-10}
SMALL_FILES=${BENCH_SMALL_FILES:-20000}
WORKLOADS=${BENCH_WORKLOADS:-seq par wide fio small}
TIMEOUT=${BENCH_TIMEOUT:-900}
DD_MIB=${BENCH_DD_MIB:-1}
GPU_INDEX=${BENCH_GPU_INDEX:-0}
readonly SMALL_FILE_BYTES=4096

gib_to_mib() { awk -v g="$1" 'BEGIN { printf "%d", g * 1024 }'; }
SEQ_MIB=$(gib_to_mib "$SEQ_GIB")
PAR_MIB=$(gib_to_mib "$PAR_GIB")
WIDE_JOBS=${BENCH_WIDE_JOBS:-16}
WIDE_MIB=$(gib_to_mib "${BENCH_WIDE_GIB:-0.5}")

WORK_DIR=""          # temp dir holding the mountpoints
RESULTS=""           # JSON lines, one record each
LOG_DIR=""

emit_result() {  # emit_result TARGET WORKLOAD VALUE UNIT [NOTE]
  emit type=result target="$1" workload="$2" value:="$3" unit="$4" note="${5:-}"
}

emit_failure() {  # emit_failure TARGET WORKLOAD MESSAGE
  emit type=result target="$1" workload="$2" value:=null error="${3:-no message, see the log}"
}

now_ns() { date +%s%N; }

# rate COUNT START_NS END_NS SCALE: COUNT per second divided by SCALE.
rate() { awk -v n="$1" -v a="$2" -v b="$3" -v s="$4" 'BEGIN { printf "%.6g", n / ((b - a) / 1e9) / s }'; }

cold_note() {
  if drop_caches; then echo ""; else echo "warm: could not drop caches"; fi
}

gpu_memory_used_mib() {
  command -v nvidia-smi >/dev/null || return 0
  nvidia-smi --id="$GPU_INDEX" --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null |
    head -n 1 | tr -d ' '
}

# ---------------------------------------------------------------- targets

resolve_fio() {
  if [[ -n ${FIO:-} ]]; then
    command -v "$FIO" >/dev/null || { log "FIO=$FIO not found"; FIO=""; }
    return 0
  fi
  if command -v fio >/dev/null; then FIO=fio; return 0; fi
  FIO=""
  local tools=${CUDAFS_BENCH_TOOLS:-}
  [[ -n $tools ]] || return 0
  if [[ -f $tools ]]; then  # a tarball made by bundle-tools.sh
    mkdir -p "$WORK_DIR/tools"
    tar -xzf "$tools" -C "$WORK_DIR/tools"
    tools=$WORK_DIR/tools
  fi
  [[ -x $tools/fio ]] && FIO=$tools/fio
  return 0
}

# ---------------------------------------------------------------- workloads
# Each takes TARGET DIRECTORY, records its results, and removes its files.
# Every measured command logs to LOG_DIR/TARGET.WORKLOAD.log.

# measure_dd TARGET WORKLOAD BYTES NOTE write|read DIR FILE...: runs one dd
# per FILE at once and records BYTES over the wall time of the group.
measure_dd() {
  local target=$1 workload=$2 bytes=$3 note=$4 mode=$5 dir=$6; shift 6
  local log_file=$LOG_DIR/$target.$workload.log file start end pids=() pid failed=0
  start=$(now_ns)
  for file in "$@"; do
    if [[ $mode == write ]]; then
      run_logged "$log_file" dd if=/dev/zero of="$dir/$file" bs="${DD_MIB}M" \
        count="$(( (bytes / $# >> 20) / DD_MIB ))" conv=fdatasync &
    else
      run_logged "$log_file" dd if="$dir/$file" of=/dev/null bs="${DD_MIB}M" &
    fi
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
  end=$(now_ns)
  if ((failed)); then
    emit_failure "$target" "$workload" "$(error_line "$log_file")"
    return 1
  fi
  emit_result "$target" "$workload" "$(rate "$bytes" "$start" "$end" 1e9)" GB/s "$note"
}

bench_seq() {
  local target=$1 dir=$2 bytes=$((SEQ_MIB << 20))
  log "$target: sequential write, $SEQ_MIB MiB"
  if measure_dd "$target" seq_write "$bytes" "" write "$dir" seq.bin; then
    snapshot_gpu after_seq_write
    log "$target: sequential read, cold"
    measure_dd "$target" seq_read_cold "$bytes" "$(cold_note)" read "$dir" seq.bin || true
  else
    emit_failure "$target" seq_read_cold "skipped: the write failed"
  fi
  rm -f "$dir/seq.bin" || true
}

# parallel_streams TARGET DIR PREFIX JOBS MIB: JOBS writers of one MIB file
# each, then JOBS cold readers of them.
parallel_streams() {
  local target=$1 dir=$2 prefix=$3 jobs=$4 mib=$5 bytes=$(($4 * ($5 << 20))) files=() i
  for ((i = 0; i < jobs; i++)); do files+=("$prefix.$i"); done
  log "$target: $jobs parallel writers, $mib MiB each"
  if measure_dd "$target" "${prefix}_write" "$bytes" "" write "$dir" "${files[@]}"; then
    snapshot_gpu "after_${prefix}_write"
    log "$target: $jobs parallel readers, cold"
    measure_dd "$target" "${prefix}_read_cold" "$bytes" "$(cold_note)" read "$dir" "${files[@]}" ||
      true
  else
    emit_failure "$target" "${prefix}_read_cold" "skipped: the writes failed"
  fi
  rm -f "$dir/$prefix".* || true
}

bench_par() { parallel_streams "$1" "$2" par "$PAR_JOBS" "$PAR_MIB"; }

# More streams than the GPU machine has cores: what the transport carries.
bench_wide() { parallel_streams "$1" "$2" wide "$WIDE_JOBS" "$WIDE_MIB"; }

# fio_iops TARGET WORKLOAD DIR RW DIRECT NOTE
fio_iops() {
  local target=$1 workload=$2 dir=$3 rw=$4 direct=$5 note=$6
  local log_file=$LOG_DIR/$target.$workload.log json=$LOG_DIR/$target.$workload.json files iops
  if [[ $FIO_SHARED == 1 ]]; then
    files=(--filename="$dir/fio.shared")
  else
    # shellcheck disable=SC2016  # $jobnum is fio's, not the shell's
    files=(--directory="$dir" --filename_format='fio.$jobnum')
  fi
  log "$target: fio $rw, 4 KiB, $FIO_JOBS jobs, direct=$direct, ${FIO_SECONDS}s"
  if run_logged "$log_file" "$FIO" --name="$workload" "${files[@]}" --rw="$rw" --bs=4k \
      --ioengine=psync --direct="$direct" --numjobs="$FIO_JOBS" --size="${FIO_MIB}m" \
      --time_based --runtime="$FIO_SECONDS" --group_reporting \
      --output-format=json --output="$json" &&
    iops=$("$PYTHON" -c 'import json, sys; job = json.load(open(sys.argv[1]))["jobs"][0]
print(job[sys.argv[2]]["iops"])' "$json" "${rw#rand}" 2>>"$log_file"); then
    emit_result "$target" "$workload" "$iops" IOPS "$note"
  else
    emit_failure "$target" "$workload" "$(error_line "$log_file")"
  fi
}

bench_fio() {
  local target=$1 dir=$2 direct=1 note=""
  if [[ -z $FIO ]]; then
    emit_failure "$target" fio_randread "fio not found"
    emit_failure "$target" fio_randwrite "fio not found"
    return 0
  fi
  # O_DIRECT keeps the page cache out of the measurement where the target
  # allows it; where it does not, say so next to the number.
  if ! dd if=/dev/zero of="$dir/direct-probe" bs=4096 count=1 oflag=direct 2>/dev/null; then
    direct=0
    note="direct=0: O_DIRECT refused"
  fi
  rm -f "$dir/direct-probe" || true
  # The random writes reuse the files that fio laid out for the reads.
  fio_iops "$target" fio_randread "$dir" randread "$direct" "$note"
  fio_iops "$target" fio_randwrite "$dir" randwrite "$direct" "$note"
  rm -f "$dir"/fio.* || true
}

bench_small() {
  local target=$1 dir=$2 log_file=$LOG_DIR/$1.small.log output phase rate_value
  log "$target: $SMALL_FILES small files"
  if run_logged "$log_file" "$PYTHON" "$BENCH_DIR/smallfiles.py" --dir="$dir/small" \
      --count="$SMALL_FILES" --size="$SMALL_FILE_BYTES"; then
    output=$(tail -n 1 "$log_file")
    for phase in create stat unlink; do
      rate_value=$("$PYTHON" -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2] + "_per_second"])' \
        "$output" "$phase")
      emit_result "$target" "small_$phase" "$rate_value" files/s
    done
  else
    for phase in create stat unlink; do
      emit_failure "$target" "small_$phase" "$(error_line "$log_file")"
    done
  fi
  rm -rf "$dir/small" || true
}

# ---------------------------------------------------------------- driver

declare -A GPU_SNAPSHOTS=()
SNAPSHOT_GPU=0
snapshot_gpu() {
  ((SNAPSHOT_GPU)) || return 0
  local used
  used=$(gpu_memory_used_mib)
  [[ -n $used ]] && GPU_SNAPSHOTS[$1]=$used
  return 0
}

gpu_snapshots_json() {
  local json="" key
  for key in before_mount after_mount after_seq_write after_par_write before_unmount after_unmount; do
    [[ -n ${GPU_SNAPSHOTS[$key]:-} ]] && json+="${json:+,}\"$key\":${GPU_SNAPSHOTS[$key]}"
  done
  echo "{$json}"
}

peak_rss_kib() {  # VmHWM of the daemon, empty when it is gone
  if [[ -n $1 ]]; then awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null || true; fi
}

bench_target() {
  local name=$1 spec=$2
  local kind=${spec%%:*} mountpoint=$WORK_DIR/$name errors=$LOG_DIR/$name.mount.log
  local pid="" rss="" rss_now workload
  # A directory target gets a fresh subdirectory, removed at the end.
  [[ $kind == dir ]] && mountpoint=${spec#*:}/$(basename "$WORK_DIR").$name
  GPU_SNAPSHOTS=()
  SNAPSHOT_GPU=0
  [[ $kind == cudafs ]] && SNAPSHOT_GPU=1
  snapshot_gpu before_mount
  log "$name: mounting ($spec)"
  if ! mount_target "$name" "$spec" "$mountpoint" "$errors"; then
    local message
    message=$(grep -v '^\s*$' "$errors" | head -n 1 || true)
    log "$name: mount failed: $message"
    emit type=target target="$name" spec="$spec" status=mount_failed error="${message:-unknown error}"
    rmdir "$mountpoint" 2>/dev/null || true
    return 0
  fi
  [[ $kind == cudafs ]] && pid=$(daemon_pid "$mountpoint")
  emit type=target target="$name" spec="$spec" status=ok mountpoint="$mountpoint" \
    filesystem="$(findmnt -n -o FSTYPE --target "$mountpoint" 2>/dev/null | head -n 1 || stat -f -c %T "$mountpoint")"
  snapshot_gpu after_mount
  for workload in $WORKLOADS; do
    "bench_$workload" "$name" "$mountpoint"
    rss_now=$(peak_rss_kib "$pid")
    [[ -n $rss_now ]] && rss=$rss_now
  done
  snapshot_gpu before_unmount
  local daemon_alive=false
  if [[ -n $pid && -d /proc/$pid ]]; then daemon_alive=true; fi
  unmount_target "$kind" "$mountpoint"
  snapshot_gpu after_unmount
  if [[ $kind == cudafs ]]; then
    [[ $daemon_alive == true ]] || log "$name: the cudafs daemon died during the run"
    emit type=memory target="$name" daemon_vmhwm_kib:="${rss:-null}" \
      daemon_alive_at_end:="$daemon_alive" gpu_used_mib:="$(gpu_snapshots_json)"
  fi
}

emit_run_record() {
  emit_machine_record \
    fio="$FIO" fio_version="$([[ -n $FIO ]] && "$FIO" --version 2>/dev/null || echo unavailable)" \
    seq_mib:="$SEQ_MIB" par_jobs:="$PAR_JOBS" par_mib:="$PAR_MIB" wide_jobs:="$WIDE_JOBS" \
    wide_mib:="$WIDE_MIB" fio_jobs:="$FIO_JOBS" \
    fio_mib:="$FIO_MIB" fio_shared:="$FIO_SHARED" fio_seconds:="$FIO_SECONDS" \
    small_files:="$SMALL_FILES" small_file_bytes:="$SMALL_FILE_BYTES" mount_size="$MOUNT_SIZE" \
    workloads="$WORKLOADS" dd_mib:="$DD_MIB"
}

default_mount_size() {  # what the largest workload keeps at once, plus 1 GiB
  local fio_total=$FIO_MIB
  [[ $FIO_SHARED == 1 ]] || fio_total=$((FIO_MIB * FIO_JOBS))
  local need=$SEQ_MIB
  ((PAR_JOBS * PAR_MIB > need)) && need=$((PAR_JOBS * PAR_MIB))
  ((WIDE_JOBS * WIDE_MIB > need)) && need=$((WIDE_JOBS * WIDE_MIB))
  ((fio_total > need)) && need=$fio_total
  ((SMALL_FILES * SMALL_FILE_BYTES >> 20 > need)) && need=$((SMALL_FILES * SMALL_FILE_BYTES >> 20))
  echo "$((need + 1024))m"
}

main() {
  parse_targets "$@"
  local -a names=("${TARGET_NAMES[@]}") specs=("${TARGET_SPECS[@]}")
  local argument
  for argument in $WORKLOADS; do
    [[ $argument =~ ^(seq|par|wide|fio|small)$ ]] || { echo "unknown workload '$argument'" >&2; exit 2; }
  done
  [[ $EUID == 0 ]] || echo "warning: not root: mounts and drop_caches will likely fail" >&2
  MOUNT_SIZE=${BENCH_SIZE:-$(default_mount_size)}

  mkdir -p "$OUT_DIR"
  OUT_DIR=$(cd "$OUT_DIR" && pwd)
  RESULTS=$OUT_DIR/results.jsonl
  LOG_DIR=$OUT_DIR/logs
  : >"$RESULTS"
  rm -rf "$LOG_DIR"
  mkdir -p "$LOG_DIR"
  WORK_DIR=$(mktemp -d /tmp/cudafs-bench.XXXXXX)
  trap cleanup EXIT
  trap 'exit 130' INT TERM

  resolve_fio
  [[ -n $FIO ]] || log "fio not found: the random I/O rows will say so"
  emit_run_record

  local i
  for i in "${!names[@]}"; do bench_target "${names[$i]}" "${specs[$i]}"; done

  "$PYTHON" "$BENCH_DIR/report.py" "$RESULTS" --markdown "$OUT_DIR/report.md" \
    --chart "$OUT_DIR/benchmarks.png"
  log "results: $RESULTS; report: $OUT_DIR/report.md"
}

main "$@"
