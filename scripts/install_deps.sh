#!/usr/bin/env bash
# Installs the Debian 12 packages Weft needs to build, test and benchmark (DESIGN.md §2).
# Idempotent: asks dpkg-query which are missing and installs only those, so a machine that
# already has everything is not touched (no apt-get update, no sudo prompt).
set -euo pipefail

packages=(
  build-essential g++ cmake ninja-build pkg-config git
  libopenblas-dev libdnnl-dev libeigen3-dev libfmt-dev
  ocl-icd-opencl-dev  # oneDNN's CMake package requires OpenCL; only Recommended by libdnnl-dev
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  clang-format python3 python3-numpy
  ccache  # CI (.ci/run): its phases share the object files whose flags agree
  clang-14 libclang-rt-14-dev libomp-14-dev  # the fuzz targets (fuzz/, scripts/fuzz.sh): clang, libFuzzer
  libcpp-httplib-dev  # weft serve (HTTP/1.1); wrk, for its benchmark, is installed by hand
  libblis-dev  # only for the GEMM comparison benchmark
  librdkit-dev libboost-dev  # optional: SMILES parsing (weft/io/molecule_graph.h, WEFT_WITH_RDKIT)
  libopenmpi-dev openmpi-bin  # distributed training (weft/dist, WEFT_WITH_MPI; mpirun)
  # The Python module (python/, WEFT_BUILD_PYTHON) and its pytest suite, for /usr/bin/python3.
  pybind11-dev python3-dev python3-pytest python3-venv python3-setuptools python3-wheel
  python3-hypothesis  # the property-based tests of the Python surface (python/tests/test_properties.py)
)
# PyTorch only serves the DLPack interop test (python/tests/test_tensor.py), which skips without
# it; it is large (216 packages, 751 MB, 4.5 minutes here), so WEFT_NO_TORCH=1 leaves it out.
if [[ "${WEFT_NO_TORCH:-}" != "1" ]]; then packages+=(python3-torch); fi

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  if [[ "$status" != "installed" ]]; then missing+=("$package"); fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install_deps: all ${#packages[@]} Debian packages already installed; nothing to do"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "install_deps: missing ${missing[*]}; run as root or install sudo" >&2
  exit 1
fi

echo "install_deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
echo "install_deps: installed ${missing[*]}"
