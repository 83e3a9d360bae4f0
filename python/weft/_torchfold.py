"""torchfold's API over Weft (weft.torch.Fold): ``f.add(op, *args)`` records a call of the model's
method `op` (args: nodes, ints, torch tensors), ``node.split(n)`` names the outputs of a method
returning n tensors, ``node.nobatch()`` passes one node's whole value, and ``f.apply(model,
[[nodes...], ...])`` runs every method once per step (the node's depth) on all its calls, on
Weft's tape: the torch methods are torch bodies (weft.torch.call), the arguments are gathered by
Weft's gather_rows, and the results are torch tensors of one differentiable torch step."""

import collections

import numpy as np
import torch

from . import _weft
from . import _torch_bodies as _wt


class Node:
    """A recorded call (torchfold's Fold.Node): its method, step, index in the step's batch of
    that method, and which output (split) it stands for."""

    def __init__(self, fold, op, step, index, args, split_idx=-1):
        self.fold, self.op, self.step, self.index, self.args = fold, op, step, index, args
        self.split_idx = split_idx
        self.batch = True

    def split(self, num):
        """The node's outputs, for a method returning `num` tensors."""
        return tuple(Node(self.fold, self.op, self.step, self.index, self.args, k)
                     for k in range(num))

    def nobatch(self):
        """Pass this node's whole value to the methods using it (not one row per call)."""
        self.batch = False
        return self

    def __repr__(self):
        return "[%d:%d]%s" % (self.step, self.index, self.op)


class Fold:
    """torchfold.Fold, over Weft. ``volatile=True`` records no gradients; ``cuda`` is accepted for
    torchfold's signature (tensors stay where the model's are)."""

    Node = Node

    def __init__(self, volatile=False, cuda=False):
        self.steps = collections.defaultdict(lambda: collections.defaultdict(list))
        self.cached_nodes = collections.defaultdict(dict)
        self.total_nodes = 0
        self.volatile = volatile
        self._cuda = cuda

    def cuda(self):
        self._cuda = True
        return self

    def add(self, op, *args):
        """Records op(*args); the same op on the same arguments is one node."""
        self.total_nodes += 1
        for arg in args:
            if not isinstance(arg, (Node, int, torch.Tensor)) or isinstance(arg, bool):
                raise _weft.Error(f"[Fold] add('{op}'): arguments are Fold nodes, ints or torch "
                                  f"tensors, got {type(arg).__name__}")
        key = tuple(("t", id(a)) if isinstance(a, torch.Tensor) else a for a in args)
        if key not in self.cached_nodes[op]:
            step = max([0] + [a.step + 1 for a in args if isinstance(a, Node)])
            node = Node(self, op, step, len(self.steps[step][op]), args)
            self.steps[step][op].append(args)
            self.cached_nodes[op][key] = node
        return self.cached_nodes[op][key]

    def apply(self, nn, nodes):
        """Runs the recorded calls on `nn`'s methods, batched per (step, method); returns one
        torch tensor per list of `nodes` (their values stacked along the first axis)."""
        run = _FoldRun(self, nn, nodes)
        outputs = _wt.WeftStep.apply(run, run.anchor, *run.external)
        return list(outputs) if isinstance(outputs, tuple) else [outputs]

    def __str__(self):
        lines = []
        for step in sorted(self.steps):
            lines.append("%d step:" % step)
            for op, calls in self.steps[step].items():
                lines.append("\t%s = %d x (%s)" % (op, len(calls), ", ".join(
                    str(tuple(a.shape)) if isinstance(a, torch.Tensor) else str(a)
                    for a in calls[0])))
        return "\n".join(lines) + "\n"

    __repr__ = __str__


class _Result:
    """The outputs of one (step, method) batched call: a Var per output, `batch` calls."""

    def __init__(self, vars_, batch):
        self.vars, self.batch = vars_, batch

    def var(self, split_idx):
        if split_idx >= 0:
            return self.vars[split_idx]
        if len(self.vars) != 1:
            raise _weft.Error("[Fold] a node of a method returning several tensors is used "
                              "without .split(n)")
        return self.vars[0]

    def rows_of(self, index, split_idx):
        """torch.chunk's rows of call `index` (a method may return several rows per call)."""
        rows = self.var(split_idx).shape[0]
        per = -(-rows // self.batch)
        return list(range(index * per, min(rows, (index + 1) * per)))


class _FoldRun:
    """One apply(): Weft's tape, the recorded calls, the torch tensors given as arguments."""

    def __init__(self, fold, nn, nodes):
        self.fold, self.nn, self.nodes = fold, nn, nodes
        self.tape = _weft.Tape()
        self.tape.grad_enabled = not fold.volatile and torch.is_grad_enabled()
        self.anchor = torch.zeros((), requires_grad=not fold.volatile)
        seen, self.external = set(), []
        for step in fold.steps.values():
            for calls in step.values():
                for args in calls:
                    for a in args:
                        if isinstance(a, torch.Tensor) and id(a) not in seen:
                            seen.add(id(a))
                            self.external.append(a)
        self.external_vars = {}
        self.values = {}
        self.outputs = []

    def _tensor_var(self, t):
        if id(t) not in self.external_vars:
            value = _weft.from_dlpack(t.detach().contiguous())
            differentiable = t.requires_grad and t.dtype == torch.float32
            self.external_vars[id(t)] = (self.tape.variable(value) if differentiable
                                         else self.tape.constant(value))
        return self.external_vars[id(t)]

    def _node_var(self, node):
        return self.values[node.step][node.op].var(node.split_idx)

    def _column(self, column):
        """One argument of a batched call from the column of its calls' arguments."""
        if all(isinstance(a, Node) for a in column):
            if not column[0].batch:
                if any(a is not column[0] and (a.op, a.step, a.index) !=
                       (column[0].op, column[0].step, column[0].index) for a in column):
                    raise _weft.Error("[Fold] more than one nobatch node in an argument")
                return self._gather([column[0]])
            if not all(a.batch for a in column):
                raise _weft.Error("[Fold] batched and nobatch nodes mixed in an argument")
            return self._gather(column)
        if all(isinstance(a, int) for a in column):
            return self.tape.constant(_weft.from_numpy(np.asarray(column, np.int64)))
        return self._gather(column)

    def _gather(self, items):
        """The rows of nodes and tensors, in order: one Var, gathered by Weft (no gather when it
        is a whole result in order, as torchfold's try_get_batched)."""
        sources, offsets, indices = [], {}, []
        for item in items:
            if isinstance(item, int):
                raise _weft.Error("[Fold] ints mixed with nodes or tensors in an argument")
            if isinstance(item, Node):
                key = (item.step, item.op, item.split_idx)
                result = self.values[item.step][item.op]
                rows = result.rows_of(item.index, item.split_idx)
                var = self._node_var(item)
            else:
                key = ("t", id(item))
                var = self._tensor_var(item)
                rows = list(range(var.shape[0]))
            if key not in offsets:
                offsets[key] = sum(v.shape[0] for v in sources)
                sources.append(var)
            indices.extend(offsets[key] + r for r in rows)
        whole = sources[0] if len(sources) == 1 else _weft.concat(sources, 0)
        if indices == list(range(whole.shape[0])):
            return whole
        return _weft.gather_rows(whole, np.asarray(indices, np.int32))

    def forward(self):
        with self.tape:
            for step in sorted(self.fold.steps):
                self.values[step] = {}
                for op, calls in self.fold.steps[step].items():
                    args = [self._column(list(col)) for col in zip(*calls)]
                    out = _wt.call(getattr(self.nn, op), *args, name=op, batch_rows=None)
                    out = list(out) if isinstance(out, tuple) else [out]
                    self.values[step][op] = _Result(out, len(calls))
            self.outputs = [self._column(list(col)) for col in self.nodes]
        return [torch.from_dlpack(v.value) for v in self.outputs]

    def backward(self, grads):
        _wt.backward_outputs(self.tape, self.outputs, grads)
        out = []
        for t in self.external:
            var = self.external_vars.get(id(t))
            g = None if var is None else var.grad
            out.append(None if g is None else torch.from_dlpack(g).clone())
        self.tape.clear()
        return out


class Unfold:
    """torchfold.Unfold: the same calls run at once, one at a time, on `nn` (for debugging a
    Fold program: same add / split / nobatch / apply, no batching)."""

    class Node:
        def __init__(self, value):
            self.value = value

        def split(self, num):
            return tuple(Unfold.Node(self.value[k]) for k in range(num))

        def nobatch(self):
            return self

        def __repr__(self):
            return repr(self.value)

    def __init__(self, nn, volatile=False, cuda=False):
        self.nn, self.volatile, self._cuda = nn, volatile, cuda

    def cuda(self):
        self._cuda = True
        return self

    def _value(self, arg):
        if isinstance(arg, Unfold.Node):
            return arg.value
        if isinstance(arg, int):
            return torch.tensor([arg], device="cuda" if self._cuda else "cpu")
        return arg

    def add(self, op, *args):
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.volatile):
            return Unfold.Node(getattr(self.nn, op)(*[self._value(a) for a in args]))

    def apply(self, nn, nodes):
        if nn is not self.nn:
            raise _weft.Error("[Unfold] apply() got another module than the one Unfold was "
                              "made with")
        return [torch.cat([self._value(a) for a in column]) for column in nodes]
