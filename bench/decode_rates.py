"""Decoding rates of tree2seq / seq2tree checkpoints on one core: a mixed-length batch of 64
decoded together, the same examples one at a time, and a batch of 64 whose outputs all have one
length (full trees of depth 3). Rounds alternate; the median of each is reported."""
import json, statistics, sys, time
import weft

def full_tree(depth, k):
    if depth == 0:
        return {"number": (k * 7 + 3) % 10}
    return {"op": "+-*"[k % 3], "left": full_tree(depth - 1, 2 * k + 1), "right": full_tree(depth - 1, 2 * k + 2)}

def text(e):
    if "number" in e: return str(e["number"])
    return "(" + text(e["left"]) + " " + e["op"] + " " + text(e["right"]) + ")"

def rate(model, examples, batch, beam):
    start = time.perf_counter()
    for i in range(0, len(examples), batch):
        model.predict(examples[i:i + batch], beam=beam)
    return len(examples) / (time.perf_counter() - start)

name, path, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
model = weft.models.load(path, use="evaluate")
dev = model.examples("test")[:64]
same = [{"expression": full_tree(3, k)} for k in range(64)]
if name == "seq2tree":
    dev = [{"text": e["text"]} for e in dev]
    same = [{"text": text(e["expression"])} for e in same]
out = {}
for beam in (0, 4):
    runs = {"batch64": [], "one_at_a_time": [], "one_length_batch64": []}
    model.predict(dev[:8], beam=beam)
    for _ in range(rounds):
        runs["batch64"].append(rate(model, dev, 64, beam))
        runs["one_at_a_time"].append(rate(model, dev, 1, beam))
        runs["one_length_batch64"].append(rate(model, same, 64, beam))
    out[f"beam{beam}"] = {k: round(statistics.median(v), 1) for k, v in runs.items()}
    out[f"beam{beam}"]["rounds"] = {k: [round(x, 1) for x in v] for k, v in runs.items()}
print(json.dumps({"model": name, **out}))
