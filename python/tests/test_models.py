"""Every registered model from Python: built by name with its own options, trained a few steps
(its training loss falls), predictions, and checkpoints shared with the command line both ways."""

import json
import re
import subprocess

import pytest

import weft

# Tiny options per model (as tests/models_registry_test.cpp small_options), and the data each needs.
SMALL = {
    "calculator": ({"hidden": 8}, None),
    "sentiment": ({"hidden": 8, "no_embeddings": True, "embedding_dim": 6}, "sst/dev.txt"),
    "attention": ({"hidden": 8, "no_embeddings": True, "embedding_dim": 6}, "sst/dev.txt"),
    "langid": ({"hidden": 8, "char_hidden": 8, "char_embedding": 4}, "tatoeba-langid/testset.csv"),
    "molecules": ({"hidden": 8, "pair_hidden": 4, "graph_hidden": 8, "task": "esol"},
                  "molecules/delaney-processed.csv"),
    "tree2seq": ({"hidden": 8, "max_depth": 2}, None),
    "seq2tree": ({"hidden": 8, "max_depth": 2}, None),
}
INFER = {
    "calculator": ['{"op": "*", "left": {"number": 3}, "right": {"number": 4}}'],
    "sentiment": ["(3 (2 a) (4 (3 lovely) (2 film)))"],
    "attention": ["(3 (2 a) (4 (3 lovely) (2 film)))"],
    "langid": ["Bonjour tout le monde"],
    "molecules": ["CCO"],
    "tree2seq": ['{"op": "*", "left": {"number": 3}, "right": {"number": 4}}'],
    "seq2tree": ["(3 * 4)"],
}


def small_model(name, data_dir, **extra):
    options, needs = SMALL[name]
    if needs and not (data_dir / needs).exists():
        pytest.skip(f"data file {data_dir / needs} is absent")
    try:
        return weft.models.create(name, data_dir=str(data_dir), max_train=24, max_eval=8, seed=3,
                                  **options, **extra)
    except weft.Error as e:
        if "RDKit" in str(e) or "rdkit" in str(e):
            pytest.skip(str(e))
        raise


def test_the_registry_is_visible():
    names = weft.models.names()
    assert set(SMALL) <= set(names)
    d = weft.models.describe("sentiment")
    assert d["name"] == "sentiment" and any(o["name"] == "hidden" for o in d["options"])
    with pytest.raises(weft.Error, match="unknown model 'nope'"):
        weft.models.create("nope")
    with pytest.raises(weft.Error, match="hidden"):
        weft.models.create("calculator", hidden=0)
    with pytest.raises(weft.Error, match="bogus"):
        weft.models.create("calculator", bogus=1)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_each_model_trains_from_python_and_its_loss_falls(name, data_dir, tmp_path):
    model = small_model(name, data_dir)
    before = model.evaluate("train", batch_size=8, progress="off")["loss"]
    epochs = model.fit(epochs=4, batch_size=8, progress="off", checkpoint=str(tmp_path / "c.safetensors"))
    assert len(epochs) == 4
    after = model.evaluate("train", batch_size=8, progress="off")["loss"]
    assert after < before, (before, after)
    predictions = model.predict(INFER[name])
    assert len(predictions) == len(INFER[name]) and isinstance(predictions[0], dict)
    # A checkpoint alone rebuilds it, with the same predictions.
    path = tmp_path / f"{name}.safetensors"
    model.save(str(path))
    loaded = weft.models.load(str(path), data_dir=str(tmp_path / "no-data"))
    assert loaded.name == name and loaded.options["hidden"] == model.options["hidden"]
    assert loaded.predict(INFER[name]) == predictions


def test_python_checkpoints_load_in_the_cli_and_back(data_dir, weft_cli, tmp_path):
    model = small_model("calculator", data_dir)
    model.fit(epochs=1, batch_size=8, progress="off")
    path = tmp_path / "py.safetensors"
    model.save(str(path))
    line = INFER["calculator"][0]
    infer = subprocess.run([weft_cli, "infer", "calculator", "--checkpoint", str(path)], input=line + "\n",
                           capture_output=True, text=True, check=True)
    assert json.loads(infer.stdout.splitlines()[0]) == model.predict([line])[0]
    ev = subprocess.run([weft_cli, "eval", "calculator", "--checkpoint", str(path), "--data-dir", str(data_dir)],
                        capture_output=True, text=True, check=True)
    figures = json.loads(ev.stdout)
    assert "dev" in figures and "loss" in figures["dev"]
    evaluated = weft.models.load(str(path), use="evaluate", data_dir=str(data_dir))
    assert evaluated.evaluate("dev", progress="off")["loss"] == pytest.approx(figures["dev"]["loss"], rel=1e-5)

    # The other way: trained by `weft train`, loaded and used from Python.
    cli_path = tmp_path / "cli.safetensors"
    subprocess.run([weft_cli, "train", "calculator", "--epochs", "1", "--hidden", "8", "--max-train", "24",
                    "--max-eval", "8", "--batch-size", "8", "--progress", "off", "--data-dir", str(data_dir),
                    "--checkpoint", str(cli_path)], capture_output=True, text=True, check=True)
    loaded = weft.models.load(str(cli_path))
    assert loaded.options["hidden"] == 8
    infer = subprocess.run([weft_cli, "infer", "calculator", "--checkpoint", str(cli_path)], input=line + "\n",
                           capture_output=True, text=True, check=True)
    assert loaded.predict([line])[0] == json.loads(infer.stdout.splitlines()[0])


def approx_floats(value):
    """`value` with every float inside it compared with a relative tolerance of 1e-5."""
    if isinstance(value, float):
        return pytest.approx(value, rel=1e-5, abs=1e-6)
    if isinstance(value, dict):
        return {key: approx_floats(item) for key, item in value.items()}
    if isinstance(value, list):
        return [approx_floats(item) for item in value]
    return value


@pytest.mark.parametrize("name", ["tree2seq", "seq2tree"])
def test_decoding_models_answer_in_python_as_weft_infer_does(name, data_dir, weft_cli, tmp_path):
    model = small_model(name, data_dir)
    model.fit(epochs=2, batch_size=8, progress="off")
    path = tmp_path / f"{name}.safetensors"
    model.save(str(path))
    lines = [example["text"] if name == "seq2tree" else json.dumps(example)
             for example in model.examples("dev")]
    best = {}
    for beam, penalty in ((0, 0.0), (1, 0.0), (3, 0.0), (3, 1.0)):
        infer = subprocess.run([weft_cli, "infer", name, "--checkpoint", str(path), "--beam", str(beam),
                                "--length-penalty", str(penalty)],
                               input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
        answers = [json.loads(line) for line in infer.stdout.splitlines()]
        # Equal but for the last bits of the log-probabilities: the two processes may batch, and
        # so sum, in different orders (and the GEMM calibration may pick another provider).
        assert answers == approx_floats(model.predict(lines, beam=beam, length_penalty=penalty))
        assert all(("beams" in a) == (beam > 0) for a in answers)
        if beam:
            assert all(1 <= len(a["beams"]) <= beam for a in answers)
            for a in answers:  # ranked by log_prob / length^penalty
                scores = [h["log_prob"] / h["length"] ** penalty for h in a["beams"]]
                assert [h["score"] for h in a["beams"]] == pytest.approx(scores)
                assert scores == sorted(scores, reverse=True)
        best[beam, penalty] = answers
    # One convention everywhere: 0 decodes greedily, width 1 searches one beam and finds the same.
    assert [a["text"] for a in best[1, 0.0]] == [a["text"] for a in best[0, 0.0]]
    assert [a["log_prob"] for a in best[1, 0.0]] == approx_floats([a["log_prob"] for a in best[0, 0.0]])
    with pytest.raises(weft.Error, match=r"option 'length_penalty' must be a finite number in \[0, 4\], got -1"):
        model.predict(lines, beam=2, length_penalty=-1.0)
    with pytest.raises(weft.Error, match="does not decode step by step"):
        small_model("calculator", data_dir).predict(INFER["calculator"], beam=2)


def option_bounds(model_name, option):
    spec = next(o for o in weft.models.describe(model_name)["options"] if o["name"] == option)
    return int(spec["min"]), int(spec["max"])


@pytest.mark.parametrize("name", ["tree2seq", "seq2tree"])
def test_predict_bounds_the_beam_as_weft_infer_does(name, data_dir, weft_cli, tmp_path):
    # One bound everywhere, from the model's option: beam=10**9 used to grow to gigabytes.
    model = small_model(name, data_dir)
    low, high = option_bounds(name, "beam")
    path = tmp_path / f"{name}.safetensors"
    model.save(str(path))
    line = INFER[name][0]
    for beam in (high + 1, 10**9, low - 1):
        refusal = rf"option 'beam' must be an integer in \[{low}, {high}\], got {beam}"
        with pytest.raises(weft.Error, match=r"predict\(beam=\.\.\.\): " + refusal):
            model.predict([line], beam=beam)
        infer = subprocess.run([weft_cli, "infer", name, "--checkpoint", str(path), "--beam", str(beam)],
                               input=line + "\n", capture_output=True, text=True)
        assert infer.returncode != 0 and re.search(refusal, infer.stderr), infer.stderr
    for wrong in (True, 2.5, "3"):
        with pytest.raises(weft.Error, match="option 'beam' must be an integer"):
            model.predict([line], beam=wrong)
    assert len(model.predict([line], beam=high)[0]["beams"]) <= high


def test_predict_reads_the_json_object_form_as_weft_infer_and_the_server_do(data_dir, weft_cli, tmp_path):
    model = small_model("calculator", data_dir)
    path = tmp_path / "calc.safetensors"
    model.save(str(path))
    values = [{"number": 3}, {"op": "-", "left": {"number": 2}, "right": {"number": 7}},
              {"expression": {"number": 3}}]
    lines = [json.dumps(v) for v in values]
    infer = subprocess.run([weft_cli, "infer", "calculator", "--checkpoint", str(path)],
                           input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    expected = [json.loads(line) for line in infer.stdout.splitlines()]
    assert model.predict(values) == approx_floats(expected)
    assert model.predict(lines) == model.predict(values)
    loaded = weft.models.load(str(path))
    assert loaded.predict([{"number": 3}]) == model.predict(['{"number": 3}'])
    with pytest.raises(weft.Error, match="example 1"):
        model.predict([{"number": 3}, {"op": "?"}])
