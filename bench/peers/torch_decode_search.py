"""Greedy decoding and beam search for the PyTorch tree2seq / seq2tree (torch_decode_models.py),
written the two ways PyTorch users write them, with Weft's search rules (src/flow/search.cpp,
src/models/seq2tree.cpp) so that the answers can be checked equal:

- one example at a time: the obvious eager loop (a beam's hypotheses as the rows of one step);
- a padded batch: every example (x beams) a row of every step until the last one finishes,
  finished rows masked; for seq2tree a padded frontier, one pending node per row per step (a
  stack of pending children per row as tensors, masked when empty).

Rules: greedy takes the lowest argmax until the end (tree2seq: the end token; seq2tree: no
pending child) or the bound (2n tokens / n decisions). Beam: every live hypothesis' expansions
ranked by summed log-probability (float64; ties by hypothesis, then decision); the best `width`
that do not end continue, those among the best `width` that end are kept; a search stops when
none is live or no live one can beat the width-th best kept (search_finished); tree2seq adds its
live beams at its bound; the kept are ranked by log_prob / length^length_penalty. An answer is
(decisions, log_prob).
"""

import math

from torch_decode_models import (
    PLUS, ROOT, LEFT, RIGHT, S2T_DECISIONS, S2T_NO_DECISION, S2T_NO_PARENT, T2S_END,
    T2S_OUTPUTS, T2S_START, s2t_input_id, torch)


def score(answer, length_penalty):
    decisions, log_prob = answer
    if length_penalty == 0.0 or not decisions:
        return log_prob
    return log_prob / math.pow(len(decisions), length_penalty)


def search_finished(kept, best_live, width, bound, length_penalty):
    """Weft's flow::search_finished: `width` answers kept and the best live log-probability
    (which only falls, over at most `bound` decisions) cannot beat the width-th best of them."""
    if len(kept) < width:
        return False
    reachable = best_live
    if length_penalty > 0 and best_live < 0:
        reachable = best_live / math.pow(bound, length_penalty)
    return reachable <= sorted((score(a, length_penalty) for a in kept), reverse=True)[width - 1]


# ---------------------------------------------------------------------------- hypotheses


class Hypothesis:
    """One example's partial output: its decisions, summed log-probability, decoder state
    ([1, H] rows) and (seq2tree) pending children (parent h, parent operator, position)."""

    __slots__ = ("decisions", "log_prob", "h", "c", "stack")

    def __init__(self, decisions, log_prob, h, c, stack):
        self.decisions, self.log_prob, self.h, self.c, self.stack = (
            decisions, log_prob, h, c, stack)


class TextSearch:
    """tree2seq: the decisions are the text's tokens, ending with the end token."""

    outputs = T2S_OUTPUTS
    bound_ends = False  # at its bound a search keeps its live beams

    def __init__(self, model):
        self.model = model

    def start(self, h, c):
        return Hypothesis([], 0.0, h, c, None)

    def step_one(self, memory, hyps):
        ids = torch.tensor([h.decisions[-1] if h.decisions else T2S_START for h in hyps])
        return self.model.decoder(ids, torch.cat([h.h for h in hyps]),
                                  torch.cat([h.c for h in hyps]),
                                  memory.expand(len(hyps), -1, -1))

    def advance(self, hyp, h, c, decision, log_prob):
        return Hypothesis(hyp.decisions + [decision], log_prob, h, c, None)

    def ends(self, hyp, bound):
        return hyp.decisions[-1] == T2S_END

    # The padded batch's rows: R rows, each with its decisions so far [R, T].
    def start_rows(self, h, c, longest):
        return {"history": torch.zeros(h.shape[0], longest, dtype=torch.long)}

    def step_rows(self, rows, h, c, memory, mask, t):
        ids = rows["history"][:, t - 1] if t > 0 else torch.full((h.shape[0],), T2S_START)
        return self.model.decoder(ids, h, c, memory, mask)

    def candidate_ends(self, rows, source, decisions, t, bounds):
        return decisions == T2S_END

    def advance_rows(self, rows, source, decisions, h_step, t, active):
        if source is not None:
            rows["history"] = rows["history"][source]
        rows["history"][:, t] = decisions


class TreeSearch:
    """seq2tree: the decisions are the tree's nodes top-down; a hypothesis ends when no child is
    pending or at its bound (as many decisions as the text has symbols)."""

    outputs = S2T_DECISIONS
    bound_ends = True

    def __init__(self, model):
        self.model = model

    def start(self, h, c):
        return Hypothesis([], 0.0, h, c, [(h, S2T_NO_PARENT, ROOT)])

    def step_one(self, memory, hyps):
        ids, parents = [], []
        for hyp in hyps:
            parent, op, position = hyp.stack[-1]
            previous = hyp.decisions[-1] if hyp.decisions else S2T_NO_DECISION
            ids.append(s2t_input_id(previous, op, position))
            parents.append(parent)
        return self.model.decoder(torch.tensor(ids), torch.cat([h.h for h in hyps]),
                                  torch.cat([h.c for h in hyps]),
                                  memory.expand(len(hyps), -1, -1), None, torch.cat(parents))

    def advance(self, hyp, h, c, decision, log_prob):
        stack = hyp.stack[:-1]
        if decision >= PLUS:
            stack = stack + [(h, decision - PLUS, RIGHT), (h, decision - PLUS, LEFT)]
        return Hypothesis(hyp.decisions + [decision], log_prob, h, c, stack)

    def ends(self, hyp, bound):
        return not hyp.stack or len(hyp.decisions) >= bound

    # The padded frontier: per row a stack of pending children as tensors [R, S] (the parent as
    # a row of `states`, every step's h appended [(t + 1) R, H]) and its size [R].
    def start_rows(self, h, c, longest):
        count = h.shape[0]
        rows = {
            "history": torch.zeros(count, longest, dtype=torch.long),
            "parent": torch.zeros(count, longest + 1, dtype=torch.long),
            "op": torch.full((count, longest + 1), S2T_NO_PARENT),
            "position": torch.full((count, longest + 1), ROOT),
            "size": torch.ones(count, dtype=torch.long),
            "states": h.new_empty((longest + 1) * count, h.shape[1]),
        }
        rows["parent"][:, 0] = torch.arange(count)
        rows["states"][:count] = h
        return rows

    def step_rows(self, rows, h, c, memory, mask, t):
        top = (rows["size"] - 1).clamp(min=0).unsqueeze(1)
        parent = rows["parent"].gather(1, top).squeeze(1)
        op = rows["op"].gather(1, top).squeeze(1)
        position = rows["position"].gather(1, top).squeeze(1)
        previous = rows["history"][:, t - 1] if t > 0 else torch.full_like(op, S2T_NO_DECISION)
        return self.model.decoder(s2t_input_id(previous, op, position), h, c, memory, mask,
                                  rows["states"][parent])

    def candidate_ends(self, rows, source, decisions, t, bounds):
        size = rows["size"] if source is None else rows["size"][source]
        size = size - 1 + 2 * (decisions >= PLUS)
        return (size == 0) | (t + 1 >= bounds)

    def advance_rows(self, rows, source, decisions, h_step, t, active):
        count = h_step.shape[0]
        rows["states"][(t + 1) * count : (t + 2) * count] = h_step
        made_by = torch.arange(count) if source is None else source
        if source is not None:
            for key in ("history", "parent", "op", "position", "size"):
                rows[key] = rows[key][source]
        rows["history"][:, t] = decisions
        size = torch.where(active, rows["size"] - 1, rows["size"])
        grows = active & (decisions >= PLUS)
        index = torch.arange(count)[grows]
        at = size[grows]
        parent = (t + 1) * count + made_by[grows]
        op = decisions[grows] - PLUS
        for offset, position in ((0, RIGHT), (1, LEFT)):
            rows["parent"][index, at + offset] = parent
            rows["op"][index, at + offset] = op
            rows["position"][index, at + offset] = position
        rows["size"] = size + 2 * grows


def search_for(model):
    return TextSearch(model) if model.name == "tree2seq" else TreeSearch(model)


# ---------------------------------------------------------------------------- one at a time


def greedy_one(search, example):
    memory, h, c, bound = search.model.encode_one(example)
    hyp = search.start(h, c)
    for _ in range(bound):
        h, c, log_probs = search.step_one(memory, [hyp])
        best = int(log_probs[0].argmax())
        hyp = search.advance(hyp, h, c, best, hyp.log_prob + float(log_probs[0, best]))
        if search.ends(hyp, bound):
            break
    return hyp.decisions, hyp.log_prob


def beam_one(search, example, width, length_penalty=0.0):
    memory, h, c, bound = search.model.encode_one(example)
    beams, kept = [search.start(h, c)], []
    for _ in range(bound):
        h, c, log_probs = search.step_one(memory, beams)
        totals = torch.tensor([b.log_prob for b in beams], dtype=torch.float64).unsqueeze(1)
        values, order = torch.sort((totals + log_probs.double()).view(-1), descending=True,
                                   stable=True)
        live = []
        for rank, (value, index) in enumerate(zip(values.tolist(), order.tolist())):
            if len(live) >= width:
                break
            b, decision = divmod(index, search.outputs)
            hyp = search.advance(beams[b], h[b : b + 1], c[b : b + 1], decision, value)
            if not search.ends(hyp, bound):
                live.append(hyp)
            elif rank < width:
                kept.append(hyp)
        beams = live  # best first
        answers = [(hyp.decisions, hyp.log_prob) for hyp in kept]
        if not beams or search_finished(answers, beams[0].log_prob, width, bound, length_penalty):
            break
    if len(kept) < width:
        kept += beams
    answers = [(hyp.decisions, hyp.log_prob) for hyp in kept]
    return sorted(answers, key=lambda a: score(a, length_penalty), reverse=True)[:width]


# ---------------------------------------------------------------------------- padded batch


def greedy_batch(search, examples):
    memory, mask, h, c, bounds = search.model.encode_batch(examples)
    count, longest = h.shape[0], max(bounds)
    rows = search.start_rows(h, c, longest)
    bounds = torch.tensor(bounds)
    active = torch.ones(count, dtype=torch.bool)
    lengths = torch.zeros(count, dtype=torch.long)
    log_prob = torch.zeros(count, dtype=torch.float64)
    for t in range(longest):
        h, c, log_probs = search.step_rows(rows, h, c, memory, mask, t)
        best = log_probs.argmax(1)
        chosen = log_probs.gather(1, best.unsqueeze(1)).squeeze(1).double()
        log_prob += torch.where(active, chosen, torch.zeros_like(chosen))
        lengths += active
        stops = search.candidate_ends(rows, None, best, t, bounds) | (t + 1 >= bounds)
        search.advance_rows(rows, None, best, h, t, active)
        active &= ~stops
        if not active.any():
            break
    history = rows["history"].tolist()
    return [(history[e][: lengths[e]], float(log_prob[e])) for e in range(count)]


def beam_batch(search, examples, width, length_penalty=0.0):
    memory, mask, h, c, bounds = search.model.encode_batch(examples)
    count, longest = h.shape[0], max(bounds)
    memory, mask, h, c = (x.repeat_interleave(width, 0) for x in (memory, mask, h, c))
    rows = search.start_rows(h, c, longest)
    totals = torch.full((count, width), -math.inf, dtype=torch.float64)
    totals[:, 0] = 0.0  # one live beam per example at first
    kept = [[] for _ in range(count)]
    done = torch.zeros(count, dtype=torch.bool)
    bounds = torch.tensor(bounds)
    for t in range(longest):
        h, c, log_probs = search.step_rows(rows, h, c, memory, mask, t)
        ranked = Ranked(search, rows, totals, log_probs, t, bounds, width)
        for e, k in ranked.ended.nonzero().tolist():
            row = int(ranked.source[e, k])
            kept[e].append((rows["history"][row, :t].tolist() + [int(ranked.decisions[e, k])],
                            float(ranked.values[e, k])))
        picked = ranked.source.gather(1, ranked.pick).view(-1)
        search.advance_rows(rows, picked, ranked.decisions.gather(1, ranked.pick).view(-1), h,
                            t, ranked.taken.view(-1))
        h, c = h[picked], c[picked]
        totals = torch.where(ranked.taken, ranked.values.gather(1, ranked.pick),
                             torch.full_like(totals, -math.inf))
        # The taken columns come first, best first: totals[e, 0] is e's best live beam.
        beaten = torch.tensor([bool(ranked.taken[e, 0]) and search_finished(
            kept[e], float(totals[e, 0]), width, int(bounds[e]), length_penalty)
            for e in range(count)], dtype=torch.bool)
        finishing = ~done & (beaten | ~ranked.taken.any(1) | (t + 1 >= bounds))
        for e in finishing.nonzero().squeeze(1).tolist():
            if len(kept[e]) < width:  # tree2seq at its bound: the live beams too
                kept[e] += [(rows["history"][e * width + slot, : t + 1].tolist(),
                             float(totals[e, slot]))
                            for slot in range(width) if ranked.taken[e, slot]]
            totals[e] = -math.inf
        done |= finishing
        if done.all():
            break
    return [sorted(k, key=lambda a: score(a, length_penalty), reverse=True)[:width]
            for k in kept]


class Ranked:
    """One step's expansions of every example's beams ranked, [B, W V] best first: their
    summed log-probabilities (`values`), source rows and decisions; `ended`: those that end
    within the best `width`; `pick` [B, W]: the columns of the best `width` that do not end
    (`taken` where there are fewer)."""

    def __init__(self, search, rows, totals, log_probs, t, bounds, width):
        count, outputs = totals.shape[0], search.outputs
        candidates = totals.unsqueeze(2) + log_probs.double().view(count, width, outputs)
        self.values, order = torch.sort(candidates.view(count, -1), dim=1, descending=True,
                                        stable=True)
        self.source = (torch.arange(count) * width).unsqueeze(1) + order // outputs
        self.decisions = order % outputs
        ends = search.candidate_ends(rows, self.source, self.decisions, t, bounds.unsqueeze(1))
        valid = self.values > -math.inf
        self.ended = ends & valid
        self.ended[:, width:] = False
        live = ~ends & valid
        take = live & (live.cumsum(1) <= width)
        self.pick = torch.sort((~take).to(torch.uint8), dim=1, stable=True)[1][:, :width]
        self.taken = take.gather(1, self.pick)
