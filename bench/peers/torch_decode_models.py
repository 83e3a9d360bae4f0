"""Weft's tree2seq and seq2tree (issue 32) in PyTorch, on a Weft checkpoint's weights.

The layers of src/models/tree2seq.cpp, seq2tree.cpp and attention_decoder.cpp as a PyTorch user
writes them (nn.Embedding, nn.LSTMCell / nn.LSTM, nn.Linear), each encoder both one example at
a time and batched (the Tree-LSTM by depth, the reader as a packed nn.LSTM), and teacher forcing
(the training loss) both ways. The searches are in torch_decode_search.py.
"""

import json

import numpy as np

from torch_treelstm import load_safetensors, torch

if torch is not None:
    from torch import nn

# Infix symbols (src/models/expression_tokens.h): digits are their own value.
PLUS, MINUS, TIMES, OPEN, CLOSE, SYMBOLS = 10, 11, 12, 13, 14, 15
OPERATORS = "+-*"
MAX_MEMORY = 128  # AttentionDecoder::kMemorySizes.back(): rows of the position table
PAD_MASK = -1e9  # added to the attention scores of padding, as Weft's memories do

# tree2seq: outputs are the symbols and the end token; the start token is an input only.
T2S_END, T2S_START = SYMBOLS, SYMBOLS + 1
T2S_OUTPUTS, T2S_INPUTS = SYMBOLS + 1, SYMBOLS + 2
# seq2tree: decisions are digits and operators; an input id packs the previous decision (or
# none), the parent's operator (or none) and the child's position.
S2T_DECISIONS = TIMES + 1
S2T_NO_DECISION, S2T_NO_PARENT = S2T_DECISIONS, 3
ROOT, LEFT, RIGHT = 0, 1, 2
S2T_INPUTS = (S2T_DECISIONS + 1) * 4 * 3


def s2t_input_id(previous, parent_op, position):
    return (previous * 4 + parent_op) * 3 + position


class CheckpointError(Exception):
    """The checkpoint is not the tree2seq / seq2tree this peer re-implements."""


# ---------------------------------------------------------------------------- expressions


def expression_of(example):
    return example["expression"] if "expression" in example else example


def infix_tokens(node, out=None):
    """The calculator's text of an expression as symbols: ((3 + 4) * 2)."""
    out = [] if out is None else out
    if "number" in node:
        out.append(int(node["number"]))
        return out
    out.append(OPEN)
    infix_tokens(node["left"], out)
    out.append(PLUS + OPERATORS.index(node["op"]))
    infix_tokens(node["right"], out)
    out.append(CLOSE)
    return out


def tokens_text(tokens):
    """Symbols as the calculator writes text (expression_tokens::tokens_text)."""
    out = []
    for t in tokens:
        if 0 <= t <= 9:
            out.append(str(t))
        elif PLUS <= t <= TIMES:
            out.append(f" {OPERATORS[t - PLUS]} ")
        else:
            out.append({OPEN: "(", CLOSE: ")"}.get(t, "?"))
    return "".join(out)


def tokenize(text):
    """Infix text to symbols, skipping spaces (seq2tree's reader input)."""
    table = {"+": PLUS, "-": MINUS, "*": TIMES, "(": OPEN, ")": CLOSE}
    out = []
    for column, ch in enumerate(text, 1):
        if ch.isdigit():
            out.append(int(ch))
        elif ch in table:
            out.append(table[ch])
        elif ch not in " \t":
            raise ValueError(f"column {column}: unexpected character {ch!r} in {text!r}")
    return out


def preorder(node, out=None):
    """seq2tree's gold decisions: the tree's symbols top-down, left before right."""
    out = [] if out is None else out
    if "number" in node:
        out.append(int(node["number"]))
        return out
    out.append(PLUS + OPERATORS.index(node["op"]))
    preorder(node["left"], out)
    preorder(node["right"], out)
    return out


def tree_text(decisions):
    """The calculator's text of pre-order decisions (seq2tree's "text"); a node not decided yet
    (a sequence stopped at its bound) is "?", as Weft's answer writes it."""
    at = 0

    def build():
        nonlocal at
        if at >= len(decisions):
            return "?"
        d = decisions[at]
        at += 1
        if d < PLUS:
            return str(d)
        left = build()
        right = build()
        return f"({left} {OPERATORS[d - PLUS]} {right})"

    return build()


# ---------------------------------------------------------------------------- checkpoint


def expected_shapes(model, n):
    """Every tensor the model has, by Weft's parameter name, and its shape."""
    if model == "tree2seq":
        shapes = {
            "encoder/digits/table": (10, n),
            "encoder/operators/table": (3, n),
            "encoder/cell/weight": (3 * n, 5 * n),
            "encoder/cell/bias": (5 * n,),
            "encoder/positions/table": (MAX_MEMORY, n),
        }
        inputs, outputs, cell_in = T2S_INPUTS, T2S_OUTPUTS, n
    else:
        shapes = {
            "encoder/symbols/table": (SYMBOLS, n),
            "encoder/cell/weight": (2 * n, 4 * n),
            "encoder/cell/bias": (4 * n,),
        }
        inputs, outputs, cell_in = S2T_INPUTS, S2T_DECISIONS, 2 * n
    shapes.update({
        "decoder/input/table": (inputs, n),
        "decoder/cell/weight": (cell_in + n, 4 * n),
        "decoder/cell/bias": (4 * n,),
        "decoder/attended/weight": (2 * n, n),
        "decoder/attended/bias": (n,),
        "decoder/scores/weight": (n, outputs),
        "decoder/scores/bias": (outputs,),
    })
    return shapes


def read_checkpoint(path):
    """(model name, hidden, weights by name) of a Weft tree2seq / seq2tree checkpoint; raises
    CheckpointError naming what differs from what this peer implements."""
    try:
        tensors, metadata = load_safetensors(path)
    except (OSError, KeyError, ValueError) as e:
        raise CheckpointError(f"{path}: not a readable Weft checkpoint ({e!r})") from e
    name = metadata.get("model_name")
    if name not in ("tree2seq", "seq2tree"):
        raise CheckpointError(f"{path}: holds a {name!r} model, not tree2seq or seq2tree")
    try:
        hidden = int(json.loads(metadata["config"])["model"]["options"]["hidden"])
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{path}: its metadata names no model option 'hidden'") from e
    weights = {k[len("model/"):]: v for k, v in tensors.items() if k.startswith("model/")}
    shapes = expected_shapes(name, hidden)
    problems = [f"missing {k}" for k in sorted(set(shapes) - set(weights))]
    problems += [f"unexpected {k}" for k in sorted(set(weights) - set(shapes))]
    problems += [
        f"{k} is {list(weights[k].shape)} {weights[k].dtype}, expected {list(s)} float32"
        for k, s in shapes.items()
        if k in weights and (weights[k].shape != s or weights[k].dtype != np.float32)
    ]
    if problems:
        raise CheckpointError(f"{path} ({name}, hidden {hidden}): " + "; ".join(problems))
    return name, hidden, weights


# ---------------------------------------------------------------------------- layers


def _tensor(array):
    return torch.tensor(np.array(array, dtype=np.float32))


def linear_from(weight, bias):
    """nn.Linear computing Weft's FC: x W + b with W [in, out]."""
    layer = nn.Linear(*weight.shape)
    with torch.no_grad():
        layer.weight.copy_(_tensor(weight).t())
        layer.bias.copy_(_tensor(bias))
    return layer


def embedding_from(table):
    return nn.Embedding.from_pretrained(_tensor(table), freeze=False)


def lstm_weights(weight, bias, input_size):
    """Weft's LSTM cell, one weight [x | h] -> [f | i | g | o], as PyTorch's (W_ih, W_hh, b_ih)
    in its gate order [i | f | g | o]; b_hh is zero."""
    n = weight.shape[1] // 4
    order = np.r_[n : 2 * n, 0:n, 2 * n : 4 * n]
    w = _tensor(weight[:, order]).t()
    return w[:, :input_size], w[:, input_size:], _tensor(bias[order])


def load_lstm(layer, weight, bias, input_size, suffix=""):
    """Copies Weft's cell into an nn.LSTMCell (suffix "") or an nn.LSTM (suffix "_l0")."""
    w_ih, w_hh, b_ih = lstm_weights(weight, bias, input_size)
    with torch.no_grad():
        getattr(layer, "weight_ih" + suffix).copy_(w_ih)
        getattr(layer, "weight_hh" + suffix).copy_(w_hh)
        getattr(layer, "bias_ih" + suffix).copy_(b_ih)
        getattr(layer, "bias_hh" + suffix).zero_()
    return layer


class AttentionDecoder(nn.Module if torch is not None else object):
    """One decoding step for rows of examples: an LSTM cell over the embedded input id (and,
    with parent feeding, the parent's h), dot-product attention over the memory (padding masked
    by `mask`), tanh FC of [h | context], log-softmax of the scores."""

    def __init__(self, w, parent_feed):
        super().__init__()
        self.embed = embedding_from(w["decoder/input/table"])
        n = self.embed.embedding_dim
        cell_in = 2 * n if parent_feed else n
        self.cell = load_lstm(nn.LSTMCell(cell_in, n), w["decoder/cell/weight"],
                              w["decoder/cell/bias"], cell_in)
        self.attended = linear_from(w["decoder/attended/weight"], w["decoder/attended/bias"])
        self.scores = linear_from(w["decoder/scores/weight"], w["decoder/scores/bias"])

    def forward(self, ids, h, c, memory, mask=None, parent_h=None):
        x = self.embed(ids)
        if parent_h is not None:
            x = torch.cat([x, parent_h], 1)
        h, c = self.cell(x, (h, c))
        scores = torch.bmm(memory, h.unsqueeze(2)).squeeze(2)
        if mask is not None:
            scores = scores + mask
        weights = torch.softmax(scores, 1)
        context = torch.bmm(weights.unsqueeze(1), memory).squeeze(1)
        attended = torch.tanh(self.attended(torch.cat([h, context], 1)))
        return h, c, torch.log_softmax(self.scores(attended), 1)


def pad_memory(rows, lengths):
    """Per-example memories from the rows [N, H] of all examples (lengths[e] rows each, in
    order): [B, M, H] padded with zeros to the longest, and the additive mask [B, M]."""
    longest = max(lengths)
    index, mask, first = [], [], 0
    for length in lengths:
        index += list(range(first, first + length)) + [rows.shape[0]] * (longest - length)
        mask += [0.0] * length + [PAD_MASK] * (longest - length)
        first += length
    padded = torch.cat([rows, rows.new_zeros(1, rows.shape[1])], 0)
    memory = padded.index_select(0, torch.tensor(index)).view(len(lengths), longest, -1)
    return memory, torch.tensor(mask).view(len(lengths), longest)


# ---------------------------------------------------------------------------- tree2seq


class Tree2Seq(nn.Module if torch is not None else object):
    """The binary Tree-LSTM encoder ([x | h_l | h_r] -> [f_l | f_r | i | u | o]; leaves read a
    digit with zero children, inner nodes an operator) and the attention decoder over every
    node's h plus an embedding of its in-order position. Memory rows are in post-order."""

    name = "tree2seq"

    def __init__(self, w):
        super().__init__()
        self.digits = embedding_from(w["encoder/digits/table"])
        self.operators = embedding_from(w["encoder/operators/table"])
        self.positions = embedding_from(w["encoder/positions/table"])
        self.cell = linear_from(w["encoder/cell/weight"], w["encoder/cell/bias"])
        self.decoder = AttentionDecoder(w, parent_feed=False)
        self.hidden = self.digits.embedding_dim

    def tree_cell(self, x, h_left, h_right, c_left, c_right):
        f_l, f_r, i, u, o = self.cell(torch.cat([x, h_left, h_right], 1)).chunk(5, 1)
        c = torch.sigmoid(i) * torch.tanh(u) + torch.sigmoid(f_l) * c_left
        c = c + torch.sigmoid(f_r) * c_right
        return torch.sigmoid(o) * torch.tanh(c), c

    # One example: a cell call per node, children first.
    def encode_one(self, example):
        """(memory [1, n, H], root h [1, H], root c, max_length) of one expression."""
        nodes = postorder_nodes(expression_of(example))
        zero = torch.zeros(1, self.hidden)
        h, c = [], []
        for digit, op, left, right, _ in nodes:
            if op is None:
                state = self.tree_cell(self.digits(torch.tensor([digit])), zero, zero, zero, zero)
            else:
                state = self.tree_cell(self.operators(torch.tensor([op])), h[left], h[right],
                                       c[left], c[right])
            h.append(state[0])
            c.append(state[1])
        positions = torch.tensor([node[4] for node in nodes])
        memory = torch.cat(h, 0) + self.positions(positions)
        return memory.unsqueeze(0), h[-1], c[-1], 2 * len(nodes)

    # A batch: the Tree-LSTM by depth, one cell call per depth across all trees.
    def encode_batch(self, examples):
        """(memory [B, M, H], mask [B, M], root h [B, H], root c, max_lengths) of a batch."""
        plan = DepthPlan([postorder_nodes(expression_of(e)) for e in examples])
        zero = torch.zeros(len(plan.leaves), self.hidden)
        h, c = self.tree_cell(self.digits(torch.tensor(plan.leaves)), zero, zero, zero, zero)
        for ops, left, right in plan.levels:
            left, right = torch.tensor(left), torch.tensor(right)
            h_new, c_new = self.tree_cell(self.operators(torch.tensor(ops)), h[left], h[right],
                                          c[left], c[right])
            h, c = torch.cat([h, h_new], 0), torch.cat([c, c_new], 0)
        rows = h.index_select(0, torch.tensor(plan.memory_rows))
        memory, mask = pad_memory(rows + self.positions(torch.tensor(plan.positions)),
                                  plan.lengths)
        roots = torch.tensor(plan.roots)
        return memory, mask, h[roots], c[roots], [2 * n for n in plan.lengths]

    # Teacher forcing: the summed negative log-likelihood of the gold text and its end token.
    def loss_one(self, example):
        memory, h, c, _ = self.encode_one(example)
        total, previous = 0.0, T2S_START
        for token in infix_tokens(expression_of(example)) + [T2S_END]:
            h, c, log_probs = self.decoder(torch.tensor([previous]), h, c, memory)
            total = total - log_probs[0, token]
            previous = token
        return total

    def loss_batch(self, examples):
        memory, mask, h, c, _ = self.encode_batch(examples)
        gold = [infix_tokens(expression_of(e)) + [T2S_END] for e in examples]
        inputs = [[T2S_START] + g[:-1] for g in gold]
        (inputs, targets), valid = padded_columns([inputs, gold])
        total = 0.0
        for t in range(len(valid)):
            h, c, log_probs = self.decoder(inputs[t], h, c, memory, mask)
            total = total + masked_nll(log_probs, targets[t], valid[t])
        return total


def postorder_nodes(tree):
    """A tree's nodes children first, as (digit, operator, left, right, position): a leaf has
    operator None, an inner node digit None and its children's indices in the list; position
    is the node's place in the text's order of nodes (in-order), as Weft embeds it."""
    nodes, next_position = [], 0

    def visit(node):
        nonlocal next_position
        if "number" in node:
            nodes.append((int(node["number"]), None, -1, -1, next_position))
            next_position += 1
            return len(nodes) - 1
        left = visit(node["left"])
        position = next_position
        next_position += 1
        right = visit(node["right"])
        nodes.append((None, OPERATORS.index(node["op"]), left, right, position))
        return len(nodes) - 1

    visit(tree)
    return nodes


class DepthPlan:
    """A batch of trees by depth: the leaves' digits (rows 0..L-1), then per depth its nodes'
    operators and child rows (their rows appended in that order); every tree's nodes' rows in
    post-order with their positions, its node count and its root's row."""

    def __init__(self, trees):
        self.leaves, levels, where = [], [], []  # where: (depth, index) per tree's node
        for nodes in trees:
            refs, depths = [], []
            for digit, op, left, right, _ in nodes:
                if op is None:
                    depths.append(0)
                    refs.append((0, len(self.leaves)))
                    self.leaves.append(digit)
                    continue
                depths.append(1 + max(depths[left], depths[right]))
                while len(levels) < depths[-1]:
                    levels.append(([], [], []))
                ops, lefts, rights = levels[depths[-1] - 1]
                refs.append((depths[-1], len(ops)))
                ops.append(op)
                lefts.append(refs[left])
                rights.append(refs[right])
            where.append(refs)
        offsets = [0, len(self.leaves)]
        for ops, _, _ in levels:
            offsets.append(offsets[-1] + len(ops))

        def row(ref):
            return offsets[ref[0]] + ref[1]

        self.levels = [(ops, [row(r) for r in lefts], [row(r) for r in rights])
                       for ops, lefts, rights in levels]
        self.memory_rows = [row(r) for refs in where for r in refs]
        self.positions = [node[4] for nodes in trees for node in nodes]
        self.lengths = [len(nodes) for nodes in trees]
        self.roots = [row(refs[-1]) for refs in where]


def padded_columns(lists):
    """Per-example integer lists of one length each (parallel lists of lists), padded with 0 to
    the longest: one int64 tensor [T, B] per list (column t is step t across the batch), and the
    float mask [T, B] of real entries."""
    lengths = [len(x) for x in lists[0]]
    longest = max(lengths)
    out = [torch.tensor([x + [0] * (longest - len(x)) for x in part]).t() for part in lists]
    valid = torch.tensor([[1.0] * n + [0.0] * (longest - n) for n in lengths]).t()
    return out, valid


def masked_nll(log_probs, targets, valid):
    """The summed negative log-likelihood of the targets [B] in rows where valid [B] is 1."""
    return -(log_probs.gather(1, targets.unsqueeze(1)).squeeze(1) * valid).sum()


# ---------------------------------------------------------------------------- seq2tree


def teacher_steps(expression):
    """seq2tree's teacher-forced steps of a gold tree: (input id, parent, decision) each, the
    parent as the index of the step whose state it is (0: the encoder's final state, k: the
    state after decision k)."""
    stack = [(0, S2T_NO_PARENT, ROOT)]
    previous, out = S2T_NO_DECISION, []
    for step, decision in enumerate(preorder(expression), 1):
        parent, op, position = stack.pop()
        out.append((s2t_input_id(previous, op, position), parent, decision))
        if decision >= PLUS:
            stack += [(step, decision - PLUS, RIGHT), (step, decision - PLUS, LEFT)]
        previous = decision
    return out


class Seq2Tree(nn.Module if torch is not None else object):
    """The LSTM reader over the text's symbols (nn.LSTM; packed for a batch) and the attention
    decoder fed the parent's h beside the input id, growing the tree top-down."""

    name = "seq2tree"

    def __init__(self, w):
        super().__init__()
        self.symbols = embedding_from(w["encoder/symbols/table"])
        n = self.symbols.embedding_dim
        self.reader = load_lstm(nn.LSTM(n, n, batch_first=True), w["encoder/cell/weight"],
                                w["encoder/cell/bias"], n, suffix="_l0")
        self.decoder = AttentionDecoder(w, parent_feed=True)
        self.hidden = n

    def encode_one(self, example):
        """(memory [1, T, H], final h [1, H], final c, max_decisions) of one text."""
        symbols = tokenize(example["text"])
        memory, (h, c) = self.reader(self.symbols(torch.tensor([symbols])))
        return memory, h[0], c[0], len(symbols)

    def encode_batch(self, examples):
        """(memory [B, T, H], mask [B, T], final h [B, H], final c, max_decisions)."""
        texts = [tokenize(e["text"]) for e in examples]
        (ids,), valid = padded_columns([texts])
        lengths = valid.sum(0).long()
        packed = nn.utils.rnn.pack_padded_sequence(self.symbols(ids.t()), lengths,
                                                   batch_first=True, enforce_sorted=False)
        out, (h, c) = self.reader(packed)
        memory, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
        return memory, (1 - valid.t()) * PAD_MASK, h[0], c[0], [len(t) for t in texts]

    def loss_one(self, example):
        memory, h, c, _ = self.encode_one(example)
        states, total = [h], 0.0
        for input_id, parent, decision in teacher_steps(example["expression"]):
            h, c, log_probs = self.decoder(torch.tensor([input_id]), h, c, memory, None,
                                           states[parent])
            states.append(h)
            total = total - log_probs[0, decision]
        return total

    def loss_batch(self, examples):
        memory, mask, h, c, _ = self.encode_batch(examples)
        steps = [teacher_steps(e["expression"]) for e in examples]
        (ids, parents, gold), valid = padded_columns(
            [[[s[k] for s in example] for example in steps] for k in range(3)])
        batch = torch.arange(len(examples))
        states, total = [h], 0.0
        for t in range(len(valid)):
            parent_h = torch.stack(states)[parents[t], batch]
            h, c, log_probs = self.decoder(ids[t], h, c, memory, mask, parent_h)
            states.append(h)
            total = total + masked_nll(log_probs, gold[t], valid[t])
        return total


def build_model(name, weights):
    return Tree2Seq(weights) if name == "tree2seq" else Seq2Tree(weights)
