"""The torch loop (sst_tree_lstm.py --cells weft --optimizer weft) against the same Weft model
driven from Python with Weft's own loss, backward and Adam (lazy rows), in one process, passes
alternated: µs a step of each and the difference (weft.torch's glue plus torch's own part).
PYTHONPATH=build/test/python python3 python_driven.py ROOT [PASSES]"""
import importlib.util
import sys
import time

import torch
import weft
from weft import blocks as td

root = sys.argv[1]
passes = int(sys.argv[2]) if len(sys.argv) > 2 else 3
spec = importlib.util.spec_from_file_location(
    "ex", f"{root}/python/examples/torch/sst_tree_lstm.py")
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)
args = type("A", (), dict(data_dir="/work/shared/data", seed=1, hidden=150, max_train=0,
                          max_eval=0, no_embeddings=False))
torch.manual_seed(1)
torch.set_num_threads(1)
cli = ex.registered_model(args)
train = td.Inputs([ex.with_pair_keys(t) for t in cli.examples("train")])
values = {q.name: q.numpy() for q in cli.parameters()}
vocab, dim = values["embedding/table"].shape


def model():
    m = ex.WeftTreeLSTM(vocab, dim, 150, seed=1, sparse=True)
    m.load_weft_values(values)
    return m


loop_model, weft_model = model(), model()
loop_opt = ex.optimizers(loop_model, 1e-3, True, fused=True)
weft_opt = weft.train.Adam(list(weft_model.store.trainable_parameters()), lr=1e-3)
compiler, tape = weft_model.weft._folder.compiler, weft.Tape()


def loop_step(batch):
    for o in loop_opt:
        o.zero_grad(set_to_none=True)
    loss, _ = ex.loss_of(loop_model, batch)
    loss.backward()
    for o in loop_opt:
        o.step()
    return float(loss)


def weft_step(batch):
    weft_opt.zero_grad()
    tape.clear()
    with weft.forward_mode(True, weft_model.rng), tape:
        nodes = compiler.forward(batch, tape).metric("nodes")
        loss = weft.sum(weft.softmax_cross_entropy(nodes.values, nodes.label_tensor()))
        loss = loss * (1.0 / len(batch))
    tape.backward(loss)
    weft_opt.step()
    return loss.item()


for epoch in range(1, passes + 1):
    order = weft.train.epoch_order(len(train), 1, epoch)
    for name, step in (("torch loop", loop_step), ("Weft from Python", weft_step)):
        start, total, steps = time.perf_counter(), 0.0, 0
        for i in range(0, len(train), 25):
            batch = train.take(order[i:i + 25])
            total += step(batch) * len(batch)
            steps += 1
        seconds = time.perf_counter() - start
        print(f"pass {epoch} {name}: loss {total / len(train):.4f}, {len(train) / seconds:.1f} "
              f"trees/s, {seconds / steps * 1e6:.0f} us a step", flush=True)
