"""python/examples/torch: the SST Tree-LSTM as a torch nn.Module through Weft (with torch bodies
its loss and every gradient equal the same modules run eagerly per tree; with Weft's cells,
weft.torch.Blocks, they equal Weft's own tape; on SST it trains under Adam) and tree2seq (torch
bodies in a blocks encoder and weft.flow decoder: loss and gradients equal eager torch, batched
greedy decoding equals one tree at a time, it learns) and molecules (message passing with torch
bodies over SMILES graphs: loss and gradients equal eager torch per molecule; it learns ESOL)."""

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is absent (Debian: python3-torch)")

import weft  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "torch"))

import sst_tree_lstm as sst  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)


def random_tree(rng, depth, vocab):
    label = int(rng.integers(0, 5))
    if depth == 0 or rng.random() < 0.3:
        return {"label": label, "pair": 0, "id": int(rng.integers(0, vocab))}
    return {"label": label, "pair": 1,
            "children": [random_tree(rng, depth - 1, vocab), random_tree(rng, depth - 1, vocab)]}


def eager_node(model, tree, logits, labels):
    """The torch model one node at a time; its rows come in another order than Weft's metric
    rows, so the two are compared through the summed loss."""
    if tree["pair"] == 0:
        h, c = model.leaf(torch.tensor([tree["id"]], dtype=torch.int32))
    else:
        (h1, c1), (h2, c2) = (eager_node(model, t, logits, labels) for t in tree["children"])
        h, c = model.composer(h1, c1, h2, c2)
    logits.append(model.classifier(h))
    labels.append(tree["label"])
    return h, c


@pytest.mark.parametrize("seed", [1, 2])
def test_torch_cells_equal_eager_torch_per_tree(seed):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    vocab = 20
    model = sst.TorchTreeLSTM(vocab, 7, 6, dropout=0.0)
    trees = [random_tree(rng, 5, vocab) for _ in range(8)]
    loss, root = sst.loss_of(model, trees)
    loss.backward()
    got = {k: p.grad.clone() for k, p in model.named_parameters()}

    model.zero_grad()
    logits, labels, roots = [], [], []
    for t in trees:
        h, _ = eager_node(model, t, logits, labels)
        roots.append(model.classifier(h))
    want = torch.nn.functional.cross_entropy(torch.cat(logits), torch.tensor(labels),
                                             reduction="sum") / len(trees)
    want.backward()
    torch.testing.assert_close(loss, want, **TOL)
    torch.testing.assert_close(root.detach(), torch.cat(roots).detach(), **TOL)
    for k, p in model.named_parameters():
        torch.testing.assert_close(got[k], p.grad, **TOL)


def test_weft_cells_in_a_torch_model_equal_weft_alone():
    rng = np.random.default_rng(3)
    vocab = 15
    model = sst.WeftTreeLSTM(vocab, 5, 4, dropout=0.0, seed=3)
    trees = [random_tree(rng, 4, vocab) for _ in range(6)]
    loss, _ = sst.loss_of(model, trees)
    loss.backward()
    # The same loss on Weft's own tape, Weft's own gradients.
    model.store.zero_grad()
    tape = weft.Tape()
    with tape:
        result = model.weft._folder.compiler.forward(trees, tape)
        nodes = result.metric("nodes")
        want = weft.sum(weft.softmax_cross_entropy(nodes.values, nodes.label_tensor()))
        want = want * (1.0 / len(trees))
    tape.backward(want)
    assert abs(float(loss) - want.item()) < 1e-5 * max(1.0, abs(want.item()))
    for p in model.store.parameters:
        view = model.weft.weft[p.name.replace("/", "_")]
        grad = np.zeros(p.shape, np.float32) if p.grad is None else np.asarray(p.grad)
        np.testing.assert_allclose(view.grad.numpy(), grad, **TOL)


@pytest.mark.parametrize("cells", ["torch", "weft"])
def test_sst_trains_with_adam(cells, data_dir):
    if not (data_dir / "sst" / "train.txt").exists():
        pytest.skip(f"no SST data under {data_dir}")
    history = sst.main(["--data-dir", str(data_dir), "--cells", cells, "--max-train", "150",
                        "--max-eval", "50", "--epochs", "3", "--hidden", "24",
                        "--no-embeddings", "--learning-rate", "0.01"])
    assert history[-1]["loss"] < 0.8 * history[0]["loss"]


@pytest.mark.parametrize("cells,dense,optimizer", [
    ("weft", False, "torch"), ("weft", True, "torch"), ("weft", False, "weft"),
    ("torch", False, "weft"), ("torch", False, "torch")])
def test_sst_example_tracks_weft_train_sentiment(cells, dense, optimizer, data_dir):
    """The example starts from `weft train sentiment`'s initial weights, sees its batches and
    draws its dropout masks (Weft's cells themselves, torch bodies through WeftDropout): torch's
    optimizers (SparseAdam on the word vectors, or one dense Adam) or weft.torch.Adam give the
    Trainer's epoch losses (lazy, or dense, row updates)."""
    if not (data_dir / "sst" / "train.txt").exists():
        pytest.skip(f"no SST data under {data_dir}")
    common = dict(max_train=120, max_eval=30, hidden=16, seed=2)
    history = sst.main(["--data-dir", str(data_dir), "--cells", cells, "--epochs", "2"]
                       + [f"--{k.replace('_', '-')}={v}" for k, v in common.items()]
                       + (["--dense-embeddings"] if dense else [])
                       + ["--optimizer", optimizer])
    cli = weft.models.create("sentiment", data_dir=str(data_dir), embedding_aliases="none",
                             **common)
    epochs = cli.fit(epochs=2, optimizer="adam", learning_rate=1e-3, weight_decay=0,
                     embedding_lr_scale=1, sparse_updates="dense" if dense else "lazy",
                     threads=1, prepare_ahead=False, restore_best=False, progress="off")
    for mine, theirs in zip(history, epochs):  # (torch's own dropout masks: 2.5e-3 apart)
        assert abs(mine["loss"] - theirs["train"]["loss"]) < 1e-5 * theirs["train"]["loss"]
        assert abs(mine["dev_root"] - theirs["dev"]["root_fine"]) < 1e-9


def eager_tree2seq_loss(model, trees):
    """tree2seq.py's model in plain torch, one tree and one token at a time."""
    import tree2seq

    def encode(t):
        if isinstance(t, int):
            return torch.tanh(model.embed(torch.tensor([t])))
        return torch.tanh(model.compose(torch.cat([encode(t[0]), encode(t[1])], 1)))

    total = 0.0
    for t in trees:
        h, prev = encode(t), tree2seq.END
        for token in tree2seq.leaves(t) + [tree2seq.END]:
            h = model.decoder(model.embed(torch.tensor([prev])), h)
            total = total + torch.nn.functional.cross_entropy(model.head(h), torch.tensor([token]),
                                                              reduction="sum")
            prev = token
    return total / len(trees)


def test_tree2seq_with_torch_bodies_on_flow_equals_eager_torch():
    import tree2seq

    torch.manual_seed(2)
    rng = np.random.default_rng(2)
    model = tree2seq.Tree2Seq(6)
    trees = [tree2seq.random_tree(rng, 3) for _ in range(7)]
    tape = weft.Tape()
    loss = model.loss(trees, tape)
    tape.backward(loss)
    got = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    want = eager_tree2seq_loss(model, trees)
    want.backward()
    assert abs(loss.item() - float(want)) < 1e-5 * max(1.0, float(want))
    for k, p in model.named_parameters():
        torch.testing.assert_close(got[k], p.grad, **TOL)
    batched = model.greedy(trees)  # programs of different lengths, batched per step
    assert batched == [model.greedy([t])[0] for t in trees]


def test_tree2seq_learns():
    import tree2seq

    losses, _, _ = tree2seq.main(["--steps", "100", "--batch-size", "16", "--hidden", "32"])
    assert np.mean(losses[-10:]) < 0.85 * np.mean(losses[:10])


def test_molecules_message_passing_equals_eager_torch():
    import molecules

    torch.manual_seed(4)
    elements = {}
    smiles = ["OCC3OC(OCC2OC(OC(C#N)c1ccccc1)C(O)C(O)C2O)C(O)C(O)C3O", "Cc1occc1C(=O)Nc2ccccc2",
              "C", "[Na+].[Cl-]", "ClC(Cl)(Cl)Cl", "c1ccc2ccccc2c1", "CC(C)(C)O"]
    mols = [molecules.parse_smiles(s, elements) for s in smiles]
    assert [len(m["atoms"]) for m in mols[2:5]] == [1, 2, 5]
    assert sorted(len(n) for n in mols[5]["nbrs"]) == [2] * 8 + [3] * 2  # naphthalene's rings
    model = molecules.MessagePassing(len(elements), n=6, layers=2)
    target = torch.randn(len(mols))
    loss = torch.nn.functional.mse_loss(model(mols), target)
    loss.backward()
    got = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    want = torch.nn.functional.mse_loss(torch.cat([model.eager(m) for m in mols]), target)
    want.backward()
    torch.testing.assert_close(loss, want, **TOL)
    for k, p in model.named_parameters():
        torch.testing.assert_close(got[k], p.grad, **TOL)


def test_molecules_trains_on_esol(data_dir):
    import molecules

    if not (data_dir / "molecules" / "delaney-processed.csv").exists():
        pytest.skip(f"no ESOL data under {data_dir}")
    history = molecules.main(["--data-dir", str(data_dir), "--epochs", "3",
                              "--max-molecules", "200", "--hidden", "16"])
    assert history[-1]["loss"] < 0.8 * history[0]["loss"]
