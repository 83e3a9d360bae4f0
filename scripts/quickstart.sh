#!/usr/bin/env bash
# README command (1): install the missing Debian packages, build Weft in Release (without
# tests and benchmarks, for speed) in build/release, and run the main job on its built-in
# default: `weft train calculator` (a Tree-RNN on random arithmetic expressions, about a
# minute). Extra arguments go to it. Safe to run again; later runs only rebuild what changed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install_deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_BENCHMARKS=OFF -DWEFT_BUILD_TOOLS=ON
cmake --build build/release
build/release/tools/weft/weft train calculator "$@"
