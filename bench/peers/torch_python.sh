# Sourced by the peers' ctest scripts: sets `python` to the first of the given interpreters
# and /usr/bin/python3 that imports torch and numpy, or exits 77 (a skip for ctest) saying so.
# Usage: source torch_python.sh; find_torch_python "$CANDIDATE"
find_torch_python() {
  python=""
  for candidate in "$@" /usr/bin/python3; do
    if [[ -x "$candidate" ]] && "$candidate" -c "import numpy, torch" 2>/dev/null; then
      python=$candidate
      return 0
    fi
  done
  echo "SKIPPED: no Python with torch and numpy ($*, /usr/bin/python3; Debian: python3-torch)"
  exit 77
}
