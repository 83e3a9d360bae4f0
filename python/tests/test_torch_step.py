"""weft.torch's per-step calls into C++ (python/src/torch_glue.cpp): weft.torch.Adam's one call
for all of a step's tensors equals Weft's rule applied tensor by tensor, bit for bit (dense, sparse
rows as weft.torch gives them, torch's own unsorted repeated rows, weight decay, parameters
without a gradient), follows a parameter whose memory was replaced, and refuses what it cannot
update by name; a fold's outputs, metric rows and labels, and its backward seeded from several
outputs, equal Weft's own."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is absent (Debian: python3-torch)")

import weft  # noqa: E402
import weft.torch as wt  # noqa: E402
from weft import blocks as td  # noqa: E402
from weft.blocks import Type  # noqa: E402
from test_torch_bodies import TOL, random_tree  # noqa: E402
from test_torch_sparse import tree_lstm  # noqa: E402


def unchecked_coo(indices, values, shape):
    """A sparse COO tensor built without torch's checks of its indices (out-of-range rows)."""
    indices = torch.tensor(indices).unsqueeze(0)
    if "check_invariants" in (torch.sparse_coo_tensor.__doc__ or ""):
        return torch.sparse_coo_tensor(indices, values, shape, check_invariants=False)
    return torch._sparse_coo_tensor_unsafe(indices, values, shape)


def sparse_grads(rows, width, generator):
    """Gradients of a [rows, width] table: weft.torch's (sorted distinct rows, not flagged
    coalesced, as torch's accumulation leaves them), torch's own (repeated, unsorted rows) and
    one that touches no row."""
    sorted_rows = torch.tensor([[1, 4, 5, 9]])
    repeated = torch.tensor([[7, 2, 7, 0, 2, 7]])
    return [torch.sparse_coo_tensor(sorted_rows, torch.randn(4, width, generator=generator),
                                    (rows, width)),
            torch.sparse_coo_tensor(repeated, torch.randn(6, width, generator=generator),
                                    (rows, width)),
            torch.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.long), torch.zeros(0, width),
                                    (rows, width))]


def tensor_by_tensor(rule, lr, step, value, grad, slots):
    """Weft's rule on one torch tensor (what weft.torch.Adam did per tensor before)."""
    views = [weft.from_dlpack(s) for s in slots]
    if grad.is_sparse:
        grad = grad.coalesce()
        indices = weft.from_dlpack(grad._indices()[0].to(torch.int32))
        rows = weft.from_dlpack(grad._values().contiguous())
    else:
        indices, rows = None, weft.from_dlpack(grad)
    rule.update_tensor(lr, step, weft.from_dlpack(value), rows, indices, views)


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_one_call_for_all_tensors_equals_the_rule_tensor_by_tensor(weight_decay):
    g = torch.Generator().manual_seed(11)
    shapes = [(10, 3), (7, 5), (5,), (3, 4, 2)]  # the first one trained by sparse gradients
    params = [torch.nn.Parameter(torch.randn(s, generator=g)) for s in shapes]
    ref = [p.detach().clone() for p in params]
    moments = [[torch.zeros(s), torch.zeros(s)] for s in shapes]
    steps = [0] * len(shapes)
    lr, betas, eps = 0.02, (0.85, 0.99), 1e-7
    opt = wt.Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    spec = weft.train.OptimizerSpec(kind="adam", beta1=betas[0], beta2=betas[1], epsilon=eps,
                                    weight_decay=weight_decay)
    rule = weft.train.make_optimizer(spec, [])
    for sparse in sparse_grads(*shapes[0], g):
        for k in range(2):  # some steps leave a parameter without a gradient (not updated)
            grads = [sparse] + [torch.randn(s, generator=g) for s in shapes[1:]]
            if k == 1:
                grads[2] = None
            opt.zero_grad(set_to_none=True)
            for p, grad in zip(params, grads):
                p.grad = grad
            opt.step()
            for i, grad in enumerate(grads):
                if grad is not None:
                    steps[i] += 1
                    tensor_by_tensor(rule, lr, steps[i], ref[i], grad, moments[i])
            for p, r in zip(params, ref):
                assert torch.equal(p.detach(), r)
    for p, m, step in zip(params, moments, steps):
        assert opt.state[p]["step"] == step
        assert torch.equal(opt.state[p]["exp_avg"], m[0])
        assert torch.equal(opt.state[p]["exp_avg_sq"], m[1])


def test_a_parameter_whose_memory_was_replaced_is_updated_there():
    """`p.data = ...` keeps the Parameter object but moves its memory: the step updates the new
    memory (a view kept by the object alone would keep training the old one)."""
    p = torch.nn.Parameter(torch.ones(4, 3))
    opt = wt.Adam([p], lr=0.1)
    p.grad = torch.ones(4, 3)
    opt.step()
    old = p.data
    p.data = torch.full((4, 3), 5.0)
    p.grad = torch.ones(4, 3)
    opt.step()
    assert torch.all(p.detach() < 5.0)
    torch.testing.assert_close(old, torch.full((4, 3), 0.9))


def test_what_the_step_cannot_update_is_refused_by_name():
    table = torch.nn.Parameter(torch.zeros(4, 3))
    opt = wt.Adam([table], lr=0.1)
    table.grad = unchecked_coo([1, 7], torch.ones(2, 3), (4, 3))
    with pytest.raises(weft.Error, match=r"\[weft.torch.Adam\] parameter \[4, 3\]: .*row index 7 "
                                         r"at position 1 is outside \[0, 4\)"):
        opt.step()
    table.grad = unchecked_coo([1, -2], torch.ones(2, 3), (4, 3))
    with pytest.raises(weft.Error, match=r"\[weft.torch.Adam\] parameter \[4, 3\]: .*row index -2 "
                                         r"at position 0 is outside \[0, 2\^31\)"):
        opt.step()
    table.grad = torch.sparse_coo_tensor(torch.tensor([[0, 1], [2, 0]]), torch.ones(2), (4, 3))
    with pytest.raises(weft.Error, match=r"parameter \[4, 3\]: .*sparse in its first axis only"):
        opt.step()
    table.data = torch.zeros(4, 3, dtype=torch.float64)
    table.grad = torch.ones(4, 3, dtype=torch.float64)
    with pytest.raises(weft.Error, match=r"\[weft.torch.Adam\] parameter \[4, 3\]: .*float32"):
        opt.step()


def test_an_empty_torch_tensor_is_taken_whatever_its_strides():
    """torch exports an empty tensor with strides Weft's contiguity check refused (an empty
    sparse gradient's rows: a step whose batch used no row of a table)."""
    for shape in [(0, 3), (2, 0), (0,)]:
        assert tuple(weft.from_dlpack(torch.zeros(shape)).shape) == shape


def two_outputs_with_a_metric(n, vocab, seed):
    """A Tree-LSTM of Weft's cells (its table's gradient row-sparse) with two outputs, h and a
    body's 2 h, and a labelled metric over h at the root."""
    block, store = tree_lstm(n, vocab, seed, sparse=True)
    graph = td.Composition()
    h = graph.add(block, graph.input())
    graph.add(td.Metric("root"), [h, graph.add(td.GetItem("label"), graph.input())])
    graph.set_output(graph.add(td.AllOf(td.Identity(), td.Function(
        "twice", [Type.vector(n)], lambda x: x * 2.0)), h))
    return graph, store


def test_outputs_labels_and_a_backward_from_several_outputs_equal_weft_s_own():
    n, vocab = 5, 12
    rng = np.random.default_rng(9)
    trees = [dict(random_tree(rng, 3, vocab), label=int(rng.integers(0, n))) for _ in range(6)]
    block, store = two_outputs_with_a_metric(n, vocab, 9)
    step = wt.fold(block, store, metrics=["root"])
    h, twice = step(trees)
    rows, labels = step.metric("root")
    assert labels.dtype == torch.int64 and labels.tolist() == [t["label"] for t in trees]
    loss = (h * h).sum() + (twice * 0.5).sum() + torch.nn.functional.cross_entropy(rows, labels)
    loss.backward()
    assert step.torch_params[0].grad.is_sparse  # the table: its rows, as torch's sparse COO
    got = {p.name: (v.grad.to_dense() if v.grad.is_sparse else v.grad).clone()
           for p, v in zip(step.weft_params, step.torch_params)}

    store.zero_grad()
    tape = weft.Tape()
    with tape:
        result = td.Compiler(block).forward(trees, tape)
        wh, wtwice, root = result.output(0), result.output(1), result.metric("root")
        want = (weft.sum(wh * wh) + weft.sum(wtwice * 0.5) + weft.sum(
            weft.softmax_cross_entropy(root.values, root.label_tensor())) * (1.0 / len(trees)))
    tape.backward(want)
    torch.testing.assert_close(loss.detach(), torch.tensor(want.item()), **TOL)
    torch.testing.assert_close(h.detach(), torch.from_dlpack(wh.value), rtol=0, atol=0)
    torch.testing.assert_close(twice.detach(), torch.from_dlpack(wtwice.value), rtol=0, atol=0)
    torch.testing.assert_close(rows.detach(), torch.from_dlpack(root.values.value), rtol=0, atol=0)
    for p in store.parameters:  # the table's dense gradient: its rows scatter-added by Weft
        torch.testing.assert_close(got[p.name], torch.from_dlpack(p.grad), **TOL)
