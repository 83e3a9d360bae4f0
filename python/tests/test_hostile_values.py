"""Values a Python user passes by mistake (or an attacker on purpose) get a Python exception that
says what is wrong: nesting past max_json_depth, element counts past 64 bits, arrays a Parameter
cannot view, integers past 64 bits, invalid Unicode, Function bodies returning non-Vars. Before,
these overflowed the C stack, allocated 4 elements for 2^64 + 4, copied silently, or surfaced
pybind11's "Unable to cast Python instance to C++ type"."""

import os
import subprocess
import sys

import numpy as np
import pytest

import weft
from weft import blocks as td
from weft.blocks import Type


def nested(levels, inner=1.0):
    x = inner
    for _ in range(levels):
        x = [x]
    return x


def test_deep_nesting_is_refused_at_the_json_depth_limit():
    deep = nested(30000)
    for call in (lambda: td.GetItem(0).eval(deep), lambda: td.GetItem(0).max_depth(deep),
                 lambda: td.Inputs([deep]), lambda: td.Compiler(td.GetItem(0) >> td.Scalar()).weave([deep])):
        with pytest.raises(weft.Error, match=r"more than 256 levels deep \(limit max_json_depth = 256; "
                                             r"raise it with WEFT_LIMIT_JSON_DEPTH\)"):
            call()
    deep_dict = {}
    cursor = deep_dict
    for _ in range(1000):
        cursor["a"] = {}
        cursor = cursor["a"]
    with pytest.raises(weft.Error, match="levels deep"):
        td.GetItem("a").eval(deep_dict)
    # Up to the limit is fine: 256 lists inside one another, not 257.
    assert td.GetItem(0).eval(nested(256)) == nested(255)
    with pytest.raises(weft.Error, match="more than 256 levels deep"):
        td.GetItem(0).eval(nested(257))


def test_deep_nesting_in_predict_is_refused(tmp_path):
    model = weft.models.create("calculator", hidden=4, max_train=8, max_eval=4, seed=1)
    with pytest.raises(weft.Error, match="levels deep"):
        model.predict([nested(30000)])
    with pytest.raises(weft.Error, match="levels deep"):
        weft.models.create("calculator", hidden=4, bogus=nested(30000))


def test_element_counts_past_64_bits_are_errors_naming_the_shape():
    with pytest.raises(weft.Error, match=r"\[4611686018427387905, 4\] has more elements than a 64-bit count holds"):
        weft.zeros([2**62 + 1, 4])
    with pytest.raises(weft.Error, match=r"\[4294967296, 4294967296\]"):
        weft.zeros([2**32, 2**32])
    with pytest.raises(weft.Error, match=r"needs more than 2\^63 bytes"):
        weft.zeros([2**62])
    with pytest.raises(weft.Error, match=r"\[3, -1\]: negative extent -1"):
        weft.zeros([3, -1])
    with pytest.raises(weft.Error, match="rank 7"):
        weft.zeros([1] * 7)
    with pytest.raises(weft.Error, match="unsupported dtype 'float16'"):
        weft.zeros([2], "float16")
    assert weft.zeros([2, 0, 2**40]).size == 0
    assert weft.zeros([2], "float64").dtype == "float64"  # was silently float32
    with pytest.raises(weft.Error, match="64-bit count"):
        td.Type.tensor([2**40, 2**40])
    with pytest.raises(weft.Error, match="64-bit count"):
        weft.tensor(np.zeros(4, np.float32)).reshape([2**62, 2**2, 2])


def test_a_parameter_never_copies_an_array_silently():
    a = np.zeros((2, 3), np.float32)
    p = weft.Parameter("w", a)
    p.value.numpy()[0, 0] = 7  # a view both ways
    assert a[0, 0] == 7
    for bad, why in [(np.zeros((2, 3)), "float64"), (np.zeros(3, np.int32), "int32"),
                     (np.zeros((4, 6), np.float32)[::2, ::2], "not C-contiguous"),
                     (np.zeros((3, 2), np.float32).T, "not C-contiguous")]:
        with pytest.raises(weft.Error, match=f"Parameter 'w'.*{why}.*silent copy") as info:
            weft.Parameter("w", bad)
        assert "np.ascontiguousarray" in str(info.value)
    with pytest.raises(weft.Error, match=r"\[Parameter 'p'\] the value is None"):
        weft.Parameter("p", None)
    with pytest.raises(weft.Error, match="parameters are float32"):
        weft.Parameter("p", weft.tensor([1, 2]))
    # Plain numbers and lists have nothing to share: copied, as documented.
    assert weft.Parameter("b", [1.0, 2.0]).numpy().tolist() == [1.0, 2.0]


def test_integers_past_64_bits_and_invalid_unicode_are_named():
    with pytest.raises(weft.Error, match="the integer 1180591620717411303424 does not fit 64 bits"):
        td.Scalar("int64").eval(2**70)
    with pytest.raises(weft.Error, match="integer of 100001 bits does not fit"):
        td.Scalar("int64").eval(2**100000)
    with pytest.raises(weft.Error, match="integers beyond 64 bits"):
        weft.tensor([2**70])
    with pytest.raises(weft.Error, match=r"lone surrogate \(U\+D800 at index 1\)"):
        td.Identity().eval("a\ud800")
    model = weft.models.create("calculator", hidden=4, max_train=8, max_eval=4, seed=1)
    with pytest.raises(weft.Error, match=r"\[example 1\] .*lone surrogate \(U\+D800 at index 0\)"):
        model.predict(['{"number": 3}', "\ud800"])
    with pytest.raises(weft.Error, match=r"\[example dict key\] .*lone surrogate"):
        td.Identity().eval({"\udfff": 1})


@pytest.mark.parametrize("returned, shown", [(42, "int"), (None, "NoneType \\(a missing return\\?\\)"),
                                              ("x", "str")], ids=["int", "None", "str"])
def test_a_function_body_returning_a_non_var_is_named(returned, shown):
    # Given its input types, a Function runs its body once to infer its output type: the error
    # comes at construction. Without them it comes when the block first runs.
    with pytest.raises(weft.Error, match=f"Function 'bad': the body returned {shown}; it must return a Var"):
        td.Function("bad", [Type.scalar()], lambda x: returned)
    with pytest.raises(weft.Error, match="Function 'pair': the body returned"):
        td.Function("pair", [Type.scalar()], lambda x: (x, returned))
    late = td.Function("late", [], lambda x: returned)
    with pytest.raises(weft.Error, match=f"Function 'late': the body returned {shown}"):
        (td.Scalar() >> late).eval(1.0)


def test_star_import_of_blocks_keeps_the_builtin_eval():
    namespace = {}
    exec("from weft.blocks import *\nresult = eval('1 + 1')", namespace)
    assert "eval" not in namespace and "Map" in namespace and "Compiler" in namespace
    assert namespace["result"] == 2
    # In a fresh interpreter too, with blocks' own eval as a method.
    code = "from weft.blocks import *\nprint(eval('2 * 3'), float(Scalar().eval(4)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["6", "4.0"]
