#!/usr/bin/env bash
# The binary names the commit it was built from, wherever it runs: `weft --version` and `weft
# info` run from a folder outside the checkout print the version and the source tree's `git
# describe --always --dirty` ("unknown" for a source tree that is not a checkout).
# Usage: build_commit_test.sh WEFT_BINARY SOURCE_DIR
set -uo pipefail
weft=$(realpath "$1")  # absolute: parts of the test run in another folder
source_dir=$2
source "$(dirname "$0")/test_helpers.sh"  # $work, $failures, expected_build_commit, finish

commit=$(expected_build_commit "$source_dir")
version=$(sed -n 's/^project(weft VERSION \([0-9.]*\).*/\1/p' "$source_dir/CMakeLists.txt")
echo "expecting weft $version (commit $commit)"
cd "$work" || exit 1
out=$("$weft" --version 2>&1)
[[ $out == "weft $version (commit $commit)" ]] || { echo "FAIL weft --version: '$out'"; failures=$((failures + 1)); }
"$weft" info >"$work/info.out" 2>&1 || { echo "FAIL weft info"; failures=$((failures + 1)); }
[[ $(head -1 "$work/info.out") == "weft $version (commit $commit)" ]] ||
  { echo "FAIL weft info's first line"; cat "$work/info.out"; failures=$((failures + 1)); }
finish build_commit_test
