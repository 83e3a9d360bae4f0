"""TensorFlow Fold's example programs ported with only the import changed
(python/examples/tf_fold): each trains a few seconds and must learn, judged against what
guessing would give on its own dev data."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "tf_fold"))

import blocks_tutorial  # noqa: E402
import calculator  # noqa: E402
import fizzbuzz  # noqa: E402
import sentiment  # noqa: E402


def learned(history):
    first, last = history[0], history[-1]
    return first["train"]["loss"], last["train"]["loss"], last["dev"]


def test_calculator_learns_the_sign_of_expressions():
    first, last, dev = learned(calculator.main(
        ["--train_size", "800", "--dev_size", "300", "--epochs", "4", "--state_size", "16"]))
    assert last < 0.6 * first
    assert dev["accuracy"] > 0.7  # "positive", the commonest sign of these expressions, is 0.62


def test_fizzbuzz_learns_buzz_from_the_last_digit():
    first, last, dev = learned(fizzbuzz.main(
        ["--max_input", "999", "--state_vector_len", "32", "--train_size", "2000",
         "--dev_size", "300", "--epochs", "4", "--learning_rate", "0.01"]))
    assert last < first
    assert dev["accuracy"] > 0.58  # "neither" alone is 8/15 = 0.53


def test_blocks_tutorial_lstm_learns_and_its_snippets_compute():
    first, last, dev = learned(blocks_tutorial.main(["--train_size", "600", "--epochs", "4"]))
    assert last < 0.7 * first and dev["accuracy"] > 0.8  # half the words have a 'z'
    abs_of_each = blocks_tutorial.abs_of_each()
    assert abs_of_each.eval([-1, 2, -3], tolist=True) == [1.0, 2.0, 3.0]
    assert (abs_of_each >> blocks_tutorial.sequential_sum()).eval([1, -2, 3.5], tolist=True) == 6.5
    assert (abs_of_each >> blocks_tutorial.parallel_sum()).eval([1, -2, 3.5], tolist=True) == 6.5
    expr = {"op": "add", "left": {"op": "lit", "val": 2.0},
            "right": {"op": "add", "left": {"op": "lit", "val": 3.0},
                      "right": {"op": "lit", "val": 4.0}}}
    assert blocks_tutorial.expression().eval(expr, tolist=True) == 9.0
    vec = blocks_tutorial.record().eval({"id": 3, "name": "Joe", "location": (2.5, 7.0)})
    assert vec.shape == (128,)


def test_sentiment_notebook_tree_lstm_learns(data_dir):
    if not (data_dir / "sst" / "train.txt").exists():
        pytest.skip("the SST data is absent (%s)" % data_dir)
    history = sentiment.main(["--data", str(data_dir), "--lstm_num_units", "16",
                              "--max_train", "200", "--max_dev", "50", "--epochs", "3",
                              "--batch_size", "25"])
    assert history[-1]["train"]["loss"] < history[0]["train"]["loss"]
    assert 0 < history[-1]["dev"]["all_hits"] <= 1
