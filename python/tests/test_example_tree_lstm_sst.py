"""python/examples/tree_lstm_sst.py runs (regression: td.Composition("sst_node") passed the name
as TF Fold's children list, so the example failed before training), and its reader keeps a word
with a no-break space whole (regression: SST's train.txt line 4342, "8\xa01\\/2", split in two
and broke the parse of the full training set)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from tree_lstm_sst import read_trees  # noqa: E402

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


def test_a_word_with_a_no_break_space_is_one_leaf(tmp_path):
    path = tmp_path / "trees.txt"
    path.write_text("(2 (2 like) (3 8\xa01\\/2))\n(1 (2 a) (1 b))\n", encoding="utf-8")
    vocab = {"<unk>": 0}
    trees = read_trees(path, vocab, True)
    assert len(trees) == 2
    assert trees[0]["children"][1] == {"label": 3, "pair": 0, "id": vocab["8\xa01\\/2"]}
    assert trees[1]["children"][1]["label"] == 1
