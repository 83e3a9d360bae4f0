"""Process-wide settings from Python: denormal floats are flushed while Weft's kernels run
(weft.denormal_mode() == 'flush' by default) and kept on request, and the caller's own mode is
left alone either way."""

import numpy as np
import pytest

import weft

TINY = np.float32(1e-39)  # a denormal: below float32's smallest normal, 1.18e-38


def product_of_denormals():
    """[1, 2] denormals times a [2, 1] of ones: their sum, or 0 when inputs are flushed."""
    tape = weft.Tape()
    x = tape.constant(np.full((1, 2), TINY, np.float32))
    w = tape.constant(np.ones((2, 1), np.float32))
    return float(weft.matmul(x, w).item())


def test_denormals_are_flushed_by_default_and_kept_on_request():
    assert weft.denormal_mode() == "flush"
    assert product_of_denormals() == 0.0
    weft.set_denormal_mode("keep")
    try:
        assert weft.denormal_mode() == "keep"
        assert product_of_denormals() == np.float32(2) * TINY
    finally:
        weft.set_denormal_mode("flush")
    # NumPy on this thread still sees denormals: the kernel gave the thread its mode back.
    assert np.float32(TINY) * np.float32(1) == TINY


def test_an_unknown_denormal_mode_is_refused():
    with pytest.raises(weft.Error, match="unknown denormal mode 'off'; expected flush or keep"):
        weft.set_denormal_mode("off")
