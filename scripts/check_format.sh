#!/usr/bin/env bash
# Checks that every tracked C++/CUDA source is formatted as .clang-format says; lists the
# files that are not and exits non-zero. Fix them with `clang-format -i FILE`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v clang-format >/dev/null || { echo "check_format: clang-format not installed" >&2; exit 1; }
# Tracked files, plus new ones not yet added (not ignored), so a local run sees them too.
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- \
  '*.h' '*.cpp' '*.cu' '*.cuh' | sort -u)
offenders=()
for file in "${files[@]}"; do
  [[ -f "$file" ]] || continue  # deleted in the working tree, not yet in the index
  if ! clang-format --dry-run -Werror "$file" >/dev/null 2>&1; then offenders+=("$file"); fi
done

if [[ ${#offenders[@]} -gt 0 ]]; then
  echo "check_format: ${#offenders[@]} of ${#files[@]} files need clang-format -i:"
  printf '  %s\n' "${offenders[@]}"
  exit 1
fi
echo "check_format: all ${#files[@]} files formatted"
