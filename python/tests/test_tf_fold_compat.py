"""TensorFlow Fold programs on weft.blocks with only the import changed (issue 34): TF Fold's
spellings, types and value conventions, and the engine fixes its tests found (the one-element
broadcast, AllOf() as Void, tuples of Python values, errors at composition)."""

import collections
import itertools

import numpy as np
import pytest

import weft
from weft import blocks as td


# ---- Types ------------------------------------------------------------------------------------

def test_types_read_and_compare_as_tf_fold():
    t = td.TupleType(td.TensorType(()), td.TensorType((1,), "int32"))
    assert repr(t) == "TupleType(TensorType((), 'float32'), TensorType((1,), 'int32'))"
    assert t[0:1] == td.TupleType(td.TensorType(())) and len(t) == 2 and t.size == 2
    assert hash(td.SequenceType(td.TensorType([2]))) == hash(td.SequenceType(td.TensorType([2])))
    assert td.TupleType(td.TensorType([3]), td.SequenceType(td.TensorType([]))).size is None
    assert td.convert_to_type(([1, 2, "int64"], "float64", 3)) == td.TupleType(
        td.TensorType((1, 2), "int64"), td.TensorType((), "float64"), td.TensorType((3,)))
    instance = ([], [1], ([2], [3], ()), ((),))
    flat_type = td.convert_to_type(instance)
    assert flat_type.unflatten(iter(flat_type.flatten(instance)), None) == instance
    assert td.canonicalize_type(td.TupleType(td.PyObjectType(), td.PyObjectType())) == \
        td.PyObjectType()


def test_blocks_report_tf_fold_types_and_take_type_likes():
    block = td.Map(td.Vector(2)) >> td.Sum()
    assert block.output_type == td.TensorType([2])
    assert block.input_type == td.PyObjectType()
    assert isinstance(td.Record({"a": td.Scalar()}).output_type, td.TupleType)
    unknown = td.Identity()
    assert unknown.output_type is None
    assert unknown.set_input_type([3, "int32"]).output_type == td.TensorType((3,), "int32")


# ---- The engine fixes -------------------------------------------------------------------------

@pytest.mark.parametrize("fn, expected", [
    (lambda x: 2.0 * x, 42.0), (lambda x: 2.0 + x, 23.0), (lambda x: 2.0 - x, -19.0),
    (lambda x: x * 2.0, 42.0), (lambda x: x + 2.0, 23.0), (lambda x: x - 2.0, 19.0)])
def test_a_number_on_either_side_keeps_the_batch_shape(fn, expected):
    block = td.Scalar() >> td.Function(fn)
    assert block.output_type == td.TensorType([])
    assert block.eval(21, tolist=True) == expected
    compiler = td.Compiler.create(block)
    for examples in ([21], [21, 21, 21]):  # a one-element batch was the broken case
        out = td.Session().run(compiler.output_tensors, compiler.build_feed_dict(examples))
        assert out[0].shape == (len(examples),) and out[0].tolist() == [expected] * len(examples)


def test_all_of_nothing_is_void_and_all_of_python_values_a_tuple():
    assert (td.Scalar() >> td.AllOf()).eval(-3) is None
    assert (td.Scalar() >> td.AllOf()).output_type == td.VoidType()
    assert td.Record([]).eval(()) == ()
    assert td.AllOf(td.Identity(), td.Identity()).eval("foo") == ("foo", "foo")
    assert (td.AllOf(td.Identity(), td.Identity()) >> (td.Scalar(), td.Scalar())).eval(
        42, tolist=True) == (42.0, 42.0)


def test_bad_blocks_raise_when_composed():
    with pytest.raises(TypeError, match="42 is not a tensor or np.ndarray"):
        td.FromTensor(42)
    with pytest.raises(TypeError, match="positional"):
        td.Slice(1)
    with pytest.raises(TypeError, match="Slice"):
        td.Scalar() >> td.Slice(stop=1)
    with pytest.raises(TypeError, match="tf_fn is not callable: 42"):
        td.Function(42)
    with pytest.raises(ValueError, match="case_blocks must be non-empty"):
        td.OneOf(lambda x: x, {})


# ---- Spellings --------------------------------------------------------------------------------

def test_tuples_and_dicts_are_records():
    block = {"x": td.Map(td.Scalar()), "y": td.Scalar() >> td.Broadcast()} >> td.Zip()
    assert block.eval({"x": [1, 2], "y": 3}, tolist=True) == [(1.0, 3.0), (2.0, 3.0)]
    pair = (td.Scalar(), td.Vector(2)) >> td.Function(lambda a, b: b * a)
    assert pair.eval((2, [1, 3]), tolist=True) == [2.0, 6.0]
    ordered = td.Record(collections.OrderedDict([("b", td.Scalar()), ("a", td.Scalar("int32"))]))
    assert ordered.eval({"a": 1, "b": 2}, tolist=True) == (2.0, 1)
    sliced = td.Record([(0, td.Scalar()), (slice(1, 3), (td.Scalar(), td.Scalar()) >> td.Concat())])
    assert sliced.eval([1, 2, 3], tolist=True) == (1.0, [2.0, 3.0])


def test_function_gets_and_returns_nested_tuples():
    block = ((td.Vector(1), (td.Vector(2), td.Vector(3))) >>
             td.Function(lambda x, y: ((y[1], x), y[0])))
    assert block.output_type == td.TupleType(
        td.TupleType(td.TensorType([3]), td.TensorType([1])), td.TensorType([2]))
    assert block.eval(([1], ([2, 3], [4, 5, 6])), tolist=True) == \
        (([4.0, 5.0, 6.0], [1.0]), [2.0, 3.0])


def test_composition_scope_and_connect_in_any_order():
    c = td.Composition()
    with c.scope():
        scalar = td.Scalar().reads(c.input)
        doubled = td.Function(lambda x: x * 2.0).reads(scalar)
        tripled = td.Function(lambda x: x * 3.0).reads(scalar)
        c.output.reads(td.Function(weft.add).reads(doubled, tripled))
    assert c.eval(5, tolist=True) == 25.0 and c.max_depth(5) == 2
    fn0, fn1, fn2 = td.Scalar(), td.Function(lambda x: x * 2.0), td.Function(weft.add)
    d = td.Composition([fn2, fn1, fn0])
    d.connect((fn0, fn1), fn2)  # before fn1 and fn0 are connected: added when they are
    d.connect(fn2, d.output)
    d.connect(fn0, fn1)
    d.connect(d.input, fn0)
    assert d.eval(1, tolist=True) == 3.0
    a, b = td.Function(lambda x: x), td.Function(lambda x: x)
    looped = td.Composition([a, b])
    looped.connect(a, b)
    looped.connect(b, a)
    looped.connect(b, looped.output)
    with pytest.raises(ValueError, match="Composition cannot have cycles."):
        looped._validate()
    other = td.Composition([a])
    with pytest.raises(ValueError, match="cannot read from composition output"):
        other.connect(other.output, a)
    with pytest.raises(ValueError, match="the input or output of a different composition"):
        other.connect(looped.input, a)


def test_one_of_spellings_and_python_keys():
    signed = td.OneOf(lambda x: x > 0, {True: td.Scalar(),
                                        False: td.Scalar() >> td.Function(weft.neg)})
    assert [signed.eval(v, tolist=True) for v in (3, -3)] == [3.0, 3.0]
    by_tuple = (td.Identity(), td.Scalar("int32")) >> td.OneOf(
        key_fn=td.GetItem(0), case_blocks=(td.Function(lambda x: x * x), td.Function(weft.neg)),
        pre_block=td.GetItem(1))
    assert by_tuple.eval((0, 2), tolist=True) == 4 and by_tuple.eval((1, 2), tolist=True) == -2
    neutral = td.OneOf(lambda s: s == "2", (td.Scalar("int32"), td.Scalar("int32") >>
                                            td.Function(weft.neg)))
    assert neutral.eval("2", tolist=True) == -2 and neutral.eval("3", tolist=True) == 3
    last = td.OneOf(lambda x: -1, (td.Scalar(), td.Scalar() >> td.Function(weft.neg)))
    assert last.eval(4, tolist=True) == -4.0


def test_untyped_forward_declaration_learns_its_types():
    fwd = td.ForwardDeclaration()
    expr = td.OneOf(lambda x: x["op"], {
        "lit": td.GetItem("val") >> td.Scalar(),
        "add": td.Record({"left": fwd(), "right": fwd()}) >> td.Function(weft.add)})
    fwd.resolve_to(expr)
    tree = {"op": "add", "left": {"op": "lit", "val": 3}, "right": {"op": "lit", "val": 5}}
    assert expr.eval(tree, tolist=True) == 8.0 and expr.max_depth(tree) == 1


def test_concat_and_layers_under_tf_fold_names():
    rec = {"a": td.Tensor([1, 3]), "b": td.Tensor([1, 3])} >> td.Concat(concat_dim=1)
    assert rec.eval({"a": [[1, 2, 3]], "b": [[4, 5, 6]]}, tolist=True) == [[1, 2, 3, 4, 5, 6]]
    fc = td.FC(3, activation=None, initializer=lambda shape, rng: np.ones(shape))
    block = td.Vector(2) >> fc >> td.Function(td.FC(1, activation=None))
    assert block.output_type == td.TensorType([1])
    assert fc.input_type == td.TensorType([2])
    assert (td.Vector(2) >> fc).eval([1, 2], tolist=True) == [3.0, 3.0, 3.0]
    table = np.array([[1, 2], [3, 4]], np.float32)
    embed = td.Scalar("int32") >> td.Embedding(2, 2, initializer=table)
    assert [embed.eval(i, tolist=True) for i in (0, 1, 7, -5)] == [[1, 2], [3, 4], [3, 4], [3, 4]]
    scoped = td.ScopedLayer(lambda x, scope: x * scope.get_variable("w", (2,), 3.0), "scaled")
    assert (td.Vector(2) >> scoped).eval([1, 2], tolist=True) == [3.0, 6.0]
    assert len(scoped.parameters()) == 1


def test_python_values_as_tf_fold_treats_them():
    assert td.Map(td.Scalar()).eval(range(3), tolist=True) == [0.0, 1.0, 2.0]
    assert (td.GetItem(1) >> td.Scalar()).eval({1: 5, 2: 6}, tolist=True) == 5.0
    ten = td.Map(td.Scalar()) >> td.Fold(td.Function(weft.add), np.array(10.0, "float32"))
    assert td.FromTensor(np.array(10.0, "float32")).output_type == td.TensorType([])
    assert ten.eval([1, 2, 3], tolist=True) == 16.0 and ten.max_depth([1, 2, 3]) == 3
    repeated = (td.Scalar() >> td.Broadcast()).eval(42, tolist=True)
    assert isinstance(repeated, itertools.repeat) and next(repeated) == 42.0
    assert (td.Map(td.Scalar()) >> td.NGrams(2)).eval([1, 2, 3], tolist=True) == \
        [(1.0, 2.0), (2.0, 3.0)]


def test_metrics_come_back_from_eval_and_session():
    block = td.Map(td.Scalar() >> td.AllOf(td.Metric("x"), td.Identity()))
    value, metrics = block.eval([1, 2], tolist=True)
    assert value == [(None, 1.0), (None, 2.0)] and metrics == {"x": [1.0, 2.0]}
    root = td.Map(td.Scalar() >> td.Metric("x")) >> td.Void()
    compiler = td.Compiler.create(root)
    assert list(compiler.metric_tensors) == ["x"]
    rows = td.Session().run(compiler.metric_tensors["x"], compiler.build_feed_dict([[1], [2, 3]]))
    assert rows.tolist() == [1.0, 2.0, 3.0]


def test_compiled_batches_match_one_at_a_time():
    # (A [B, 2] * n [B] would broadcast n along the rows' axis, in TF Fold as here.)
    block = td.AllOf(td.Map(td.Vector(2)) >> td.Mean(), td.Length()) >> td.Function(
        lambda mean, n: (mean + mean, n * 2.0))
    compiler = td.Compiler.create(td.Identity() >> block)
    examples = [[[1, 5], [2, 3]], [[0, 4]], []]
    totals, lengths = td.Session().run(compiler.output_tensors, compiler.build_feed_dict(examples))
    for i, example in enumerate(examples):
        alone_total, alone_n = block.eval(example)
        np.testing.assert_allclose(totals[i], alone_total)
        assert lengths[i] == alone_n == 2 * len(example)
    with pytest.raises(TypeError, match="root output may not contain sequences"):
        td.Compiler.create(td.Map(td.Scalar()))
    with pytest.raises(TypeError, match="root outputs must all be tensors"):
        td.Compiler.create(td.GetItem("foo"))
    with pytest.raises(TypeError, match="root must have at least one output"):
        td.Compiler.create(td.Record([]))


def test_serialized_message_to_tree():
    with pytest.raises(TypeError, match="message type name must be a string; 42 has"):
        td.SerializedMessageToTree(42)
    pytest.importorskip("google.protobuf", reason="protobuf is absent (python3-protobuf)")
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    proto = descriptor_pb2.FileDescriptorProto(name="weft_fold_test.proto", package="weft_test")
    node = proto.message_type.add(name="Node")
    node.field.add(name="name", number=1, type=9, label=1)       # optional string
    node.field.add(name="values", number=2, type=5, label=3)     # repeated int32
    node.field.add(name="child", number=3, type=11, label=1, type_name=".weft_test.Node")
    descriptor_pool.Default().Add(proto)
    descriptor = descriptor_pool.Default().FindMessageTypeByName("weft_test.Node")
    get_class = getattr(message_factory, "GetMessageClass", None)
    cls = get_class(descriptor) if get_class else message_factory.MessageFactory().GetPrototype(
        descriptor)
    message = cls(name="a", values=[1, 2], child=cls(name="b"))
    tree = td.SerializedMessageToTree("weft_test.Node").eval(message.SerializeToString())
    assert tree == {"name": "a", "values": [1, 2],
                    "child": {"name": "b", "values": [], "child": None}}


def test_star_import_keeps_the_builtins():
    scope = {}
    exec("from weft.blocks import *", scope)
    assert "eval" not in scope and "Map" in scope and "TensorType" in scope
    assert all(name in td.__all__ for name in ("Compiler", "Composition", "FC", "Embedding"))


def test_a_composition_named_by_a_string_alone():
    # td.Composition("root") used to take the string as its children ("'r' cannot be converted").
    c = td.Composition("root")
    with c.scope():
        c.output.reads(td.Function(lambda x: x * 2.0).reads(td.Scalar().reads(c.input)))
    assert c.eval(4, tolist=True) == 8.0 and "root" in repr(c)
    assert "named" in repr(td.Composition(name="named"))
    with pytest.raises(TypeError, match="give the name once"):
        td.Composition("a", name="b")


def test_td_eval_is_there_outside_star_imports():
    block = td.Map(td.Scalar()) >> td.Sum()
    assert td.eval(block, [1, 2, 3], tolist=True) == block.eval([1, 2, 3], tolist=True)
    assert td.eval({"a": td.Scalar()}, {"a": 2}, tolist=True) == (2.0,)
    assert "eval" not in td.__all__
