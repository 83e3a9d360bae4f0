"""Read-only memory from NumPy (np.frombuffer of bytes, read-only np.memmap, arrays made read-only)
never becomes a writable Weft view: from_numpy and Parameter refuse it, naming the copy to make;
copies (weft.tensor) and writable mappings work. The optimizer case runs in a child process, so a
crash fails the test instead of ending pytest."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import weft

COPY_HINT = r"read-only .*np\.array\(a\)"


def read_only_memmap(path, values):
    np.asarray(values, np.float32).tofile(path)
    return np.memmap(path, dtype=np.float32, mode="r", shape=(len(values),))


def test_from_numpy_refuses_the_memory_of_bytes():
    data = bytes(16)
    with pytest.raises(weft.Error, match=r"\[from_numpy\] the array \(4,\) is " + COPY_HINT):
        weft.from_numpy(np.frombuffer(data, np.float32))
    assert data == bytes(16)
    t = weft.from_numpy(np.array(np.frombuffer(data, np.float32)))  # the copy the message names
    np.asarray(t)[0] = 5.0
    assert data == bytes(16) and t.tolist()[0] == 5.0


def test_from_numpy_refuses_arrays_flagged_read_only():
    a = np.zeros((2, 3), np.float32)
    a.flags.writeable = False
    with pytest.raises(weft.Error, match=COPY_HINT):
        weft.from_numpy(a)
    with pytest.raises(weft.Error, match=COPY_HINT):
        weft.from_numpy(np.broadcast_to(np.float32(1), (3,)))
    assert weft.tensor(a).tolist() == a.tolist()  # a copy reads any memory


def test_parameter_refuses_a_read_only_memmap(tmp_path):
    mapped = read_only_memmap(tmp_path / "w.bin", [1, 2, 3])
    with pytest.raises(weft.Error, match=r"Parameter 'w'.*" + COPY_HINT):
        weft.Parameter("w", mapped)
    p = weft.Parameter("w", np.array(mapped))
    assert p.numpy().tolist() == [1, 2, 3]


def test_a_writable_memmap_is_a_view_the_optimizer_updates(tmp_path):
    path = tmp_path / "w.bin"
    np.ones(3, np.float32).tofile(path)
    mapped = np.memmap(path, dtype=np.float32, mode="r+", shape=(3,))
    p = weft.Parameter("w", mapped)
    with weft.Tape() as tape:
        tape.backward(weft.sum(weft.Var(p) * 2.0))
    weft.train.SGD([p]).step(0.5)
    mapped.flush()
    assert np.fromfile(path, np.float32).tolist() == [0.0, 0.0, 0.0]


def test_dlpack_export_of_read_only_memory_is_refused():
    with pytest.raises((weft.Error, BufferError, TypeError)):
        weft.from_dlpack(np.frombuffer(bytes(16), np.float32))


def test_adam_over_a_read_only_memmap_never_crashes(tmp_path):
    # The crash of issue 41: a Parameter over a read-only mapping, then Adam's update (SIGSEGV).
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import weft
        path = sys.argv[1]
        np.arange(4, dtype=np.float32).tofile(path)
        mapped = np.memmap(path, dtype=np.float32, mode="r", shape=(4,))
        try:
            p = weft.Parameter("w", mapped)
        except weft.Error as error:
            print("refused:", error)
            sys.exit(0)
        with weft.Tape() as tape:
            tape.backward(weft.sum(weft.Var(p) * 3.0))
        weft.train.Adam([p]).step(0.1)
        print("updated")
    """)
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "w.bin")], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr[-2000:])
    assert run.stdout.startswith("refused: [Parameter 'w'] the array (4,) is read-only"), run.stdout
    assert np.fromfile(tmp_path / "w.bin", np.float32).tolist() == [0, 1, 2, 3]
