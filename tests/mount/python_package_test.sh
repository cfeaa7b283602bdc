#!/usr/bin/env bash
# The Python package as a user installs it: pip, with no package index,
# into fresh virtual environments (a wheel with build isolation, an
# editable install, `pip install -e`, without); then, from outside the
# tree, `import cudafs` (which must load the library pip built into the
# package; the editable one the checkout's module), `python -m cudafs
# --help`, the examples in docs/examples compiled, their --help and what
# they say without PyTorch, or with one too old, and mount_share_test's
# Python cases (host memory) run by the editable install.
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
venv/bin/pip install --quiet --no-index --no-build-isolation -e "$source_dir/fs/client/python"
echo "python_package_test: two venvs made and installed in $((SECONDS - started)) s"

# The package's version is the project's (CMakeLists.txt), in its
# metadata and as cudafs.__version__; the editable install runs the
# checkout's module.
version=$(sed -n 's/^project(cudafs VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
for python in isolated/bin/python venv/bin/python; do
  checkout=
  [[ $python == venv/* ]] && checkout=$source_dir/fs/client/python
  "$python" - "$version" "$checkout" <<'EOF'
import importlib.metadata, os, sys, cudafs
assert cudafs.__version__ == importlib.metadata.version("cudafs") == sys.argv[1], (
    cudafs.__version__, importlib.metadata.version("cudafs"), sys.argv[1])
here = os.path.dirname(cudafs.__file__)
assert here.startswith(sys.prefix + os.sep), "not the installed module: " + here
assert cudafs._lib()._name == os.path.join(here, "libcudafs_client.so"), cudafs._lib()._name
code = cudafs.map.__code__.co_filename
if sys.argv[2]:
    assert code == os.path.join(sys.argv[2], "cudafs", "__init__.py"), code
else:
    assert code == cudafs.__file__, code
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
# Without PyTorch (the venv has none) each example's --help works, and a
# run says what it needs instead of a traceback; so does one with a
# PyTorch older than load_safetensors.py's 2.1.
for example in "$source_dir"/docs/examples/*.py; do
  venv/bin/python "$example" --help >/dev/null
done
expect_refusal() {
  local said
  if said=$(venv/bin/python "$1" --mount "$work" 2>&1); then
    echo "python_package_test: $1 ran: $said"
    exit 1
  fi
  [[ $said == *"needs PyTorch"* && $said != *Traceback* ]] ||
    { echo "python_package_test: $1 said: $said"; exit 1; }
  echo "python_package_test: $(basename "$1"): $said"
}
expect_refusal "$source_dir/docs/examples/load_safetensors.py"
expect_refusal "$source_dir/docs/examples/train_from_shards.py"
mkdir -p old-torch/torch
echo '__version__ = "1.13.1"' >old-torch/torch/__init__.py
PYTHONPATH=$work/old-torch expect_refusal "$source_dir/docs/examples/load_safetensors.py"

# The daemon is this build's; the Python side, the package's.
CUDAFS_TEST_PYTHON=$work/venv/bin/python "$share_test" \
  --gtest_filter='*/ShareTest.Python*/host' | tee share_test.log
if grep -q '^\[  SKIPPED \]' share_test.log; then
  echo "python_package_test: the share tests skipped (see above)"
  exit 77
fi
