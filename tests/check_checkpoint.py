#!/usr/bin/env python3
"""Opens a Weft checkpoint with nothing but the standard library and NumPy.

As a ctest: check_checkpoint.py WEFT_TESTS_BINARY runs the gtest
TrainCheckpoint.WritesAFileForPython to write a checkpoint with known contents, then reads it
back here and checks every tensor and metadata field. By hand: check_checkpoint.py --show FILE
lists a checkpoint's tensors and training state. Exits 77 (ctest: skipped) without NumPy.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("numpy is not installed; skipping")
    sys.exit(77)

DTYPES = {"F32": "<f4", "I32": "<i4"}


def read_safetensors(path):
    """Returns ({name: ndarray}, {metadata key: str}) for a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    metadata = header.pop("__metadata__", {})
    data = raw[8 + length:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype=DTYPES[entry["dtype"]])
        tensors[name] = array.reshape(entry["shape"])
    return tensors, metadata


def read_checkpoint(path):
    """Splits a Weft checkpoint into model parameters, optimizer state, training state."""
    tensors, metadata = read_safetensors(path)
    assert metadata.get("format") == "weft-checkpoint", metadata
    model = {k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}
    optimizer = {k[len("optimizer/"):]: v for k, v in tensors.items()
                 if k.startswith("optimizer/")}
    return model, optimizer, json.loads(metadata["training_state"]), metadata


def self_test(weft_tests):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "python.safetensors")
        env = dict(os.environ, WEFT_CHECKPOINT_FOR_PYTHON=path)
        subprocess.run([weft_tests, "--gtest_filter=TrainCheckpoint.WritesAFileForPython"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        model, optimizer, state, metadata = read_checkpoint(path)
    assert sorted(model) == ["fc/bias", "fc/weight"], sorted(model)
    assert model["fc/weight"].dtype == np.float32 and model["fc/weight"].shape == (2, 3)
    assert model["fc/weight"].tolist() == [[0.5, 1.5, 2.5], [3.5, 4.5, -7.0]], model
    assert model["fc/bias"].tolist() == [-0.75, -1.0, -2.0], model
    assert sorted(optimizer) == ["sgd/step", "sgd/velocity/fc/bias", "sgd/velocity/fc/weight"]
    assert optimizer["sgd/step"].shape == () and int(optimizer["sgd/step"]) == 1
    assert (optimizer["sgd/velocity/fc/weight"] == 1).all()
    assert (optimizer["sgd/velocity/fc/bias"] == 2).all()
    assert state == {"epoch": 3, "step": 1, "rng": [1, 2, 2**64 - 1, 12345678901234567],
                     "best_dev": 0.75, "best_epoch": 2, "best_dev_loss": 1.5}, state
    assert metadata["format_version"] == "1"
    assert metadata["model_name"] == "python-check"
    assert json.loads(metadata["config"]) == {"hidden": 3, "cell": "fc"}
    assert metadata["optimizer"] == "sgd momentum=0.5", metadata
    print("checkpoint read with NumPy: OK")


def show(path):
    model, optimizer, state, metadata = read_checkpoint(path)
    print(f"model {metadata.get('model_name')!r}, optimizer {metadata.get('optimizer')!r}")
    print("training state:", state)
    for name, array in {**model, **{"optimizer/" + k: v for k, v in optimizer.items()}}.items():
        print(f"  {name}: {array.dtype} {list(array.shape)}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--show":
        show(sys.argv[2])
    elif len(sys.argv) == 2:
        self_test(sys.argv[1])
    else:
        sys.exit(__doc__)
