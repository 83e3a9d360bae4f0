#!/usr/bin/env python3
"""The binary Tree-LSTM of Tai et al. (2015) on the Stanford Sentiment Treebank as a PyTorch
nn.Module trained by torch.optim.Adam, with Weft batching the trees. Two ways in:

  --cells torch   the leaf, the composer and the classifier are torch modules (torch bodies in
                  Weft blocks, one call per depth and operation);
  --cells weft    Weft's own cells (nn.Embedding, NaryTreeLSTMCell, FC) inside the torch model,
                  their parameters nn.Parameters over Weft's memory (weft.torch.Blocks).

Either way the loss (every node's cross-entropy, summed per tree, the batch's mean over trees)
is torch code and loss.backward() runs Weft's tape backward through the bodies.

    /usr/bin/python3 python/examples/torch/sst_tree_lstm.py --epochs 1 --max-train 2000
"""

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

import weft
import weft.torch as wt
from weft import blocks as td
from weft.blocks import Type

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tree_lstm_sst import read_trees  # noqa: E402  (the SST reader of the Weft-only example)


class Leaf(torch.nn.Module):
    """Tai et al.'s leaf: c = W_c x + b_c, h = sigmoid(W_o x + b_o) * tanh(c)."""

    def __init__(self, embedding, n, dropout):
        super().__init__()
        self.embedding, self.proj = embedding, torch.nn.Linear(embedding.embedding_dim, 2 * n)
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, ids):
        c, o = self.proj(self.dropout(self.embedding(ids.long()))).chunk(2, 1)
        return torch.sigmoid(o) * torch.tanh(c), c


class Composer(torch.nn.Module):
    """The binary N-ary Tree-LSTM cell: (h1, c1), (h2, c2) -> (h, c), dropout on the candidate."""

    def __init__(self, n, dropout):
        super().__init__()
        self.gates = torch.nn.Linear(2 * n, 5 * n)
        self.dropout = torch.nn.Dropout(dropout)

    def forward(self, h1, c1, h2, c2):
        i, f1, f2, o, u = self.gates(torch.cat([h1, h2], 1)).chunk(5, 1)
        c = (torch.sigmoid(i) * self.dropout(torch.tanh(u)) + torch.sigmoid(f1) * c1
             + torch.sigmoid(f2) * c2)
        return torch.sigmoid(o) * torch.tanh(c), c


def sst_block(leaf, composer, logits, state):
    """The SST program: a tree's (h, c) by recursion, logits and a labelled metric at every node
    ("nodes"), and the root's logits as the output."""
    tree = td.ForwardDeclaration(Type.input(), state)
    node = td.Composition(name="sst_node")
    s = node.add(td.OneOf(td.GetItem("pair"), [
        td.GetItem("id") >> td.Scalar("int32") >> leaf,
        td.GetItem("children") >> td.Record([tree(), tree()]) >> composer]), node.input())
    node.add(td.Metric("nodes"), [node.add(logits, s), node.add(td.GetItem("label"), node.input())])
    node.set_output(s)
    tree.resolve_to(node)
    return tree() >> logits


class TorchTreeLSTM(torch.nn.Module):
    """The model with torch bodies: every parameter is an ordinary torch parameter."""

    def __init__(self, vocab_size, dim, n, dropout=0.25):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab_size, dim)
        self.leaf = Leaf(self.embedding, n, dropout)
        self.composer = Composer(n, dropout)
        self.classifier = torch.nn.Linear(n, 5)
        self.dropout = torch.nn.Dropout(dropout)
        state = Type.tuple(Type.vector(n), Type.vector(n))
        block = sst_block(
            wt.Function("leaf", [Type.scalar("int32")], self.leaf, state),
            wt.Function("composer", [state, state], self.composer, state),
            wt.Function("logits", [state], lambda h, c: self.classifier(self.dropout(h)),
                        Type.vector(5)), state)
        self.fold = wt.fold(block, metrics=["nodes"], threads=1)

    def forward(self, trees):
        """Root logits [trees, 5], every node's logits [nodes, 5] and their labels."""
        root = self.fold(trees)
        nodes, labels = self.fold.metric("nodes")
        return root, nodes, labels


class WeftTreeLSTM(torch.nn.Module):
    """The same model with Weft's own cells; a torch optimizer trains them (weft.torch.Blocks)."""

    def __init__(self, vocab_size, dim, n, dropout=0.25, seed=0):
        super().__init__()
        self.store = weft.nn.ParameterStore(seed=seed)
        embedding = weft.nn.Embedding(self.store, "embedding", vocab_size, dim, mod_inputs=False)
        self.embedding_table = embedding.table
        leaf_w = self.store.create("leaf/weight", [dim, 2 * n], weft.nn.glorot_uniform())
        leaf_b = self.store.create("leaf/bias", [2 * n])
        cell = weft.nn.NaryTreeLSTMCell(self.store, "composer", 0, n, arity=2,
                                        recurrent_dropout=dropout)
        classifier = weft.nn.FC(self.store, "classifier", n, 5, activation="none",
                                input_dropout=dropout)
        state = Type.tuple(Type.vector(n), Type.vector(n))

        def leaf_body(ids):
            x = weft.nn.mode_dropout(embedding(ids), dropout)
            c, o = weft.split(weft.linear(x, leaf_w, leaf_b), 2)
            return weft.sigmoid(o) * weft.tanh(c), c

        block = sst_block(
            td.Function("leaf", [Type.scalar("int32")], leaf_body),
            td.Function("composer", [state, state],
                        lambda h1, c1, h2, c2: cell(None, [h1, h2], [c1, c2])),
            td.Function("logits", [state], lambda h, c: classifier(h)), state)
        self.weft = wt.Blocks(block, self.store, metrics=["nodes"], threads=1)
        self.rng = weft.Rng(seed)

    def forward(self, trees):
        with weft.forward_mode(self.training, self.rng):  # Weft's dropout follows train()/eval()
            root = self.weft(trees)
        nodes, labels = self.weft.metric("nodes")
        return root, nodes, labels


def loss_of(model, trees):
    root, nodes, labels = model(trees)
    loss = torch.nn.functional.cross_entropy(nodes, labels, reduction="sum") / len(trees)
    return loss, root


def root_accuracy(model, trees, batch_size=256):
    model.eval()
    hits = 0
    with torch.no_grad():
        for i in range(0, len(trees), batch_size):
            batch = trees[i:i + batch_size]
            root, _, _ = model(batch)
            labels = torch.tensor([t["label"] for t in batch])
            hits += int((root.argmax(1) == labels).sum())
    model.train()
    return hits / max(1, len(trees))


def load_glove(table, path, vocab):
    for line in open(path, encoding="utf-8"):
        word, *values = line.rstrip().split(" ")
        if word in vocab:
            table[vocab[word]] = torch.tensor(np.asarray(values, dtype=np.float32))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=os.environ.get("WEFT_DATA_DIR", "../shared/data"))
    p.add_argument("--cells", choices=["torch", "weft"], default="torch")
    p.add_argument("--hidden", type=int, default=150)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=25)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--max-train", type=int, default=0)
    p.add_argument("--max-eval", type=int, default=0, help="dev and test trees (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-embeddings", action="store_true", help="random word vectors, not GloVe")
    args = p.parse_args(argv)
    data = Path(args.data_dir)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    vocab = {"<unk>": 0}
    train = read_trees(data / "sst/train.txt", vocab, True, args.max_train or None)
    # One vocabulary over every split's words, as `weft train sentiment` builds it: a dev or test
    # word keeps its GloVe vector (unsupervised), only training trees move the vectors.
    dev = read_trees(data / "sst/dev.txt", vocab, True, args.max_eval or None)
    test = read_trees(data / "sst/test.txt", vocab, True, args.max_eval or None)
    glove = None if args.no_embeddings else data / "glove-sst/glove.6B.100d.sst.txt"
    if args.cells == "torch":
        model = TorchTreeLSTM(len(vocab), 100, args.hidden)
        table = model.embedding.weight
    else:
        model = WeftTreeLSTM(len(vocab), 100, args.hidden, seed=args.seed)
        table = model.weft.weft["embedding_table"]
    if glove is not None and glove.exists():
        with torch.no_grad():
            load_glove(table, glove, vocab)
    opt = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    rng = np.random.default_rng(args.seed)
    history = []
    print(f"{len(train)} training trees, {len(dev)} dev trees, {len(vocab)} words, "
          f"{args.cells} cells", flush=True)
    for epoch in range(1, args.epochs + 1):
        start, total = time.perf_counter(), 0.0
        order = rng.permutation(len(train))
        for i in range(0, len(train), args.batch_size):
            batch = [train[k] for k in order[i:i + args.batch_size]]
            opt.zero_grad()
            loss, _ = loss_of(model, batch)
            loss.backward()
            opt.step()
            total += float(loss) * len(batch)
        seconds = time.perf_counter() - start
        figures = {"epoch": epoch, "loss": total / len(train),
                   "dev_root": root_accuracy(model, dev),
                   "trees_per_second": len(train) / seconds}
        history.append(figures)
        print(f"epoch {epoch}: loss {figures['loss']:.3f}, dev root accuracy "
              f"{figures['dev_root']:.3f}, {figures['trees_per_second']:.1f} trees/s", flush=True)
    history[-1]["test_root"] = root_accuracy(model, test)  # the last epoch's model
    print(f"test root accuracy {history[-1]['test_root']:.4f} ({len(test)} trees)", flush=True)
    return history


if __name__ == "__main__":
    main(sys.argv[1:])
