#!/usr/bin/env bash
# Builds DyNet from its public source (github.com/clab/dynet) outside the repository, then the
# DyNet peer of tree2seq greedy decoding (bench/peers/dynet_tree2seq.cpp) against it: issue 32,
# item 5(d). CPU (Eigen) backend with Debian's libeigen3-dev (3.4; DyNet's README asks for an
# Eigen snapshot, eigen-b2e267dc99d4, that Debian does not ship: set EIGEN3_INCLUDE_DIR to use
# another), no Boost, no Python, compile jobs niced (JOBS, default 2).
# Usage: build_dynet.sh DYNET_SOURCE BUILD_DIR
#   DYNET_SOURCE: a checkout of clab/dynet (its CMakeLists.txt, cmake/, config.h.cmake, dynet/
#   and third_party/ suffice). Leaves BUILD_DIR/dynet_tree2seq.
set -euo pipefail
src=$(realpath "$1")
mkdir -p "$2"
build=$(realpath "$2")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
eigen=${EIGEN3_INCLUDE_DIR:-/usr/include/eigen3}

cmake -S "$src" -B "$build/dynet" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DEIGEN3_INCLUDE_DIR="$eigen" -DENABLE_BOOST=OFF -DENABLE_CPP_EXAMPLES=OFF
nice cmake --build "$build/dynet" --target dynet -j "${JOBS:-2}"
nice g++ -O2 -std=c++17 -I"$src" -I"$build/dynet" -I"$eigen" "$here/dynet_tree2seq.cpp" \
  -L"$build/dynet/dynet" -ldynet -Wl,-rpath,"$build/dynet/dynet" -o "$build/dynet_tree2seq"
echo "build_dynet: $build/dynet_tree2seq"
