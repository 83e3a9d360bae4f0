"""weft.torch, Weft inside a torch model: fold(block)(examples) and the Blocks nn.Module are one
differentiable torch step (loss.backward() runs Weft's tape backward and, through it, the torch
bodies); Weft-native parameters are nn.Parameters over Weft's memory, trained by torch.optim,
saved and restored by state_dict."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is absent (Debian: python3-torch)")

import weft  # noqa: E402
import weft.torch as wt  # noqa: E402
from weft import blocks as td  # noqa: E402
from weft.blocks import Type  # noqa: E402
from test_torch_bodies import TOL, eager, make_program, random_tree  # noqa: E402


def native_tree_lstm(n, vocab, seed):
    """A Tree-LSTM of Weft's own cells (NaryTreeLSTMCell, Embedding): no torch inside."""
    store = weft.nn.ParameterStore(seed=seed)
    emb = weft.nn.Embedding(store, "emb", vocab, n)
    cell = weft.nn.NaryTreeLSTMCell(store, "cell", 0, n, arity=2)
    state = Type.tuple(Type.vector(n), Type.vector(n))
    decl = td.ForwardDeclaration(Type.input(), state)
    leaf = td.GetItem("word") >> td.Scalar("int32") >> td.EmbeddingBlock(emb) >> td.Function(
        "leaf", [Type.vector(n)], lambda x: (weft.tanh(x), x))
    node = td.GetItem("children") >> td.Record([decl(), decl()]) >> td.TreeLSTMBlock(cell)
    model = td.OneOf(lambda t: "word" in t, {True: leaf, False: node})
    decl.resolve_to(model)
    return model >> td.GetItem(0), store


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fold_of_torch_bodies_matches_eager_torch(seed):
    rng = np.random.default_rng(seed)
    n, vocab = 5, 7
    compiler, store, emb, leaf, cell = make_program(seed, n, vocab)
    head = torch.nn.Linear(n, 3)
    trees = [random_tree(rng, 5, vocab) for _ in range(9)]
    labels = torch.tensor(rng.integers(0, 3, len(trees)))
    step = wt.fold(compiler, store)
    (table,) = step.torch_params
    modules = [leaf, cell, head]

    loss = torch.nn.functional.cross_entropy(head(step(trees)), labels)
    loss.backward()
    got = [p.grad.clone() for m in modules for p in m.parameters()] + [table.grad.clone()]

    for m in modules:
        m.zero_grad()
    ref_table = table.detach().clone().requires_grad_(True)
    h = torch.cat([eager(t, ref_table, leaf, cell)[0] for t in trees])
    want_loss = torch.nn.functional.cross_entropy(head(h), labels)
    want_loss.backward()
    want = [p.grad for m in modules for p in m.parameters()] + [ref_table.grad]
    torch.testing.assert_close(loss, want_loss, **TOL)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, **TOL)


def test_native_cells_train_with_torch_optim_and_state_dict_round_trips():
    n, vocab = 6, 9
    block, store = native_tree_lstm(n, vocab, seed=4)
    rng = np.random.default_rng(4)
    trees = [random_tree(rng, 4, vocab) for _ in range(12)]
    model = wt.Blocks(block, store)
    names = sorted(k for k, _ in model.named_parameters())
    assert names == sorted("weft." + p.name.replace("/", "_") for p in store.parameters)

    # The gradients torch sees are Weft's own backward's.
    out = model(trees)
    (out * out).sum().backward()
    seen = {k: v.grad.clone() for k, v in model.weft.items()}  # .grad views Weft's buffer
    tape = weft.Tape()
    store.zero_grad()
    with tape:
        h = td.Compiler(block).forward(trees, tape).output()
        tape.backward(weft.sum(h * h))
    for p in store.parameters:
        np.testing.assert_allclose(seen[p.name.replace("/", "_")].numpy(), np.asarray(p.grad),
                                   **TOL)

    # torch.optim updates Weft's memory; state_dict restores it.
    saved = {k: v.clone() for k, v in model.state_dict().items()}
    before = model(trees).detach().clone()
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(3):
        opt.zero_grad()
        loss = (model(trees) ** 2).mean()
        loss.backward()
        opt.step()
    table = store.get("emb/table")
    assert not np.allclose(np.asarray(table.value), saved["weft.emb_table"].numpy())
    after = model(trees).detach()
    direct = td.Compiler(block).forward(trees, weft.Tape()).output()  # Weft alone sees the steps
    torch.testing.assert_close(after, torch.from_dlpack(direct.value), rtol=0, atol=0)
    assert not torch.equal(after, before)
    model.load_state_dict(saved)
    np.testing.assert_array_equal(np.asarray(table.value), saved["weft.emb_table"].numpy())
    torch.testing.assert_close(model(trees).detach(), before, rtol=0, atol=0)


def test_a_second_backward_is_refused():
    block, store = native_tree_lstm(4, 5, seed=1)
    out = wt.fold(block, store)([{"word": 1}, {"children": [{"word": 2}, {"word": 3}]}])
    loss = out.sum()
    loss.backward(retain_graph=True)
    with pytest.raises(weft.Error, match="already backpropagated"):
        loss.backward()


def test_outputs_outlive_their_step_when_the_tape_is_reused():
    """A fold reuses a step's tape once its backward ran; the tensors it returned still hold
    their values (they keep Weft's memory alive), whatever later steps compute."""
    block, store = native_tree_lstm(5, 6, seed=2)
    step = wt.fold(block, store)
    first = step([{"word": 1}, {"children": [{"word": 2}, {"word": 3}]}])
    kept = first.detach().clone()
    first.sum().backward()
    for words in ([4, 5], [0, 1], [3, 3]):
        out = step([{"children": [{"word": w} for w in words]}] * 3)
        (out * out).sum().backward()
    assert len(step.tapes) == 1  # one tape, cleared and reused
    torch.testing.assert_close(first.detach(), kept, rtol=0, atol=0)


def test_native_gradients_accumulate_as_torch_does_without_a_copy():
    """torch's .grad of a Weft-native parameter is a view of Weft's gradient buffer (no copy per
    step); backward calls without zero_grad add up, zero_grad in place or to None starts over."""
    n, vocab = 5, 7
    block, store = native_tree_lstm(n, vocab, seed=6)
    rng = np.random.default_rng(6)
    first, second = ([random_tree(rng, 3, vocab) for _ in range(5)] for _ in range(2))
    model = wt.Blocks(block, store)

    def grads_of(*batches):
        for p in model.parameters():
            p.grad = None
        for trees in batches:
            (model(trees) ** 2).sum().backward()
        return {k: v.grad.clone() for k, v in model.named_parameters()}

    alone = [grads_of(first), grads_of(second)]
    both = grads_of(first, second)
    for k in both:
        torch.testing.assert_close(both[k], alone[0][k] + alone[1][k], **TOL)
    for p in store.parameters:  # the views share Weft's memory: no copy was made
        view = model.weft[p.name.replace("/", "_")]
        assert view.grad.data_ptr() == torch.from_dlpack(p.grad).data_ptr()
    for set_to_none in (False, True):
        torch.optim.SGD(model.parameters(), lr=0.0).zero_grad(set_to_none=set_to_none)
        (model(second) ** 2).sum().backward()
        for k, v in model.named_parameters():
            torch.testing.assert_close(v.grad, alone[1][k], **TOL)


def test_a_step_without_gradients_gives_its_tape_back():
    """Under torch.no_grad() no backward comes: the step's tape returns to the pool at once (the
    outputs keep their values), so evaluation between epochs leaves training its tape."""
    block, store = native_tree_lstm(5, 6, seed=3)
    step = wt.fold(block, store)
    trees = [{"word": 1}, {"children": [{"word": 2}, {"word": 3}]}]
    step(trees).sum().backward()
    assert len(step.tapes) == 1
    with torch.no_grad():
        kept = step(trees)
        assert len(step.tapes) == 1
        again = step([{"word": 4}] * 3)
    assert len(step.tapes) == 1
    torch.testing.assert_close(kept, step(trees).detach(), rtol=0, atol=0)
    assert again.shape[0] == 3
