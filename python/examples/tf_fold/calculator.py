"""TensorFlow Fold's calculator example on Weft (tensorflow_fold/blocks/examples/calculator): a
recursive model over arithmetic expression trees (ForwardDeclaration, OneOf on the operator,
Record >> Concat >> FC per operator, an Embedding for digits) learns the sign of the result.
CalculatorModel's blocks are the original's with only the import changed; the expressions are
made here as the parsed protos of its make_dataset.py read, and Weft's Trainer trains."""

import random

from weft import blocks as td

from fold_training import build_with_parameters, report, train_classifier, training_arguments

NUM_LABELS = 3  # negative, zero and positive.
OPS = ("PLUS", "MINUS", "TIMES", "DIV")


def preprocess_expression(expr):
    # Set the op field for numbers, so we can handle cases uniformly.
    if expr["number"] is not None:
        expr["op"] = {"name": "NUM"}
    return expr


def result_sign(result):
    if result < 0:
        return 0
    if result == 0:
        return 1
    return 2


class CalculatorModel(object):
    """A Fold model for calculator examples (the original's blocks)."""

    def __init__(self, state_size):
        expr_decl = td.ForwardDeclaration(td.PyObjectType(), state_size)
        digit = (td.GetItem("number") >> td.Scalar(dtype="int32") >>
                 td.Function(td.Embedding(10, state_size, name="terminal_embed")))

        def bin_op(name):
            return (td.Record([("left", expr_decl()), ("right", expr_decl())]) >>
                    td.Concat() >>
                    td.FC(state_size, name="FC_" + name))

        cases = td.OneOf(lambda x: x["op"]["name"],
                         {"NUM": digit,
                          "PLUS": bin_op("PLUS"),
                          "MINUS": bin_op("MINUS"),
                          "TIMES": bin_op("TIMES"),
                          "DIV": bin_op("DIV")})
        expression = td.InputTransform(preprocess_expression) >> cases
        expr_decl.resolve_to(expression)
        expression_logits = (expression >>
                             td.FC(NUM_LABELS, activation=None, name="FC_logits"))
        expression_label = (td.GetItem("result") >>
                            td.InputTransform(result_sign) >>
                            td.OneHot(NUM_LABELS))
        model = td.AllOf(expression_logits, expression_label)
        self._compiler = td.Compiler.create(model)

    @property
    def compiler(self):
        return self._compiler


def random_expression(rng, depth):
    """An expression as the calculator's parsed protos: a digit or an operator on two."""
    if depth == 0 or rng.random() < 0.3:
        n = rng.randint(0, 9)
        return {"op": None, "left": None, "right": None, "number": n, "result": n}
    left, right = random_expression(rng, depth - 1), random_expression(rng, depth - 1)
    op = rng.choice(OPS)
    a, b = left["result"], right["result"]
    if op == "DIV" and b == 0:
        op = "TIMES"
    result = {"PLUS": a + b, "MINUS": a - b, "TIMES": a * b, "DIV": a // b if b else 0}[op]
    return {"op": {"name": op}, "left": left, "right": right, "number": None, "result": result}


def main(argv=None):
    parser = training_arguments(__doc__, train_size=4000, dev_size=500, epochs=10,
                                batch_size=50, learning_rate=0.01)
    parser.add_argument("--state_size", type=int, default=32)
    parser.add_argument("--max_depth", type=int, default=3)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    data = lambda n: [random_expression(rng, args.max_depth) for _ in range(n)]  # noqa: E731
    model, parameters = build_with_parameters(CalculatorModel, args.state_size)
    history = train_classifier(model.compiler, parameters, lambda out: (out[0], out[1].value),
                               data(args.train_size), data(args.dev_size), args.epochs,
                               args.batch_size, args.learning_rate, seed=args.seed)
    return report(history)


if __name__ == "__main__":
    main()
