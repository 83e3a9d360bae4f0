"""Split of one training step of sst_tree_lstm.py --cells weft --optimizer weft (µs a step, the
last pass): PYTHONPATH=<weft package> python3 probe.py ROOT [PASSES] [glue]. `glue` (the new code
only) also times weft.torch's remaining pieces and prints every timer."""
import collections, importlib.util, sys, time, os
import torch, weft, weft.torch as wt
from weft import blocks as td
import weft._torch_optim as topt
import weft.torch as wtm

root = sys.argv[1]
spec = importlib.util.spec_from_file_location("ex", f"{root}/python/examples/torch/sst_tree_lstm.py")
ex = importlib.util.module_from_spec(spec); spec.loader.exec_module(ex)
T = collections.defaultdict(float)

def wrap(owner, name, key):
    f = getattr(owner, name)
    def g(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            T[key] += time.perf_counter() - t
    setattr(owner, name, g)

wrap(td.Compiler, "forward", "fwd_weft")
wrap(wtm._Run, "forward", "fwd_run")
wrap(wtm._Run, "backward", "bwd_run")
import weft._torch_bodies as tb
NEW = not hasattr(wtm, "_sparse_torch_grad")
if NEW:
    wrap(weft._weft.torch_glue, "step_backward", "bwd_tape")   # zeroing + tape + grads, in C++
    wrap(weft._weft.torch_glue.TorchUpdate, "step", "adam_kernel")  # all tensors, in C++
else:
    wrap(wtm, "backward_outputs", "bwd_tape")
    wrap(wtm, "_sparse_torch_grad", "bwd_sparse")
    wrap(weft.train.Optimizer, "update_tensor", "adam_kernel")

args = ["--data-dir", "/work/shared/data", "--cells", "weft", "--optimizer", "weft", "--seed", "1"]
p = ex.argparse.ArgumentParser()
# reuse main's setup by running it with epochs=0? replicate instead
a = dict(data_dir="/work/shared/data", seed=1, hidden=150, max_train=0, max_eval=0, no_embeddings=False)
class A: pass
A = type("A", (), a)
if len(sys.argv) > 3 and sys.argv[3] == "glue":
    wrap(wtm._glue, "step_outputs", "step_outputs")
    wrap(wtm, "_COALESCED_COO", "sparse_coo_ctor")
    wrap(wtm, "_from_capsule", "from_capsule (fwd+bwd)")
    wrap(wtm._Run, "release", "release (tape.clear)")
    wrap(wtm._Folder, "__call__", "_Folder.__call__")
    wrap(wtm.WeftStep, "forward", "WeftStep.forward")
    wrap(wtm.WeftStep, "backward", "WeftStep.backward")
    wrap(topt.Adam, "_update", "Adam._update")
torch.manual_seed(1); torch.set_num_threads(1)
cli = ex.registered_model(A)
train = [ex.with_pair_keys(t) for t in cli.examples("train")]
values = {q.name: q.numpy() for q in cli.parameters()}
vocab, dim = values["embedding/table"].shape
model = ex.WeftTreeLSTM(vocab, dim, 150, seed=1, sparse=True)
model.load_weft_values(values)
opts = ex.optimizers(model, 1e-3, True, fused=True)
inputs = td.Inputs(train)
passes = int(sys.argv[2]) if len(sys.argv) > 2 else 2
for epoch in range(1, passes + 1):
    T.clear(); steps = 0
    order = weft.train.epoch_order(len(train), 1, epoch)
    start = time.perf_counter(); total = 0.0
    for i in range(0, len(train), 25):
        t0 = time.perf_counter()
        batch = inputs.take(order[i:i + 25])
        t1 = time.perf_counter()
        for o in opts: o.zero_grad(set_to_none=True)
        t2 = time.perf_counter()
        root_, nodes, labels = model(batch)
        t3 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(nodes, labels, reduction="sum") / len(batch)
        t4 = time.perf_counter()
        loss.backward()
        t5 = time.perf_counter()
        for o in opts: o.step()
        t6 = time.perf_counter()
        total += float(loss) * len(batch)
        t7 = time.perf_counter()
        for k, v in (("take", t1-t0), ("zero_grad", t2-t1), ("model", t3-t2), ("loss", t4-t3),
                     ("backward", t5-t4), ("step", t6-t5), ("float", t7-t6), ("all", t7-t0)):
            T[k] += v
        steps += 1
    secs = time.perf_counter() - start
    print(f"pass {epoch}: loss {total/len(train):.4f} {len(train)/secs:.1f} trees/s")
us = {k: v / steps * 1e6 for k, v in T.items()}
rows = [("take", us["take"]), ("zero_grad", us["zero_grad"]),
        ("forward: Weft (Compiler.forward)", us["fwd_weft"]),
        ("forward: glue (model() - Compiler.forward)", us["model"] - us["fwd_weft"]),
        ("  of which _Run.forward - Compiler.forward", us["fwd_run"] - us["fwd_weft"]),
        ("loss", us["loss"]),
        ("backward: Weft tape", us["bwd_tape"]),
        ("backward: sparse grad", us.get("bwd_sparse", 0.0)),
        ("backward: _Run.backward other", us["bwd_run"] - us["bwd_tape"] - us.get("bwd_sparse", 0.0)),
        ("backward: torch engine etc (backward - _Run.backward)", us["backward"] - us["bwd_run"]),
        ("step: kernels (update_tensor)", us["adam_kernel"]),
        ("step: Python (step - kernels)", us["step"] - us["adam_kernel"]),
        ("float(loss)", us["float"]), ("step total", us["all"])]
for k, v in rows: print(f"| {k} | {v:.1f} |")
if len(sys.argv) > 3 and sys.argv[3] == "glue":
    for k, v in sorted(us.items(), key=lambda kv: -kv[1]):
        print(f"| {k} | {v:.1f} |")
