#!/usr/bin/env python3
"""The PyTorch peer of `weft train sentiment`: the binary Tree-LSTM of Tai et al. (2015) on SST.

Same model as src/models/sentiment.cpp: word vector -> dropout -> leaf linear to [c | o],
h = sigmoid(o) tanh(c); a pair of children -> one linear of [h_l | h_r] to [f_l | f_r | i | g | o],
c = sigmoid(f_l) c_l + sigmoid(f_r) c_r + sigmoid(i) dropout(tanh(g)), h = sigmoid(o) tanh(c);
every node's h -> dropout -> linear to 5 logits, cross entropy summed over a tree's nodes and
averaged over the batch's trees. Same recipe: Adagrad 0.05 (accumulator from 0, eps 1e-8, L2
decay 1e-4 added to the gradient), the word vectors at 0.1x with lazy row updates, batch 25.
Batched the TorchFold way: per depth one index_select of the children's h and c rows, one cell
call on every node of that depth across the batch, the results concatenated onto the values.
With --device cuda the model runs on the GPU the way a GPU training loop should: a batch's index
arrays (words, every depth's child rows, labels, roots, the distinct words) packed into one
pinned buffer and sent with one asynchronous copy, no host synchronisation inside a batch (the
loss is summed on the device and read once per epoch; the word vectors' lazy Adagrad rows are
the distinct words the host already knows), and the epoch timed between synchronisations.

  --check CKPT     the same loss, accuracies and root predictions as `weft eval` / `weft infer`
                   on the same weights (a Weft checkpoint) and trees, in evaluation mode
  --check-step     one training step without dropout from Weft's initial weights: the same
                   loss, gradients (Weft's Adagrad accumulator) and updated weights as Weft's
  --train          trains epochs and prints trees/s as Weft's examples_per_second (training
                   only); --init CKPT starts from a Weft checkpoint's weights and vocabulary,
                   and with --weft first runs --check on it (on --device), timing nothing if
                   the figures differ
  --device cuda    every mode on the GPU (default cpu)

Usage: /usr/bin/python3 bench/peers/torch_sentiment.py --check sst.safetensors --weft W
       /usr/bin/python3 bench/peers/torch_sentiment.py --train --epochs 1 --threads 1
       python3 bench/peers/torch_sentiment.py --train --device cuda --init CKPT --weft W
Needs Debian's python3-torch and python3-numpy; exits 77 (a skip for ctest) without torch.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CLASSES = 5
GATES = ("f1", "f2", "i", "g", "o")  # the composer's column blocks in Weft's order


sys.path.insert(0, HERE)
from peer_threads import pin_gemm_threads, start_torch  # noqa: E402

pin_gemm_threads()  # before torch loads
from torch_treelstm import load_safetensors, torch  # noqa: E402

if torch is not None:
    import torch.nn.functional as F


# ---------------------------------------------------------------------------- data


TOKEN = re.compile(r"\(|\)|[^ ()]+")  # SST splits on ASCII spaces only (PROVENANCE.md)


def parse_tree(line):
    """A bracketed SST line as nested tuples: (label, word) or (label, left, right)."""
    tokens = TOKEN.findall(line.rstrip("\r\n"))
    pos = 0

    def node():
        nonlocal pos
        assert tokens[pos] == "(", f"expected '(' in {line!r}"
        label = int(tokens[pos + 1])
        pos += 2
        if tokens[pos] != "(":
            word = tokens[pos]
            pos += 2  # the word and ')'
            return (label, word)
        children = []
        while tokens[pos] == "(":
            children.append(node())
        pos += 1
        assert len(children) == 2, "the binary Tree-LSTM needs binary trees"
        return (label, children[0], children[1])

    return node()


def read_split(data_dir, name, limit):
    """The split's lines and trees; with 0 < limit < size, evenly spaced trees i * size / limit
    as Weft's --max-train / --max-eval take them (the files are ordered by label)."""
    with open(os.path.join(data_dir, "sst", name + ".txt"), encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    if 0 < limit < len(lines):
        lines = [lines[i * len(lines) // limit] for i in range(limit)]
    return lines, [parse_tree(line) for line in lines]


def leaf_words(tree, out):
    if len(tree) == 2:
        out.append(tree[1])
    else:
        leaf_words(tree[1], out)
        leaf_words(tree[2], out)
    return out


def build_vocabulary(trees):
    """Weft's io::build_vocabulary: "<unk>", then words by count, ties in order of appearance."""
    counts = {}
    for tree in trees:
        for word in leaf_words(tree, []):
            counts[word] = counts.get(word, 0) + 1
    return ["<unk>"] + sorted(counts, key=lambda w: -counts[w])  # sorted() is stable


def encode(tree, index):
    """Words to ids (unknown: 0), as Weft's examples hold them."""
    if len(tree) == 2:
        return (tree[0], index.get(tree[1], 0))
    return (tree[0], encode(tree[1], index), encode(tree[2], index))


def glove_matrix(vocabulary, path, aliases_path, seed, scale=0.05):
    """Weft's io::build_embedding_matrix with VectorLookup::kGloveUncased and the alias table:
    a word's vector (exact, lower case, lower case without PTB backslashes), else its alias's;
    other rows uniform in [-0.05, 0.05] (NumPy's generator, not Weft's Rng)."""
    vectors = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split(" ")
            vectors.setdefault(fields[0], fields[1:])
    aliases = {}
    if aliases_path:
        with open(aliases_path, encoding="utf-8") as f:
            for line in f:
                fields = line.split()
                if fields and not fields[0].startswith("#"):
                    aliases[fields[0]] = fields[1]

    def lookup(word):
        lower = word.lower()
        for key in (word, lower, re.sub(r"\\(?=.)", "", lower)):
            if key in vectors:
                return vectors[key]
        return vectors.get({"-LRB-": "(", "-RRB-": ")"}.get(word, ""))

    dim = len(next(iter(vectors.values())))
    matrix = np.random.default_rng(seed).uniform(-scale, scale, (len(vocabulary), dim))
    matrix = matrix.astype(np.float32)
    found = 0
    for i, word in enumerate(vocabulary[1:], 1):
        row = lookup(word)
        alias = aliases.get(word, aliases.get(word.lower()))
        if row is None and alias is not None:
            row = lookup(alias)
        if row is not None:
            matrix[i] = np.array(row, dtype=np.float32)
            found += 1
    print(f"torch_sentiment: {found} of {len(vocabulary) - 1} vocabulary words have a vector")
    return matrix


def fresh_weights(embeddings, hidden, seed):
    """Weft's initializers: Glorot uniform (leaf, composer), uniform unit scaling (classifier),
    zero biases but the composer's forget gates at 1. NumPy's generator, not Weft's Rng."""
    rng = np.random.default_rng(seed + 1)
    dim = embeddings.shape[1]

    def uniform(shape, limit):
        return rng.uniform(-limit, limit, shape).astype(np.float32)

    composer_bias = np.zeros(5 * hidden, dtype=np.float32)
    composer_bias[: 2 * hidden] = 1.0
    return {
        "embedding/table": embeddings,
        "leaf/weight": uniform((dim, 2 * hidden), np.sqrt(6.0 / (dim + 2 * hidden))),
        "leaf/bias": np.zeros(2 * hidden, dtype=np.float32),
        "composer/weight": uniform((2 * hidden, 5 * hidden), np.sqrt(6.0 / (7 * hidden))),
        "composer/bias": composer_bias,
        "classifier/weight": uniform((hidden, CLASSES), np.sqrt(3.0 / hidden)),
        "classifier/bias": np.zeros(CLASSES, dtype=np.float32),
    }


def read_checkpoint(path):
    """Weights ("model/..."; a checkpoint also holds "best/..." and the optimizer's state),
    model options and vocabulary of a Weft sentiment checkpoint, and all its tensors."""
    tensors, metadata = load_safetensors(path)
    if metadata.get("model_name") != "sentiment":
        sys.exit(f"torch_sentiment: {path} is not a sentiment checkpoint")
    config = json.loads(metadata["config"])["model"]
    weights = {k[6:]: v for k, v in tensors.items() if k.startswith("model/")}
    return weights, config["options"], config["assets"]["vocabulary"], tensors


# ---------------------------------------------------------------------------- the model


def weave(trees, device="cpu"):
    """The batch's schedule: leaf word ids, then per depth the interleaved [l0, r0, l1, r1, ..]
    rows of the values (leaves first, then each depth's nodes appended), every node's label in
    value order, each tree's root row, and the distinct word ids (the embedding rows the batch
    updates). All of them one int64 buffer on the host, sent to `device` by one copy (pinned and
    asynchronous on a GPU) and cut there into views: no other upload, no wait."""
    words, labels, levels, level_labels = [], [], [], []

    def visit(node):  # -> (depth, index within the depth)
        if len(node) == 2:
            words.append(node[1])
            labels.append(node[0])
            return (0, len(words) - 1)
        left, right = visit(node[1]), visit(node[2])
        depth = 1 + max(left[0], right[0])
        while len(levels) < depth:
            levels.append([])
            level_labels.append([])
        levels[depth - 1].append((left, right))
        level_labels[depth - 1].append(node[0])
        return (depth, len(levels[depth - 1]) - 1)

    roots = [visit(tree) for tree in trees]
    offsets = [0, len(words)]
    for nodes in levels:
        offsets.append(offsets[-1] + len(nodes))
    steps = [[offsets[d] + i for pair in nodes for d, i in pair] for nodes in levels]
    for more in level_labels:
        labels += more
    root_rows = [offsets[d] + i for d, i in roots]
    parts = [words, *steps, labels, root_rows, sorted(set(words))]
    packed = torch.from_numpy(np.fromiter((v for part in parts for v in part), np.int64))
    if device != "cpu":
        packed = packed.pin_memory().to(device, non_blocking=True)
    views = torch.split(packed, [len(part) for part in parts])
    return (views[0], list(views[1 : 1 + len(steps)]), *views[1 + len(steps) :])


class TreeLSTM:
    """The parameters under Weft's checkpoint names, and the forward of a woven batch."""

    def __init__(self, weights, dropout, recurrent_dropout, layout=GATES, device="cpu"):
        self.device = device
        # Row-sparse gradients on the CPU; on the GPU a dense one (coalescing a sparse gradient
        # there waits for the device), of which the optimizer reads the batch's rows.
        self.sparse_embedding = device == "cpu"
        self.params = {
            name: torch.tensor(
                np.array(weights[name], dtype=np.float32), device=device, requires_grad=True
            )
            for name in (
                "embedding/table",
                "leaf/weight",
                "leaf/bias",
                "composer/weight",
                "composer/bias",
                "classifier/weight",
                "classifier/bias",
            )
        }
        self.hidden = self.params["classifier/weight"].shape[0]
        if tuple(layout) != GATES:  # read the checkpoint's column blocks in another order
            n = self.hidden
            order = [layout.index(gate) for gate in GATES]
            with torch.no_grad():
                for name in ("composer/weight", "composer/bias"):
                    p = self.params[name]
                    blocks = [p[..., k * n : (k + 1) * n] for k in order]
                    p.copy_(torch.cat(blocks, -1))
        self.dropout = dropout
        self.recurrent_dropout = recurrent_dropout

    def __getitem__(self, name):
        return self.params[name]

    def forward(self, woven, training):
        """The logits of every node, in the order of the woven labels."""
        words, steps = woven[0], woven[1]
        p, n = self.params, self.hidden
        x = F.embedding(words, p["embedding/table"], sparse=self.sparse_embedding)
        x = F.dropout(x, self.dropout, training)
        leaf = torch.addmm(p["leaf/bias"], x, p["leaf/weight"])  # [c | o]
        cs = leaf[:, :n]
        hs = torch.sigmoid(leaf[:, n:]) * torch.tanh(cs)
        for k, idx in enumerate(steps):
            h2 = hs.index_select(0, idx).view(-1, 2 * n)  # [h_l | h_r]
            c2 = cs.index_select(0, idx).view(-1, 2 * n)  # [c_l | c_r]
            gates = torch.addmm(p["composer/bias"], h2, p["composer/weight"])
            s = torch.sigmoid(gates)  # f_l, f_r, i and o are used; g's sigmoid is not
            g = F.dropout(torch.tanh(gates[:, 3 * n : 4 * n]), self.recurrent_dropout, training)
            fc = s[:, : 2 * n] * c2
            c = fc[:, :n] + fc[:, n:] + s[:, 2 * n : 3 * n] * g
            hs = torch.cat([hs, s[:, 4 * n :] * torch.tanh(c)], 0)
            if k + 1 < len(steps):
                cs = torch.cat([cs, c], 0)
        states = F.dropout(hs, self.dropout, training)
        return torch.addmm(p["classifier/bias"], states, p["classifier/weight"])


def loss_sum(model, woven, training):
    logits = model.forward(woven, training)
    return F.cross_entropy(logits, woven[2], reduction="sum"), logits


class Adagrad:
    """Weft's Adagrad: s += (g + decay w)^2; w -= lr (g + decay w) / (sqrt(s) + eps), s from 0.
    The dense parameters through torch.optim.Adagrad (the same rule); the row-sparse word
    vectors by hand, lazily (only the rows the batch used, their sum and their decay), because
    torch.optim.Adagrad refuses weight_decay with sparse gradients."""

    def __init__(self, model, lr=0.05, weight_decay=1e-4, embedding_scale=0.1, eps=1e-8):
        dense = [p for name, p in model.params.items() if name != "embedding/table"]
        self.dense = torch.optim.Adagrad(
            dense, lr=lr, weight_decay=weight_decay, eps=eps, initial_accumulator_value=0.0
        )
        self.table = model["embedding/table"]
        self.sums = torch.zeros_like(self.table)
        self.table_lr, self.decay, self.eps = lr * embedding_scale, weight_decay, eps

    def zero_grad(self):
        self.dense.zero_grad(set_to_none=True)
        self.table.grad = None

    @torch.no_grad()
    def step(self, woven):
        """The update after backward on `woven`, whose last view is its distinct word ids."""
        self.dense.step()
        if self.table.grad.is_sparse:
            grad = self.table.grad.coalesce()  # duplicate rows summed
            rows, g = grad.indices()[0], grad.values()
        else:  # dense (on a GPU): the rows of the batch's words, known on the host
            rows = woven[-1]
            g = self.table.grad.index_select(0, rows)
        w = self.table.index_select(0, rows)
        g = g + self.decay * w
        s = self.sums.index_select(0, rows).addcmul_(g, g)
        self.sums.index_copy_(0, rows, s)
        self.table.index_copy_(0, rows, w - self.table_lr * g / (s.sqrt() + self.eps))


# ---------------------------------------------------------------------------- figures


def figures(model, trees, batch_size=256):
    """Weft's evaluation figures (mean tree loss, node loss, accuracies) and per tree the root's
    label and class probabilities, in evaluation mode (no dropout)."""
    total, rows, roots, hits = 0.0, 0, [], {}
    with torch.no_grad():
        for start in range(0, len(trees), batch_size):
            woven = weave(trees[start : start + batch_size], model.device)
            loss, logits = loss_sum(model, woven, False)
            logits, labels, root_rows = logits.cpu(), woven[2].cpu(), woven[3].cpu()
            total += float(loss)
            rows += logits.shape[0]
            for prefix, idx in (("all", None), ("root", root_rows)):
                picked = logits if idx is None else logits.index_select(0, idx)
                picked_labels = labels if idx is None else labels.index_select(0, idx)
                count_hits(hits, prefix, picked.double().numpy(), picked_labels.numpy())
            root_logits = logits.index_select(0, root_rows).double()
            for row in torch.softmax(root_logits, 1).numpy():
                roots.append((int(np.argmax(row)), row))
    out = {"loss": total / len(trees), "node_loss": total / rows}
    for name, (hit, count) in hits.items():
        out[name] = hit / count if count else 0.0
    return out, roots


def count_hits(hits, prefix, logits, labels):
    """Fine: argmax; binary: p3 + p4 > p0 + p1 on the non-neutral labels (as Weft's add_hits)."""
    p = np.exp(logits - logits.max(1, keepdims=True))
    fine = (np.argmax(logits, 1) == labels).sum()
    positive = p[:, 3] + p[:, 4] > p[:, 0] + p[:, 1]
    keep = labels != 2
    binary = (positive[keep] == (labels[keep] > 2)).sum()
    counts = ((prefix + "_fine", fine, len(labels)), (prefix + "_binary", binary, keep.sum()))
    for name, hit, count in counts:
        old = hits.get(name, (0, 0))
        hits[name] = (old[0] + int(hit), old[1] + int(count))


def run_weft(args, *command, stdin=None):
    result = subprocess.run([args.weft, *command], input=stdin, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"torch_sentiment: {' '.join(command[:2])} failed:\n{result.stderr}")
    return result.stdout


def check(args):
    """Loss, accuracies and root predictions of the same weights on the same trees."""
    weights, _, vocabulary, _ = read_checkpoint(args.check)
    model = TreeLSTM(weights, 0.0, 0.0, args.composer_layout.split(","), args.device)
    index = {w: i for i, w in enumerate(vocabulary)}
    lines, trees = read_split(args.data_dir, args.split, args.max_eval)
    ours, roots = figures(model, [encode(t, index) for t in trees])
    theirs = json.loads(
        run_weft(args, "eval", "sentiment", "--checkpoint", args.check, "--data-dir",
                 args.data_dir, "--max-eval", str(args.max_eval), "--splits", args.split,
                 "--threads", "1")
    )[args.split]
    predictions = run_weft(args, "infer", "sentiment", "--checkpoint", args.check,
                           "--threads", "1", stdin="\n".join(lines) + "\n").splitlines()
    predictions = [json.loads(line) for line in predictions]
    ok = len(predictions) == len(roots)
    print(f"check: {len(trees)} {args.split} trees, hidden {model.hidden}, "
          f"{len(vocabulary)} words, checkpoint {args.check}, torch on {args.device}")
    for name in ("loss", "node_loss"):
        rel = abs(ours[name] - theirs[name]) / abs(theirs[name])
        ok &= rel <= 1e-4
        print(f"  {name:<12} weft {theirs[name]:.9g}  torch {ours[name]:.9g}  relative {rel:.2g}")
    for name in ("all_fine", "all_binary", "root_fine", "root_binary"):
        ok &= abs(ours[name] - theirs[name]) < 1e-12
        print(f"  {name:<12} weft {theirs[name]:.6f}  torch {ours[name]:.6f}")
    same_label = sum(int(p["label"]) == r[0] for p, r in zip(predictions, roots))
    gaps = [np.abs(np.array(p["probabilities"]) - r[1]).max() for p, r in zip(predictions, roots)]
    worst = float(max(gaps, default=0.0))
    ok &= same_label == len(roots) and worst <= 1e-5
    print(f"  root labels  {same_label} of {len(roots)} the same (weft infer); "
          f"largest probability difference {worst:.2g} (weft prints 6 decimals)")
    print("check: " + ("same" if ok else "DIFFERENT"))
    return 0 if ok else 1


def check_step(args):
    """One step from Weft's initial weights, without dropout, on Weft's first batch: Weft gives
    its initial weights only through a checkpoint after a step, so run A takes the step at rate
    1e-30 (weights unchanged but for zero biases, which become +-1e-30) and its Adagrad sums are
    the squared decayed gradients; run B takes the recipe's step. The same loss, gradients and
    updated weights must come out of torch."""
    with tempfile.TemporaryDirectory(prefix="torch_sentiment_") as work:
        return compare_step(args, work)


def compare_step(args, work):
    """check_step with its checkpoints and logs in `work`."""
    common = ["train", "sentiment", "--data-dir", args.data_dir, "--max-train", "25",
              "--max-eval", "1", "--epochs", "1", "--batch-size", "25", "--dropout", "0",
              "--recurrent-dropout", "0", "--hidden", str(args.hidden), "--threads", "1",
              "--progress", "off", "--no-compare"]
    for run, rate in (("a", ["--learning-rate", "1e-30"]), ("b", [])):
        run_weft(args, *common, *rate, "--checkpoint", os.path.join(work, run + ".safetensors"),
                 "--log", os.path.join(work, run + ".jsonl"))
    w0, _, vocabulary, state_a = read_checkpoint(os.path.join(work, "a.safetensors"))
    w1, _, _, _ = read_checkpoint(os.path.join(work, "b.safetensors"))
    with open(os.path.join(work, "a.jsonl")) as f:
        weft_loss = json.loads(f.readline())["train"]["loss"]
    model = TreeLSTM(w0, 0.0, 0.0, args.composer_layout.split(","), args.device)
    index = {w: i for i, w in enumerate(vocabulary)}
    _, trees = read_split(args.data_dir, "train", 25)
    trees = [encode(t, index) for t in trees]
    optimizer = Adagrad(model, lr=0.05, weight_decay=1e-4, embedding_scale=0.1)
    woven = weave(trees, args.device)
    loss, _ = loss_sum(model, woven, True)
    (loss / len(trees)).backward()
    rel = abs(float(loss) / len(trees) - weft_loss) / weft_loss
    ok = rel <= 1e-4
    print(f"check-step: 25 training trees, hidden {model.hidden}, no dropout, torch on "
          f"{args.device}")
    print(f"  loss         weft {weft_loss:.9g}  torch {float(loss) / len(trees):.9g}  "
          f"relative {rel:.2g}")
    grads = {}
    for name, p in model.params.items():
        g = p.grad.to_dense() if p.grad.is_sparse else p.grad
        grads[name] = (g + 1e-4 * p.detach()).cpu().numpy().copy()
    optimizer.step(woven)
    for name, p in model.params.items():
        g = np.abs(grads[name])
        weft_g = np.sqrt(state_a["optimizer/adagrad/accumulator/" + name])
        if name == "embedding/table":  # untouched rows: no gradient, no decay (lazy rows)
            used = np.zeros((g.shape[0], 1), dtype=bool)
            used[woven[-1].cpu().numpy()] = True
            g = np.where(used, g, 0)
        g_rel = np.linalg.norm(weft_g - g) / np.linalg.norm(g)
        # Adagrad's first step is lr g / (|g| + 1e-8): ~lr sign(g), but sensitive to rounding
        # where |g| is near 1e-8, so only elements with |g| > 1e-5 must agree to 1e-5.
        moved = np.abs(p.detach().cpu().numpy() - w1[name])
        firm = g > 1e-5
        off = int((moved[firm] > 1e-5).sum())
        ok &= g_rel <= 1e-4 and off == 0
        print(f"  {name:<18} |grad| relative difference {g_rel:.1e}; updated weights differ by "
              f"at most {moved[firm].max(initial=0):.1e} ({firm.sum()} elements with |grad| > "
              f"1e-5), {moved.max():.1e} (all {g.size}); {off} differ by more than 1e-5")
    print("check-step: " + ("same" if ok else "DIFFERENT"))
    return 0 if ok else 1


# ---------------------------------------------------------------------------- training


def synchronize(device):
    if device != "cpu":
        torch.cuda.synchronize()


def train(args):
    torch.manual_seed(args.seed)
    _, train_trees = read_split(args.data_dir, "train", args.max_train)
    _, dev_trees = read_split(args.data_dir, "dev", args.max_eval)
    if args.init:
        weights, _, vocabulary, _ = read_checkpoint(args.init)
        print(f"torch_sentiment: weights and vocabulary of {args.init}")
        if args.weft:  # the same figures as Weft's on these weights, or nothing is timed
            check_args = argparse.Namespace(**{**vars(args), "check": args.init, "split": "dev"})
            if check(check_args) != 0:
                print("torch_sentiment: not timed: the model differs from Weft's")
                return 1
    else:
        _, test_trees = read_split(args.data_dir, "test", args.max_eval)
        vocabulary = build_vocabulary(train_trees + dev_trees + test_trees)
        embeddings = glove_matrix(
            vocabulary,
            os.path.join(args.data_dir, "glove-sst", "glove.6B.100d.sst.txt"),
            os.path.join(REPO, "resources", "word_aliases", "sst_glove.txt"),
            args.seed,
        )
        weights = fresh_weights(embeddings, args.hidden, args.seed)
    index = {w: i for i, w in enumerate(vocabulary)}
    train_trees = [encode(t, index) for t in train_trees]
    dev_trees = [encode(t, index) for t in dev_trees]
    model = TreeLSTM(weights, args.dropout, args.recurrent_dropout, device=args.device)
    optimizer = Adagrad(model, args.learning_rate, args.weight_decay, args.embedding_lr_scale)
    rng = np.random.default_rng(args.seed)
    print(f"torch_sentiment: {len(train_trees)} training trees, hidden {model.hidden}, batch "
          f"{args.batch_size}, torch {torch.__version__}, {torch.get_num_threads()} thread(s), "
          f"device {args.device}", flush=True)
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(train_trees))
        total = torch.zeros((), dtype=torch.float64, device=args.device)  # read once, at the end
        synchronize(args.device)
        cpu, start = time.process_time(), time.perf_counter()
        for b in range(0, len(order), args.batch_size):
            batch = [train_trees[i] for i in order[b : b + args.batch_size]]
            optimizer.zero_grad()
            woven = weave(batch, args.device)
            loss, _ = loss_sum(model, woven, True)
            (loss / len(batch)).backward()
            optimizer.step(woven)
            total += loss.detach()
        synchronize(args.device)
        seconds = time.perf_counter() - start
        cpu = (time.process_time() - cpu) / seconds
        total = float(total)
        dev, _ = figures(model, dev_trees)
        record = {
            "epoch": epoch,
            "examples": len(train_trees),
            "seconds": seconds,
            "examples_per_second": len(train_trees) / seconds,
            "cpu_over_wall": cpu,
            "train": {"loss": total / len(train_trees)},
            "dev": dev,
        }
        print(f"epoch {epoch}: {record['examples_per_second']:.1f} trees/s "
              f"({seconds:.2f} s, cpu/wall {cpu:.2f}), train loss {total / len(train_trees):.4f}, "
              f"dev root fine {dev['root_fine']:.4f}, binary {dev['root_binary']:.4f}", flush=True)
        if args.log:
            with open(args.log, "a") as f:
                f.write(json.dumps(record) + "\n")
    return 0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", metavar="CHECKPOINT", help="compare with weft eval / infer")
    mode.add_argument("--check-step", action="store_true", help="compare one training step")
    mode.add_argument("--train", action="store_true", help="train and time epochs")
    p.add_argument("--weft", help="the weft executable (--check, --check-step)")
    p.add_argument("--data-dir", default=os.path.join(REPO, "..", "shared", "data"))
    p.add_argument("--split", default="test", choices=["dev", "test"])
    p.add_argument("--max-eval", type=int, default=0, help="evenly spaced dev / test trees")
    p.add_argument("--max-train", type=int, default=0, help="evenly spaced training trees")
    p.add_argument("--composer-layout", default=",".join(GATES),
                   help="order of the checkpoint's composer blocks (a wrong one fails --check)")
    p.add_argument("--init", help="--train: start from this Weft checkpoint")
    p.add_argument("--hidden", type=int, default=150)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=25)
    p.add_argument("--learning-rate", type=float, default=0.05)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--embedding-lr-scale", type=float, default=0.1)
    p.add_argument("--dropout", type=float, default=0.25)
    p.add_argument("--recurrent-dropout", type=float, default=0.25)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--log", help="--train: append one JSON line per epoch")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = p.parse_args()
    if (args.check or args.check_step) and not args.weft:
        p.error("--check and --check-step need --weft")
    return args


def main():
    args = parse_args()
    if not start_torch(torch, args.threads):
        return 77
    if args.device == "cuda" and not torch.cuda.is_available():
        print("SKIPPED: --device cuda but torch sees no CUDA device")
        return 77
    if args.check:
        return check(args)
    if args.check_step:
        return check_step(args)
    return train(args)


if __name__ == "__main__":
    sys.exit(main())
