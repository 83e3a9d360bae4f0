#!/usr/bin/env bash
# Builds Weft with the CUDA backend for a GPU machine that has neither this workstation's
# packages nor a network (build/gpu: Release, sm_90, no -march=native), and packs what that
# machine needs into build/gpu-bundle/weft-gpu.tar.xz for scripts/gpu_bench.sh: the weft tool and
# the CUDA tests, stripped; libweft and every shared library they link that is not glibc's or
# the GPU's own (cuBLAS, cudart, the driver come from the device); libstdc++ and libgcc_s apart,
# in lib/fallback, used only where the device's own are too old; the SST data
# (WEFT_BUNDLE_DATA=0 leaves it out); and WEFT_BUNDLE_DECODER, a trained tree2seq checkpoint
# (`weft train tree2seq --best-checkpoint F`, 50 s on one core), as tree2seq.safetensors for the
# served-decoding step. Prints the bundle's size: a device run carries at most
# 64 MiB in all. JOBS (default 2) bounds the build; CUDA_ARCHS (default 90) the GPU targets.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

nvcc=${WEFT_CUDA_COMPILER:-/usr/local/cuda/bin/nvcc}
data=${WEFT_DATA_DIR:-../shared/data}
export CMAKE_CXX_COMPILER_LAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER:-ccache}
export CMAKE_CUDA_COMPILER_LAUNCHER=${CMAKE_CUDA_COMPILER_LAUNCHER:-ccache}
command -v "$CMAKE_CXX_COMPILER_LAUNCHER" >/dev/null ||
  unset CMAKE_CXX_COMPILER_LAUNCHER CMAKE_CUDA_COMPILER_LAUNCHER

# -O2 rather than Release's -O3, as CI's CUDA phase: GCC 12 reports a false -Wrestrict at -O3.
cmake -S . -B build/gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O2 -DNDEBUG" -DWEFT_WITH_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" \
  -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" -DWEFT_NATIVE_ARCH=OFF -DWEFT_WERROR=ON \
  -DWEFT_BUILD_TESTS=ON -DWEFT_BUILD_BENCHMARKS=OFF -DWEFT_BUILD_TOOLS=ON \
  -DWEFT_BUILD_EXAMPLES=OFF -DWEFT_WITH_MPI=OFF -DWEFT_WITH_RDKIT=OFF -DWEFT_BUILD_PYTHON=OFF
cmake --build build/gpu -j "${JOBS:-2}" --target weft_cli weft_cuda_tests

stage=build/gpu-bundle/stage
rm -rf build/gpu-bundle
mkdir -p "$stage/bin" "$stage/lib/fallback" "$stage/data"
binaries=(build/gpu/tools/weft/weft build/gpu/tests/weft_cuda_tests)
cp "${binaries[@]}" "$stage/bin/"

# The libraries the binaries load, less glibc's (the device has its own, and they must match
# its loader) and the GPU stack's (the device's driver and toolkit).
system='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil)\.so'
gpu='^(libcuda|libcudart|libcublas|libcublasLt|libnvidia|libnvrtc)[.-]'
while read -r name path; do
  [[ "$name" =~ $system || "$name" =~ $gpu ]] && continue
  if [[ "$name" =~ ^(libstdc\+\+|libgcc_s)\. ]]; then
    cp -L "$path" "$stage/lib/fallback/$name"
  else
    cp -L "$path" "$stage/lib/$name"
  fi
done < <(for b in "${binaries[@]}"; do ldd "$b"; done |
  awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u)
if ldd "${binaries[@]}" | grep -q 'not found'; then
  echo "gpu_bundle: a library the binaries need was not found here:" >&2
  ldd "${binaries[@]}" | grep 'not found' >&2
  exit 1
fi
chmod u+w "$stage"/bin/* "$stage"/lib/*.so* "$stage"/lib/fallback/*
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*.so* "$stage"/lib/fallback/*

if [[ "${WEFT_BUNDLE_DATA:-1}" == 1 && -f "$data/sst/train.txt" ]]; then
  mkdir -p "$stage/data/sst" "$stage/data/glove-sst"
  cp "$data"/sst/*.txt "$stage/data/sst/"
  cp "$data"/glove-sst/*.txt "$stage/data/glove-sst/"
else
  echo "gpu_bundle: no SST data bundled (WEFT_BUNDLE_DATA=0 or none at $data)" >&2
fi
if [[ -n "${WEFT_BUNDLE_DECODER:-}" ]]; then
  cp "$WEFT_BUNDLE_DECODER" "$stage/tree2seq.safetensors"
else
  echo "gpu_bundle: no decoder checkpoint bundled (WEFT_BUNDLE_DECODER unset)" >&2
fi
git rev-parse HEAD >"$stage/COMMIT"
git status --porcelain --untracked-files=no | sed 's/^/dirty: /' >>"$stage/COMMIT"
(cd "$stage" && ls lib lib/fallback) >"$stage/LIBS"

tar -C "$stage" -cf - . | xz -T2 -6 >build/gpu-bundle/weft-gpu.tar.xz
rm -rf "$stage"
size=$(stat -c %s build/gpu-bundle/weft-gpu.tar.xz)
echo "gpu_bundle: build/gpu-bundle/weft-gpu.tar.xz $((size / 1024 / 1024)) MiB ($size bytes)"
if ((size > 60 * 1024 * 1024)); then
  echo "gpu_bundle: over 60 MiB: the device carries 64 MiB at most (try WEFT_BUNDLE_DATA=0)" >&2
  exit 1
fi
