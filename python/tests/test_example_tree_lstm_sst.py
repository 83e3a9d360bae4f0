"""python/examples/tree_lstm_sst.py runs (regression: td.Composition("sst_node") passed the name
as TF Fold's children list, so the example failed before training)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tree_lstm_sst.py"


def test_the_sst_example_trains_an_epoch(data_dir):
    if not (data_dir / "sst" / "train.txt").exists():
        pytest.skip(f"no SST data under {data_dir}")
    run = subprocess.run([sys.executable, str(EXAMPLE), "--data-dir", str(data_dir),
                          "--max-train", "40", "--max-eval", "10", "--epochs", "1",
                          "--hidden", "16", "--no-embeddings"],
                         capture_output=True, text=True, env=os.environ, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "epoch 1: loss" in run.stdout
