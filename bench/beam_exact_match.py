"""Test-split exact match of greedy decoding and beam 4 at the given length penalties, for a
tree2seq or seq2tree checkpoint (one load; exact match as the models define it: the whole output
equals the gold one). Usage: beam_exact_match.py MODEL CHECKPOINT PENALTY..."""
import json, sys, weft
def text(e):
    if "number" in e: return str(e["number"])
    return "(" + text(e["left"]) + " " + e["op"] + " " + text(e["right"]) + ")"
name, path = sys.argv[1], sys.argv[2]
penalties = [float(p) for p in sys.argv[3:]]
m = weft.models.load(path, use="evaluate")
test = m.examples("test")
inputs = [{"text": e["text"]} for e in test] if name == "seq2tree" else test
def hits(answers):
    if name == "seq2tree":
        return sum(a["ended"] and a["expression"] == e["expression"] for a, e in zip(answers, test))
    return sum(a["ended"] and a["text"] == text(e["expression"]) for a, e in zip(answers, test))
out = {"greedy": hits(m.predict(inputs, beam=0)) / len(test)}
for p in penalties:
    kw = {"length_penalty": p} if p else {}
    out[f"beam4_lp{p}"] = hits(m.predict(inputs, beam=4, **kw)) / len(test)
print(json.dumps({"model": name, "n": len(test), **out}))
