# Sourced by the command-line tests: a scratch folder $work (removed at exit), a count of
# $failures, expect_error, and finish NAME (reports the count; exits 1 after a failure).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# expect_error NAME EXPECTED-SUBSTRING COMMAND...: fails unless the command exits non-zero
# (but not by a signal) with exactly one stderr line containing the substring.
expect_error() {
  local name=$1 expected=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err" </dev/null
  local rc=$?
  local lines
  lines=$(wc -l <"$work/err")
  if [[ $rc -eq 0 || $rc -ge 128 ]] || ! grep -qF -- "$expected" "$work/err" || [[ $lines -ne 1 ]]; then
    echo "FAIL $name: exit $rc, $lines stderr lines, expected '$expected' in:"
    cat "$work/err"
    failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

finish() {
  if [[ $failures -ne 0 ]]; then
    echo "$1: $failures failed"
    exit 1
  fi
  echo "$1: all passed"
}

# expected_build_commit SOURCE_DIR: what weft::build_commit() should say for a build of that
# source tree as it is now (cmake/write_build_commit.cmake): its `git describe --always
# --dirty` when it is a checkout's top folder, else "unknown".
expected_build_commit() {
  local top
  top=$(git -C "$1" rev-parse --show-toplevel 2>/dev/null) &&
    [[ $(realpath "$top") == $(realpath "$1") ]] &&
    git -C "$1" describe --always --dirty 2>/dev/null || echo unknown
}
