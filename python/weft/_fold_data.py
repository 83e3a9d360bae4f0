"""How TF Fold's Python example data reaches the engine (JSON-like) when it does not as it is
(ranges, NumPy arrays, bytes, dicts with non-string keys), and metric rows back as NumPy: shared
by the block combinators (eval) and the compiler (Session.run)."""

import numpy as np


def to_data(value):
    """Example data as the engine reads it (JSON-like): ranges and other iterables become lists,
    dict keys strings, 0-d arrays numbers. Only called when the engine refused the value as is."""
    if isinstance(value, dict):
        return {str(k): to_data(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, bytes):  # serialized protos: text holding the bytes as latin-1
        return value.decode("latin-1")
    if isinstance(value, (list, tuple, range)) or (
            hasattr(value, "__iter__") and not isinstance(value, (str, bytes, np.generic))):
        return [to_data(v) for v in value]
    return value


def with_data(fn, value):
    try:
        return fn(value)
    except TypeError as error:
        if "example data" not in str(error) and "dict keys" not in str(error):
            raise
        return fn(to_data(value))


def metric_rows(values, tolist):
    if len(values) == 0:
        return []
    rows = np.asarray(values.values.value)
    return rows.tolist() if tolist else list(rows)
