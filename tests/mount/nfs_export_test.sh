#!/usr/bin/env bash
# A cudafs mount served over NFS: mounts cudafs (host backend), exports it
# with NFS-Ganesha's VFS FSAL over NFSv4 on loopback (a config, pid file,
# log and port of its own), and runs nfs_export_client against it: files of
# several sizes and a directory tree written and read through NFS and on
# the mount, again after drop_caches (the server then reopens files by
# handle), and a removed file's handle, which must be stale.
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

cat >"$work/ganesha.conf" <<EOF
NFS_CORE_PARAM {
  Protocols = 4;
  NFS_Port = $port;
  Bind_addr = 127.0.0.1;
  Enable_NLM = false;
  Enable_RQUOTA = false;
  Enable_UDP = false;
}
NFSV4 {
  Graceless = true;
  RecoveryRoot = "$work/recovery";
}
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
  Export_Id = 1;
  Path = "$mountpoint";
  Pseudo = /cudafs;
  Access_Type = RW;
  Squash = No_Root_Squash;
  SecType = sys;
  Protocols = 4;
  Transports = TCP;
  # Every GETATTR asks the filesystem: a handle of a removed file must be
  # found stale, not answered from Ganesha's attribute cache.
  Attr_Expiration_Time = 0;
  FSAL { Name = VFS; }
}
EOF
ganesha.nfsd -F -f "$work/ganesha.conf" -L "$work/ganesha.log" -p "$work/ganesha.pid" \
  -N NIV_EVENT &
ganesha_pid=$!
for _ in $(seq 200); do
  kill -0 "$ganesha_pid" 2>/dev/null || { echo "Ganesha exited at start"; exit 1; }
  port_in_use "$port" && break
  sleep 0.1
done
port_in_use "$port" || { echo "Ganesha does not listen on port $port after 20 s"; exit 1; }

started=$SECONDS
"$client" 127.0.0.1 "$port" /cudafs "$mountpoint"
kill -0 "$ganesha_pid" || { echo "Ganesha died during the test"; exit 1; }
echo "nfs_export_test: passed ($((SECONDS - started)) s of NFS checks)"
