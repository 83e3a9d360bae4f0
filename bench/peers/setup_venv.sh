#!/usr/bin/env bash
# Builds the PyTorch peers' virtual environments from PyPI (never needed by README's commands or
# CI): build/peers-venv (requirements.txt: current PyTorch, torchfold, PyG) and
# build/peers-venv-dgl (requirements-dgl.txt: DGL with the newest PyTorch it supports).
# Usage: bench/peers/setup_venv.sh [VENV_DIR [DGL_VENV_DIR]]; TORCH_INDEX_URL=<PyTorch's CPU wheel
# index> installs CPU-only torch wheels instead of PyPI's (which bring CUDA libraries, ~4 GB).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=${1:-$root/build/peers-venv}
dgl_venv=${2:-$root/build/peers-venv-dgl}
python=${PYTHON:-/usr/bin/python3}

if ! "$python" -c "import venv, ensurepip" 2>/dev/null; then
  echo "setup_venv.sh: $python cannot make a virtual environment: install python3-venv" \
       "(Debian: apt-get install python3-venv) and run this again" >&2
  exit 1
fi

make_venv() {  # make_venv DIR REQUIREMENTS
  local dir=$1 requirements=$2
  [[ -x "$dir/bin/python" ]] || "$python" -m venv "$dir"
  "$dir/bin/python" -m pip install -q --upgrade pip
  local index=()
  [[ -n "${TORCH_INDEX_URL:-}" ]] && index=(--extra-index-url "$TORCH_INDEX_URL")
  "$dir/bin/python" -m pip install -q "${index[@]}" -r "$requirements"
  "$dir/bin/python" -c "import torch; print('$dir: torch', torch.__version__)"
}

make_venv "$venv" "$here/requirements.txt"
make_venv "$dgl_venv" "$here/requirements-dgl.txt"
"$dgl_venv/bin/python" -c "import dgl; print('$dgl_venv: dgl', dgl.__version__)"
echo "Run the peers with $venv/bin/python (and $dgl_venv/bin/python for DGL);" \
     "PYTHONPATH=$root/build/test/python lets them import weft (built by README command 2)."
