#!/usr/bin/env python3
"""torchfold 0.1.0 against weft.torch.Fold with only the import changed: torchfold's own test file
(torchfold/torchfold_test.py as the PyPI wheel ships it) and its README example (the sketch made
concrete: trees of words, a leaf / init / child model), each run once with `torchfold` being the
real package and once being weft.torch, on the same seeds; every value f.apply returns and every
model-parameter gradient of their sum are compared.

What the real torchfold needs to run at all under a PyTorch of 2018+ (applied to both sides alike,
none of it to Weft's code): its module sees `torch.tensor._TensorBase` as torch.Tensor (a shim:
torch.tensor became a function in PyTorch 0.4); the test file is Python 2 (`xrange`) and imports
`mock` (both given: range, unittest.mock).

    PYTHONPATH=build/test/python build/peers-venv/bin/python bench/peers/torchfold_compare.py
"""

import builtins
import importlib
import io
import sys
import types
import unittest
import unittest.mock
from pathlib import Path

import torch

import weft.torch

builtins.xrange = range  # the test file is Python 2
sys.modules["mock"] = unittest.mock


class _TorchWithTensorBase(types.ModuleType):
    """torch, as torchfold 0.1.0's module sees it: torch.tensor._TensorBase is torch.Tensor."""

    def __init__(self):
        super().__init__("torch")
        self.tensor = types.SimpleNamespace(_TensorBase=torch.Tensor)

    def __getattr__(self, name):
        return getattr(torch, name)


def real_torchfold():
    module = importlib.import_module("torchfold")
    importlib.import_module("torchfold.torchfold").torch = _TorchWithTensorBase()
    return module


class Recorder:
    """Wraps Fold.apply: keeps its outputs and the model's parameter gradients of their sum."""

    def __init__(self, fold_class):
        self.fold_class, self.original = fold_class, fold_class.apply
        self.records = []

    def __enter__(self):
        recorder = self

        def apply(fold, nn, nodes):
            outputs = recorder.original(fold, nn, nodes)
            params = [p for p in nn.parameters() if p.requires_grad]
            nn.zero_grad()  # backward(), not autograd.grad: Weft's torch bodies fill .grad
            sum(o.sum() for o in outputs).backward(retain_graph=True)
            recorder.records.append(([o.detach().clone() for o in outputs],
                                     [torch.zeros_like(p) if p.grad is None else p.grad.clone()
                                      for p in params]))
            nn.zero_grad()
            return outputs

        self.fold_class.apply = apply
        return self

    def __exit__(self, *exc):
        self.fold_class.apply = self.original


def run_test_file(torchfold_module):
    """torchfold_test.py with `import torchfold` giving `torchfold_module`: each test alone, torch
    seeded 0 first; returns {test id: (outcome, records)}."""
    path = Path(importlib.util.find_spec("torchfold").submodule_search_locations[0])
    source = (path / "torchfold_test.py").read_text()
    sys.modules["torchfold"] = torchfold_module
    namespace = {"__name__": "torchfold_test"}
    exec(compile(source, str(path / "torchfold_test.py"), "exec"), namespace)
    results = {}
    loader = unittest.TestLoader()
    for case in ("TorchFoldTest", "TestRNNBatching"):
        for name in loader.getTestCaseNames(namespace[case]):
            torch.manual_seed(0)
            with Recorder(torchfold_module.Fold) as recorder:
                outcome = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(
                    namespace[case](name))
            failures = [text.strip().splitlines()[-1] for _, text in
                        outcome.failures + outcome.errors]
            results[f"{case}.{name}"] = ("ok" if not failures else failures[0], recorder.records)
    return results


class ReadmeModel(torch.nn.Module):
    """The README's Model: leaf(word), init(), child(prev, child), batched."""

    def __init__(self, vocab=20, n=16):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, n)
        self.start = torch.nn.Parameter(torch.randn(1, n))
        self.combine = torch.nn.Linear(2 * n, n)

    def leaf(self, word):
        return self.embed(word)

    def init(self):
        return torch.tanh(self.start)

    def child(self, prev, child):
        return torch.tanh(self.combine(torch.cat([prev, child], 1)))


def random_tree(gen, depth):
    if depth == 0 or torch.rand((), generator=gen) < 0.3:
        return int(torch.randint(0, 20, (), generator=gen))
    return [random_tree(gen, depth - 1) for _ in range(int(torch.randint(1, 4, (), generator=gen)))]


def run_readme(torchfold_module):
    """The README example made concrete: 32 random trees, dfs as the README writes it."""
    gen = torch.Generator().manual_seed(3)
    trees = [random_tree(gen, 5) for _ in range(32)]
    f = torchfold_module.Fold()

    def dfs(node):
        if isinstance(node, int):  # is_leaf(node)
            return f.add("leaf", node)
        prev = f.add("init")
        for child in node:  # children(node)
            prev = f.add("child", prev, dfs(child))
        return prev

    torch.manual_seed(0)
    model = ReadmeModel()
    with Recorder(torchfold_module.Fold) as recorder:
        f.apply(model, [[dfs(t) for t in trees]])
    return {"README example": ("ok", recorder.records)}


def largest_difference(a, b):
    pairs = [(x, y) for (outs_a, grads_a), (outs_b, grads_b) in zip(a, b)
             for x, y in zip(outs_a + grads_a, outs_b + grads_b)]
    if len(a) != len(b) or any(x.shape != y.shape for x, y in pairs):
        return float("inf")
    return max([0.0] + [float((x - y).abs().max()) for x, y in pairs if x.numel()])


def main():
    print(f"torch {torch.__version__}; torchfold 0.1.0 (shimmed as the docstring says) against "
          "weft.torch.Fold")
    real = real_torchfold()
    want = {**run_test_file(real), **run_readme(real)}
    got = {**run_test_file(weft.torch), **run_readme(weft.torch)}
    worst = 0.0
    for name in want:
        outcome_real, records_real = want[name]
        outcome_weft, records_weft = got[name]
        diff = largest_difference(records_real, records_weft)
        values = sum(len(o) + len(g) for o, g in records_real)
        worst = max(worst, diff if outcome_real == outcome_weft == "ok" else 0.0)
        print(f"{name}: torchfold {outcome_real}; weft.torch.Fold {outcome_weft}; "
              f"{values} tensors compared, largest difference {diff:.3g}")
    print(f"largest difference over the passing tests: {worst:.3g}")


if __name__ == "__main__":
    main()
