"""The snippets of TensorFlow Fold's blocks tutorial (g3doc/blocks.md) on Weft, each a function
returning its block, with only the import changed and TensorFlow's functions spelled with weft's
(tf.add -> weft.add, tf.nn.sigmoid -> weft.sigmoid, tf.zeros(n) -> np.zeros(n)). main() trains
the tutorial's hand-made LSTM cell (a Composition) under td.RNN on a small string task with
Weft's Trainer: is there a 'z' in the word?"""

import random
import string

import numpy as np

import weft
from weft import blocks as td

from fold_training import build_with_parameters, report, train_classifier, training_arguments


def abs_of_each():
    # Convert a python list of scalars to a sequence of tensors, and take the
    # absolute value of each one.
    return td.Map(td.Scalar() >> td.Function(weft.abs))


def sequential_sum(shape=()):
    # Compute the sum of a sequence, processing elements in order.
    return td.Fold(td.Function(weft.add), td.FromTensor(np.zeros(shape, "float32")))


def parallel_sum():
    # Compute the sum of a sequence, in parallel.
    return td.Reduce(td.Function(weft.add))


def char_rnn():
    # Convert a string to a vector with a character RNN, using Map and Fold
    return (td.InputTransform(lambda s: [ord(c) for c in s]) >>
            td.Map(td.Scalar("int32") >> td.Function(td.Embedding(128, 16))) >>
            td.Fold(td.Concat() >> td.Function(td.FC(64)),
                    td.FromTensor(np.zeros(64, "float32"))))


def record(num_ids=16, embed_len=16):
    # Takes as input records of the form {'id': n, 'name': some_string, 'location': (x, y)}
    return (td.Record([("id", td.Scalar("int32") >>
                        td.Function(td.Embedding(num_ids, embed_len))),
                       ("name", char_rnn()),
                       ("location", td.Vector(2))]) >>
            td.Concat() >> td.Function(td.FC(128)))


def lstm_cell(num_hidden):
    # The input to lstm_cell is (input_vec, (previous_cell_state, previous_output_vec))
    # The output of lstm_cell is (output_vec, (next_cell_state, output_vec))
    lstm_cell = td.Composition()
    with lstm_cell.scope():
        in_state = td.Identity().reads(lstm_cell.input[1])
        bx = td.Concat().reads(lstm_cell.input[0], in_state[1])     # inputs to gates
        bi = td.Function(td.FC(num_hidden, weft.sigmoid)).reads(bx)  # input gate
        bf = td.Function(td.FC(num_hidden, weft.sigmoid)).reads(bx)  # forget gate
        bo = td.Function(td.FC(num_hidden, weft.sigmoid)).reads(bx)  # output gate
        bg = td.Function(td.FC(num_hidden, weft.tanh)).reads(bx)     # modulation
        bc = td.Function(lambda c, i, f, g: c * f + i * g).reads(in_state[0], bi, bf, bg)
        by = td.Function(lambda c, o: weft.tanh(c) * o).reads(bc, bo)  # final output
        out_state = td.Identity().reads(bc, by)   # make a tuple of (bc, by)
        lstm_cell.output.reads(by, out_state)
    return lstm_cell


def expression():
    # the expr block processes objects of the form:
    # expr_type ::=  {'op': 'lit', 'val': <float>}
    #             |  {'op': 'add', 'left': <expr_type>, 'right': <expr_type>}
    expr_fwd = td.ForwardDeclaration(td.PyObjectType(), td.TensorType([]))
    lit_case = td.GetItem("val") >> td.Scalar()
    add_case = (td.Record({"left": expr_fwd(), "right": expr_fwd()}) >>
                td.Function(weft.add))
    expr = td.OneOf(lambda x: x["op"], {"lit": lit_case, "add": add_case})
    expr_fwd.resolve_to(expr)
    return expr


def has_z_model(num_hidden):
    """The tutorial's string LSTM, ending in 2-way logits, beside the one-hot label."""
    str_lstm = (td.InputTransform(lambda s: [ord(c) for c in s]) >>
                td.Map(td.Scalar("int32") >> td.Function(td.Embedding(128, 16))) >>
                td.RNN(lstm_cell(num_hidden),
                       initial_state=td.AllOf(np.zeros(num_hidden, "float32"),
                                              np.zeros(num_hidden, "float32"))))
    logits = (td.GetItem("word") >> str_lstm >> td.GetItem(1) >> td.GetItem(1) >>
              td.FC(2, activation=None))
    return td.Compiler.create(td.AllOf(logits, td.GetItem("label") >> td.OneHot(2)))


def random_word(rng):
    letters = string.ascii_lowercase
    word = "".join(rng.choice(letters[:25]) for _ in range(rng.randint(2, 8)))
    if rng.random() < 0.5:
        i = rng.randrange(len(word))
        word = word[:i] + "z" + word[i + 1:]
    return {"word": word, "label": int("z" in word)}


def main(argv=None):
    parser = training_arguments(__doc__, train_size=1000, dev_size=200, epochs=5,
                                batch_size=20, learning_rate=0.01)
    parser.add_argument("--num_hidden", type=int, default=16)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    compiler, parameters = build_with_parameters(has_z_model, args.num_hidden)
    history = train_classifier(compiler, parameters, lambda out: (out[0], out[1].value),
                               [random_word(rng) for _ in range(args.train_size)],
                               [random_word(rng) for _ in range(args.dev_size)],
                               args.epochs, args.batch_size, args.learning_rate, seed=args.seed)
    return report(history)


if __name__ == "__main__":
    main()
