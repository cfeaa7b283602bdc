#!/usr/bin/env bash
# The Python package as a user installs it: pip, with no package index,
# into fresh virtual environments (with and without build isolation); then,
# from outside the tree, `import cudafs` (which must load the library pip
# built into the package), `python -m cudafs --help`, the examples in
# docs/examples compiled, and mount_share_test's Python cases (host memory)
# run by the installed package instead of this tree's module.
#   python_package_test.sh SOURCE_DIR MOUNT_SHARE_TEST
# Exit status 77 (a skip, for ctest) when the share tests could not mount.
set -euo pipefail
source_dir=${1:?usage: python_package_test.sh SOURCE_DIR MOUNT_SHARE_TEST}
share_test=${2:?usage: python_package_test.sh SOURCE_DIR MOUNT_SHARE_TEST}
work=$(mktemp -d /tmp/cudafs-python-package.XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
unset PYTHONPATH
# Another library named here must not be the one loaded.
export CUDAFS_CLIENT_LIBRARY=$work/missing/libcudafs_client.so
export PIP_DISABLE_PIP_VERSION_CHECK=1

started=$SECONDS
python3 -m venv isolated
isolated/bin/pip install --quiet --no-index "$source_dir/fs/client/python"
python3 -m venv venv
venv/bin/pip install --quiet --no-index --no-build-isolation "$source_dir/fs/client/python"
echo "python_package_test: two venvs made and installed in $((SECONDS - started)) s"

# The package's version is the project's (CMakeLists.txt), in its
# metadata and as cudafs.__version__.
version=$(sed -n 's/^project(cudafs VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
for python in isolated/bin/python venv/bin/python; do
  "$python" - "$version" <<'EOF'
import importlib.metadata, os, sys, cudafs
assert cudafs.__version__ == importlib.metadata.version("cudafs") == sys.argv[1], (
    cudafs.__version__, importlib.metadata.version("cudafs"), sys.argv[1])
here = os.path.dirname(cudafs.__file__)
assert here.startswith(sys.prefix + os.sep), "not the installed module: " + here
assert cudafs._lib()._name == os.path.join(here, "libcudafs_client.so"), cudafs._lib()._name
assert os.path.exists(os.path.join(here, "py.typed"))
assert set(cudafs.__all__) <= set(dir(cudafs))
EOF
  "$python" -m cudafs --help >/dev/null
done
# Without any library: the module imports, and map says what is missing
# (unless the system has one, as where the .deb is installed).
PYTHONPATH=$source_dir/fs/client/python python3 - <<'EOF'
import ctypes, errno, cudafs
try:
    ctypes.CDLL("libcudafs_client.so")
    print("python_package_test: the system has a libcudafs_client.so; map without one not tried")
except OSError:
    try:
        cudafs.map("/nonexistent")
        raise AssertionError("map worked without the library")
    except OSError as error:
        assert error.errno == errno.ELIBACC, error
        assert "CUDAFS_CLIENT_LIBRARY" in str(error), error
EOF
sh -n "$source_dir"/docs/examples/*.sh
venv/bin/python - "$source_dir"/docs/examples/*.py <<'EOF'
import sys
for path in sys.argv[1:]:
    with open(path) as f:
        compile(f.read(), path, "exec")
print("python_package_test: %d examples compile" % len(sys.argv[1:]))
EOF

# The daemon is this build's; the Python side, the package's.
CUDAFS_TEST_PYTHON=$work/venv/bin/python "$share_test" \
  --gtest_filter='*/ShareTest.Python*/host' | tee share_test.log
if grep -q '^\[  SKIPPED \]' share_test.log; then
  echo "python_package_test: the share tests skipped (see above)"
  exit 77
fi
