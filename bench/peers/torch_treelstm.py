"""The ICLR 2017 benchmark model in PyTorch, in the same four modes as `weft bench treelstm`.

The peer that Weft is measured against (bench/peers/side_by_side.py runs both). Trees and
initial weights come from the files `weft bench treelstm --export DIR` writes, so both sides
run the same work: unbatched (one call per node), manual (identical shapes hand-batched per
depth), dynamic / full-dynamic done the TorchFold way (per depth one index_select, one cell
call, one torch.cat onto the values). Needs Debian's python3-torch and python3-numpy.
"""

import json
import struct
import time

import numpy as np

try:
    import torch
except ImportError:  # the side-by-side script prints how to install it
    torch = None

MODES = ("unbatched", "manual", "dynamic", "full-dynamic")


def load_safetensors(path):
    """Tensors (as NumPy arrays) and metadata of a safetensors file, stdlib + NumPy only."""
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    metadata = header.pop("__metadata__", {})
    dtypes = {"F32": "<f4", "I32": "<i4", "F64": "<f8", "I64": "<i8", "BOOL": "|b1"}
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        data = raw[8 + length + begin : 8 + length + end]
        tensors[name] = np.frombuffer(data, dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return tensors, metadata


def timed_batches(batch_size, repeats):
    return (32 // batch_size) * repeats if batch_size < 32 else repeats


class Model:
    """Leaf: embedding lookup. Internal: tree-LSTM (relu layer, four gates, no output gate)
    or tree-FC, on children concatenated as [B, 2N]."""

    def __init__(self, weights, cell):
        def param(name):
            return torch.tensor(np.array(weights[name]), requires_grad=True)

        self.cell = cell
        self.table, self.w0, self.b0 = param("embedding"), param("w0"), param("b0")
        self.params = [self.table, self.w0, self.b0]
        if cell == "tree-lstm":
            self.w1, self.b1 = param("w1"), param("b1")
            self.params += [self.w1, self.b1]
        self.n = self.w0.shape[1]

    def leaf(self, ids):
        return self.table.index_select(0, ids)

    def internal(self, x):
        h0 = torch.relu(torch.addmm(self.b0, x, self.w0))
        if self.cell == "tree-fc":
            return h0
        fl, fr, i, g = torch.addmm(self.b1, h0, self.w1).chunk(4, dim=1)
        left, right = x[:, : self.n], x[:, self.n :]
        return torch.sigmoid(fl) * left + torch.sigmoid(fr) * right + torch.sigmoid(i) * torch.tanh(g)


def finish(model, roots, train, lr, want_grad_sq=False):
    """The loss (½Σy² training, Σy inference) and, training, backward + SGD; returns loss, Σg²."""
    if not train:
        return float(roots.sum()), 0.0
    loss = 0.5 * (roots * roots).sum()
    loss.backward()
    grad_sq = 0.0
    with torch.no_grad():
        for p in model.params:
            if want_grad_sq:
                grad_sq += float((p.grad.double() ** 2).sum())
            p.sub_(lr * p.grad)
            p.grad = None
    return float(loss), grad_sq


def run_unbatched(model, trees):
    roots = []
    for tree in trees:
        stack = []
        for v in tree.tolist():
            if v >= 0:
                stack.append(model.leaf(torch.tensor([v])))
            else:
                right = stack.pop()
                stack[-1] = model.internal(torch.cat([stack[-1], right], 1))
        roots.append(stack[0])
    return torch.cat(roots, 0)


def levels_of(shape):
    """Per depth, each internal node's (source, index) children; source 0 = leaves."""
    per_tree, left, right, stack = [0], [], [], []
    for v in shape:
        if v >= 0:
            stack.append((0, per_tree[0]))
            per_tree[0] += 1
            continue
        r = stack.pop()
        l = stack[-1]
        depth = 1 + max(l[0], r[0])
        while len(per_tree) <= depth:
            per_tree.append(0)
            left.append([])
            right.append([])
        left[depth - 1].append(l)
        right[depth - 1].append(r)
        stack[-1] = (depth, per_tree[depth])
        per_tree[depth] += 1
    return left, right, per_tree


def make_gather(children, per_tree, batch):
    """Rows to gather per source (in order), then the permutation that orders them, if several."""
    k = len(children)
    rows, slots = {}, {}
    for b in range(batch):
        for j, (source, index) in enumerate(children):
            rows.setdefault(source, []).append(b * per_tree[source] + index)
            slots.setdefault(source, []).append(b * k + j)
    perm = np.empty(k * batch, dtype=np.int64)
    position, side = 0, []
    for source in sorted(rows):
        for slot in slots[source]:
            perm[slot] = position
            position += 1
        side.append((source, torch.tensor(rows[source], dtype=torch.int64)))
    return side, (torch.from_numpy(perm) if len(side) > 1 else None)


def manual_plan(shape, batch):
    """Per depth, the children gathered interleaved (l0, r0, l1, r1, ...) as [2kB, N] rows,
    viewed as the [kB, 2N] input; no gather when they are one source's rows in order."""
    left, right, per_tree = levels_of(shape)
    plan = []
    for d in range(len(left)):
        interleaved = [ref for pair in zip(left[d], right[d]) for ref in pair]
        source = interleaved[0][0]
        identity = per_tree[source] == len(interleaved) and all(
            ref == (source, i) for i, ref in enumerate(interleaved))
        plan.append(("view", source) if identity else ("gather", make_gather(interleaved, per_tree, batch)))
    return plan


def build_children(side, values):
    pieces, perm = side
    if perm is None:
        source, idx = pieces[0]
        return values[source].index_select(0, idx)
    cat = torch.cat([values[s].index_select(0, idx) for s, idx in pieces], 0)
    return cat.index_select(0, perm)


def manual_roots(model, words, plan):
    values = [model.leaf(words)]
    for kind, what in plan:
        rows = values[what] if kind == "view" else build_children(what, values)
        values.append(model.internal(rows.reshape(-1, 2 * model.n)))
    return values[-1]


def run_manual(model, trees, plan):
    """`plan`: manual_plan's, or compile_manual's compiled function of the words."""
    words = torch.from_numpy(trees[trees >= 0].astype(np.int64))  # tree-major leaf order
    return plan(words) if callable(plan) else manual_roots(model, words, plan)


def compile_manual(model, plan):
    """torch.compile (PyTorch 2) of the hand-batched forward for one plan: Inductor's fused C++
    kernels; its backward is compiled with it (AOTAutograd)."""
    return torch.compile(lambda words: manual_roots(model, words, plan), dynamic=False)


def weave(trees):
    """TorchFold-style schedule: leaf words, then per depth the interleaved [l0, r0, l1, r1..]
    rows of the values tensor (leaves first, then each depth's outputs appended)."""
    words, depth_nodes, roots = [], [], []
    for tree in trees:
        stack = []
        for v in tree.tolist():
            if v >= 0:
                stack.append((0, len(words)))
                words.append(v)
                continue
            r = stack.pop()
            l = stack[-1]
            depth = 1 + max(l[0], r[0])
            while len(depth_nodes) < depth:
                depth_nodes.append([])
            nodes = depth_nodes[depth - 1]
            nodes.append((l, r))
            stack[-1] = (depth, len(nodes) - 1)
        roots.append(stack[0])
    offsets = [0, len(words)]
    for nodes in depth_nodes:
        offsets.append(offsets[-1] + len(nodes))
    steps = []
    for nodes in depth_nodes:
        idx = [offsets[d] + i for l, r in nodes for d, i in (l, r)]
        steps.append(torch.tensor(idx, dtype=torch.int64))
    root_idx = torch.tensor([offsets[d] + i for d, i in roots], dtype=torch.int64)
    return torch.tensor(words, dtype=torch.int64), steps, root_idx


def run_fold(model, woven):
    words, steps, root_idx = woven
    values = model.leaf(words)
    for idx in steps:
        x = values.index_select(0, idx).view(-1, 2 * model.n)
        values = torch.cat([values, model.internal(x)], 0)
    return values.index_select(0, root_idx)


def step(model, mode, trees, train, lr, plan=None, want_grad_sq=False):
    """One batch; returns (weave seconds, run seconds, loss, Σ grad²)."""
    start = time.perf_counter()
    woven = weave(trees) if mode in ("dynamic", "full-dynamic") else None
    weave_s = time.perf_counter() - start
    start = time.perf_counter()
    with torch.set_grad_enabled(train):
        if mode == "unbatched":
            roots = run_unbatched(model, trees)
        elif mode in ("manual", "manual-compiled"):
            roots = run_manual(model, trees, plan)
        else:
            roots = run_fold(model, woven)
        loss, grad_sq = finish(model, roots, train, lr, want_grad_sq)
    return weave_s, time.perf_counter() - start, loss, grad_sq


def check_compiled(weights, cell, trees, plan, train):
    """The compiled hand-batched step (compiled here, untimed) must give the eager one's loss and
    Σ grad² on the same weights and trees; returns its model (one check step on) and the step."""
    want = step(Model(weights, cell), "manual", trees, train, 1e-5, plan, want_grad_sq=True)[2:]
    model = Model(weights, cell)
    compiled = compile_manual(model, plan)
    got = step(model, "manual-compiled", trees, train, 1e-5, compiled, want_grad_sq=True)[2:]
    # Written as "not within" so that a NaN (which compares false to everything) fails too.
    if not (abs(got[0] - want[0]) <= 1e-4 * abs(want[0])
            and abs(got[1] - want[1]) <= 1e-3 * abs(want[1])):
        raise SystemExit(f"torch.compile's step differs: loss, grad² {got} against eager {want}")
    print(f"check manual-compiled: loss {got[0]:.9g} (eager {want[0]:.9g}), grad^2 {got[1]:.9g} "
          f"(eager {want[1]:.9g})", flush=True)
    return model, compiled


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return float(line.split()[1]) / 1024.0
    return float("nan")


def run_row(trees_file, weights, cell, mode, batch, train, repeats, max_unbatched, lr=1e-5):
    """Warm-up batch 0, then the timed batches; the same trees and rules as Weft's rows."""
    model = Model(weights, cell)
    kind = "same" if mode in ("manual", "manual-compiled", "dynamic") else "random"
    count = min(batch, max_unbatched) if mode == "unbatched" else batch
    scale = batch / count
    plan = None
    if mode in ("manual", "manual-compiled"):
        plan = manual_plan(trees_file[f"B{batch}/same/0"][0].tolist(), batch)
    if mode == "manual-compiled":
        model, plan = check_compiled(weights, cell, trees_file[f"B{batch}/same/0"], plan, train)
    reset_peak_rss()
    batch_s, weave_s = [], []
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    for index in range(timed_batches(batch, repeats) + 1):
        trees = trees_file[f"B{batch}/{kind}/{index}"][:count]
        w, r, _, _ = step(model, mode, trees, train, lr, plan)
        if index > 0:
            batch_s.append((w + r) * scale)
            weave_s.append(w * scale)
    cpu_over_wall = (time.process_time() - cpu_start) / (time.perf_counter() - wall_start)
    median = float(np.median(batch_s))
    return {
        "mode": mode, "vector_size": model.n, "batch_size": batch,
        "phase": "train" if train else "infer", "trees_per_s": batch / median,
        "batch_s_min": min(batch_s), "batch_s_median": median, "batch_s_max": max(batch_s),
        "weave_s": float(np.median(weave_s)), "peak_rss_mb": peak_rss_mb(),
        "cpu_over_wall": cpu_over_wall,
    }
