#!/usr/bin/env bash
# A cudafs mount served over NFS: mounts cudafs (host backend) as root,
# exports it with NFS-Ganesha's VFS FSAL over NFSv4 on loopback, with the
# ganesha.conf README.md gives (taken from it, so that the two cannot
# differ; only a port, an address and a recovery folder of the test's own
# added, and Attr_Expiration_Time = 0), and runs nfs_export_client against
# it as a client of uid 1000: files of several sizes and a directory tree
# written and read through NFS and on the mount, again after drop_caches
# (the server then reopens files by handle), and a removed file's handle,
# which must be stale. Twice: with the README's Root_Squash, then with
# No_Root_Squash (a second start of Ganesha, served at once: Graceless).
#   tests/mount/nfs_export_test.sh CUDAFS_BINARY NFS_EXPORT_CLIENT
# CUDAFS_TEST_BINARY replaces the binary, CUDAFS_TEST_MOUNT_OPTIONS adds
# mount options (as for the other mount tests). Exit 77 (ctest: skipped)
# where Ganesha cannot run at all (not root, no /dev/fuse, Ganesha, its VFS
# FSAL or libnfs missing); CUDAFS_TEST_REQUIRE_NFS=1 makes that a failure
# (./build.sh test installs all of them). Ganesha is stopped and the mount
# unmounted on every exit.
set -euo pipefail
binary=${CUDAFS_TEST_BINARY:-${1:?usage: nfs_export_test.sh CUDAFS_BINARY NFS_EXPORT_CLIENT}}
client=${2:-}
readme=$(cd "$(dirname "$0")/../.." && pwd)/README.md

skip() {
  if [[ ${CUDAFS_TEST_REQUIRE_NFS:-0} == 1 ]]; then
    echo "nfs_export_test: FAILED: $1 (CUDAFS_TEST_REQUIRE_NFS=1)"
    exit 1
  fi
  echo "nfs_export_test: SKIPPED: $1"
  exit 77
}
[[ $(id -u) == 0 ]] || skip "needs root (Ganesha opens files by handle, the test drops caches)"
[[ -c /dev/fuse ]] || skip "no /dev/fuse"
command -v ganesha.nfsd >/dev/null || skip "no ganesha.nfsd (Debian: nfs-ganesha)"
compgen -G '/usr/lib/*/ganesha/libfsalvfs.so' >/dev/null ||
  compgen -G '/usr/lib*/ganesha/libfsalvfs.so' >/dev/null ||
  skip "no VFS FSAL for Ganesha (Debian: nfs-ganesha-vfs)"
[[ -n $client && -x $client ]] || skip "nfs_export_client was not built (needs libnfs-dev)"

work=$(mktemp -d /tmp/cudafs-nfs-XXXXXX)
mountpoint=$work/mnt
ganesha_pid=
status=1
cleanup() {
  if [[ -n $ganesha_pid ]] && kill -0 "$ganesha_pid" 2>/dev/null; then
    kill -TERM "$ganesha_pid"
    for _ in $(seq 100); do kill -0 "$ganesha_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$ganesha_pid" 2>/dev/null || true
    wait "$ganesha_pid" 2>/dev/null || true
  fi
  if grep -qs " $mountpoint " /proc/mounts; then
    fusermount3 -u "$mountpoint" 2>/dev/null || umount -l "$mountpoint" || true
  fi
  if ((status != 0)) && [[ -f $work/ganesha.log ]]; then
    echo "nfs_export_test: Ganesha's warnings and errors:"
    grep -E " :(WARN|MAJ|CRIT|FATAL) :" "$work/ganesha.log" | tail -n 30 || true
  fi
  rm -rf --one-file-system "$work"
}
trap 'status=$?; cleanup; exit $status' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

mkdir "$mountpoint"
options=size=256m,backend=host${CUDAFS_TEST_MOUNT_OPTIONS:+,$CUDAFS_TEST_MOUNT_OPTIONS}
"$binary" "$mountpoint" -o "$options"
grep -qs " $mountpoint fuse.cudafs " /proc/mounts || { echo "cudafs did not mount"; exit 1; }

# A port nothing listens on (bash's /dev/tcp connects where one does).
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for _ in $(seq 20); do
  port=$((20000 + RANDOM % 20000))
  port_in_use "$port" || break
done

# README's block: the first fenced block after "**NFS-Ganesha**".
readme_conf=$(awk '/^\*\*NFS-Ganesha\*\*/ { found = 1 }
  found && /^```/ { if (inside) exit; inside = 1; next }
  inside { print }' "$readme")
for anchor in '^NFS_CORE_PARAM \{' '^NFSV4 \{' '^EXPORT \{' 'Path = /mnt/gpu;' \
  'Squash = Root_Squash;'; do
  grep -qE "$anchor" <<<"$readme_conf" ||
    { echo "README.md's ganesha.conf has no line matching '$anchor': adapt the test"; exit 1; }
done

# Ganesha with the README's config, Squash as asked, on a port of its own.
start_ganesha() {
  local squash=$1
  sed -e "s|^NFS_CORE_PARAM {|&\n  NFS_Port = $port;\n  Bind_addr = 127.0.0.1;|" \
    -e "s|^NFSV4 {|&\n  RecoveryRoot = \"$work/recovery\";|" \
    -e "s|Path = /mnt/gpu;|Path = \"$mountpoint\";|" \
    -e "s|Squash = Root_Squash;|Squash = $squash;|" \
    -e "s|^EXPORT {|&\n  Attr_Expiration_Time = 0;  # a removed file's handle: stale at once|" \
    <<<"$readme_conf" >"$work/ganesha.conf"
  ganesha.nfsd -F -f "$work/ganesha.conf" -L "$work/ganesha.log" -p "$work/ganesha.pid" \
    -N NIV_EVENT &
  ganesha_pid=$!
  for _ in $(seq 200); do
    kill -0 "$ganesha_pid" 2>/dev/null || { echo "Ganesha exited at start"; exit 1; }
    port_in_use "$port" && return
    sleep 0.1
  done
  echo "Ganesha does not listen on port $port after 20 s"
  exit 1
}
stop_ganesha() {
  kill -TERM "$ganesha_pid"
  wait "$ganesha_pid" || true
  ganesha_pid=
}

started=$SECONDS
# Every check with the README's Root_Squash; with No_Root_Squash the small
# files (the rest checks cudafs alone, whoever the client is).
for squash in Root_Squash No_Root_Squash; do
  echo "nfs_export_test: Squash = $squash, a client of uid 1000"
  start_ganesha "$squash"
  "$client" 127.0.0.1 "$port" /gpu "$mountpoint" 1000 1000 \
    $([[ $squash == No_Root_Squash ]] && echo --files-only)
  kill -0 "$ganesha_pid" || { echo "Ganesha died during the test"; exit 1; }
  stop_ganesha
  find "$mountpoint" -mindepth 1 -delete
done
echo "nfs_export_test: passed ($((SECONDS - started)) s of NFS checks)"
