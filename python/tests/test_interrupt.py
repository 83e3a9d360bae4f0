"""Ctrl-C during a fit: SIGINT to a process inside model.fit / Trainer.fit raises KeyboardInterrupt
at the next step, and the checkpoint of the last finished epoch still loads. Before, Python only
saw the signal when the whole fit returned, so a fit of a million epochs could not be stopped."""

import os
import signal
import subprocess
import sys
import time

import pytest

import weft

# A fit far longer than the test's patience: only an interrupt ends it in time.
REGISTERED = """
import sys, weft
model = weft.models.create("calculator", hidden=8, max_train=64, max_eval=8, seed=2)
try:
    model.fit(epochs=1000000, batch_size=4, progress="off", checkpoint=sys.argv[1])
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    sys.exit(3)
"""

BLOCKS = """
import sys, weft
from weft import blocks as td
store = weft.nn.ParameterStore(seed=1)
fc = weft.nn.FC(store, "fc", 2, 1, activation="none")
compiler = td.Compiler(td.Vector(2) >> td.FCBlock(fc))

def figures(result, training):
    loss = weft.l2_loss(result.output())
    if training:
        weft.current_tape().backward(loss)
    return weft.train.BatchFigures(loss.item(), 4)

model = weft.train.BlocksModel(compiler, store.trainable_parameters(), figures,
                               train=[[1.0, 2.0]] * 64)
trainer = weft.train.Trainer(epochs=1000000, batch_size=4, progress="off", checkpoint=sys.argv[1])
try:
    trainer.fit(model)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
    sys.exit(3)
"""


def interrupt_after_first_checkpoint(script, checkpoint):
    proc = subprocess.Popen([sys.executable, "-c", script, str(checkpoint)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=os.environ)
    try:
        deadline = time.monotonic() + 120
        while not checkpoint.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert checkpoint.exists(), "no epoch finished: " + (proc.stderr.read() if proc.poll() is not None else "")
        time.sleep(0.2)  # into a later epoch
        proc.send_signal(signal.SIGINT)
        # Liveness, not speed: without the per-step check the fit runs on for hours.
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


@pytest.mark.parametrize("script", [REGISTERED, BLOCKS], ids=["model.fit", "Trainer.fit"])
def test_sigint_during_fit_raises_keyboard_interrupt_and_keeps_the_checkpoint(script, tmp_path):
    checkpoint = tmp_path / "last.safetensors"
    returncode, out, err = interrupt_after_first_checkpoint(script, checkpoint)
    assert returncode == 3 and out.strip() == "KeyboardInterrupt", err
    assert not list(tmp_path.glob("*.tmp*")), "a half-written checkpoint was left behind"
    if script is REGISTERED:
        model = weft.models.load(str(checkpoint))
        prediction = model.predict(['{"number": 3}'])
        assert len(prediction) == 1
    else:
        assert checkpoint.stat().st_size > 0
