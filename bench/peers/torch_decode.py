#!/usr/bin/env python3
"""PyTorch peers of Weft's decoding models (issue 32, item 5c): tree2seq and seq2tree.

Both models re-implemented in PyTorch on a Weft checkpoint's weights (torch_decode_models.py:
every tensor by name, its shape checked), decoded the two ways PyTorch users write it
(torch_decode_search.py): `loop`, one example at a time (greedy, or the example's beams as the
rows of a step), and `batch`, a padded batch of 64 with finished rows masked (beams batched
over examples x beams; seq2tree with a padded frontier of pending children per row).

First the check, on the checkpoint's test expressions, for both arms: greedy answers identical
to Weft's (`weft.models.load(...).predict(examples, beam=0)`) with summed log-probabilities
within --tolerance, beam-k answers identical with equal log-probabilities (or, where two
hypotheses' scores are within the tolerance, the same scores in another order, counted as
ties), and the teacher-forced loss of the dev split equal to `Model.evaluate`'s (relative
1e-4). Any other difference fails (exit 1) and nothing is timed.

Then (--time) interleaved rounds on one thread (torch.set_num_threads(1), OPENBLAS/OMP to 1
before torch loads, WEFT_NUM_THREADS=1, WEFT_GEMM=openblas unless set): decoding sequences/s,
greedy and beam k, of Weft's batch of 64, Weft one at a time, the PyTorch loop and the PyTorch
padded batch of 64; training examples/s (teacher forcing, forward + backward + Adam, batch 64,
gradients clipped at 5 as Weft's recipe) of Weft's `Model.fit` (one epoch on --train-examples
generated expressions) and of both PyTorch arms on the same expressions. Every arm runs once
untimed first (Weft's first training epoch is several times slower than the next). Rates per
second of CPU time (one thread: the arm's own work, whatever else loads the machine) and of the
wall clock; reported: the medians of the rounds and the median over rounds of each arm's rate
over the PyTorch padded batch's in the same round; every round goes to --out PREFIX.json and
PREFIX.csv. --length-penalty ranks kept beams by log_prob / length^p. With --dynet, the DyNet peer
of tree2seq greedy decoding (dynet_tree2seq.cpp, built by build_dynet.sh) is checked and timed
too: autobatched batches of 64 and one at a time.

Usage: PYTHONPATH=build/test/python /usr/bin/python3 bench/peers/torch_decode.py \\
           tree2seq.safetensors seq2tree.safetensors [--time --rounds 5 --out DIR/decode_peers]
Needs Debian's python3-torch and python3-numpy and Weft's Python module (PYTHONPATH or
--weft-python); exits 77 (a skip for ctest) without torch.
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from peer_threads import pin_gemm_threads, start_torch  # noqa: E402

pin_gemm_threads()  # before torch loads
os.environ.setdefault("WEFT_NUM_THREADS", "1")
os.environ.setdefault("WEFT_GEMM", "openblas")  # EXPERIMENTS.md "Decoders"
import torch_decode_models as models  # noqa: E402
import torch_decode_search as search  # noqa: E402
from torch_decode_models import T2S_END, torch  # noqa: E402

DECODE_ARMS = ("weft_batch64", "weft_one_at_a_time", "torch_loop", "torch_batch64")
TRAIN_ARMS = ("weft_fit", "torch_loop", "torch_batch64")


# ---------------------------------------------------------------------------- answers


def answer_text(name, decisions):
    """The text Weft's prediction gives for these decisions."""
    if name == "tree2seq":
        ended = bool(decisions) and decisions[-1] == T2S_END
        return models.tokens_text(decisions[:-1] if ended else decisions)
    return models.tree_text(decisions)


def weft_inputs(name, examples):
    """Examples in the form Weft's predict reads: the expression, or the text alone."""
    if name == "tree2seq":
        return [{"expression": models.expression_of(e)} for e in examples]
    return [{"text": e["text"]} for e in examples]


def chunks(items, size):
    return [items[i : i + size] for i in range(0, len(items), size)]


def weft_decode(model, inputs, beam, batch, penalty=0.0):
    out = []
    for part in chunks(inputs, batch):
        extra = {"length_penalty": penalty} if penalty else {}
        out += model.predict(part, beam=beam, **extra)
    return out


def torch_decode(name, peer, examples, beam, arm, batch, penalty=0.0):
    """Per example, [(text, log_prob)] best first: one for greedy (beam 0), up to `beam`."""
    finder = search.search_for(peer)
    if arm == "loop":
        if beam == 0:
            raw = [[search.greedy_one(finder, e)] for e in examples]
        else:
            raw = [search.beam_one(finder, e, beam, penalty) for e in examples]
    else:
        raw = []
        for part in chunks(examples, batch):
            if beam == 0:
                raw += [[a] for a in search.greedy_batch(finder, part)]
            else:
                raw += search.beam_batch(finder, part, beam, penalty)
    return [[(answer_text(name, d), lp) for d, lp in hyps] for hyps in raw]


def weft_answers(prediction, beam):
    hyps = [prediction] if beam == 0 else prediction["beams"]
    return [(h["text"], float(h["log_prob"])) for h in hyps]


def run_dynet(args, path, examples, rounds):
    """The DyNet peer (dynet_tree2seq.cpp, built by build_dynet.sh) on these expressions: its
    greedy answers and sequences/s per round, autobatched in batches and one at a time."""
    with tempfile.TemporaryDirectory(prefix="torch_decode_") as work:
        lines = os.path.join(work, "examples.jsonl")
        with open(lines, "w") as f:
            for e in examples:
                f.write(json.dumps({"expression": models.expression_of(e)}) + "\n")
        done = subprocess.run([args.dynet, path, lines, str(rounds), str(args.batch)],
                              check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------- the check


def compare(weft, peer, tolerance, strict):
    """Per-example answer lists: (ties, differing example indices, largest |log_prob| gap of
    hypotheses at the same rank)."""
    ties, differ, gap = 0, [], 0.0
    for e, (w, p) in enumerate(zip(weft, peer)):
        gaps = [abs(a[1] - b[1]) for a, b in zip(w, p)]
        gap = max([gap] + gaps)
        same_scores = len(w) == len(p) and max(gaps, default=0.0) <= tolerance
        if same_scores and [a[0] for a in w] == [b[0] for b in p]:
            continue
        if same_scores and not strict:
            ties += 1
        else:
            differ.append(e)
    return ties, differ, gap


def report_arm(label, theirs, ours, tolerance, figures):
    """Compares one arm's answers with Weft's (greedy strictly), prints and records how many
    are the same; whether all are."""
    ties, differ, gap = compare(theirs, ours, tolerance, strict=label.endswith("greedy"))
    figures[label] = {"ties": ties, "differ": differ, "max_gap": gap}
    print(f"  {label:<12} {len(theirs) - len(differ)} of {len(theirs)} the same ({ties} ties), "
          f"largest log_prob gap {gap:.2g}", flush=True)
    for e in differ[:3]:
        print(f"    example {e}: weft {theirs[e]}\n    {' ' * len(str(e))}          "
              f"peer {ours[e]}")
    return not differ


def check_model(args, path, weft):
    """The check for one checkpoint; returns (ok, figures)."""
    name, hidden, weights = models.read_checkpoint(path)
    if args.perturb:
        if args.perturb not in weights:
            sys.exit(f"torch_decode: --perturb {args.perturb}: no such tensor in {path}")
        # A pattern, not a constant: log-softmax does not see a constant added to every score.
        w = weights[args.perturb]
        weights = {**weights, args.perturb: w + 0.01 * np.cos(np.arange(w.size)).reshape(w.shape)}
    loaded = weft.models.load(path, use="evaluate", max_eval=args.examples)
    examples = loaded.examples("test")[: args.examples]
    peer = models.build_model(name, weights)
    inputs = weft_inputs(name, examples)
    print(f"check {name} (hidden {hidden}, {path}): {len(examples)} test expressions, "
          f"greedy and beam {args.beam} (length penalty {args.length_penalty:g}); tolerance "
          f"{args.tolerance:g}", flush=True)
    ok, figures = True, {"model": name, "hidden": hidden, "examples": len(examples)}
    for beam in (0, args.beam):
        theirs = [weft_answers(p, beam) for p in weft_decode(loaded, inputs, beam, args.batch,
                                                              args.length_penalty)]
        label = "greedy" if beam == 0 else f"beam {beam}"
        for arm in ("loop", "batch"):
            with torch.no_grad():
                ours = torch_decode(name, peer, examples, beam, arm, args.batch,
                                    args.length_penalty)
            ok &= report_arm(f"{arm}_{label}", theirs, ours, args.tolerance, figures)
        if beam == 0 and args.dynet and name == "tree2seq":
            dynet = run_dynet(args, path, examples, 1)["answers"]
            ours = [[(a["text"], float(a["log_prob"]))] for a in dynet]
            ok &= report_arm("dynet_greedy", theirs, ours, args.tolerance, figures)
    ok &= check_loss(loaded, peer, args, figures)
    print(f"check {name}: " + ("same" if ok else "DIFFERENT"), flush=True)
    return ok, figures


def check_loss(loaded, peer, args, figures):
    """Teacher forcing on the dev split: Weft's evaluate loss (mean summed NLL per example)."""
    dev = loaded.examples("dev")
    theirs = loaded.evaluate("dev", batch_size=args.batch)["loss"]
    ok = True
    with torch.no_grad():
        losses = {
            "loop": sum(float(peer.loss_one(e)) for e in dev) / len(dev),
            "batch": sum(float(peer.loss_batch(p)) for p in chunks(dev, args.batch)) / len(dev),
        }
    for arm, ours in losses.items():
        rel = abs(ours - theirs) / max(abs(theirs), 1e-12)
        ok &= rel <= 1e-4
        figures[f"{arm}_dev_loss"] = {"weft": theirs, "torch": ours, "relative": rel}
        print(f"  {arm + '_dev_loss':<12} ({len(dev)} expressions) weft {theirs:.7g} "
              f"torch {ours:.7g} relative {rel:.2g}")
    return ok


# ---------------------------------------------------------------------------- timing


def timed(work, count):
    """(wall, cpu): count per second of the wall clock and of this process's CPU time (which
    other processes' load does not inflate; one thread, so CPU time is the work's own)."""
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return count / (time.perf_counter() - wall), count / (time.process_time() - cpu)


def record(runs, task, arm, rates):
    """Appends one round's (wall, cpu) rates of an arm."""
    for clock, rate in zip(("wall", "cpu"), rates):
        runs[clock].setdefault(task, {}).setdefault(arm, []).append(rate)


def decode_arms(name, loaded, peer, examples, beam, batch, penalty=0.0):
    inputs = weft_inputs(name, examples)
    finder = search.search_for(peer)
    one = (lambda e: search.greedy_one(finder, e)) if beam == 0 else (
        lambda e: search.beam_one(finder, e, beam, penalty))
    many = (lambda p: search.greedy_batch(finder, p)) if beam == 0 else (
        lambda p: search.beam_batch(finder, p, beam, penalty))
    return {
        "weft_batch64": lambda: weft_decode(loaded, inputs, beam, batch, penalty),
        "weft_one_at_a_time": lambda: weft_decode(loaded, inputs, beam, 1, penalty),
        "torch_loop": lambda: [one(e) for e in examples],
        "torch_batch64": lambda: [many(p) for p in chunks(examples, batch)],
    }


def torch_trainer(name, weights, examples, batch, arm):
    """One epoch of teacher forcing over `examples` on a fresh copy of the weights."""
    peer = models.build_model(name, weights)
    optimizer = torch.optim.Adam(peer.parameters(), lr=0.003)

    def epoch():
        for part in chunks(examples, batch):
            optimizer.zero_grad(set_to_none=True)
            if arm == "torch_loop":
                loss = sum(peer.loss_one(e) for e in part)
            else:
                loss = peer.loss_batch(part)
            (loss / len(part)).backward()
            torch.nn.utils.clip_grad_norm_(peer.parameters(), 5.0)
            optimizer.step()

    return epoch


class Arms:
    """One checkpoint's timed work: Weft's loaded model and a fresh one to train, the PyTorch
    peer, the test expressions decoded and the generated training expressions."""

    def __init__(self, args, path, weft):
        self.args, self.path = args, path
        self.name, self.hidden, self.weights = models.read_checkpoint(path)
        self.loaded = weft.models.load(path, use="evaluate", max_eval=args.examples)
        self.examples = self.loaded.examples("test")[: args.examples]
        self.peer = models.build_model(self.name, self.weights)
        self.fresh = weft.models.create(self.name, hidden=self.hidden, seed=args.seed,
                                        max_train=args.train_examples, max_eval=1, eval_beam=0)
        self.train = self.fresh.examples("train")

    def warm_up(self):
        """Every arm once on a few examples, not timed, and one Weft training epoch (its first
        is several times slower than the next)."""
        with torch.no_grad():
            for beam in (0, self.args.beam):
                for work in decode_arms(self.name, self.loaded, self.peer, self.examples[:8], beam,
                                        self.args.batch, self.args.length_penalty).values():
                    work()
        self.fresh.fit(epochs=1, batch_size=self.args.batch, progress="off")
        for arm in TRAIN_ARMS[1:]:
            torch_trainer(self.name, self.weights, self.train[: self.args.batch],
                          self.args.batch, arm)()

    def round(self, runs):
        """One round of every arm, each recording its rates in runs (record())."""
        args, count = self.args, len(self.examples)
        for beam in (0, args.beam):
            arms = decode_arms(self.name, self.loaded, self.peer, self.examples, beam, args.batch,
                               args.length_penalty)
            with torch.no_grad():
                for arm in DECODE_ARMS:
                    record(runs, f"beam{beam}", arm, timed(arms[arm], count))
        if args.dynet and self.name == "tree2seq":
            dynet = run_dynet(args, self.path, self.examples, 1)
            for arm in ("autobatch_batch", "one_at_a_time"):
                record(runs, "beam0", "dynet_" + arm, (dynet[arm][0], dynet[arm + "_cpu"][0]))
        own = []  # Weft's own figure: the epoch's training loop alone, by the wall clock
        record(runs, "train", "weft_fit", timed(lambda: own.append(self.fresh.fit(
            epochs=1, batch_size=args.batch, progress="off")[-1]["examples_per_second"]),
            len(self.train)))
        runs["weft_fit_loop_wall"].append(own[0])
        for arm in TRAIN_ARMS[1:]:
            work = torch_trainer(self.name, self.weights, self.train, args.batch, arm)
            record(runs, "train", arm, timed(work, len(self.train)))


def time_model(args, path, weft):
    arms = Arms(args, path, weft)
    arms.warm_up()
    runs = {"wall": {}, "cpu": {}, "weft_fit_loop_wall": []}
    for r in range(args.rounds):
        arms.round(runs)
        print(f"  {arms.name} round {r + 1} (cpu-time rates): " + "; ".join(
            f"{task} " + " ".join(f"{a} {v[-1]:.0f}" for a, v in by_arm.items())
            for task, by_arm in runs["cpu"].items()), flush=True)
    return {"model": arms.name, "hidden": arms.hidden, "decode_examples": len(arms.examples),
            "train_examples": len(arms.train), "runs": runs}


def summary_rows(result):
    """Per task and arm: medians of the rounds by CPU time and wall clock, and the median over
    rounds of the arm's rate over the PyTorch padded batch's in the same round."""
    rows = []
    for task, arms in result["runs"]["cpu"].items():
        wall = result["runs"]["wall"][task]
        for arm, cpu in arms.items():
            ratios = [a / b for a, b in zip(cpu, arms["torch_batch64"])]
            wall_ratios = [a / b for a, b in zip(wall[arm], wall["torch_batch64"])]
            rows.append({
                "model": result["model"], "task": task, "arm": arm,
                "cpu_median": round(statistics.median(cpu), 1),
                "cpu_over_torch_batch64": round(statistics.median(ratios), 2),
                "wall_median": round(statistics.median(wall[arm]), 1),
                "wall_over_torch_batch64": round(statistics.median(wall_ratios), 2),
                "cpu_rounds": " ".join(f"{v:.1f}" for v in cpu),
                "wall_rounds": " ".join(f"{v:.1f}" for v in wall[arm]),
            })
    return rows


def report(results, args):
    rows = [row for result in results for row in summary_rows(result)]
    print(f"{'model':<9} {'task':<6} {'arm':<22} {'cpu /s':>8} {'/ torch':>7} {'wall /s':>8} "
          f"{'/ torch':>7}  (per second of CPU time / wall clock; / torch: the median round's "
          f"ratio to torch_batch64)")
    for r in rows:
        print(f"{r['model']:<9} {r['task']:<6} {r['arm']:<22} {r['cpu_median']:>8.1f} "
              f"{r['cpu_over_torch_batch64']:>6.2f}x {r['wall_median']:>8.1f} "
              f"{r['wall_over_torch_batch64']:>6.2f}x")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out + ".json", "w") as f:
            json.dump({"settings": vars(args), "torch": torch.__version__, "results": results},
                      f, indent=1)
        with open(args.out + ".csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        print(f"torch_decode: wrote {args.out}.json and {args.out}.csv")


# ---------------------------------------------------------------------------- main


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("checkpoints", nargs="+", help="Weft tree2seq / seq2tree checkpoints")
    p.add_argument("--time", action="store_true", help="after the check, time the arms")
    p.add_argument("--examples", type=int, default=128, help="test (and dev) expressions")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--length-penalty", type=float, default=0.0,
                   help="beam: hypotheses ranked by log_prob / length^p (Weft's predict option)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--tolerance", type=float, default=1e-4, help="on summed log-probabilities")
    p.add_argument("--perturb", metavar="TENSOR",
                   help="add 0.01 cos(i) to this tensor's element i first (the check must fail)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--train-examples", type=int, default=640)
    p.add_argument("--seed", type=int, default=1, help="of the training expressions")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--weft-python", default=os.path.join(REPO, "build", "test", "python"),
                   help="where `import weft` is found (unless PYTHONPATH has it)")
    p.add_argument("--out", help="--time: write PREFIX.json and PREFIX.csv")
    p.add_argument("--dynet", metavar="BINARY",
                   help="tree2seq greedy: also check and time DyNet (build_dynet.sh's "
                        "dynet_tree2seq; autobatched batches and one at a time)")
    return p.parse_args()


def main():
    args = parse_args()
    if not start_torch(torch, args.threads):
        return 77
    sys.path.append(args.weft_python)
    import weft

    weft.train.set_num_threads(args.threads)
    try:
        checks = [check_model(args, path, weft) for path in args.checkpoints]
    except models.CheckpointError as e:
        print(f"torch_decode: {e}")
        return 2
    if not all(ok for ok, _ in checks):
        print("torch_decode: DIFFERENT from Weft: nothing timed")
        return 1
    if args.time:
        report([time_model(args, path, weft) for path in args.checkpoints], args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
