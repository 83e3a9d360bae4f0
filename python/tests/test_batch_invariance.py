"""Batch invariance from Python (weft.set_batch_invariant, README "Batch invariance"), a
Hypothesis property over random blocks programs: in the mode, an example's output is
bit-identical alone and at a random position among up to 256 random companions, on 1 and 2
threads. Programs: a layer over each element of a sequence (any width and activation), a
reduction (sum, mean, max or an LSTM fold), then a head (softmax, log-softmax, exp or none).
Also Model.predict's batch_invariant= keyword. Derandomized and sized to run in seconds."""

import os
import tempfile

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="Hypothesis is absent (Debian: python3-hypothesis)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.configuration import set_hypothesis_home_dir  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import weft  # noqa: E402
from weft import blocks as td  # noqa: E402
from weft.blocks import Type  # noqa: E402

set_hypothesis_home_dir(os.path.join(tempfile.gettempdir(), "weft-hypothesis"))
settings.register_profile("weft-invariance", derandomize=True, deadline=None, database=None, max_examples=30,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

HEADS = {"softmax": weft.softmax, "log_softmax": weft.log_softmax, "exp": weft.exp, "none": lambda x: x}


@pytest.fixture(autouse=True)
def invariant_mode():
    before_mode, before_threads = weft.batch_invariant(), weft.train.num_threads()
    weft.set_batch_invariant(True)
    yield
    weft.set_batch_invariant(before_mode)
    weft.train.set_num_threads(before_threads)


def program(width, hidden, activation, reducer, head, seed):
    """A random blocks program over sequences of vectors of `width`; its [5] output."""
    store = weft.nn.ParameterStore(seed=seed)
    layer = weft.nn.FC(store, "layer", width, hidden, activation=activation)
    out = weft.nn.FC(store, "out", hidden, 5, activation="none")
    elements = td.Map(td.Vector(width) >> td.Function("layer", [Type.vector(width)], layer))
    if reducer == "lstm":
        cell = weft.nn.LSTMCell(store, "cell", hidden, hidden)
        state = Type.tuple(Type.vector(hidden), Type.vector(hidden))
        step = td.Function("step", [state, Type.vector(hidden)], lambda h, c, x: tuple(cell(x, h, c)))
        reduced = td.Fold(step, td.Zeros(state)) >> td.GetItem(0)
    else:
        reduced = {"sum": td.Sum, "mean": td.Mean, "max": td.Max}[reducer]()
    head_fn = HEADS[head]
    model = elements >> reduced >> td.Function("head", [Type.vector(hidden)], lambda x: head_fn(out(x)))
    return td.Compiler(model, threads=1), store


def outputs(compiler, examples):
    return compiler.forward(examples, weft.Tape()).output().numpy().copy()


def random_sequence(rng, width):
    return rng.uniform(-2, 2, size=(int(rng.integers(1, 7)), width)).astype(np.float32).tolist()


@settings(settings.get_profile("weft-invariance"))
@given(width=st.integers(1, 40), hidden=st.integers(1, 70),
       activation=st.sampled_from(["relu", "tanh", "sigmoid", "none"]),
       reducer=st.sampled_from(["sum", "mean", "max", "lstm"]),
       head=st.sampled_from(sorted(HEADS)), seed=st.integers(0, 10_000))
def test_random_programs_answer_an_example_alone_as_in_any_batch(width, hidden, activation, reducer, head, seed):
    compiler, _ = program(width, hidden, activation, reducer, head, seed)
    rng = np.random.default_rng(seed)
    example = random_sequence(rng, width)
    weft.train.set_num_threads(1)
    alone = outputs(compiler, [example])[0]
    companions = [random_sequence(rng, width) for _ in range(int(rng.integers(1, 257)))]
    position = int(rng.integers(0, len(companions) + 1))
    batch = companions[:position] + [example] + companions[position:]
    for threads in (1, 2):
        weft.train.set_num_threads(threads)
        got = outputs(compiler, batch)[position]
        assert got.tobytes() == alone.tobytes(), (position, len(batch), threads, got - alone)


def test_the_mode_is_a_setting_and_a_predict_keyword():
    assert weft.batch_invariant()
    weft.set_batch_invariant(False)
    assert not weft.batch_invariant()
    model = weft.models.create("calculator", hidden=8, max_train=20, max_eval=20, seed=3)
    line = '{"op": "*", "left": {"number": 3}, "right": {"number": 4}}'
    alone = model.predict([line], batch_invariant=True)
    crowd = ['{"op": "+", "left": {"number": %d}, "right": {"number": 2}}' % (i % 10) for i in range(70)]
    assert model.predict(crowd[:33] + [line] + crowd[33:], batch_invariant=True)[33] == alone[0]
    assert not weft.batch_invariant()  # the keyword sets the mode for its call only
