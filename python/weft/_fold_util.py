"""TensorFlow Fold's small utilities that training loops use (td.group_by_batches, td.epochs,
td.parse_spec) and the argument capture its layers' reprs were built on (get_local_arguments),
with TF Fold's meaning and errors."""

import ast
import collections.abc
import inspect
import itertools
import random


def group_by_batches(iterable, batch_size, truncate=False):
    """Lists of batch_size consecutive items; the last may be shorter unless truncate."""
    if batch_size <= 0:
        raise ValueError("batch_size must be positive: %s" % (batch_size,))
    iterator = iter(iterable)
    while True:
        batch = list(itertools.islice(iterator, batch_size))
        if not batch or (truncate and len(batch) < batch_size):
            return
        yield batch


def epochs(items, n=None, shuffle=True, prng=None):
    """Yields `items` n times (forever when n is 0 or None), memoized as it is first read, and
    shuffled in place after each yield but the last; with n == 1, items itself."""
    if not isinstance(items, collections.abc.Iterable):
        raise TypeError("items must be an iterable: %s" % (items,))
    if n is not None and n < 0:
        raise ValueError("n must be non-negative: %s" % (n,))
    if n == 1:
        yield items
        return
    first, memo = itertools.tee(items)
    yield first
    items = list(memo)
    rounds = itertools.count(1) if not n else range(1, n)
    for _ in rounds:
        if shuffle:
            _shuffle(items, prng or random.random)
        yield items


def _shuffle(items, prng):
    """Fisher-Yates with a nullary prng in [0, 1), as TF Fold's epochs took."""
    for i in range(len(items) - 1, 0, -1):
        j = int(prng() * (i + 1))
        items[i], items[j] = items[j], items[i]


def parse_spec(spec):
    """'a=1,b=[1,2],c=foo' -> {'a': 1, 'b': [1, 2], 'c': 'foo'} (values as Python literals when
    they read as one, else strings)."""
    result, depth, start, pieces = {}, 0, 0, []
    for i, ch in enumerate(spec + ","):
        if ch in "[({":
            depth += 1
        elif ch in "])}":
            depth -= 1
        elif ch == "," and depth == 0:  # a comma between entries, not inside a list value
            pieces.append(spec[start:i])
            start = i + 1
    for piece in filter(None, (p.strip() for p in pieces)):
        key, sep, value = piece.partition("=")
        if not sep:
            raise ValueError("malformed spec entry (no '='): %r" % (piece,))
        try:
            result[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            result[key.strip()] = value.strip()
    return result


def get_local_arguments(fun, is_method=False):
    """The caller's arguments to `fun` as (positional values, [(keyword, value)] for keywords
    given a value other than their default)."""
    frame = inspect.currentframe().f_back
    local = frame.f_locals
    spec = inspect.getfullargspec(fun)
    names = spec.args[1:] if is_method else spec.args
    defaults = spec.defaults or ()
    num_positional = len(names) - len(defaults)
    args = [local[name] for name in names[:num_positional]]
    kwargs = [(name, local[name]) for name, default in zip(names[num_positional:], defaults)
              if local[name] != default]
    return args, kwargs


def parse_message_to_tree(message_type_name, serialized):
    """A serialized protobuf (bytes, or text holding them as latin-1: example data reaches Python
    callbacks JSON-like) as TF Fold's proto_tools rendered it: a dict by field name, repeated
    fields as lists, submessages recursively, enums as {name, index, number}, unset optional
    fields as None. Needs the protobuf package and the type's _pb2 module imported."""
    from google.protobuf import descriptor_pool, message_factory  # only this block needs them

    descriptor = descriptor_pool.Default().FindMessageTypeByName(message_type_name)
    get_class = getattr(message_factory, "GetMessageClass", None)  # protobuf >= 4.21
    message = (get_class(descriptor) if get_class else
               message_factory.MessageFactory().GetPrototype(descriptor))()
    message.ParseFromString(serialized.encode("latin-1") if isinstance(serialized, str)
                            else bytes(serialized))
    return _message_tree(message)


def _message_tree(message):
    tree = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if field.label == field.LABEL_REPEATED:
            tree[field.name] = [_field_value(field, v) for v in value]
        elif _has_presence(field) and not message.HasField(field.name):
            tree[field.name] = None
        else:
            tree[field.name] = _field_value(field, value)
    return tree


def _has_presence(field):
    return field.message_type is not None or getattr(field, "has_presence", False)


def _field_value(field, value):
    if field.message_type is not None:
        return _message_tree(value)
    if field.enum_type is not None:
        enum = field.enum_type.values_by_number[value]
        return {"name": enum.name, "index": enum.index, "number": enum.number}
    return value

