#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang under AddressSanitizer + UndefinedBehavior-
# Sanitizer (build/fuzz) and runs each for SECONDS (default 30), as many at once as there are
# cores, starting from its regression inputs in fuzz/corpus/<target>/ (copied: what the fuzzer
# finds stays in build/fuzz/corpus).
#   scripts/fuzz.sh [SECONDS [TARGET...]]
# An input that crashes, leaks, or runs longer than 1 s fails the run; libFuzzer writes it to
# build/fuzz/findings/<target>/ (add it to fuzz/corpus/<target>/ once fixed). Prints, per
# target, the executions, the coverage (edges) and the corpus size reached. Warnings are not
# errors here: the warning policy is GCC's (scripts/test.sh), clang only instruments.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

seconds=${1:-30}
shift || true
scripts/install_deps.sh
# RelWithDebInfo's -O2 -g. (Not -O1 -gline-tables-only, as OSS-Fuzz builds: clang 14 fails on
# the flow layer's coroutines there with "Cannot represent a difference across sections".)
CC=clang-14 CXX=clang++-14 cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g -DNDEBUG" \
  -DWEFT_BUILD_FUZZERS=ON -DWEFT_SANITIZE=ON -DWEFT_WERROR=OFF \
  -DWEFT_BUILD_TESTS=OFF -DWEFT_BUILD_BENCHMARKS=OFF -DWEFT_BUILD_TOOLS=OFF \
  -DWEFT_BUILD_EXAMPLES=OFF -DWEFT_BUILD_PYTHON=OFF -DBUILD_SHARED_LIBS=OFF
cmake --build build/fuzz --target fuzzers

if [[ $# -gt 0 ]]; then
  targets=("$@")
else
  mapfile -t targets < <(ls fuzz/corpus)
fi
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Targets run side by side, one per core (FUZZ_JOBS overrides), each for the full SECONDS.
jobs=${FUZZ_JOBS:-$(nproc)}
run_target() {
  local target=$1
  local corpus=build/fuzz/corpus/$target findings=build/fuzz/findings/$target
  mkdir -p "$corpus" "$findings"
  if build/fuzz/fuzz/fuzz_"$target" -max_total_time="$seconds" -timeout=1 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/" \
    "$corpus" "fuzz/corpus/$target" >"build/fuzz/$target.log" 2>&1; then
    echo ok >"build/fuzz/$target.status"
  else
    echo FAILED >"build/fuzz/$target.status"
  fi
}
for target in "${targets[@]}"; do
  rm -f "build/fuzz/$target.status"
  echo "=== fuzz: $target for ${seconds}s ==="
  run_target "$target" &
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
done
wait

failed=()
summary=()
for target in "${targets[@]}"; do
  log=build/fuzz/$target.log
  status=$(cat "build/fuzz/$target.status" 2>/dev/null || echo FAILED)
  if [[ "$status" != ok ]]; then
    failed+=("$target")
    echo "=== fuzz: $target failed; the end of its log ==="
    tail -n 40 "$log"
  fi
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  edges=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*' || echo "?")
  units=$(grep -o 'corp: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*' || echo "?")
  summary+=("$(printf '%-18s %-6s %10s runs %6s edges %6s inputs' "$target" "$status" "$runs" "$edges" "$units")")
done
printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -ne 0 ]]; then
  echo "fuzz: ${failed[*]} failed (inputs in build/fuzz/findings/)" >&2
  exit 1
fi
