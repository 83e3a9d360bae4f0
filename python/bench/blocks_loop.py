"""Usage: blocks_loop.py [H] [N]. The blocks Loop on the flow engine: batched vs one example at a time, and vs the same loops
teacher-forced (static weave, the fast path), interleaved, medians of 7 rounds."""
import statistics, sys, time
import numpy as np
import weft
from weft import blocks as td
B = weft._weft.blocks
H = int(sys.argv[1]) if len(sys.argv) > 1 else 64
N = int(sys.argv[2]) if len(sys.argv) > 2 else 64
rng = np.random.default_rng(4)
w = weft.Parameter("w", (rng.uniform(-1, 1, (H, H)) / np.sqrt(H) * 1.5).astype("float32"))
r = weft.Parameter("r", (rng.uniform(-1, 1, (H, 1)) / np.sqrt(H) * 3).astype("float32"))
def step(h, clock):
    h2 = weft.tanh(weft.matmul(h, w))
    return h2, clock + weft.sigmoid(weft.matmul(h2, r)) * 0.3, h2
vh, v1 = B.Type.vector(H), B.Type.vector(1)
body = B.Function("step", [vh, v1], step, output=B.Type.tuple(B.Type.tuple(vh, v1), vh))
state = td.Record([("h", td.Vector(H)), ("clock", td.Vector(1))])
decided = B.Compiler(state >> td.Loop(body, td.GetItem(1), max_steps=60, threshold=1.0, emits=True))
examples = [{"h": rng.uniform(-1, 1, H).tolist(), "clock": [float(rng.uniform(-1.5, 0.9))]} for _ in range(N)]
out = decided.forward(examples, weft.Tape())
rows = list(out.output_examples(2)); lengths = [rows.count(e) for e in range(N)]
forced = B.Compiler(td.Record([("s", state), ("n", td.InputTransform(lambda x: x))]) >> td.Loop(
    body, td.GetItem(1), max_steps=60, threshold=1.0, emits=True, teacher_forced=True))
forced_examples = [{"s": e, "n": n} for e, n in zip(examples, lengths)]
assert not forced.needs_flow
np.testing.assert_allclose(forced.forward(forced_examples, weft.Tape()).output(2).numpy(), out.output(2).numpy(), atol=1e-5)
def timed(f):
    t = time.perf_counter(); f(); return time.perf_counter() - t
def batched(): decided.forward(examples, weft.Tape())
def alone():
    for e in examples: decided.forward([e], weft.Tape())
def static(): forced.forward(forced_examples, weft.Tape())
times = {"flow batched": [], "one at a time": [], "static (teacher-forced)": []}
for _ in range(7):
    for name, f in (("flow batched", batched), ("one at a time", alone), ("static (teacher-forced)", static)):
        times[name].append(timed(f))
print(f"H={H} N={N} loop lengths {min(lengths)}..{max(lengths)} mean {np.mean(lengths):.1f}")
med = {k: statistics.median(v) for k, v in times.items()}
for k, v in med.items():
    print(f"{k:26s} {v*1e3:8.1f} ms  ({N / v:8.0f} examples/s)")
print(f"batched / one at a time: {med['one at a time'] / med['flow batched']:.2f}x faster; "
      f"flow / static: {med['flow batched'] / med['static (teacher-forced)']:.2f}x the time")
