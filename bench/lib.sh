# shellcheck shell=bash
# Shell functions shared by the mount-level benchmarks (run_benchmarks.sh,
# tree_workload.sh, cache_benchmark.sh, cache_matrix.sh): logging, JSON lines, timed commands, mounting and
# unmounting targets, cleanup. Sourced, not run.
#
# The caller sets: PYTHON (python 3), RESULTS (the JSON lines file),
# TIMEOUT (seconds one command may run), CUDAFS (the binary), MOUNT_SIZE
# (size= of each mount unless its spec has one), WORK_DIR (temp dir, removed
# by cleanup). MOUNTED lists what is mounted now.

declare -a MOUNTED=() # "KIND MOUNTPOINT" of what is mounted now, for cleanup

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# emit KEY=STRING | KEY:=JSON ...: append one JSON object to the results.
emit() {
  "$PYTHON" - "$@" >>"$RESULTS" <<'PY'
import json, sys
record = {}
for argument in sys.argv[1:]:
    key, value = argument.split("=", 1)
    if key.endswith(":"):
        record[key[:-1]] = json.loads(value)
    else:
        record[key] = value
print(json.dumps(record))
PY
}

# run_logged LOG COMMAND...: runs COMMAND with a time limit, output appended to LOG.
run_logged() {
  local log_file=$1; shift
  printf '$ %s\n' "$*" >>"$log_file"
  local status=0
  timeout --foreground -k 10 "$TIMEOUT" "$@" >>"$log_file" 2>&1 || status=$?
  if ((status == 124 || status == 137)); then echo "timed out after ${TIMEOUT}s" >>"$log_file"; fi
  return $status
}

# error_line LOG: the last line of LOG that says what went wrong (not a
# command we echoed, nor dd's statistics).
error_line() {
  grep -v -E '^\$ |^\s*$|records (in|out)$|bytes .* copied' "$1" | tail -n 1 | cut -c 1-300 || true
}

# drop_caches: flushes dirty pages and evicts the page cache so reads are cold.
drop_caches() {
  sync
  [[ -w /proc/sys/vm/drop_caches ]] && echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
}

# The daemon is the cudafs process whose command line names the mountpoint
# (pgrep -f; without procps, every process in /proc is a candidate).
# Explicit return statuses: this also runs from the exit trap, where a bare
# `return` would return the status that ended the script.
daemon_pid() {
  local mountpoint=$1 candidates pid
  if command -v pgrep >/dev/null; then
    candidates=$(pgrep -f -- "$mountpoint" || true)
  else
    candidates=$(cd /proc && printf '%s\n' [0-9]*)
  fi
  for pid in $candidates; do
    if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == cudafs ]] &&
      tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$mountpoint"; then
      echo "$pid"
      return 0
    fi
  done
  return 0
}

with_size() {  # with_size OPTIONS: OPTIONS plus size= unless it has one
  local options=$1
  if [[ ,$options, == *,size=* ]]; then echo "$options"; else echo "${options:+$options,}size=$MOUNT_SIZE"; fi
}

# mount_target NAME SPEC MOUNTPOINT ERRFILE: mounts; on failure ERRFILE says why.
# parse_targets ARG...: the targets of a benchmark's command line, in
# TARGET_NAMES and TARGET_SPECS: NAME=SPEC, or a NAME of the caller's
# DEFAULT_SPECS; none given: the caller's DEFAULT_TARGETS. -h prints the
# caller's usage.
parse_targets() {
  TARGET_NAMES=() TARGET_SPECS=()
  local argument
  for argument in "$@"; do
    case $argument in
      -h | --help) usage; exit 0 ;;
      -*) usage >&2; exit 2 ;;
      *=*) TARGET_NAMES+=("${argument%%=*}"); TARGET_SPECS+=("${argument#*=}") ;;
      *)
        if [[ -z ${DEFAULT_SPECS[$argument]:-} ]]; then
          echo "unknown target '$argument' (give NAME=SPEC)" >&2; usage >&2; exit 2
        fi
        TARGET_NAMES+=("$argument"); TARGET_SPECS+=("${DEFAULT_SPECS[$argument]}")
        ;;
    esac
  done
  if ((${#TARGET_NAMES[@]} == 0)); then
    for argument in "${DEFAULT_TARGETS[@]}"; do
      TARGET_NAMES+=("$argument"); TARGET_SPECS+=("${DEFAULT_SPECS[$argument]}")
    done
  fi
}

mount_target() {
  local name=$1 spec=$2 mountpoint=$3 errors=$4
  local kind=${spec%%:*} options=""
  [[ $spec == *:* ]] && options=${spec#*:}
  case $kind in
    cudafs)
      mkdir -p "$mountpoint"
      "$CUDAFS" "$mountpoint" -o "$(with_size "$options")" 2>"$errors" || return 1
      MOUNTED+=("cudafs $mountpoint")
      ;;
    tmpfs)
      mkdir -p "$mountpoint"
      mount -t tmpfs -o "$(with_size "$options")" bench-tmpfs "$mountpoint" 2>"$errors" || return 1
      MOUNTED+=("tmpfs $mountpoint")
      ;;
    dir)
      mkdir "$mountpoint" 2>"$errors" || return 1
      MOUNTED+=("dir $mountpoint")
      ;;
    *)
      echo "unknown kind '$kind' in target $name=$spec" >"$errors"
      return 1
      ;;
  esac
}

unmount_target() {  # unmount_target KIND MOUNTPOINT
  local kind=$1 mountpoint=$2 pid
  case $kind in
    cudafs)
      pid=$(daemon_pid "$mountpoint")
      umount "$mountpoint" 2>/dev/null || umount -l "$mountpoint" || true
      # The daemon releases its memory when it exits; wait so the next
      # target starts from the same state.
      for _ in $(seq 300); do
        [[ -n $pid && -d /proc/$pid ]] || break
        sleep 0.1
      done
      rmdir "$mountpoint" 2>/dev/null || true
      ;;
    tmpfs)
      umount "$mountpoint" 2>/dev/null || umount -l "$mountpoint" || true
      rmdir "$mountpoint" 2>/dev/null || true
      ;;
    dir)
      rm -rf "$mountpoint"
      ;;
  esac
  local remaining=() entry
  for entry in "${MOUNTED[@]}"; do [[ $entry == "$kind $mountpoint" ]] || remaining+=("$entry"); done
  MOUNTED=("${remaining[@]}")
}

cleanup() {
  local entry
  for entry in "${MOUNTED[@]}"; do unmount_target "${entry% *}" "${entry#* }"; done
  [[ -n $WORK_DIR ]] && rm -rf "$WORK_DIR"
  return 0
}

# emit_machine_record KEY=VALUE...: the run record (type=run) with what
# describes the machine, the command line ($COMMAND_LINE) and the binary
# ($CUDAFS), then the caller's own settings.
emit_machine_record() {
  local gpu="" cpu_model
  if command -v nvidia-smi >/dev/null; then
    gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | paste -sd ';' || true)
  fi
  cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
  emit type=run command="$COMMAND_LINE" date="$(date -u '+%Y-%m-%d %H:%M:%S UTC')" \
    host="$(hostname)" kernel="$(uname -r)" cpus:="$(nproc)" cpu_model="$cpu_model" \
    memory_kib:="$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)" gpu="$gpu" \
    fuse_max_pages_limit="$(cat /proc/sys/fs/fuse/max_pages_limit 2>/dev/null || true)" \
    cudafs="$CUDAFS" cudafs_version="$("$CUDAFS" --version 2>/dev/null || echo unavailable)" "$@"
}

appends() {  # appends DIR: 1 KiB appends round-robin to 1000 files, appends/s
  "$PYTHON" - "$1" <<'PY'
import os, sys, time
d = sys.argv[1]
# A mount's first write pays for its storage (cudafs: the CUDA context,
# about 0.2 s): paid here, outside the timing.
with open(os.path.join(d, "warm"), "wb") as warm:
    warm.write(b"x" * 4096)
    os.fsync(warm.fileno())
fds = [os.open(os.path.join(d, "a%d" % i), os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
       for i in range(1000)]
chunk = b"x" * 1024
start = time.perf_counter()
for _ in range(20):
    for fd in fds:
        os.write(fd, chunk)
elapsed = time.perf_counter() - start
for fd in fds:
    os.close(fd)
print("%.0f" % (20 * len(fds) / elapsed))
PY
}
