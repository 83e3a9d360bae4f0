"""weft.blocks: TensorFlow Fold's block combinators, natively, under TF Fold's names and
spellings, so a TF Fold program runs with `from weft import blocks as td` in place of
`import tensorflow_fold.public.blocks as td`. The blocks themselves are the C++ engine's
(weft._weft.blocks); what TF Fold users wrote sits on top, one module per part, each importing
only those below it (tests/test_package_imports.py holds the package to no cycles):
  _fold_types     TF Fold's type objects (TensorType, TupleType, ...)
  _fold_util      group_by_batches, epochs, parse_spec, parse_message_to_tree
  _fold_data      TF Fold's Python values to the engine and metric rows back
  _blocks         the combinators: tuples and dicts as Records, Function(fn) with inferred
                  types, Composition scopes, eval(tolist=) with metrics, convert_to_block
  _fold_layers    layers (FC, Embedding, ScopedLayer) over _blocks
  _fold_compiler  Compiler.create, build_feed_dict and Session over _blocks
This module gathers them. Weft's own spellings (Function(name, inputs, body), OneOf(key,
cases), Composition.add, ...) keep working. Every difference from TF Fold is listed in
docs/coming_from_tensorflow_fold.md."""

from ._blocks import (  # noqa: F401
    AllOf, AsTensor, BatchResult, Block, Broadcast, ChildSumForgetBlock, ChildSumNodeBlock,
    Collect, Collected, Composition, Concat, convert_to_block, ConvertibleToBlock, EmbeddingBlock,
    FCBlock, Fold, ForwardDeclaration, FromTensor, Function, Gather, GatherLists, GetItem,
    GRUBlock, Identity, Inputs,
    InputTransform, Length, Loop, LSTMBlock, Map, Max, max_depth, Mean, Metric, MetricValues, Min,
    NGrams, Nth, OneHot, OneHotFromList, OneOf, Optional, Pipe, Record, Reduce, RNN, Scalar,
    SerializedMessageToTree, Slice, Sum, Tensor, TreeLSTMBlock, Type, Vector, Void, Wire,
    WovenBatch, Zeros, Zip, ZipWith,
)
from ._fold_compiler import (  # noqa: F401
    Compiler, EdibleIterator, Session,
)
from ._fold_layers import (  # noqa: F401  (TF Fold's layers, td.FC, ...)
    Embedding, FC, Layer, ScopedLayer, trainable_parameters,
)
from ._fold_types import (  # noqa: F401  (TF Fold's type names, td.TensorType, ...)
    BroadcastSequenceType, canonicalize_type, convert_to_type, PyObjectType, ResultType,
    SequenceType, TensorType, TupleType, VoidType,
)
from ._fold_util import (  # noqa: F401
    epochs, get_local_arguments, group_by_batches, parse_message_to_tree, parse_spec,
)


def eval(block, inp=None, tolist=False):  # noqa: A001  (td.eval; outside __all__, see below)
    """The value of a block-like on one input: convert_to_block(block).eval(inp, tolist=tolist)."""
    return convert_to_block(block).eval(inp, tolist=tolist)


# `from weft.blocks import *` gives the block language, never shadowing a builtin (td.eval
# stays outside it).
__all__ = [
    "AllOf", "AsTensor", "BatchResult", "Block", "Broadcast", "BroadcastSequenceType",
    "ChildSumForgetBlock", "ChildSumNodeBlock", "Collect", "Collected", "Compiler",
    "Composition", "Concat", "EmbeddingBlock", "Embedding", "FC", "FCBlock", "Fold",
    "EdibleIterator", "ForwardDeclaration", "FromTensor", "Function", "GRUBlock", "Gather",
    "GatherLists", "GetItem", "Identity",
    "InputTransform", "Inputs", "LSTMBlock", "Layer", "Length", "Map", "Max", "Mean", "Metric",
    "MetricValues", "Min", "NGrams", "Nth", "OneHot", "OneHotFromList", "OneOf", "Optional",
    "Pipe", "PyObjectType", "RNN", "Record", "Reduce", "ResultType", "Scalar", "ScopedLayer",
    "SequenceType", "SerializedMessageToTree", "Session", "Slice", "Sum", "Tensor", "TensorType", "TreeLSTMBlock",
    "TupleType", "Type", "Vector", "Void", "VoidType", "Wire", "WovenBatch", "Zeros", "Zip",
    "ZipWith", "canonicalize_type", "convert_to_block", "convert_to_type", "epochs",
    "get_local_arguments", "group_by_batches", "max_depth", "parse_spec", "trainable_parameters",
]
