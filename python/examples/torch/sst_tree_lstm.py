#!/usr/bin/env python3
"""The binary Tree-LSTM of Tai et al. (2015) on the Stanford Sentiment Treebank as a PyTorch
nn.Module trained by torch optimizers, with Weft batching the trees. Two ways in:

  --cells torch   the leaf, the composer and the classifier are torch modules (torch bodies in
                  Weft blocks, one call per depth and operation);
  --cells weft    Weft's own cells (nn.Embedding, NaryTreeLSTMCell, FC) inside the torch model,
                  their parameters nn.Parameters over Weft's memory (weft.torch.Blocks).

Either way the loss (every node's cross-entropy, summed per tree, the batch's mean over trees)
is torch code and loss.backward() runs Weft's tape backward through the bodies. The word vectors
get a row-sparse gradient (torch's sparse COO: only the rows a batch used), trained by
torch.optim.SparseAdam, the rest by torch.optim.Adam (--dense-embeddings: one dense Adam;
--optimizer weft: one weft.torch.Adam, Weft's fused update, lazy on the word vectors' rows).

The data, the vocabulary and the initial weights are those of `weft train sentiment` at the same
seed (weft.models.create("sentiment")), the batches come in the Trainer's order
(weft.train.epoch_order) and the dropout masks are the Trainer's draws (Weft's cells draw them
themselves; torch bodies through weft.torch.WeftDropout), so the two runs start from the same
model, see the same batches and drop the same units.

    /usr/bin/python3 python/examples/torch/sst_tree_lstm.py --epochs 1 --max-train 2000
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

import weft
import weft.torch as wt
from weft import blocks as td
from weft.blocks import Type


def dropout_module(p, weft_draws):
    """torch's Dropout, or weft.torch.WeftDropout: the masks Weft's own layers would draw."""
    return wt.WeftDropout(p) if weft_draws else torch.nn.Dropout(p)


class Leaf(torch.nn.Module):
    """Tai et al.'s leaf: c = W_c x + b_c, h = sigmoid(W_o x + b_o) * tanh(c)."""

    def __init__(self, embedding, n, dropout, weft_draws=False):
        super().__init__()
        self.embedding, self.proj = embedding, torch.nn.Linear(embedding.embedding_dim, 2 * n)
        self.dropout = dropout_module(dropout, weft_draws)

    def forward(self, ids):
        c, o = self.proj(self.dropout(self.embedding(ids.long()))).chunk(2, 1)
        return torch.sigmoid(o) * torch.tanh(c), c


class Composer(torch.nn.Module):
    """The binary N-ary Tree-LSTM cell: (h1, c1), (h2, c2) -> (h, c), dropout on the candidate.
    Its gates come in the order of Weft's NaryTreeLSTMCell (f1, f2, i, u, o)."""

    def __init__(self, n, dropout, weft_draws=False):
        super().__init__()
        self.gates = torch.nn.Linear(2 * n, 5 * n)
        self.dropout = dropout_module(dropout, weft_draws)

    def forward(self, h1, c1, h2, c2):
        f1, f2, i, u, o = self.gates(torch.cat([h1, h2], 1)).chunk(5, 1)
        c = (torch.sigmoid(f1) * c1 + torch.sigmoid(f2) * c2
             + torch.sigmoid(i) * self.dropout(torch.tanh(u)))
        return torch.sigmoid(o) * torch.tanh(c), c


def sst_block(leaf, composer, logits, state):
    """The SST program, as `weft train sentiment` builds it: a tree's (h, c) by recursion, logits
    and a labelled metric at every node ("nodes"), the root's logits as the output (and its
    metric "root")."""
    tree = td.ForwardDeclaration(Type.input(), state)
    node = td.Composition(name="sst_node")
    s = node.add(td.OneOf(td.GetItem("pair"), [
        td.GetItem("id") >> td.Scalar("int32") >> leaf,
        td.GetItem("children") >> td.Record([tree(), tree()]) >> composer]), node.input())
    node.add(td.Metric("nodes"), [node.add(logits, s), node.add(td.GetItem("label"), node.input())])
    node.set_output(s)
    tree.resolve_to(node)
    graph = td.Composition(name="sentiment")
    root = graph.add(logits, graph.add(tree(), graph.input()))
    graph.add(td.Metric("root"), [root, graph.add(td.GetItem("label"), graph.input())])
    graph.set_output(root)
    return graph


class TorchTreeLSTM(torch.nn.Module):
    """The model with torch bodies: every parameter is an ordinary torch parameter (the word
    vectors' gradient sparse with sparse=True, as nn.Embedding(sparse=True)). With a seed its
    dropout draws Weft's masks from weft.Rng(seed) (WeftDropout), as `weft train` would; without,
    torch's."""

    def __init__(self, vocab_size, dim, n, dropout=0.25, sparse=False, seed=None):
        super().__init__()
        weft_draws = seed is not None
        self.rng = weft.Rng(seed) if weft_draws else None
        self.embedding = torch.nn.Embedding(vocab_size, dim, sparse=sparse)
        self.leaf = Leaf(self.embedding, n, dropout, weft_draws)
        self.composer = Composer(n, dropout, weft_draws)
        self.classifier = torch.nn.Linear(n, 5)
        self.dropout = dropout_module(dropout, weft_draws)
        state = Type.tuple(Type.vector(n), Type.vector(n))
        block = sst_block(
            wt.Function("leaf", [Type.scalar("int32")], self.leaf, state),
            wt.Function("composer", [state, state], self.composer, state),
            wt.Function("logits", [state], lambda h, c: self.classifier(self.dropout(h)),
                        Type.vector(5)), state)
        self.fold = wt.fold(block, metrics=["nodes"], threads=1, strategy="sinks_last")

    def forward(self, trees):
        """Root logits [trees, 5], every node's logits [nodes, 5] and their labels."""
        if self.rng is None:
            root = self.fold(trees)
        else:
            with weft.forward_mode(self.training, self.rng):  # WeftDropout's draws
                root = self.fold(trees)
        nodes, labels = self.fold.metric("nodes")
        return root, nodes, labels

    def word_vectors(self):
        return self.embedding.weight

    def load_weft_values(self, values):
        """Weights from Weft's layout (name -> array, weft.models.create("sentiment")'s names):
        Weft's [in, out] weights are torch's [out, in] transposed."""
        pairs = [(self.embedding.weight, "embedding/table", False),
                 (self.leaf.proj.weight, "leaf/weight", True), (self.leaf.proj.bias, "leaf/bias", False),
                 (self.composer.gates.weight, "composer/weight", True),
                 (self.composer.gates.bias, "composer/bias", False),
                 (self.classifier.weight, "classifier/weight", True),
                 (self.classifier.bias, "classifier/bias", False)]
        with torch.no_grad():
            for param, name, transposed in pairs:
                value = torch.from_numpy(np.asarray(values[name], dtype=np.float32))
                param.copy_(value.t() if transposed else value)


class WeftTreeLSTM(torch.nn.Module):
    """The same model with Weft's own cells, built as `weft train sentiment` builds it; a torch
    optimizer trains them (weft.torch.Blocks). With sparse=True the word vectors' gradient
    reaches torch as a sparse COO tensor (Embedding(..., sparse_gradient=True))."""

    def __init__(self, vocab_size, dim, n, dropout=0.25, seed=0, sparse=False):
        super().__init__()
        self.store = weft.nn.ParameterStore(seed=seed)
        embedding = weft.nn.Embedding(self.store, "embedding", vocab_size, dim, mod_inputs=False,
                                      sparse_gradient=sparse)
        leaf_w = self.store.create("leaf/weight", [dim, 2 * n], weft.nn.glorot_uniform())
        leaf_b = self.store.create("leaf/bias", [2 * n])
        cell = weft.nn.NaryTreeLSTMCell(self.store, "composer", 0, n, arity=2,
                                        recurrent_dropout=dropout)
        classifier = weft.nn.FC(self.store, "classifier", n, 5, activation="none",
                                input_dropout=dropout)
        state = Type.tuple(Type.vector(n), Type.vector(n))

        def leaf_body(ids):
            x = weft.nn.mode_dropout(embedding(ids), dropout)
            co = weft.linear(x, leaf_w, leaf_b)  # [c | o]
            c = weft.slice(co, 1, 0, n)
            return weft.lstm_hidden(co, n, c), c

        # The composer and the classifier are Weft's native blocks (C++ bodies, fused kernels);
        # the leaf is a Python body over Weft's ops (one call per batch).
        block = sst_block(
            td.Function("leaf", [Type.scalar("int32")], leaf_body),
            td.TreeLSTMBlock(cell), td.GetItem(0) >> td.FCBlock(classifier), state)
        self.weft = wt.Blocks(block, self.store, metrics=["nodes"], threads=1,
                              strategy="sinks_last")
        self.rng = weft.Rng(seed)  # the dropout draws, as the Trainer's Rng(seed)

    def forward(self, trees):
        with weft.forward_mode(self.training, self.rng):  # Weft's dropout follows train()/eval()
            root = self.weft(trees)
        nodes, labels = self.weft.metric("nodes")
        return root, nodes, labels

    def word_vectors(self):
        return self.weft.weft["embedding_table"]

    def load_weft_values(self, values):
        """Weights by Weft name, copied into the parameters' memory (which torch views)."""
        with torch.no_grad():
            for p in self.store.parameters:
                torch.from_dlpack(p.value).copy_(
                    torch.from_numpy(np.asarray(values[p.name], dtype=np.float32)))


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


def with_pair_keys(tree):
    """A tree of the registered model ({"id"} leaves, {"children"} pairs) with "pair": 0 / 1,
    which lets a native GetItem pick the case (no Python call per node while weaving)."""
    if "children" in tree:
        return {"label": tree["label"], "pair": 1,
                "children": [with_pair_keys(t) for t in tree["children"]]}
    return {"label": tree["label"], "pair": 0, "id": tree["id"]}


def optimizers(model, learning_rate, sparse, fused=False):
    """SparseAdam for the word vectors' sparse gradient and Adam for the rest (sparse), or one
    Adam (dense). SparseAdam is Adam's lazy variant: a row moves, and its moments decay, only in
    the steps whose batch used the word, as `weft train --sparse-updates lazy`. `fused`: one
    weft.torch.Adam for all (Weft's fused update; lazy on the sparse rows, eps as Adam's)."""
    if fused:
        return [wt.Adam(model.parameters(), lr=learning_rate)]
    if not sparse:
        return [torch.optim.Adam(model.parameters(), lr=learning_rate, foreach=True)]
    table = model.word_vectors()
    rest = [p for p in model.parameters() if p is not table]
    return [torch.optim.SparseAdam([table], lr=learning_rate),
            torch.optim.Adam(rest, lr=learning_rate, foreach=True)]


def registered_model(args):
    """`weft train sentiment`'s model at this seed: its data (vocabulary, GloVe vectors) and
    initial weights."""
    return weft.models.create(
        "sentiment", data_dir=args.data_dir, seed=args.seed, hidden=args.hidden,
        embedding_aliases="none", max_train=args.max_train, max_eval=args.max_eval,
        no_embeddings=args.no_embeddings)


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
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-embeddings", action="store_true", help="random word vectors, not GloVe")
    p.add_argument("--dense-embeddings", action="store_true",
                   help="a dense gradient for the word vectors and one dense Adam")
    p.add_argument("--torch-dropout", action="store_true",
                   help="--cells torch: torch's dropout masks, not Weft's draws (WeftDropout)")
    p.add_argument("--optimizer", choices=["torch", "weft"], default="torch",
                   help="torch: torch.optim's SparseAdam and Adam; weft: weft.torch.Adam")
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    cli = registered_model(args)
    train, dev, test = ([with_pair_keys(t) for t in cli.examples(split)]
                        for split in ("train", "dev", "test"))
    values = {q.name: q.numpy() for q in cli.parameters()}
    vocab_size, dim = values["embedding/table"].shape
    sparse = not args.dense_embeddings
    if args.cells == "torch":
        model = TorchTreeLSTM(vocab_size, dim, args.hidden, sparse=sparse,
                              seed=None if args.torch_dropout else args.seed)
    else:
        model = WeftTreeLSTM(vocab_size, dim, args.hidden, seed=args.seed, sparse=sparse)
    model.load_weft_values(values)
    opts = optimizers(model, args.learning_rate, sparse, fused=args.optimizer == "weft")
    train_inputs = td.Inputs(train)  # converted for Weft once, not every epoch
    history = []
    print(f"{len(train)} training trees, {len(dev)} dev trees, {vocab_size} words, "
          f"{args.cells} cells, {'sparse' if sparse else 'dense'} word-vector gradients, "
          f"{args.optimizer} optimizer",
          flush=True)
    for epoch in range(1, args.epochs + 1):
        start, total = time.perf_counter(), 0.0
        order = weft.train.epoch_order(len(train), args.seed, epoch)  # the Trainer's batches
        for i in range(0, len(train), args.batch_size):
            batch = train_inputs.take(order[i:i + args.batch_size])
            for opt in opts:
                opt.zero_grad(set_to_none=True)
            loss, _ = loss_of(model, batch)
            loss.backward()
            for opt in opts:
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
