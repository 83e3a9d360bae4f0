"""Blocks from Python: composition type errors, eval, a Python Function body against the same
model in C++ (identical outputs and gradients), Python exceptions inside bodies and transforms,
and weaving on several threads with Python callables."""

import warnings

import numpy as np
import pytest

import weft
from weft import blocks as td
from weft.blocks import Type


def test_type_errors_are_raised_at_composition():
    with pytest.raises(weft.TypeError, match=r"Tensor\(\[\], float32\)") as info:
        td.Scalar() >> td.Map(td.Scalar())
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    cell = td.Function("cell", [Type.vector(3)], lambda x: weft.tanh(x))
    with pytest.raises(weft.TypeError, match="Tensor\\(\\[4\\], float32\\).*Tensor\\(\\[3\\], float32\\)|Tensor\\(\\[3\\], float32\\).*Tensor\\(\\[4\\], float32\\)"):
        td.Vector(4) >> cell
    with pytest.raises(weft.Error, match="dtype"):
        td.Scalar("float16")


def test_eval_of_simple_blocks():
    assert td.Scalar().eval(3) == 3.0
    np.testing.assert_array_equal((td.Map(td.Scalar()) >> td.Sum()).eval([1, 2, 3.5]), 6.5)
    with pytest.warns(UserWarning, match=r"sorts a dict's keys.*\('a', 'b'\), not in the order"):
        rec = td.Record({"b": td.Scalar(), "a": td.Vector(2)})  # a dict's keys are sorted
    a, b = rec.eval({"a": [1, 2], "b": 5})
    np.testing.assert_array_equal(a, [1, 2])
    assert b == 5
    assert (td.Map(td.Scalar()) >> td.Reduce(td.Function("add", [], lambda x, y: x + y))).max_depth([1] * 8) == 3
    one_of = td.OneOf(lambda x: isinstance(x, list), {True: td.Map(td.Scalar()) >> td.Sum(), False: td.Scalar()})
    assert one_of.eval([1, 2]) == 3 and one_of.eval(7) == 7
    assert (td.InputTransform(lambda s: len(s)) >> td.Scalar()).eval("hello") == 5


def test_sum_in_order_is_one_call_adding_in_order_batched_as_alone():
    """td.Sum(in_order=True) of float32 tensors: one batched call whatever the lengths (max_depth
    1), each sequence added in order (float32 bits of a running sum, where pairing would differ),
    the same in a batch as alone, zeros on an empty sequence."""
    rng = np.random.default_rng(4)
    examples = [[list(map(float, rng.normal(size=3) * 10 ** rng.integers(0, 8, size=3)))
                 for _ in range(n)] for n in (0, 1, 2, 5, 9)]
    block = td.Map(td.Vector(3)) >> td.Sum(in_order=True)
    assert block.max_depth(examples[4]) == 1
    batched = weft.blocks.Compiler(block).forward(examples, weft.Tape()).output().numpy()
    for rows, got in zip(examples, batched):
        expected = np.zeros(3, np.float32)
        for row in rows:
            expected = expected + np.asarray(row, np.float32)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(block.eval(rows), expected)


def test_sum_pairs_as_tf_fold_and_in_order_is_one_call():
    """TF Fold's Sum (its blocks_test: three vectors are 2 deep, their Mean 3) and Sum in order:
    depth 1 at any length, the elements added one after another (float32: 1e8 + 1 - 1e8 + 1)."""
    vectors = [[1.0, 5.0], [2.0, 3.0], [0.0, 4.0]]
    assert (td.Map(td.Vector(2)) >> td.Sum()).max_depth(vectors) == 2
    assert (td.Map(td.Vector(2)) >> td.Mean()).max_depth(vectors) == 3
    in_order = td.Map(td.Scalar()) >> td.Sum(in_order=True)
    assert [in_order.max_depth(list(range(n))) for n in (1, 2, 5, 9)] == [1, 1, 1, 1]
    assert in_order.eval([1e8, 1, -1e8, 1]) == 1.0
    assert (td.Map(td.Scalar()) >> td.Sum()).eval([1e8, 1, -1e8, 1]) == 0.0
    np.testing.assert_array_equal((td.Map(td.Vector(2)) >> td.Sum(in_order=True)).eval(vectors),
                                  [3.0, 12.0])


def test_record_warns_only_when_a_dicts_order_changes():
    value = {"h": [1, 2], "clock": 3}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a list of pairs, or a dict already sorted: no warning
        in_order = td.Record([("h", td.Vector(2)), ("clock", td.Scalar())]).eval(value)
        already_sorted = td.Record({"clock": td.Scalar(), "h": td.Vector(2)}).eval(value)
    assert in_order[1] == 3 and already_sorted[0] == 3
    with pytest.warns(UserWarning, match=r"\('clock', 'h'\).*list of \(key, block\) pairs") as got:
        record = td.Record({"h": td.Vector(2), "clock": td.Scalar()})
    assert record.eval(value)[0] == 3  # the keys sorted: the clock comes first
    assert got[0].filename == __file__  # the warning points at the caller's line


def test_blocks_in_every_dtype():
    big = td.Vector(2, "int64").eval([2**53 + 1, -4])
    assert big.dtype == np.int64 and big.tolist() == [2**53 + 1, -4]
    assert td.Scalar("float64").eval(0.1).item() == 0.1
    flags = td.Vector(3, "bool").eval([True, False, 1])
    assert flags.dtype == np.bool_ and flags.tolist() == [True, False, True]
    clip = td.Function("clip", [Type.scalar("int64")],
                       lambda x: weft.where(weft.greater(x, x * 0 + 10), x * 0 + 10, x * 2))
    out = td.Map(td.Scalar("int64") >> clip).eval([3, 40, -7])
    assert [int(v) for v in out] == [6, 10, -14]
    with pytest.raises(weft.Error, match="out of range for int32"):
        td.Scalar("int32").eval(2**40)


def tree(depth, rng):
    if depth == 0 or rng.random() < 0.3:
        return {"word": int(rng.integers(0, 10))}
    return {"children": [tree(depth - 1, rng), tree(depth - 1, rng)]}


def tree_model(cell_block, embed):
    """A binary Tree-LSTM over {"word"} / {"children"} trees; the root's h."""
    n = 8
    state = Type.tuple(Type.vector(n), Type.vector(n))
    decl = td.ForwardDeclaration(Type.input(), state)
    leaf = td.GetItem("word") >> td.Scalar("int32") >> embed >> td.Function(
        "leaf", [Type.vector(n)], lambda x: (weft.tanh(x), x))
    node = td.GetItem("children") >> td.Record([decl(), decl()]) >> cell_block
    model = td.OneOf(lambda t: "word" in t, {True: leaf, False: node})
    decl.resolve_to(model)
    return td.Compiler(model >> td.GetItem(0), threads=1), model


def test_python_body_matches_the_cpp_cell():
    n = 8
    store = weft.nn.ParameterStore(seed=5)
    cell = weft.nn.NaryTreeLSTMCell(store, "cell", 0, n, arity=2)
    emb = weft.nn.Embedding(store, "emb", 10, n)
    w, b = store.get("cell/weight"), store.get("cell/bias")

    def body(h1, c1, h2, c2):  # what NaryTreeLSTMCell computes, in Python
        gates = weft.linear(weft.concat([h1, h2]), w, b)
        c = weft.lstm_cell_state(weft.slice(gates, 1, 0, 4 * n), weft.concat([c1, c2]))
        o = weft.slice(gates, 1, 4 * n, n)
        return weft.sigmoid(o) * weft.tanh(c), c

    state = Type.tuple(Type.vector(n), Type.vector(n))
    py_cell = td.Function("py_cell", [state, state], body)
    rng = np.random.default_rng(1)
    trees = [tree(5, rng) for _ in range(20)]
    results = []
    for cell_block in (td.TreeLSTMBlock(cell), py_cell):
        compiler, _ = tree_model(cell_block, td.EmbeddingBlock(emb))
        store.zero_grad()
        tape = weft.Tape()
        out = compiler.forward(trees, tape)
        h = out.output()
        tape.backward(weft.sum(h * h))
        results.append((h.numpy().copy(), [p.grad.numpy().copy() for p in store.parameters]))
    (h_cpp, g_cpp), (h_py, g_py) = results
    np.testing.assert_array_equal(h_py, h_cpp)
    for a, b_ in zip(g_py, g_cpp):
        np.testing.assert_array_equal(a, b_)


def test_python_body_runs_once_per_batched_call():
    calls = []

    def body(x):
        calls.append(x.shape[0])
        return weft.tanh(x)

    f = td.Function("f", [Type.vector(2)], body)
    compiler = td.Compiler(td.Map(td.Vector(2) >> f) >> td.Sum())
    calls.clear()
    out = compiler.forward([[[1, 2]] * 5, [[3, 4]] * 7], weft.Tape())
    assert calls == [12]  # twelve nodes, one call
    assert out.output().shape == (2, 2)


def test_python_exception_in_a_body_propagates_and_the_next_batch_runs():
    fail = {"now": True}

    def body(x):
        if fail["now"]:
            raise RuntimeError("boom in the body")
        return weft.tanh(x)

    f = td.Function("f", [Type.vector(2)], body, output=Type.vector(2))
    compiler = td.Compiler(td.Vector(2) >> f)
    tape = weft.Tape()
    with pytest.raises(RuntimeError, match="boom in the body") as info:
        compiler.forward([[1, 2], [3, 4]], tape)
    assert "body" in "".join(str(t.name) for t in info.traceback)  # the Python frame is kept
    fail["now"] = False
    tape.clear()
    out = compiler.forward([[1, 2], [3, 4]], tape)
    np.testing.assert_allclose(out.output().numpy(), np.tanh([[1, 2], [3, 4]]), rtol=1e-6)


def test_python_exception_in_a_transform_propagates_from_weaving_threads():
    def parse(s):
        if s == "bad":
            raise KeyError("bad example")
        return float(len(s))

    compiler = td.Compiler(td.InputTransform(parse) >> td.Scalar(), threads=2, examples_per_thread=8)
    examples = td.Inputs(["ab"] * 40)
    batch = compiler.weave(examples)  # converted once, woven on two threads
    assert len(batch) == 40
    out = compiler.run(batch, weft.Tape())
    assert out.output().numpy().tolist() == [2.0] * 40
    with pytest.raises(KeyError, match="bad example"):
        compiler.weave(["ab"] * 30 + ["bad"] + ["ab"] * 9)
    assert len(compiler.weave(["abc"] * 40)) == 40  # still usable


def test_weave_errors_name_the_block_and_example():
    compiler = td.Compiler(td.GetItem("x") >> td.Scalar())
    with pytest.raises(weft.Error, match="example 1"):
        compiler.weave([{"x": 1}, {"y": 2}])


def test_metrics_and_labels():
    compiler = td.Compiler(td.Map(td.Record([td.Vector(2), td.Identity()]) >> td.Metric("m")) >> td.Void())
    out = compiler.forward([[[[1, 2], 0]], [[[3, 4], 1], [[5, 6], 0]]], weft.Tape())
    m = out.metric("m")
    assert len(m) == 3 and m.examples == [0, 1, 1] and m.labels == [0, 1, 0]
    assert m.values.shape == (3, 2)


def test_gather_reads_a_list_of_indices_in_one_step_as_zip_of_nth():
    """td.Gather: (values, indices) -> [values[i] for i in indices] (negative from the end, repeats
    allowed), the values TF Fold's Zip >> Map(Nth) over a Broadcast gives; a batch of neighbour
    sums through it equals each graph alone bit for bit; bad indices name the block and position."""
    gather = td.Record([("xs", td.Map(td.Vector(2))), ("ids", td.Identity())]) >> td.Gather()
    zip_nth = td.Record([("xs", td.Map(td.Vector(2)) >> td.Broadcast()),
                         ("ids", td.Identity())]) >> td.Zip() >> td.Map(td.Nth())
    value = {"xs": [[1, 2], [3, 4], [5, 6]], "ids": [2, 0, -1, 1, 1]}
    np.testing.assert_array_equal(gather.eval(value), zip_nth.eval(value))
    assert gather.eval({"xs": [[1, 2]], "ids": []}) == []

    rng = np.random.default_rng(7)
    graphs = []
    for n in (1, 2, 4, 7):
        xs = [list(map(float, rng.normal(size=2) * 10 ** rng.integers(0, 6, size=2)))
              for _ in range(n)]
        nbrs = [[int(j) for j in rng.integers(-n, n, size=rng.integers(0, 5))] for _ in range(n)]
        graphs.append({"xs": xs, "nbrs": nbrs})
    c = td.Composition()
    values = c.add(td.GetItem("xs") >> td.Map(td.Vector(2)) >> td.Broadcast(), c.input())
    sums = c.add(td.Zip() >> td.Map(td.Gather() >> td.Sum(in_order=True)),
                 [values, c.add(td.GetItem("nbrs"), c.input())])
    c.set_output(sums)
    block = c >> td.Map(td.Identity()) >> td.Sum(in_order=True)
    batched = td.Compiler(block).forward(graphs, weft.Tape()).output().numpy()
    for g, got in zip(graphs, batched):
        expected = np.zeros(2, np.float32)
        for ids in g["nbrs"]:
            total = np.zeros(2, np.float32)
            for i in ids:
                total = total + np.asarray(g["xs"][i], np.float32)
            expected = expected + total
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(block.eval(g), expected)

    for ids, message in [([0, 3], r"<Gather> \(position 1 of the list\): index 3 is out of range"),
                         ([True], "position 0 of the list must be an integer"),
                         (["a"], "position 0 of the list must be an integer"),
                         (1, "the indices must be a list of integers, got 1")]:
        with pytest.raises(weft.Error, match=message):
            gather.eval({"xs": [[1, 2], [3, 4], [5, 6]], "ids": ids})
    with pytest.raises(weft.Error, match="Gather.*the first input must be a sequence"):
        td.Record([td.Scalar(), td.Scalar()]) >> td.Gather()


def test_gather_lists_is_gather_for_each_list_and_names_the_list():
    """td.GatherLists: (values, lists) -> [[values[i] for i in ids] for ids in lists] in one step,
    the values Zip >> Map(Gather) gives; a neighbour sum through it equals Gather's bit for bit;
    a bad list or index names the block, the list and the position."""
    lists = td.Record([("xs", td.Map(td.Scalar())), ("ids", td.Identity())]) >> td.GatherLists()
    each = (td.Record([("xs", td.Map(td.Scalar()) >> td.Broadcast()), ("ids", td.Identity())])
            >> td.Zip() >> td.Map(td.Gather()))
    value = {"xs": [4, 5, 6], "ids": [[2, 0], [], [-1, 1, 1]]}
    assert lists.eval(value, tolist=True) == each.eval(value, tolist=True) == [
        [6.0, 4.0], [], [6.0, 5.0, 5.0]]
    rng = np.random.default_rng(3)
    graph = {"xs": rng.normal(size=(6, 3)).tolist(),
             "ids": [rng.integers(-6, 6, size=rng.integers(0, 5)).tolist() for _ in range(6)]}
    sums_lists = (td.Record([("xs", td.Map(td.Vector(3))), ("ids", td.Identity())])
                  >> td.GatherLists() >> td.Map(td.Sum(in_order=True)))
    sums_each = (td.Record([("xs", td.Map(td.Vector(3)) >> td.Broadcast()), ("ids", td.Identity())])
                 >> td.Zip() >> td.Map(td.Gather() >> td.Sum(in_order=True)))
    np.testing.assert_array_equal(np.array(sums_lists.eval(graph)), np.array(sums_each.eval(graph)))
    for ids, message in [([[0], [1, 3]], r"<GatherLists> \(list 1, position 1\): index 3 is out"),
                         ([[0], 2], "list 1 must be a list of integers, got 2"),
                         (5, "the indices must be a list of lists of integers")]:
        with pytest.raises(weft.Error, match=message):
            lists.eval({"xs": [4, 5, 6], "ids": ids})
