# µs a step of weft.torch's remaining glue pieces, second pass (new code only)
import collections, importlib.util, sys, time, torch, weft
from weft import blocks as td
import weft.torch as wtm
import weft._torch_optim as topt
root = sys.argv[1]
spec = importlib.util.spec_from_file_location("ex", f"{root}/python/examples/torch/sst_tree_lstm.py")
ex = importlib.util.module_from_spec(spec); spec.loader.exec_module(ex)
T = collections.defaultdict(float)
def wrap(owner, name, key):
    f = getattr(owner, name)
    def g(*a, **k):
        t = time.perf_counter()
        try: return f(*a, **k)
        finally: T[key] += time.perf_counter() - t
    setattr(owner, name, g)
wrap(td.Compiler, "forward", "compiler.forward")
wrap(wtm._glue, "step_outputs", "step_outputs")
wrap(wtm._glue, "step_backward", "step_backward")
wrap(wtm, "_COALESCED_COO", "sparse_coo_ctor")
wrap(wtm, "_from_capsule", "from_capsule (fwd+bwd)")
wrap(wtm._Run, "forward", "_Run.forward")
wrap(wtm._Run, "backward", "_Run.backward")
wrap(wtm._Run, "release", "release (tape.clear)")
wrap(wtm._Folder, "__call__", "_Folder.__call__")
wrap(wtm.WeftStep, "forward", "WeftStep.forward")
wrap(wtm.WeftStep, "backward", "WeftStep.backward")
wrap(weft._weft.torch_glue.TorchUpdate, "step", "TorchUpdate.step")
wrap(topt.Adam, "_update", "Adam._update")
A = type("A", (), dict(data_dir="/work/shared/data", seed=1, hidden=150, max_train=0, max_eval=0, no_embeddings=False))
torch.manual_seed(1); torch.set_num_threads(1)
cli = ex.registered_model(A)
train = [ex.with_pair_keys(t) for t in cli.examples("train")]
values = {q.name: q.numpy() for q in cli.parameters()}
vocab, dim = values["embedding/table"].shape
model = ex.WeftTreeLSTM(vocab, dim, 150, seed=1, sparse=True); model.load_weft_values(values)
opts = ex.optimizers(model, 1e-3, True, fused=True)
inputs = td.Inputs(train)
for epoch in (1, 2):
    T.clear(); steps = 0
    order = weft.train.epoch_order(len(train), 1, epoch)
    for i in range(0, len(train), 25):
        t0 = time.perf_counter()
        batch = inputs.take(order[i:i + 25])
        for o in opts: o.zero_grad(set_to_none=True)
        t1 = time.perf_counter()
        root_, nodes, labels = model(batch)
        t2 = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(nodes, labels, reduction="sum") / len(batch)
        t3 = time.perf_counter()
        loss.backward()
        t4 = time.perf_counter()
        for o in opts: o.step()
        t5 = time.perf_counter()
        float(loss)
        for k, v in (("model()", t2-t1), ("loss", t3-t2), ("loss.backward()", t4-t3), ("opt.step()", t5-t4), ("step", time.perf_counter()-t0)):
            T[k] += v
        steps += 1
for k, v in sorted(T.items(), key=lambda kv: -kv[1]):
    print(f"| {k} | {v / steps * 1e6:.1f} |")
