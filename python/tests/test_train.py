"""The Trainer with a model written in Python (a TrainableModel subclass), optimizers and
schedules."""

import json

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
