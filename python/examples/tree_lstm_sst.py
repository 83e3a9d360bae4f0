#!/usr/bin/env python3
"""The binary Tree-LSTM of Tai et al. (2015) on the Stanford Sentiment Treebank, written with
Weft blocks from Python: the same model as `weft train sentiment` (a leaf module, the N-ary
Tree-LSTM composer, 5-class logits and a labelled metric at every node), trained by Weft's
Trainer with the model's recipe (Adagrad 0.05, weight decay 1e-4, embeddings at 0.1x).

    /usr/bin/python3 python/examples/tree_lstm_sst.py --epochs 1 --max-train 2000 --threads 1

The Python functions below run once per batched call (per depth and operation), not per node.
"""

import argparse
import os
import re
import time
from pathlib import Path

import numpy as np

import weft
from weft import blocks as td
from weft.blocks import Type


def read_trees(path, vocab, grow, limit=None):
    """Bracketed SST trees -> {"label", "pair": 0, "id"} leaves / {"label", "pair": 1, "children"}
    nodes ("pair" lets a native GetItem pick the case: no Python call per node while weaving)."""
    trees = []
    for line in open(path, encoding="utf-8"):
        # Words split at ASCII blanks only: SST has words with a no-break space ("8\xa01\\/2").
        tokens = re.findall(r"\(|\)|[^ \t\r\n()]+", line)
        pos = 0

        def node():
            nonlocal pos
            pos += 1  # "("
            label = int(tokens[pos])
            pos += 1
            if tokens[pos] == "(":
                children = [node(), node()]
                pos += 1  # ")"
                return {"label": label, "pair": 1, "children": children}
            word = tokens[pos].lower()
            pos += 2  # word ")"
            if word not in vocab and grow:
                vocab[word] = len(vocab)
            return {"label": label, "pair": 0, "id": vocab.get(word, 0)}

        trees.append(node())
        if limit and len(trees) == limit:
            break
    return trees


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=os.environ.get("WEFT_DATA_DIR", "../shared/data"),
                   help="the shared data folder (default: $WEFT_DATA_DIR, else ../shared/data)")
    p.add_argument("--hidden", type=int, default=150)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=25)
    p.add_argument("--max-train", type=int, default=0)
    p.add_argument("--max-eval", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dropout", type=float, default=0.25)
    p.add_argument("--no-embeddings", action="store_true", help="random word vectors, not GloVe")
    p.add_argument("--embedding-dim", type=int, default=100)
    p.add_argument("--log", default="")
    args = p.parse_args()
    data = Path(args.data_dir)

    vocab = {"<unk>": 0}
    train = read_trees(data / "sst/train.txt", vocab, True, args.max_train or None)
    dev = read_trees(data / "sst/dev.txt", vocab, False, args.max_eval or None)
    store = weft.nn.ParameterStore(seed=0)
    glove = None if args.no_embeddings else data / "glove-sst/glove.6B.100d.sst.txt"
    dim = args.embedding_dim if glove is None else 100
    embedding = weft.nn.Embedding(store, "embedding", len(vocab), dim, mod_inputs=False)
    if glove is not None:
        table = embedding.table.numpy()
        for line in open(glove, encoding="utf-8"):
            word, *values = line.rstrip().split(" ")
            if word in vocab:
                table[vocab[word]] = np.asarray(values, dtype=np.float32)

    # ---- The model -------------------------------------------------------------------------
    n, drop = args.hidden, args.dropout
    leaf_w = store.create("leaf/weight", [dim, 2 * n], weft.nn.glorot_uniform())
    leaf_b = store.create("leaf/bias", [2 * n])
    composer = weft.nn.NaryTreeLSTMCell(store, "composer", 0, n, arity=2, recurrent_dropout=drop)
    classifier = weft.nn.FC(store, "classifier", n, 5, activation="none", input_dropout=drop)
    state = Type.tuple(Type.vector(n), Type.vector(n))  # (h, c)

    def leaf_body(ids):  # Tai et al.'s leaf: c = W_c x + b_c, h = sigmoid(W_o x + b_o) tanh(c)
        x = weft.nn.mode_dropout(embedding(ids), drop)
        c, o = weft.split(weft.linear(x, leaf_w, leaf_b), 2)
        return weft.sigmoid(o) * weft.tanh(c), c

    tree = td.ForwardDeclaration(Type.input(), state)
    leaf = td.GetItem("id") >> td.Scalar("int32") >> td.Function("leaf", [Type.scalar("int32")], leaf_body)
    pair = td.GetItem("children") >> td.Record([tree(), tree()]) >> td.Function(
        "composer", [state, state], lambda h1, c1, h2, c2: composer(None, [h1, h2], [c1, c2]))
    logits = td.Function("logits", [state], lambda h, c: classifier(h))
    node = td.Composition(name="sst_node")
    s = node.add(td.OneOf(td.GetItem("pair"), [leaf, pair]), node.input())
    node.add(td.Metric("nodes"), [node.add(logits, s), node.add(td.GetItem("label"), node.input())])
    node.set_output(s)
    tree.resolve_to(node)
    root = td.Composition(name="sentiment")
    root_logits = root.add(logits, root.add(tree(), root.input()))
    root.add(td.Metric("root"), [root_logits, root.add(td.GetItem("label"), root.input())])
    root.set_output(root_logits)
    compiler = td.Compiler(root, threads=1)

    def figures(result, training):  # loss: every node's cross-entropy, summed per tree
        nodes, roots = result.metric("nodes"), result.metric("root")
        labels = nodes.label_tensor()
        loss = weft.sum(weft.softmax_cross_entropy(nodes.values, labels))
        trees = len(roots)
        if training:  # the batch's mean over trees, on the model's tape (current here)
            weft.current_tape().backward(loss * (1.0 / trees))
        hits = {"all": (weft.train.argmax_hits(nodes.values.value, labels), len(nodes)),
                "root": (weft.train.argmax_hits(roots.values.value, roots.label_tensor()), trees)}
        return weft.train.BatchFigures(loss.item(), trees, hits)

    # -----------------------------------------------------------------------------------------

    model = weft.train.BlocksModel(compiler, store.parameters, figures, train=train, dev=dev, name="sst")
    weft.train.set_num_threads(args.threads)
    trainer = weft.train.Trainer(epochs=args.epochs, batch_size=args.batch_size, optimizer="adagrad",
                                 weight_decay=1e-4, embedding_lr_scale=0.1, learning_rate=0.05, best_metric="root", threads=args.threads,
                                 log=args.log, progress="lines")
    print(f"{len(train)} training trees, {len(dev)} dev trees, {len(vocab)} words, "
          f"{compiler.num_operations} loom operations")
    start = time.perf_counter()
    for e in trainer.fit(model):
        print(f"epoch {e['epoch']}: loss {e['train']['loss']:.3f}, dev root accuracy "
              f"{e['dev'].get('root', 0):.3f}, {e['examples_per_second']:.1f} trees/s")
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
