"""TensorFlow Fold's fizzbuzz example on Weft (tensorflow_fold/blocks/examples/fizzbuzz): a Fold
over a number's digits learns fizz / buzz / fizzbuzz / neither. The blocks are TF Fold's, with
only the import changed (and np.zeros for tf.zeros); the training loop is Weft's Trainer."""

import random

import numpy as np

import weft
from weft import blocks as td

from fold_training import build_with_parameters, report, train_classifier, training_arguments

NUM_LABELS = 4


def digits(n, base):
    result = []
    while n > 0:
        result.append(n % base)
        n //= base
    return list(reversed(result))


def make_example(x, base):
    return {"digits": digits(x, base), "label": int(x % 3 == 0) + 2 * int(x % 5 == 0)}


def build(base, state_vector_len):
    """The model of the original, verbatim but for tf.zeros."""
    process_next_digit = (
        (td.Identity(), td.OneHot(base)) >>
        td.Concat() >>
        td.Function(td.FC(state_vector_len)))
    process_digits = td.Fold(process_next_digit, np.zeros(state_vector_len, "float32"))
    root_block = td.Record([("digits", process_digits),
                            ("label", td.OneHot(NUM_LABELS))])
    return td.Compiler.create(root_block)


def main(argv=None):
    parser = training_arguments(__doc__, train_size=20000, dev_size=1000, epochs=20,
                                batch_size=100, learning_rate=1e-3, seed=42)
    parser.add_argument("--max_input", type=int, default=9999)
    parser.add_argument("--base", type=int, default=10)
    parser.add_argument("--state_vector_len", type=int, default=100)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    batch = lambda n: [make_example(rng.randint(0, args.max_input), args.base)  # noqa: E731
                       for _ in range(n)]
    compiler, parameters = build_with_parameters(build, args.base, args.state_vector_len)
    # The final layer the original wrote with tf.Variable and tf.matmul.
    weights = weft.Parameter("final_layer_weights", np.random.default_rng(args.seed).normal(
        0, 0.1, (args.state_vector_len, NUM_LABELS)).astype(np.float32))
    biases = weft.Parameter("final_layer_biases", np.zeros(NUM_LABELS, np.float32))
    logits_of = lambda out: (weft.linear(out[0], weights, biases), out[1].value)  # noqa: E731
    history = train_classifier(compiler, parameters + [weights, biases],
                               logits_of, batch(args.train_size), batch(args.dev_size),
                               args.epochs, args.batch_size, args.learning_rate)
    return report(history)


if __name__ == "__main__":
    main()
