"""weft.torch, row-sparse gradients: a Weft table with sparse_grad (Embedding(...,
sparse_gradient=True)) reaches torch as a coalesced sparse COO gradient of the rows a batch used,
equal to the dense path's gradient, accumulating over several backward passes as torch's do;
torch.optim.SparseAdam over it is Weft's own lazy Adam; a dense use of such a table is refused
by name. Also the helpers a torch loop uses to see the Trainer's batches: weft.train.epoch_order
and Inputs.take."""

import copy
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is absent (Debian: python3-torch)")

import weft  # noqa: E402
import weft.torch as wt  # noqa: E402
from weft import blocks as td  # noqa: E402
from weft.blocks import Type  # noqa: E402
from test_torch_bodies import TOL, random_tree  # noqa: E402


def tree_lstm(n, vocab, seed, sparse, dense_use=False):
    """A Tree-LSTM of Weft's cells whose word table has row-sparse gradients when `sparse`;
    `dense_use` also reads the whole table in the leaf (a dense use of its gradient)."""
    store = weft.nn.ParameterStore(seed=seed)
    emb = weft.nn.Embedding(store, "emb", vocab, n, sparse_gradient=sparse)
    cell = weft.nn.NaryTreeLSTMCell(store, "cell", 0, n, arity=2)
    table = store.get("emb/table")
    state = Type.tuple(Type.vector(n), Type.vector(n))

    def leaf(x):
        if dense_use:
            x = x + weft.sum(weft.Var(table)) * 0.5
        return weft.tanh(x), x

    decl = td.ForwardDeclaration(Type.input(), state)
    node = td.OneOf(lambda t: "word" in t, {
        True: td.GetItem("word") >> td.Scalar("int32") >> td.EmbeddingBlock(emb)
        >> td.Function("leaf", [Type.vector(n)], leaf),
        False: td.GetItem("children") >> td.Record([decl(), decl()]) >> td.TreeLSTMBlock(cell)})
    decl.resolve_to(node)
    return node >> td.GetItem(0), store


def words_of(tree, out):
    if "word" in tree:
        out.add(tree["word"])
    else:
        for t in tree["children"]:
            words_of(t, out)
    return out


def torch_grads(model, *batches):
    for p in model.parameters():
        p.grad = None
    for trees in batches:
        (model(trees) ** 2).sum().backward()
    return {k: v.grad for k, v in model.named_parameters()}


def check_equals_weft_s_lazy_adam(via_torch, initial, n, vocab, seed, batches, lr, eps, tol):
    """The same model trained by Weft alone (its Adam, lazy row updates) on the same batches
    ends where torch's optimizers left `via_torch`; a row no batch used kept its `initial`."""
    block, store = tree_lstm(n, vocab, seed, sparse=True)
    compiler, tape = td.Compiler(block), weft.Tape()
    opt = weft.train.Adam(list(store.trainable_parameters()), lr=lr, epsilon=eps)
    for trees in batches:
        opt.zero_grad()
        tape.clear()
        with tape:
            h = compiler.forward(trees, tape).output()
            tape.backward(weft.sum(h * h))
        opt.step()
    for p in store.parameters:
        np.testing.assert_allclose(via_torch[p.name], np.asarray(p.value), **tol)
    unused = sorted(set(range(vocab)) - set().union(
        *(words_of(t, set()) for trees in batches for t in trees)))
    assert unused
    np.testing.assert_array_equal(via_torch["emb/table"][unused], initial[unused])


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_sparse_table_gives_torch_the_dense_paths_gradient_as_sparse_rows(seed):
    n, vocab = 5, 40
    rng = np.random.default_rng(seed)
    trees = [random_tree(rng, 4, vocab) for _ in range(7)]
    dense = torch_grads(wt.Blocks(*tree_lstm(n, vocab, seed, sparse=False)), trees)
    sparse = torch_grads(wt.Blocks(*tree_lstm(n, vocab, seed, sparse=True)), trees)
    g = sparse["weft.emb_table"]
    assert g.is_sparse and g.shape == (vocab, n)
    used = sorted(set().union(*(words_of(t, set()) for t in trees)))
    assert g._indices()[0].tolist() == used  # the rows the batch used, once each
    assert not dense["weft.emb_table"].is_sparse
    for k in dense:
        got = sparse[k].to_dense() if sparse[k].is_sparse else sparse[k]
        torch.testing.assert_close(got, dense[k], **TOL)


def test_sparse_gradients_accumulate_over_backward_passes():
    """Two backward passes without zeroing add up, as torch's own sparse gradients do; the rows
    of the first are torch's copy, not the reused tape's memory the second step overwrites."""
    n, vocab = 4, 30
    rng = np.random.default_rng(5)
    first, second = ([random_tree(rng, 3, vocab) for _ in range(5)] for _ in range(2))
    model = wt.Blocks(*tree_lstm(n, vocab, 5, sparse=True))
    alone = [{k: g.to_dense() if g.is_sparse else g.clone()
              for k, g in torch_grads(model, trees).items()} for trees in (first, second)]
    both = torch_grads(model, first, second)
    for k in both:
        got = both[k].to_dense() if both[k].is_sparse else both[k]
        torch.testing.assert_close(got, alone[0][k] + alone[1][k], **TOL)


def test_sparse_adam_over_the_sparse_gradient_is_weft_s_lazy_adam():
    """SparseAdam on the table and Adam on the rest, through torch, move every parameter as
    Weft's own Adam does with its lazy row updates (weft train --sparse-updates lazy): a row the
    batches never used keeps its value; the others match. (SparseAdam adds eps to sqrt(v) before
    the bias correction, Adam and Weft after: eps is tiny here, so that difference does not
    show.)"""
    n, vocab, lr, eps = 5, 60, 0.05, 1e-12
    rng = np.random.default_rng(7)
    batches = [[random_tree(rng, 3, vocab // 2) for _ in range(4)] for _ in range(3)]
    block, store = tree_lstm(n, vocab, 7, sparse=True)
    initial = np.asarray(store.get("emb/table").value).copy()
    model = wt.Blocks(block, store)
    table = model.weft["emb_table"]
    rest = [p for p in model.parameters() if p is not table]
    opts = [torch.optim.SparseAdam([table], lr=lr, eps=eps),
            torch.optim.Adam(rest, lr=lr, eps=eps)]
    for trees in batches:
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        (model(trees) ** 2).sum().backward()
        for opt in opts:
            opt.step()
    via_torch = {p.name: np.asarray(p.value).copy() for p in store.parameters}
    check_equals_weft_s_lazy_adam(via_torch, initial, n, vocab, 7, batches, lr, eps, TOL)


def test_a_dense_use_of_a_sparse_table_is_refused_by_name():
    model = wt.Blocks(*tree_lstm(4, 10, 1, sparse=True, dense_use=True))
    out = model([{"children": [{"word": 1}, {"word": 2}]}])
    with pytest.raises(weft.Error, match="'emb/table' asks for row-sparse gradients"):
        out.sum().backward()
    # Without sparse gradients the same program trains densely.
    model = wt.Blocks(*tree_lstm(4, 10, 1, sparse=False, dense_use=True))
    model([{"children": [{"word": 1}, {"word": 2}]}]).sum().backward()
    assert not model.weft["emb_table"].grad.is_sparse


def test_parameter_grad_rows_are_coalesced_and_none_when_dense():
    store = weft.nn.ParameterStore(seed=1)
    emb = weft.nn.Embedding(store, "e", 6, 3, sparse_gradient=True)
    table = store.get("e/table")
    assert table.sparse_grad
    tape = weft.Tape()
    with tape:
        y = emb(np.array([4, 1, 4], np.int32))
        tape.backward(weft.sum(y))
    indices, rows = table.grad_rows()
    assert np.asarray(indices).tolist() == [1, 4]
    np.testing.assert_array_equal(np.asarray(rows), [[1, 1, 1], [2, 2, 2]])
    np.asarray(table.grad)  # reading the dense gradient makes it dense until zero_grad
    assert table.grad_rows() is None
    table.zero_grad()
    assert table.grad_rows() is not None


def test_epoch_order_is_a_seeded_permutation_and_inputs_take_picks_examples():
    orders = [weft.train.epoch_order(50, seed, epoch) for seed in (1, 2) for epoch in (1, 2)]
    for order in orders:
        assert sorted(order) == list(range(50))
    assert len({tuple(o) for o in orders}) == 4
    assert weft.train.epoch_order(50, 1, 2) == orders[1]
    with pytest.raises(weft.Error, match="epoch >= 1"):
        weft.train.epoch_order(5, 1, 0)

    block, _ = tree_lstm(4, 10, 3, sparse=False)
    rng = np.random.default_rng(3)
    trees = [random_tree(rng, 3, 10) for _ in range(9)]
    inputs = td.Inputs(trees)
    compiler = td.Compiler(block)
    picked = compiler.forward(inputs.take([7, 2, 2]), weft.Tape()).output()
    want = compiler.forward([trees[7], trees[2], trees[2]], weft.Tape()).output()
    np.testing.assert_array_equal(np.asarray(picked.value), np.asarray(want.value))
    with pytest.raises(weft.Error, match="index 9 is out of range for 9 examples"):
        inputs.take([1, 9])

    # A selection of a selection indexes the selection (its examples are the pool's 7, 2, 7).
    nested = inputs.take([7, 2, 2]).take([0, 1, 0])
    assert len(nested) == 3
    want = compiler.forward([trees[7], trees[2], trees[7]], weft.Tape()).output()
    got = compiler.forward(nested, weft.Tape()).output()
    np.testing.assert_array_equal(np.asarray(got.value), np.asarray(want.value))
    assert len(compiler.weave(nested)) == 3
    with pytest.raises(weft.Error, match="index 3 is out of range for 3 examples"):
        nested.take([3])


def _resident_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux's /proc")
def test_inputs_take_shares_the_examples_instead_of_copying_them():
    # One large example (100,000 numbers, ~1.6 MB converted) taken 100 times: copies would
    # add ~160 MB; selections sharing the pool add a few bytes each.
    inputs = td.Inputs([{"xs": list(range(100_000))}])
    before = _resident_mb()
    batches = [inputs.take([0]) for _ in range(100)]
    assert _resident_mb() - before < 40
    assert [len(b) for b in batches] == [1] * 100


# ---- weft.torch.Adam: torch's Adam as Weft's fused update, lazy on sparse gradients -----------


def test_weft_adam_equals_torch_adam_on_dense_gradients():
    torch.manual_seed(3)
    shapes = [(7, 5), (5,), (3, 4, 2)]
    for weight_decay in (0.0, 0.01):
        ours = [torch.nn.Parameter(torch.randn(s)) for s in shapes]
        theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
        opts = [wt.Adam(ours, lr=0.03, betas=(0.8, 0.99), weight_decay=weight_decay),
                torch.optim.Adam(theirs, lr=0.03, betas=(0.8, 0.99), weight_decay=weight_decay)]
        for _ in range(4):
            for a, b in zip(ours, theirs):
                a.grad = torch.randn(a.shape)
                b.grad = a.grad.clone()
            for opt in opts:
                opt.step()
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_weft_adam_on_a_sparse_table_is_weft_train_s_lazy_adam():
    """weft.torch.Adam over every parameter of a model with a row-sparse table gives what Weft's
    own Adam (lazy row updates, `weft train`'s default) gives, eps included; unused rows stay."""
    n, vocab, lr = 5, 60, 0.05
    rng = np.random.default_rng(8)
    batches = [[random_tree(rng, 3, vocab // 2) for _ in range(4)] for _ in range(3)]
    block, store = tree_lstm(n, vocab, 8, sparse=True)
    initial = np.asarray(store.get("emb/table").value).copy()
    model = wt.Blocks(block, store)
    opt = wt.Adam(model.parameters(), lr=lr)
    for trees in batches:
        opt.zero_grad(set_to_none=True)
        (model(trees) ** 2).sum().backward()
        opt.step()
    via_torch = {p.name: np.asarray(p.value).copy() for p in store.parameters}
    check_equals_weft_s_lazy_adam(via_torch, initial, n, vocab, 8, batches, lr, 1e-8,
                                  dict(rtol=1e-5, atol=1e-7))


def test_weft_adam_sums_repeated_sparse_rows_as_sparse_adam_does():
    """torch's own sparse gradients (nn.Embedding(sparse=True)) may repeat a row: summed first.
    With eps tiny, the lazy rule equals SparseAdam's (which differs only in eps's place)."""
    torch.manual_seed(4)
    tables = [torch.nn.Embedding(20, 3, sparse=True) for _ in range(2)]
    tables[1].weight.data.copy_(tables[0].weight.data)
    opts = [wt.Adam(tables[0].parameters(), lr=0.1, eps=1e-12),
            torch.optim.SparseAdam(tables[1].parameters(), lr=0.1, eps=1e-12)]
    for ids in ([1, 5, 1, 1], [5, 7, 7], [2, 1]):
        for table, opt in zip(tables, opts):
            opt.zero_grad()
            table(torch.tensor(ids)).pow(2).sum().backward()
            opt.step()
    torch.testing.assert_close(tables[0].weight, tables[1].weight, rtol=1e-5, atol=1e-6)


def test_weft_adam_state_dict_round_trips():
    torch.manual_seed(5)
    params = [torch.nn.Parameter(torch.randn(4, 3)), torch.nn.Parameter(torch.randn(3))]
    grads = [[torch.randn(p.shape) for p in params] for _ in range(3)]

    def run(opt, steps):
        for g in steps:
            for p, gp in zip(params, g):
                p.grad = gp.clone()
            opt.step()

    opt = wt.Adam(params, lr=0.1)
    run(opt, grads[:2])
    saved = ([p.detach().clone() for p in params], copy.deepcopy(opt.state_dict()))
    run(opt, grads[2:])
    want = [p.detach().clone() for p in params]
    with torch.no_grad():
        for p, v in zip(params, saved[0]):
            p.copy_(v)
    fresh = wt.Adam(params, lr=0.1)
    fresh.load_state_dict(saved[1])
    run(fresh, grads[2:])
    for p, w in zip(params, want):
        torch.testing.assert_close(p.detach(), w, rtol=0, atol=0)


def test_weft_adam_refuses_what_it_cannot_update():
    with pytest.raises(weft.Error, match="contiguous float32 CPU tensors, got torch.float64"):
        wt.Adam([torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))])
    with pytest.raises(weft.Error, match="not contiguous"):
        wt.Adam([torch.nn.Parameter(torch.zeros(3, 4).t())])
    with pytest.raises(weft.Error, match=r"\[weft.torch.Adam\].*beta1"):
        wt.Adam([torch.nn.Parameter(torch.zeros(3))], betas=(1.5, 0.9))
    with pytest.raises(weft.Error, match="lr must be finite"):
        wt.Adam([torch.nn.Parameter(torch.zeros(3))], lr=float("nan"))
