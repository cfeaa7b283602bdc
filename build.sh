#!/usr/bin/env bash
# One entry point for a fresh Debian/Ubuntu clone:
#   ./build.sh mount MOUNTPOINT [cudafs options...]   install deps, build cudafs alone, mount
#   ./build.sh test                                   install deps, build, run every test
#                                                     (over /dev/fuse, then over io_uring)
#   ./build.sh build                                  install deps, build
#   ./build.sh fallback                               the tests against the system's libfuse
#                                                     (e.g. Debian 12's 3.14), in build-fallback
#   ./build.sh sanitize                               the tests again under ASan+UBSan
#   ./build.sh long                                   the model test for 1M operations
#   ./build.sh tsan                                   unit, core and mount tests under TSan
#   ./build.sh clang                                  build with Clang: the lock annotations
#                                                     are checked (-Werror=thread-safety)
#   ./build.sh no-toolkit                             build cudafs with the CUDA toolkit hidden
#                                                     (build-notoolkit): it still drives GPUs
#   ./build.sh package                                the Debian package, built alone
#                                                     (no tests): build-package/cudafs_VERSION_ARCH.deb
#   ./build.sh package-test                           lintian, then the package installed,
#                                                     mounted from fstab, removed and purged
#                                                     in a fresh Debian root
# Installing packages needs root (or sudo). The build goes to ./build.
set -euo pipefail
cd "$(dirname "$0")"

# python3-venv: tests/mount/python_package_test.sh pip-installs the Python
# package into fresh virtual environments (it seeds pip into them).
packages=(build-essential cmake pkg-config libfuse3-dev fuse3 libabsl-dev libgtest-dev
          libbenchmark-dev nlohmann-json3-dev git tar ccache python3 python3-venv groff-base
          systemd)
# For `./build.sh test` only (not for mounting): tests/mount/nfs_export_test.sh
# serves a mount over NFS with NFS-Ganesha's VFS FSAL and checks it with a
# libnfs client; there the test may not skip (CUDAFS_TEST_REQUIRE_NFS=1).
# Debian's nfs-ganesha package enables its own service (no exports in its
# default configuration); the test runs a Ganesha of its own.
nfs_test_packages=(nfs-ganesha nfs-ganesha-vfs libnfs-dev)
# To build libfuse >= 3.18 from Debian's source package when the system's is
# older (Debian 12 has 3.14). libfuse leaves out FUSE over io_uring, without
# a word, when liburing or libnuma is missing.
libfuse_build_packages=(dpkg-dev meson ninja-build liburing-dev libnuma-dev)
libfuse_prefix=$PWD/build/libfuse
# Our patches to that build, each saying why (upstreamable, for what
# libfuse lacks); a build made with another set is made again.
libfuse_patches=(fs/daemon/libfuse/*.patch)
libfuse_patches_hash() { cat "${libfuse_patches[@]}" | sha256sum | cut -d' ' -f1; }

# Every build (the variants below, abseil for ThreadSanitizer, libfuse, which
# meson hands to ccache by itself) compiles through ccache: a file compiled
# before, by any clone on this machine (paths are taken relative to the
# checkout), is not compiled again. The cache is ccache's own (~/.cache/ccache).
export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=true
compiler_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "build.sh: installing ${missing[*]}"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
}

install_dependencies() {
  install_packages "${packages[@]}"
  obtain_libfuse
}

# The Debian mirror this machine's apt already uses (deb822 or one-line
# sources), so nothing here names a mirror of its own.
debian_mirror() {
  {
    grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources || true
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list || true
  } | awk '{print $2}' | grep -v security | grep -m1 '/debian/\?$'
}

# fetch_debian_source PACKAGE DIR MIRROR: apt-get source PACKAGE from
# Debian unstable into DIR, with an apt state directory of its own (the
# machine's apt configuration is never touched).
fetch_debian_source() {
  local package=$1 work=$2 mirror=$3
  rm -rf "$work" && mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
  printf 'Types: deb-src\nURIs: %s\nSuites: unstable\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" >"$work/$package.sources"
  local apt_options=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts=/dev/null
                     -o Dir::Etc::sourcelist="$work/$package.sources" -o Dir::State::Lists="$work/lists"
                     -o Dir::Cache="$work/cache" -o APT::Sandbox::User=root)
  apt-get "${apt_options[@]}" -qq update &&
    (cd "$work" && apt-get "${apt_options[@]}" -qq source "$package" >/dev/null)
}

# Builds libfuse >= 3.18 from Debian's source package (unstable carries it)
# into build/libfuse, unless the system has one. Apt runs with a state
# directory of its own: the machine's apt configuration is never touched,
# and the system libfuse is never replaced (this one is libfuse3.so.4, found
# through the binary's rpath). Without a Debian mirror, or when the build
# fails, cudafs builds against the system libfuse and CMake says so.
#
# No fusermount3 of this build is kept: libfuse would run it (from its
# bindir) before the system's, and it would have to be setuid root. Users
# mount through the system's fusermount3; root's auto_unmount is cudafs's
# own (fs/daemon/abandoned_mount_watcher.h).
obtain_libfuse() {
  if pkg-config --atleast-version=3.18 fuse3; then return; fi
  if [ -f "$libfuse_prefix/lib/pkgconfig/fuse3.pc" ] &&
     [ "$(cat "$libfuse_prefix/patches.sha256" 2>/dev/null)" = "$(libfuse_patches_hash)" ]; then
    return
  fi
  local mirror
  if ! mirror=$(debian_mirror); then
    echo "build.sh: no Debian mirror in the apt sources; using the system libfuse $(pkg-config --modversion fuse3)"
    return
  fi
  install_packages "${libfuse_build_packages[@]}"
  local work=$PWD/build/libfuse-source
  if ! fetch_debian_source fuse3 "$work" "$mirror"; then
    echo "build.sh: could not fetch Debian's libfuse source; using the system libfuse"
    return
  fi
  local source
  source=$(find "$work" -maxdepth 1 -type d -name 'fuse3-*' | head -1)
  if [ -z "$source" ] || ! dpkg --compare-versions "${source##*/fuse3-}" ge 3.18; then
    echo "build.sh: Debian's libfuse source is older than 3.18; using the system libfuse"
    return
  fi
  local patch
  for patch in "${libfuse_patches[@]}"; do
    if ! patch -p1 -s -d "$source" <"$patch"; then
      echo "build.sh: $patch does not apply to libfuse ${source##*/fuse3-}; using the system libfuse"
      return
    fi
  done
  # `meson install` runs no install scripts when given --tags: libfuse's
  # would write /etc/fuse.conf, udev rules and an init script.
  if ! (meson setup "$work/build" "$source" --prefix="$libfuse_prefix" --libdir=lib \
          --sysconfdir=/etc --buildtype=release -Dexamples=false -Dutils=true -Dtests=false \
          -Ddisable-mtab=true >"$work/meson.log" &&
        ninja -C "$work/build" >"$work/ninja.log" &&
        meson install -C "$work/build" --tags runtime,devel >>"$work/ninja.log"); then
    echo "build.sh: building libfuse ${source##*/fuse3-} failed (see $work); using the system libfuse"
    rm -rf "$libfuse_prefix"
    return
  fi
  # mount.fuse3 and fusermount3: mount(8) and libfuse run the system's.
  rm -rf "$libfuse_prefix/sbin" "$libfuse_prefix/bin/fusermount3"
  libfuse_patches_hash >"$libfuse_prefix/patches.sha256"
  grep -q '^#define HAVE_URING' "$work/build/fuse_config.h" ||
    echo "build.sh: warning: libfuse ${source##*/fuse3-} was built without FUSE over io_uring"
}

# build [TARGET...]: configures ./build and builds the CMake targets named
# (mounting needs only `cudafs`, not the tests and benchmarks), or all.
build() {
  install_dependencies
  cmake -S . -B build -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-Release}" \
    -DCUDAFS_LIBFUSE_PREFIX="$libfuse_prefix" "${compiler_launcher[@]}" ${CMAKE_ARGS:-}
  local targets=()
  if (($#)); then targets=(--target "$@"); fi
  cmake --build build -j "$(nproc)" "${targets[@]}"
  # What the binary drives: libfuse's version, the NVIDIA drivers.
  if [[ -x build/cudafs ]]; then echo "build.sh: built $(build/cudafs --version)"; fi
}

# Runs ctest "$@" in the current directory once per FUSE transport: every
# test over /dev/fuse (uring=off), then the mount tests (label "mount": the
# others never see a transport) over io_uring (uring=on) where the kernel
# has FUSE over io_uring. Root may switch the fuse module's enable_uring for the
# second pass; the setting is put back afterwards. The io_uring pass makes a
# mount that fails an error, not a skip, so it cannot pass by mounting
# nothing. Without a GPU the mount tests' cuda instances run on the fake
# libcuda.so.1 (tests/mount/mount.h) in the first pass only: they check the
# CUDA paths, which the transport does not change, and would add minutes to
# each pass (CUDAFS_TEST_FAKE_GPUS=0 skips them; a real GPU runs them in
# both).
uring_parameter=/sys/module/fuse/parameters/enable_uring
ctest_on_each_transport() {
  echo "build.sh: tests over /dev/fuse (uring=off)"
  CUDAFS_TEST_MOUNT_OPTIONS=uring=off ctest "$@"
  # The build CI times: which tests over 20 s lack the label "slow".
  if [[ ${list_slow_tests:-} == 1 ]]; then python3 ../tests/slow_test_check.py .; fi
  if [[ ! -e $uring_parameter ]]; then
    echo "build.sh: no io_uring pass: this kernel has no FUSE over io_uring ($uring_parameter)"
    return 0
  fi
  local saved status=0
  saved=$(cat "$uring_parameter")
  if [[ $saved != Y ]] && ! as_root sh -c "echo Y > $uring_parameter" 2>/dev/null; then
    echo "build.sh: no io_uring pass: $uring_parameter is $saved and cannot be set to Y here"
    return 0
  fi
  echo "build.sh: tests over io_uring (uring=on)"
  CUDAFS_TEST_MOUNT_OPTIONS=uring=on CUDAFS_TEST_REQUIRE_MOUNT=1 CUDAFS_TEST_FAKE_GPUS=0 \
    ctest -L mount "$@" || status=$?
  if [[ $saved != Y ]]; then as_root sh -c "echo $saved > $uring_parameter"; fi
  return "$status"
}

# mount_tests_with DAEMON [ctest arguments...]: ./build's end-to-end tests
# (ctest label "mount"), which start the cudafs binary CUDAFS_TEST_BINARY
# names, run against DAEMON (a build of cudafs in another tree). The trees
# below check the daemon (the fallback's libfuse, the sanitizers), and the
# daemon runs in a process of its own: they compile it and their unit tests,
# not the mount tests again (most of what they took to build).
# `cudafs run` preloads ./build's interposer: it is not compiled against
# libfuse, and a sanitized one could not load into an unsanitized program.
mount_tests_with() {
  local daemon
  daemon=$(realpath "$1")
  shift
  (cd build && CUDAFS_TEST_BINARY=$daemon CUDAFS_PRELOAD_LIBRARY=$PWD/libcudafs_preload.so \
    ctest -L mount "$@")
}

# The suite against the system's libfuse, ignoring build/libfuse: the
# fallback that cudafs promises where libfuse 3.18 cannot be built (Debian
# 12: 3.14; file data through the kernel's page cache, set-id bits cleared
# by the kernel without FUSE_HANDLE_KILLPRIV_V2). The daemon, and the unit
# tests of what is compiled against libfuse (ctest label "libfuse": the
# FUSE layer and the daemon's own), the only ones built; the rest is the
# same code as `test` runs. Over /dev/fuse only: libfuse < 3.18 has no
# FUSE over io_uring. Not the cuda instances on fake GPUs: `test` runs
# them. Built with no CUDA toolkit in sight, as `no-toolkit` builds (a
# Debian 12 machine without one is the common case), which then checks it.
fallback() {
  build
  local libfuse_tests
  libfuse_tests=$(for test in tests/fs/fuse/*_test.cc tests/fs/daemon/*_test.cc; do
    basename "$test" .cc
  done)
  # shellcheck disable=SC2086 # one target per word
  as_root env CUDAFS_LIBFUSE_PREFIX= \
    CUDAFS_CMAKE_ARGS="-DCUDAFS_BUILD_MOUNT_TESTS=OFF ${CMAKE_ARGS:-}" \
    tests/build/build_without_toolkit.sh build-fallback cudafs $libfuse_tests
  (cd build-fallback && ctest -L libfuse --output-on-failure -j "$(nproc)")
  CUDAFS_TEST_MOUNT_OPTIONS=uring=off CUDAFS_TEST_FAKE_GPUS=0 \
    mount_tests_with build-fallback/cudafs --output-on-failure -j "$(nproc)"
}

# The sanitizer builds: optimized as the sanitizers advise (-O1), with line
# tables only (-g1), enough for their reports' stack traces; full debug
# information doubled the compile time of the large test files.
sanitizer_build_type=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
# The unit tests the sanitizer builds leave out: the write-back cache's twin
# of each test run with and without it (the room keeper's, the moves' and
# compaction's, half of what the unit tests took under ThreadSanitizer).
# Their code runs under the sanitizers all the same, in the twin without
# the cache, the cache's own tests and the fault tests; `test` runs both.
sanitizer_twins=/WithWriteBackCache

# The unit tests and the daemon built with AddressSanitizer (leaks too) and
# UndefinedBehaviorSanitizer, the daemon driven by ./build's mount tests;
# any report fails the test that caused it (a daemon that reports stops,
# and its mount with it). The randomized tests run a quarter of their
# operations (ASan runs the code 2-3x slower; `test` runs them all). Over
# /dev/fuse: our code is the same on both transports, and `test` runs the
# io_uring pass. (ThreadSanitizer needs an abseil built with it: Debian's
# is not, so it would not see absl::Mutex and would report every guarded
# access.)
sanitize() {
  build
  cmake -S . -B build-sanitize "${sanitizer_build_type[@]}" -DCUDAFS_BUILD_BENCHMARKS=OFF \
    -DCUDAFS_BUILD_MOUNT_TESTS=OFF -DCUDAFS_LIBFUSE_PREFIX="$libfuse_prefix" "${compiler_launcher[@]}" \
    -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  cmake --build build-sanitize -j "$(nproc)"
  # The mount tests' cuda instances skip here (CUDAFS_TEST_FAKE_GPUS=0):
  # `test` runs them.
  export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    LSAN_OPTIONS=suppressions=$PWD/tests/lsan_suppressions.txt \
    CUDAFS_TEST_SCALE=25 CUDAFS_MODEL_OPS=5000 CUDAFS_LOAD_SECONDS=10
  (cd build-sanitize && ctest --output-on-failure -j "$(nproc)" --timeout 900 -E "$sanitizer_twins")
  CUDAFS_TEST_MOUNT_OPTIONS=uring=off CUDAFS_TEST_FAKE_GPUS=0 \
    mount_tests_with build-sanitize/cudafs --output-on-failure -j "$(nproc)" --timeout 900
}

# The unit tests of code that runs threads (or is run from several) and the
# daemon under ThreadSanitizer, the daemon driven by ./build's mount tests,
# against an abseil built with it from Debian's source package (Debian's
# own abseil is not instrumented, so TSan would not see absl::Mutex). The
# other unit tests run on one thread, where TSan finds nothing: `sanitize`
# and `test` run them (building them here took about a third of the step).
tsan_unit_tests=(commit_pool_test pinned_buffer_pool_test spill_device_test pooled_device_test
  arena_test page_cache_test write_back_flusher_test filesystem_test move_model_test
  compaction_model_test room_keeper_test share_server_test memory_trimmer_test
  request_counters_test uring_buffers_test mount_plan_test filesystem_journal_test)
# Left out under TSan, where they took a quarter of the unit tests' time:
# the room keeper's placement rules at work (which files move, where, how
# much), whose threads are those of the moves and rounds the other room
# keeper tests run, and the page cache's single-threaded randomized tests.
tsan_left_out='RoomKeeperTest\.(Pressure|DataComesBack|AGpuWithLessThanHalf)|PageCacheModelTest|PageCacheTest\.RandomDeviceFailures'
tsan() {
  build
  install_packages ninja-build
  local absl_prefix=$PWD/build/absl-tsan work=$PWD/build/absl-source mirror
  if [ ! -f "$absl_prefix/lib/cmake/absl/abslConfig.cmake" ]; then
    mirror=$(debian_mirror) || { echo "build.sh: no Debian mirror for abseil's source"; exit 1; }
    fetch_debian_source abseil "$work" "$mirror" || { echo "build.sh: no abseil source"; exit 1; }
    local source
    source=$(find "$work" -maxdepth 1 -type d -name 'abseil-*' | head -1)
    cmake -S "$source" -B "$work/build" -G Ninja "${sanitizer_build_type[@]}" \
      -DCMAKE_CXX_STANDARD=20 -DABSL_PROPAGATE_CXX_STD=ON -DBUILD_TESTING=OFF \
      -DCMAKE_CXX_FLAGS=-fsanitize=thread -DCMAKE_INSTALL_PREFIX="$absl_prefix" \
      "${compiler_launcher[@]}" >/dev/null
    ninja -C "$work/build" install >/dev/null
  fi
  cmake -S . -B build-tsan "${sanitizer_build_type[@]}" -DCUDAFS_BUILD_BENCHMARKS=OFF \
    -DCUDAFS_LIBFUSE_PREFIX="$libfuse_prefix" -DCMAKE_PREFIX_PATH="$absl_prefix" \
    -DCUDAFS_BUILD_MOUNT_TESTS=OFF "${compiler_launcher[@]}" \
    -DCMAKE_CXX_FLAGS="-fsanitize=thread -Wno-deprecated-declarations"
  cmake --build build-tsan -j "$(nproc)" --target cudafs "${tsan_unit_tests[@]}"
  # ThreadSanitizer runs the code 5-15x slower, so the long randomized
  # tests run a tenth of their operations. The daemon stops at its first
  # report, which fails the test that mounted it. Over /dev/fuse (our code
  # is the same on both transports); not the cuda instances (the fake
  # libcuda.so.1 links a shared abseil, this daemon a static one of its own).
  # The test executables not built stand in ctest as NAME_NOT_BUILT; the
  # checks of the tree (what is installed, bundled, documented, linked) need
  # what this build leaves out, and `test` runs them.
  export TSAN_OPTIONS=halt_on_error=1 CUDAFS_TEST_SCALE=10 CUDAFS_MODEL_OPS=4000 \
    CUDAFS_LOAD_SECONDS=10
  (cd build-tsan && ctest --output-on-failure -j "$(nproc)" --timeout 900 \
    -E "_NOT_BUILT|install_test|bundle_libs_test|doc_pointers_test|include_edges_test|/cuda|CudaDevice|$sanitizer_twins|$tsan_left_out")
  CUDAFS_TEST_MOUNT_OPTIONS=uring=off CUDAFS_TEST_FAKE_GPUS=0 \
    mount_tests_with build-tsan/cudafs --output-on-failure -j "$(nproc)" --timeout 900 -E '/cuda'
}

# The code that holds lock annotations, built with Clang in build-clang:
# the daemon, the fake CUDA driver, and the unit tests of threaded code
# (tsan_unit_tests, the only tests that hold any, and tests/support). Its
# -Wthread-safety checks the absl::Mutex annotations (every ABSL_GUARDED_BY
# field, every lock a function requires) that GCC reads as comments, and
# CMakeLists.txt makes each finding an error. A new test that holds
# annotations belongs in tsan_unit_tests. Compiled only (no debug
# information): the passes above run the same code.
clang_check() {
  install_dependencies
  install_packages clang
  cmake -S . -B build-clang -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
    -DCMAKE_CXX_COMPILER=clang++ \
    -DCUDAFS_LIBFUSE_PREFIX="$libfuse_prefix" -DCUDAFS_BUILD_BENCHMARKS=OFF \
    -DCUDAFS_BUILD_MOUNT_TESTS=OFF "${compiler_launcher[@]}" ${CMAKE_ARGS:-}
  cmake --build build-clang -j "$(nproc)" --target cudafs fake_libcuda "${tsan_unit_tests[@]}"
}

command=${1:-}
# The Debian package (CPack; CMakeLists.txt says what is in it), built in
# build-package without the tests and benchmarks, which it does not carry:
# build-package/cudafs_VERSION_ARCH.deb.
package() {
  install_packages dpkg-dev file
  install_dependencies
  # Prefix /usr, where the package installs: the Python module's folder
  # follows it (fs/client/CMakeLists.txt).
  cmake -S . -B build-package -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
    -DCUDAFS_BUILD_TESTS=OFF -DCUDAFS_BUILD_BENCHMARKS=OFF \
    -DCUDAFS_LIBFUSE_PREFIX="$libfuse_prefix" "${compiler_launcher[@]}" ${CMAKE_ARGS:-}
  cmake --build build-package -j "$(nproc)"
  (cd build-package && cpack -G DEB)
}

# The package checked by lintian, then in a fresh Debian root,
# debootstrapped from the mirror apt uses (about a minute): installed with
# apt, mounted from the root's /etc/fstab, a file written and read, the
# Python module imported by the system's python3, the mount handed over by
# a reinstall, unmounted, removed with
# the fstab line still there (which the removal must mention), purged;
# then no file of cudafs may be left.
package_test() {
  package
  install_packages debootstrap procps lintian
  local deb mirror
  deb=$(realpath build-package/cudafs_*.deb)
  # Debian's checks: no error or warning but those the package explains
  # (packaging/cudafs.lintian-overrides).
  lintian --fail-on error,warning "$deb"
  echo "package-test: lintian finds nothing to say"
  mirror=$(debian_mirror) || { echo "build.sh: no Debian mirror to debootstrap from"; exit 1; }
  (
  set -euo pipefail
  suite=$(. /etc/os-release; echo "$VERSION_CODENAME")
  root=$(mktemp -d /tmp/cudafs-package-root.XXXXXX)
  chmod 755 "$root"  # apt downloads as _apt
  cleanup() {
    umount -l "$root/mnt/gpu" 2>/dev/null || true
    for m in dev/pts dev proc sys; do umount -l "$root/$m" 2>/dev/null || true; done
    rm -rf --one-file-system "$root"
  }
  trap cleanup EXIT
  started=$SECONDS
  debootstrap --variant=minbase "$suite" "$root" "$mirror" > "$root.debootstrap.log" 2>&1 || { tail -20 "$root.debootstrap.log"; exit 1; }
  echo "package-test: debootstrap $suite in $((SECONDS - started)) s"
  mount --bind /dev "$root/dev"; mount --bind /dev/pts "$root/dev/pts"
  mount -t proc proc "$root/proc"; mount -t sysfs sys "$root/sys"
  in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
  in_root apt-get update -qq
  before=$(cd "$root" && find . -xdev \( -path ./var -o -path ./tmp -o -path ./proc -o -path ./sys -o -path ./dev \) -prune -o -print | sort)
  cp "$deb" "$root/tmp/"
  in_root apt-get install -y -qq "/tmp/$(basename "$deb")" > /dev/null
  in_root cudafs --version
  in_root sh -c 'man -w cudafs 2>/dev/null || test -f /usr/share/man/man8/cudafs.8.gz'
  mkdir -p "$root/mnt/gpu"
  echo "cudafs  /mnt/gpu  fuse.cudafs  size=64m,backend=host,mode=1777,nofail  0  0" >> "$root/etc/fstab"
  in_root mount /mnt/gpu
  in_root sh -c 'echo "from fstab" > /mnt/gpu/f && test "$(cat /mnt/gpu/f)" = "from fstab"'
  in_root cudafs --stats /mnt/gpu
  # cudafs run finds the installed interposer, and a program runs with it.
  in_root cudafs run -o /mnt/gpu -- sh -c 'test "$LD_PRELOAD" = /usr/lib/cudafs/libcudafs_preload.so && test "$CUDAFS_ROOM_MOUNTS" = /mnt/gpu && cat /mnt/gpu/f' >/dev/null
  # The module where the system's python3 looks, with its metadata.
  in_root apt-get install -y -qq --no-install-recommends python3 > /dev/null
  in_root python3 -c 'import cudafs, importlib.metadata as m
assert m.version("cudafs") == cudafs.__version__
print("package-test: python3 imports cudafs", cudafs.__version__, "with its metadata")'
  # An upgrade (here a reinstall) hands root's mounts to the package's new
  # binary (packaging/postinst): the daemon changes, the file stays.
  daemon_of() { in_root python3 -c 'import os; print(os.getxattr("/mnt/gpu", "user.cudafs.daemon").decode())'; }
  local old_daemon new_daemon
  old_daemon=$(daemon_of)
  in_root apt-get install -y -qq --reinstall "/tmp/$(basename "$deb")" > /dev/null
  new_daemon=$(daemon_of)
  if [ "$new_daemon" = "$old_daemon" ]; then
    echo "package-test: the upgrade left /mnt/gpu to daemon $old_daemon"; exit 1
  fi
  in_root sh -c 'test "$(cat /mnt/gpu/f)" = "from fstab"'
  echo "package-test: the upgrade handed /mnt/gpu from daemon $old_daemon to $new_daemon"
  in_root umount /mnt/gpu
  if grep -q " $root/mnt/gpu " /proc/mounts; then echo "package-test: still mounted"; exit 1; fi
  # auto_unmount with no setuid helper: a killed daemon's mount goes.
  in_root cudafs /mnt/gpu -o size=64m,backend=host,auto_unmount
  local daemon
  daemon=$(pgrep -n -x cudafs)
  kill -KILL "$daemon"
  local waited=0
  while grep -q " $root/mnt/gpu " /proc/mounts; do
    if ((waited++ > 100)); then echo "package-test: auto_unmount left the mount"; exit 1; fi
    sleep 0.1
  done
  # A remove leaves the administrator's fstab line, and says what it does
  # (on stdout too: apt runs dpkg, and so postrm, on a terminal of its own).
  said=$(in_root apt-get remove -y -qq cudafs 2>&1)
  if [[ $said != *"/etc/fstab still has lines of type fuse.cudafs"* ]]; then
    echo "package-test: apt remove with an fstab line said: $said"; exit 1
  fi
  grep -q fuse.cudafs "$root/etc/fstab"
  sed -i '/fuse.cudafs/d' "$root/etc/fstab"
  rmdir "$root/mnt/gpu"
  in_root apt-get purge -y -qq cudafs > /dev/null
  after=$(cd "$root" && find . -xdev \( -path ./var -o -path ./tmp -o -path ./proc -o -path ./sys -o -path ./dev \) -prune -o -print | sort)
  # What the install pulled in besides cudafs (fuse3 and libraries) stays;
  # nothing of cudafs's own may.
  left=$(comm -13 <(echo "$before") <(echo "$after") | grep -i cudafs || true)
  if [ -n "$left" ]; then echo "package-test: left behind:"; echo "$left"; exit 1; fi
  echo "package-test: installed, mounted from fstab, unmounted, auto_unmount after SIGKILL," \
       "removed (the fstab line said), purged, nothing left ($((SECONDS - started)) s)"
  )
}

case "$command" in
  build)
    build
    ;;
  mount)
    mountpoint=${2:?usage: ./build.sh mount MOUNTPOINT [cudafs options...]}
    shift 2
    build cudafs
    mkdir -p "$mountpoint"
    as_root ./build/cudafs "$mountpoint" "$@"
    echo "build.sh: cudafs mounted on $mountpoint (unmount: umount $mountpoint)"
    ;;
  test)
    install_packages "${nfs_test_packages[@]}"
    build
    cd build
    CUDAFS_TEST_REQUIRE_NFS=1 list_slow_tests=1 ctest_on_each_transport --output-on-failure \
      -j "$(nproc)"
    ;;
  fallback)
    fallback
    ;;
  sanitize)
    sanitize
    ;;
  tsan)
    tsan
    ;;
  clang)
    clang_check
    ;;
  no-toolkit)
    # cudafs from our own CUDA declarations (alloc/devices/cuda_api.h): the
    # toolkit hidden in a private mount namespace (hence root), the build
    # checked to drive NVIDIA drivers all the same.
    install_dependencies
    as_root env CUDAFS_LIBFUSE_PREFIX="$libfuse_prefix" tests/build/build_without_toolkit.sh \
      build-notoolkit
    ;;
  package)
    package
    ;;
  package-test)
    package_test
    ;;
  long)
    # The randomized model test for a million operations, four threads on
    # separate trees, through the write-back cache (about 2-4 minutes).
    build
    CUDAFS_MODEL_OPS=${CUDAFS_MODEL_OPS:-1000000} CUDAFS_TEST_REQUIRE_MOUNT=1 \
      build/mount_model_test --gtest_filter='*ConcurrentModelsInSeparateTrees/host'
    ;;
  *)
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
