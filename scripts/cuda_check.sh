#!/usr/bin/env bash
# The checks the CUDA backend still needs on a machine with a GPU: build with
# WEFT_WITH_CUDA=ON and warnings as errors in build/cuda, print `weft info`, run the CUDA-vs-CPU
# tests (ctest label gpu) and the whole CPU suite of that build, then the CUDA tests under
# compute-sanitizer (memcheck, racecheck, synccheck) when it is installed. Exits non-zero on
# the first failure. CUDA_ARCHS (default 90) picks the architectures, to keep nvcc quick.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cmake -S . -B build/cuda -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_WITH_CUDA=ON \
  -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" \
  -DWEFT_WERROR=ON -DWEFT_BUILD_BENCHMARKS=OFF
cmake --build build/cuda --target weft_cli weft_tests weft_cuda_tests
build/cuda/tools/weft/weft info
ctest --test-dir build/cuda -L gpu --output-on-failure
cuda_output=$(build/cuda/tests/weft_cuda_tests)
if [[ "$cuda_output" == *"SKIPPED"* ]]; then
  echo "cuda_check: CUDA tests skipped: no usable device here" >&2
  exit 1
fi
ctest --test-dir build/cuda -LE 'gpu|consumer' --output-on-failure -j4

sanitizer=$(command -v compute-sanitizer || echo "$(dirname "$nvcc")/compute-sanitizer")
if [[ -x "$sanitizer" ]]; then
  for tool in memcheck racecheck synccheck; do
    "$sanitizer" --tool "$tool" --error-exitcode 1 build/cuda/tests/weft_cuda_tests \
      --gtest_filter='CudaOps.*:CudaBackend.*'
  done
else
  echo "cuda_check: compute-sanitizer not found; skipped" >&2
fi
echo "cuda_check: all CUDA checks passed"
