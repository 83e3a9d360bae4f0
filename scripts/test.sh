#!/usr/bin/env bash
# README command (2): install the missing Debian packages, build Weft with its tests and
# benchmarks in build/test (RelWithDebInfo; warnings are errors when CI=true) and run the
# test suite with ctest. Exits non-zero when the build or any test fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

werror=OFF
if [[ "${CI:-}" == "true" ]]; then werror=ON; fi

scripts/install_deps.sh
cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DWEFT_BUILD_TESTS=ON -DWEFT_BUILD_BENCHMARKS=ON -DWEFT_BUILD_TOOLS=ON \
  -DWEFT_SANITIZE=OFF -DWEFT_WERROR="$werror"
cmake --build build/test
ctest --test-dir build/test --output-on-failure -j2
