"""weft.torch and Ctrl-C: SIGINT to a process training a torch model through Weft (torch bodies
inside a Weft fold inside a torch loop) raises KeyboardInterrupt, wherever the signal lands
(Weft's forward, a torch body, Weft's backward inside torch's)."""

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("torch", reason="PyTorch is absent (Debian: python3-torch)")

TRAIN_FOREVER = """
import pathlib, sys, torch, weft
import weft.torch as wt
from weft import blocks as td
from weft.blocks import Type

n = 16
body = torch.nn.Sequential(torch.nn.Linear(2 * n, n), torch.nn.Tanh())
leaf = td.Vector(n)
decl = td.ForwardDeclaration(Type.input(), Type.vector(n))
node = td.Record([decl(), decl()]) >> wt.Function("cell", [Type.vector(n), Type.vector(n)],
                                                  lambda a, b: body(torch.cat([a, b], 1)),
                                                  Type.vector(n))
model = td.OneOf(lambda t: isinstance(t, list) and len(t) == 2, {True: node, False: leaf})
decl.resolve_to(model)
step = wt.fold(model)

def tree(d):
    return [0.1] * n if d == 0 else [tree(d - 1), tree(d - 1)]

trees = [tree(6) for _ in range(8)]
opt = torch.optim.SGD(body.parameters(), lr=1e-3)
try:
    for i in range(10**9):
        opt.zero_grad()
        step(trees).square().sum().backward()
        opt.step()
        if i == 2:
            pathlib.Path(sys.argv[1]).write_text("running")
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    sys.exit(3)
"""


@pytest.mark.parametrize("delay", [0.05, 0.3, 0.7])
def test_sigint_stops_a_torch_training_loop_through_weft(delay, tmp_path):
    started = tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", TRAIN_FOREVER, str(started)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ)
    try:
        deadline = time.monotonic() + 120
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), proc.stderr.read() if proc.poll() is not None else "no step"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)  # liveness: it would run for ever otherwise
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 3 and out.strip() == "KeyboardInterrupt", err
