"""The binary Tree-LSTM of TensorFlow Fold's sentiment notebook (g3doc/sentiment.ipynb) on Weft,
on the Stanford Sentiment Treebank with GloVe vectors. The blocks are the notebook's with only
the import changed: tokenize, logits_and_state, add_metrics and embed_tree read as it wrote
them. What was TensorFlow is Weft here: the Tree-LSTM cell (a td.ScopedLayer over weft ops, as
the notebook's BinaryTreeLSTMCell), the per-node loss and hit functions, and the training loop
(Weft's Trainer, Adagrad, embeddings learning at 0.1x).

    /usr/bin/python3 python/examples/tf_fold/sentiment.py --data ../shared/data --epochs 2
"""

import argparse
import os

import numpy as np

import weft
from weft import blocks as td

NUM_CLASSES = 5  # number of distinct sentiment labels


def load_embeddings(embedding_path):
    """Loads embeddings, returns weight matrix and dict from words to indices."""
    weight_vectors, word_idx = [], {}
    with open(embedding_path, encoding="utf-8") as f:
        for line in f:
            word, vec = line.rstrip("\n").split(" ", 1)
            word_idx[word] = len(weight_vectors)
            weight_vectors.append(np.array(vec.split(), dtype=np.float32))
    for paren, token in (("(", "-LRB-"), (")", "-RRB-")):
        if paren in word_idx:
            word_idx[token] = word_idx.pop(paren)
    weight_vectors.append(np.random.default_rng(0).uniform(
        -0.05, 0.05, weight_vectors[0].shape).astype(np.float32))
    return np.stack(weight_vectors), word_idx


def load_trees(filename, limit=None):
    with open(filename, encoding="utf-8") as f:
        trees = [line.strip().replace("\\", "") for line in f]
    return trees[:limit]


def sexpr_tokenize(text):
    """nltk's sexpr_tokenize: the top-level parenthesised groups (and bare words) of text."""
    tokens, depth, start = [], 0, None
    for i, ch in enumerate(text):
        if ch == "(":
            if depth == 0:
                start = i
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                tokens.append(text[start:i + 1])
        elif depth == 0 and not ch.isspace() and (i == 0 or text[i - 1].isspace()):
            tokens.append(text[i:].split(None, 1)[0])
    return tokens


def binary_tree_lstm_cell(num_units, keep_prob=1.0, forget_bias=1.0):
    """The notebook's BinaryTreeLSTMCell (Tai et al. 2015, section 3.2) as a function with
    parameters: (inputs, ((c0, h0), (c1, h1))) -> (h, (c, h))."""
    def cell(inputs, state, scope):
        (c0, h0), (c1, h1) = state
        x = weft.concat([inputs, h0, h1], 1)
        weights = scope.get_variable("weights", (x.shape[1], 5 * num_units))
        bias = scope.get_variable("bias", (5 * num_units,), 0.0)
        i, j, f0, f1, o = weft.split(weft.linear(x, weights, bias), 5, 1)
        j = weft.tanh(j)
        if keep_prob < 1:
            j = weft.nn.mode_dropout(j, 1.0 - keep_prob)
        new_c = (c0 * weft.sigmoid(f0 + forget_bias) + c1 * weft.sigmoid(f1 + forget_bias) +
                 weft.sigmoid(i) * j)
        new_h = weft.tanh(new_c) * weft.sigmoid(o)
        return new_h, (new_c, new_h)
    return cell


def build(weight_matrix, word_idx, lstm_num_units, keep_prob):
    tree_lstm = td.ScopedLayer(binary_tree_lstm_cell(lstm_num_units, keep_prob),
                               name_or_scope="tree_lstm")
    tree_lstm.state_size = (lstm_num_units, lstm_num_units)
    output_layer = td.FC(NUM_CLASSES, activation=None, name="output_layer")
    word_embedding = td.Embedding(
        *weight_matrix.shape, initializer=weight_matrix, name="word_embedding")
    embed_subtree = td.ForwardDeclaration(name="embed_subtree")

    def logits_and_state():
        """Creates a block that goes from tokens to (logits, state) tuples."""
        unknown_idx = len(word_idx)
        lookup_word = lambda word: word_idx.get(word, unknown_idx)  # noqa: E731
        word2vec = (td.GetItem(0) >> td.InputTransform(lookup_word) >>
                    td.Scalar("int32") >> word_embedding)
        pair2vec = (embed_subtree(), embed_subtree())
        zero_state = td.Zeros((tree_lstm.state_size,) * 2)
        zero_inp = td.Zeros(word_embedding.output_type.shape[0])
        word_case = td.AllOf(word2vec, zero_state)
        pair_case = td.AllOf(zero_inp, pair2vec)
        tree2vec = td.OneOf(len, [(1, word_case), (2, pair_case)])
        return tree2vec >> tree_lstm >> (output_layer, td.Identity())

    def tf_node_loss(logits, labels):
        return weft.softmax_cross_entropy(logits, labels.value)

    def tf_fine_grained_hits(logits, labels):
        predictions = np.argmax(logits.numpy(), 1)
        return weft.current_tape().constant(
            (predictions == labels.numpy()).astype(np.float32))

    def tf_binary_hits(logits, labels):
        softmax = weft.softmax(logits).numpy()
        binary_predictions = (softmax[:, 3] + softmax[:, 4]) > (softmax[:, 0] + softmax[:, 1])
        binary_labels = labels.numpy() > 2
        return weft.current_tape().constant(
            (binary_predictions == binary_labels).astype(np.float32))

    def add_metrics(is_root, is_neutral):
        """A block that adds metrics for loss and hits; output is the LSTM state."""
        c = td.Composition(
            name="predict(is_root=%s, is_neutral=%s)" % (is_root, is_neutral))
        with c.scope():
            labels = c.input[0]
            logits = td.GetItem(0).reads(c.input[1])
            state = td.GetItem(1).reads(c.input[1])
            loss = td.Function(tf_node_loss)
            td.Metric("all_loss").reads(loss.reads(logits, labels))
            if is_root:
                td.Metric("root_loss").reads(loss)
            hits = td.Function(tf_fine_grained_hits)
            td.Metric("all_hits").reads(hits.reads(logits, labels))
            if is_root:
                td.Metric("root_hits").reads(hits)
            if not is_neutral:
                binary_hits = td.Function(tf_binary_hits).reads(logits, labels)
                td.Metric("all_binary_hits").reads(binary_hits)
                if is_root:
                    td.Metric("root_binary_hits").reads(binary_hits)
            c.output.reads(state)
        return c

    def tokenize(s):
        label, phrase = s[1:-1].split(None, 1)
        return label, sexpr_tokenize(phrase)

    def embed_tree(logits_and_state, is_root):
        """Creates a block that embeds trees; output is tree LSTM state."""
        return td.InputTransform(tokenize) >> td.OneOf(
            key_fn=lambda pair: pair[0] == "2",  # label 2 means neutral
            case_blocks=(add_metrics(is_root, is_neutral=False),
                         add_metrics(is_root, is_neutral=True)),
            pre_block=(td.Scalar("int32"), logits_and_state))

    model = embed_tree(logits_and_state(), is_root=True)
    embed_subtree.resolve_to(embed_tree(logits_and_state(), is_root=False))
    compiler = td.Compiler.create(model)
    return compiler, word_embedding, [tree_lstm, output_layer, word_embedding]


def figures(result, training):
    """The notebook's loss (the sum of every node's loss) and its hit rates per batch."""
    trees = len(result.metric("root_loss"))
    loss = weft.sum(result.metric("all_loss").values)
    if training:
        weft.current_tape().backward(loss * (1.0 / trees))
    hits = {}
    for name in result.metric_names:
        if name.endswith("hits"):
            rows = result.metric(name)
            hits[name] = (int(np.sum(rows.values.numpy())) if len(rows) else 0, len(rows))
    return weft.train.BatchFigures(float(loss.item()), trees, hits)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", default=os.environ.get("WEFT_DATA_DIR", "../shared/data"))
    parser.add_argument("--lstm_num_units", type=int, default=300)
    parser.add_argument("--keep_prob", type=float, default=0.75)
    parser.add_argument("--batch_size", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--max_train", type=int, default=None)
    parser.add_argument("--max_dev", type=int, default=None)
    args = parser.parse_args(argv)
    weight_matrix, word_idx = load_embeddings(
        os.path.join(args.data, "glove-sst", "glove.6B.100d.sst.txt"))
    train_trees = load_trees(os.path.join(args.data, "sst", "train.txt"), args.max_train)
    dev_trees = load_trees(os.path.join(args.data, "sst", "dev.txt"), args.max_dev)
    compiler, word_embedding, layers = build(weight_matrix, word_idx, args.lstm_num_units,
                                             args.keep_prob)
    parameters = [p for layer in layers for p in layer.parameters()]
    model = weft.train.BlocksModel(compiler, parameters, figures, train=train_trees,
                                   dev=dev_trees, name="sentiment")
    trainer = weft.train.Trainer(
        epochs=args.epochs, batch_size=args.batch_size, optimizer="adagrad",
        embedding_lr_scale=0.1, embedding_prefix=word_embedding.name + "/",
        learning_rate=args.learning_rate, progress="off", threads=1)
    history = trainer.fit(model)
    for e in history:
        print("epoch:%4d, train_loss: %.3e, dev root_hits: %.2f, all_hits: %.2f" % (
            e["epoch"], e["train"]["loss"], 100 * e["dev"].get("root_hits", 0),
            100 * e["dev"].get("all_hits", 0)))
    return history


if __name__ == "__main__":
    main()
