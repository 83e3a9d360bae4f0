"""What TensorFlow Fold's example programs did with a TF session and tf.train, on Weft: the
compiled root's outputs (logits and one-hot labels, as the examples produced them) become a
softmax cross-entropy loss trained by Weft's Trainer over a BlocksModel. The models themselves
are TF Fold's code with only the import changed."""

import argparse

import numpy as np

import weft
from weft import blocks as td


def build_with_parameters(build, *args):
    """build(*args) and the layer Parameters it created (TF Fold read tf.trainable_variables();
    td.trainable_parameters() lists every live layer's, so earlier models' are set apart)."""
    before = {id(p) for p in td.trainable_parameters()}
    built = build(*args)
    return built, [p for p in td.trainable_parameters() if id(p) not in before]


def training_arguments(description, **defaults):
    """The flags every example takes (sizes, epochs, batch, learning rate, seed) with its own
    defaults; the example adds its own flags to the parser returned and parses."""
    parser = argparse.ArgumentParser(description=description)
    for flag in ("train_size", "dev_size", "epochs", "batch_size", "seed"):
        parser.add_argument("--" + flag, type=int, default=defaults.get(flag, 0))
    parser.add_argument("--learning_rate", type=float, default=defaults.get("learning_rate"))
    return parser


def report(history):
    for e in history:
        print("epoch %d: train loss %.4f, dev accuracy %.3f" %
              (e["epoch"], e["train"]["loss"], e["dev"]["accuracy"]))
    return history


def classifier_figures(logits_of):
    """figures(result, training) for a BlocksModel: logits_of(outputs) -> (logits Var [B, k],
    one-hot labels [B, k]) from the root's outputs; mean cross-entropy loss, accuracy."""

    def figures(result, training):
        logits, onehot = logits_of([result.output(k) for k in range(result.num_outputs)])
        labels = np.argmax(np.asarray(onehot), axis=1).astype(np.int32)
        losses = weft.softmax_cross_entropy(logits, labels)
        if training:
            weft.current_tape().backward(weft.mean(losses))
        hits = weft.train.argmax_hits(logits.value, labels)
        return weft.train.BatchFigures(float(weft.sum(losses).item()), len(labels),
                                       {"accuracy": (hits, len(labels))})

    return figures


def train_classifier(compiler, parameters, logits_of, train, dev, epochs, batch_size,
                     learning_rate, optimizer="adam", seed=0):
    """Trains with Weft's Trainer; returns its per-epoch records (train loss, dev accuracy)."""
    model = weft.train.BlocksModel(compiler, parameters, classifier_figures(logits_of),
                                   train=train, dev=dev)
    trainer = weft.train.Trainer(epochs=epochs, batch_size=batch_size,
                                 optimizer=optimizer,
                                 learning_rate=learning_rate, progress="off", seed=seed,
                                 threads=1)
    return trainer.fit(model)
