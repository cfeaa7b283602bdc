#!/bin/bash
# What one unlink costs a cudafs daemon: mounts BINARY with OPTIONS, makes
# N files of 4 KiB, then unlinks them one by one from Python while perf
# watches the daemon: `perf stat` (CPU time, context switches, page
# faults) by default, or `perf record` with RECORD_ARGS, whose report
# (children included with a call graph) goes to REPORT, followed, when
# CALLEES names functions, by the µs per unlink under each and its direct
# callees (bench/perf_callees.py; a call graph needed). Prints the wall
# time per unlink. Run as root; PERF names the perf binary (default:
# perf). PHASE=create watches the creates instead (each file opened,
# written and closed). A build with frame pointers (CMAKE_CXX_FLAGS=
# "-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer") takes
# "--call-graph fp", which perturbs the daemon far less than dwarf. Examples:
#   bench/unlink_profile.sh build/cudafs backend=host,size=4g,survive=on 20000
#   bench/unlink_profile.sh build/cudafs backend=host,size=4g 20000 /tmp/host.txt "-F 20000"
#   CALLEES="JournalScope::Commit InodeTable::Forget" bench/unlink_profile.sh build/cudafs \
#     backend=host,size=4g,survive=on 20000 /tmp/survive.txt "--call-graph dwarf,16384 -F 5000"
#   PHASE=create CALLEES="JournalScope::Commit Release>::Serve" bench/unlink_profile.sh \
#     build-fp/cudafs backend=host,size=4g,survive=on 40000 /tmp/create.txt "--call-graph fp -F 10000"
set -euo pipefail
binary=$1 options=$2 n=$3 report=${4:-} record=${5:-}
perf=${PERF:-perf}
mountpoint=$(mktemp -d /tmp/unlink-profile-XXXX)
"$binary" "$mountpoint" -o "$options"
trap 'umount "$mountpoint"; rmdir "$mountpoint"' EXIT
pid=$(pgrep -n -x cudafs)
mkdir "$mountpoint/small"
create_all='import os, sys, time
directory, n = sys.argv[1], int(sys.argv[2])
began = time.monotonic()
for i in range(n):
    with open(os.path.join(directory, "f%d" % i), "wb") as f:
        f.write(b"x" * 4096)
print("wall %.2f us per create" % ((time.monotonic() - began) / n * 1e6))'
unlink_all='import os, sys, time
directory, n = sys.argv[1], int(sys.argv[2])
began = time.monotonic()
for i in range(n):
    os.unlink(os.path.join(directory, "f%d" % i))
print("wall %.2f us per unlink" % ((time.monotonic() - began) / n * 1e6))'
watched=$unlink_all
if [ "${PHASE:-unlink}" = create ]; then
  watched=$create_all
else
  python3 -c "$create_all" "$mountpoint/small" "$n" > /dev/null
fi
if [ -n "$report" ]; then
  data=$(mktemp /tmp/unlink-profile-XXXX.data)
  # shellcheck disable=SC2086  # the record arguments, one per word
  $perf record $record -o "$data" -p "$pid" -- python3 -c "$watched" "$mountpoint/small" "$n"
  children=; [[ "$record" == *call-graph* || "$record" == *-g* ]] && children=--children
  $perf report -i "$data" --stdio --sort sym $children > "$report" 2>/dev/null
  if [ -n "${CALLEES:-}" ]; then
    # shellcheck disable=SC2086  # one argument per function name
    $perf script -i "$data" -F period,ip,sym 2>/dev/null |
      "$(dirname "$0")/perf_callees.py" "$n" $CALLEES >> "$report"
  fi
  rm -f "$data"
else
  $perf stat -e task-clock,context-switches,cpu-migrations,page-faults -p "$pid" -- \
    python3 -c "$watched" "$mountpoint/small" "$n"
fi
