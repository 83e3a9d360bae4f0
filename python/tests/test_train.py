"""The Trainer with a model written in Python (a TrainableModel subclass), optimizers and
schedules."""

import json
import math

import numpy as np
import pytest

import weft


class LinearClassifier(weft.train.TrainableModel):
    """Logistic regression on two Gaussian blobs, with plain ops."""

    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.x = np.concatenate([rng.normal(-1, 1, (64, 2)), rng.normal(1, 1, (64, 2))]).astype(np.float32)
        self.y = np.array([0] * 64 + [1] * 64, dtype=np.int32)
        self.w = weft.Parameter("w", np.zeros((2, 2), np.float32))
        self.b = weft.Parameter("b", np.zeros(2, np.float32))
        self.tape = weft.Tape()

    def parameters(self):
        return [self.w, self.b]

    def num_examples(self, split):
        return len(self.y) if split != weft.train.Split.test else 0

    def _batch(self, batch):
        ids = batch.example_ids
        self.tape.clear()
        with self.tape:
            logits = weft.linear(self.tape.constant(self.x[ids]), self.w, self.b)
            losses = weft.softmax_cross_entropy(logits, self.y[ids])
        hits = weft.train.argmax_hits(logits.value, self.y[ids])
        figures = weft.train.BatchFigures(float(weft.sum(losses).item()), len(ids), {"accuracy": (hits, len(ids))})
        return figures, losses

    def train_batch(self, batch, rng):
        figures, losses = self._batch(batch)
        self.tape.backward(weft.mean(losses))
        return figures

    def eval_batch(self, batch):
        return self._batch(batch)[0]


def test_trainer_fits_a_python_model(tmp_path):
    model = LinearClassifier()
    log = tmp_path / "log.jsonl"
    trainer = weft.train.Trainer(epochs=3, batch_size=16, learning_rate=0.5, progress="off",
                                 best_metric="accuracy", log=str(log),
                                 checkpoint=str(tmp_path / "c.safetensors"))
    epochs = trainer.fit(model)
    assert len(epochs) == 3
    assert epochs[-1]["train"]["loss"] < epochs[0]["train"]["loss"]
    assert epochs[-1]["dev"]["accuracy"] > 0.8
    assert len(log.read_text().splitlines()) == 3
    assert json.loads(log.read_text().splitlines()[0])["epoch"] == 1
    figures = trainer.evaluate(model, "dev")
    assert figures["accuracy"] > 0.8
    # Resume: a fresh model and trainer continue from the checkpoint to epoch 4.
    more = weft.train.Trainer(epochs=4, batch_size=16, learning_rate=0.5, progress="off",
                              resume=str(tmp_path / "c.safetensors")).fit(LinearClassifier())
    assert [e["epoch"] for e in more] == [4]


class FixedLosses(weft.train.TrainableModel):
    """Evaluates to fixed per-example losses, reported as loss_terms."""

    LOSSES = np.array([1e8, 1.0, -1e8, 0.25, 3e-9, 7.0, -2.5], np.float32)

    def parameters(self):
        return []

    def num_examples(self, split):
        return len(self.LOSSES)

    def train_batch(self, batch, rng):
        raise NotImplementedError

    def eval_batch(self, batch):
        terms = self.LOSSES[list(batch.example_ids)]
        figures = weft.train.BatchFigures(float(terms.sum()), len(terms))
        figures.loss_terms = [float(t) for t in terms]
        return figures


def test_evaluation_sums_loss_terms_exactly_at_any_batch_size():
    # A float sum per batch would lose the 1.0 beside 1e8 in some groupings.
    want = math.fsum(float(t) for t in FixedLosses.LOSSES) / len(FixedLosses.LOSSES)
    for size in (1, 2, 3, 7):
        trainer = weft.train.Trainer(batch_size=size, progress="off")
        assert trainer.evaluate(FixedLosses(), "dev")["loss"] == want, size


def test_optimizers_and_schedules():
    sched = weft.train.LrSchedule("cosine", learning_rate=1.0, total_steps=10)
    assert sched(0) == pytest.approx(1.0) and sched(10) == pytest.approx(0.0)
    with pytest.raises(weft.Error, match="schedule"):
        weft.train.LrSchedule("bogus")
    p = weft.Parameter("p", np.ones(3, np.float32))
    tape = weft.Tape()
    with tape:
        tape.backward(weft.sum(weft.mul(weft.Var(p), weft.Var(p))))
    opt = weft.train.Adam([p])
    opt.step(0.1)
    assert opt.steps == 1 and np.all(p.numpy() < 1)
    assert "adam/step" in opt.state()
    with pytest.raises(weft.Error, match="no option 'epoch'"):
        weft.train.Trainer(epoch=3)
    # A bad value fails as the command line's flag does (progress once fell back to "auto").
    with pytest.raises(weft.Error, match="option 'progress' must be one of auto, bar, lines, off"):
        weft.train.Trainer(progress="sometimes")
    assert "average_weights" in [o["name"] for o in weft.train.options()]


def squares_gradient(value):
    """A Parameter holding `value` whose gradient is that of sum(p * p), 2 * value."""
    p = weft.Parameter("p", np.array(value, np.float32))
    tape = weft.Tape()
    with tape:
        tape.backward(weft.sum(weft.mul(weft.Var(p), weft.Var(p))))
    return p


def test_optimizers_take_their_learning_rate_in_the_constructor():
    # Adam(params, lr=...) used to be a TypeError: the rate went to step() only.
    for make in (weft.train.SGD, weft.train.Adam, weft.train.Adagrad):
        given, stepped = squares_gradient([1, -2, 3]), squares_gradient([1, -2, 3])
        with_rate = make([given], lr=0.05)
        assert with_rate.lr == pytest.approx(0.05)
        with_rate.step()
        make([stepped]).step(0.05)
        np.testing.assert_array_equal(given.numpy(), stepped.numpy())
        assert not np.array_equal(given.numpy(), [1, -2, 3])
        with pytest.raises(weft.Error, match="lr must be a finite number >= 0, got -1"):
            make([given], lr=-1.0)
    # step(rate) still wins over lr=; SGD has no default rate, and says how to give one.
    a, b = squares_gradient([2.0]), squares_gradient([2.0])
    weft.train.SGD([a], lr=100.0).step(0.25)
    weft.train.SGD([b]).step(0.25)
    assert a.numpy().tolist() == b.numpy().tolist()
    with pytest.raises(weft.Error, match=r"no learning rate: pass one, step\(0.01\), or make the optimizer with lr="):
        weft.train.SGD([a]).step()
    spec = weft.train.OptimizerSpec("adam")
    assert weft.train.make_optimizer(spec, [a], lr=0.5).lr == 0.5


def test_gradients_add_up_over_backward_calls_until_zero_grad():
    p = squares_gradient([1.5, -1.0])
    once = p.grad.numpy().copy()
    tape = weft.Tape()
    with tape:
        tape.backward(weft.sum(weft.mul(weft.Var(p), weft.Var(p))))
    np.testing.assert_allclose(p.grad.numpy(), 2 * once)
    optimizer = weft.train.SGD([p], lr=0.1)
    optimizer.zero_grad()
    assert p.grad is None or not np.asarray(p.grad).any()


def fitted_parameters(**options):
    model = LinearClassifier()
    weft.train.Trainer(epochs=2, batch_size=16, learning_rate=0.05, progress="off", **options).fit(model)
    return [p.numpy().copy() for p in model.parameters()]


def test_the_trainer_takes_an_optimizer_spec_as_its_options():
    # Trainer(optimizer=OptimizerSpec(...)) used to fail as "cannot use a value of type
    # OptimizerSpec as example data"; it stands for the options of the same names.
    spec = weft.train.OptimizerSpec("adam", beta1=0.5, weight_decay=0.01, weight_decay_mode="decoupled")
    by_spec = fitted_parameters(optimizer=spec)
    by_name = fitted_parameters(optimizer="adam", beta1=0.5, weight_decay=0.01, weight_decay_mode="decoupled")
    plain = fitted_parameters(optimizer="adam")
    for a, b, c in zip(by_spec, by_name, plain):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, c) for a, c in zip(by_spec, plain))
    with pytest.raises(weft.Error, match="'beta1' is given both by optimizer=OptimizerSpec"):
        weft.train.Trainer(optimizer=spec, beta1=0.9)
    scales = weft.train.OptimizerSpec("sgd", learning_rate_scales=[("a/", 0.1), ("b/", 0.2)])
    with pytest.raises(weft.Error, match="has 2 learning_rate_scales; the Trainer takes one"):
        weft.train.Trainer(optimizer=scales)
