#!/usr/bin/env bash
# The weft command line end to end: train -> eval -> infer on the calculator, and every kind
# of bad input (arguments, files, checkpoints, example lines) ending as one line on stderr and
# a non-zero exit, never a stack trace or a crash. Usage: cli_test.sh WEFT_BINARY
set -uo pipefail
weft=$1
# $work, $failures, expect_error NAME EXPECTED-SUBSTRING COMMAND..., finish NAME
source "$(dirname "$0")/test_helpers.sh"

# A small calculator run with a checkpoint.
if ! "$weft" train calculator --max-train 600 --max-eval 100 --epochs 2 --hidden 16 \
    --checkpoint "$work/calc.safetensors" --log "$work/log.jsonl" --progress off --no-compare \
    >"$work/train.out" 2>&1; then
  echo "FAIL train calculator:"; cat "$work/train.out"; exit 1
fi
grep -q '^test: {"accuracy"' "$work/train.out" || { echo "FAIL train output"; cat "$work/train.out"; failures=$((failures + 1)); }
[[ $(wc -l <"$work/log.jsonl") -eq 2 ]] || { echo "FAIL log lines"; failures=$((failures + 1)); }

# eval prints one JSON object with the requested splits, and on stderr how many examples each
# covers: the checkpoint's max_eval (a data option) unless the command line overrides it.
"$weft" eval calculator --checkpoint "$work/calc.safetensors" --splits dev,test \
  >"$work/eval.out" 2>"$work/eval.err" || { echo "FAIL eval"; cat "$work/eval.err"; failures=$((failures + 1)); }
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert set(d)=={"dev","test"}; assert 0<=d["test"]["accuracy"]<=1' \
  "$work/eval.out" || { echo "FAIL eval JSON"; cat "$work/eval.out"; failures=$((failures + 1)); }
grep -qF "calculator: evaluating 100 dev, 100 test examples (max_eval 100" "$work/eval.err" ||
  { echo "FAIL eval counts"; cat "$work/eval.err"; failures=$((failures + 1)); }
"$weft" eval calculator --max-eval 40 --checkpoint "$work/calc.safetensors" --splits test \
  >/dev/null 2>"$work/eval40.err"
grep -qF "evaluating 40 test examples" "$work/eval40.err" ||
  { echo "FAIL eval counts with --max-eval"; cat "$work/eval40.err"; failures=$((failures + 1)); }

# infer: one JSON line per example line (blank lines skipped).
printf '{"op": "-", "left": {"number": 1}, "right": {"number": 8}}\n\n{"number": 3}\n' >"$work/in.jsonl"
"$weft" infer calculator --checkpoint "$work/calc.safetensors" --input "$work/in.jsonl" \
  >"$work/infer.out" 2>&1 || { echo "FAIL infer"; cat "$work/infer.out"; failures=$((failures + 1)); }
[[ $(grep -c '"sign"' "$work/infer.out") -eq 2 ]] || { echo "FAIL infer lines"; cat "$work/infer.out"; failures=$((failures + 1)); }

# infer needs nothing but the checkpoint: from an empty directory, with no data folder.
mkdir "$work/empty"
(cd "$work/empty" && printf '{"number": 3}\n' | "$weft" infer calculator --checkpoint "$work/calc.safetensors" \
  --data-dir "$work/no-data") >"$work/empty.out" 2>&1 || { echo "FAIL infer from an empty directory"; cat "$work/empty.out"; failures=$((failures + 1)); }
cmp -s <(sed -n 2p "$work/infer.out") "$work/empty.out" || { echo "FAIL infer from an empty directory differs"; cat "$work/empty.out"; failures=$((failures + 1)); }

# --key copies a field of each line into its prediction, in input order with small batches
# woven ahead; the predictions equal one batch run without weaving ahead.
for i in 1 2 3 4 5 6 7; do
  printf '{"id": "ex%d", "expression": {"op": "-", "left": {"number": %d}, "right": {"number": 4}}}\n' "$i" "$i"
done >"$work/keyed.jsonl"
"$weft" infer calculator --checkpoint "$work/calc.safetensors" --input "$work/keyed.jsonl" --key id \
  --batch-size 2 --batches-ahead 3 >"$work/keyed.out" 2>&1 || { echo "FAIL infer --key"; cat "$work/keyed.out"; failures=$((failures + 1)); }
"$weft" infer calculator --checkpoint "$work/calc.safetensors" --input "$work/keyed.jsonl" \
  --batch-size 64 --batches-ahead 0 >"$work/unkeyed.out" 2>&1 || { echo "FAIL infer one batch"; cat "$work/unkeyed.out"; failures=$((failures + 1)); }
python3 - "$work/keyed.out" "$work/unkeyed.out" <<'PY' || { echo "FAIL infer --key output"; cat "$work/keyed.out"; failures=$((failures + 1)); }
import json, sys
keyed = [json.loads(l) for l in open(sys.argv[1])]
plain = [json.loads(l) for l in open(sys.argv[2])]
assert [k.pop("key") for k in keyed] == ["ex%d" % i for i in range(1, 8)], keyed
assert len(keyed) == len(plain) == 7
for a, b in zip(keyed, plain):
    assert a["sign"] == b["sign"] and all(abs(x - y) < 1e-5 for x, y in zip(a["probabilities"], b["probabilities"])), (a, b)
PY

# Ensembles: several checkpoints of one model (repeated or a comma list) average their
# probabilities; eval says so on stderr and prints the usual JSON.
"$weft" train calculator --max-train 600 --max-eval 100 --epochs 1 --hidden 12 --seed 2 \
  --checkpoint "$work/calc2.safetensors" --progress off --no-compare >"$work/train2.out" 2>&1 ||
  { echo "FAIL train calculator seed 2"; cat "$work/train2.out"; failures=$((failures + 1)); }
"$weft" eval calculator --max-eval 100 --checkpoint "$work/calc.safetensors,$work/calc2.safetensors" \
  >"$work/ens.out" 2>"$work/ens.err" || { echo "FAIL eval ensemble"; cat "$work/ens.err"; failures=$((failures + 1)); }
grep -q '^{"dev":{"accuracy"' "$work/ens.out" && grep -q "an ensemble of 2 checkpoints" "$work/ens.err" ||
  { echo "FAIL eval ensemble output"; cat "$work/ens.out" "$work/ens.err"; failures=$((failures + 1)); }
"$weft" infer calculator --checkpoint "$work/calc.safetensors" --checkpoint "$work/calc2.safetensors" \
  --input "$work/in.jsonl" >"$work/ens-infer.out" 2>&1 ||
  { echo "FAIL infer ensemble"; cat "$work/ens-infer.out"; failures=$((failures + 1)); }
[[ $(grep -c '"probabilities"' "$work/ens-infer.out") -eq 2 ]] || { echo "FAIL infer ensemble lines"; cat "$work/ens-infer.out"; failures=$((failures + 1)); }

# The SST models' word-vector aliases: the shipped table by default, a malformed one refused
# with file:line (only where the SST data is).
data=${WEFT_DATA_DIR:-}
if [[ -n $data && -f $data/sst/dev.txt && -f $data/glove-sst/glove.6B.100d.sst.txt ]]; then
  "$weft" train sentiment --data-dir "$data" --max-train 20 --max-eval 10 --epochs 1 --hidden 8 \
    --progress off --no-compare >"$work/sst.out" 2>&1 || { echo "FAIL train sentiment"; cat "$work/sst.out"; failures=$((failures + 1)); }
  grep -q "sentiment: the aliases of resources/word_aliases/sst_glove.txt filled [0-9]* of these words with their alias's vector (" "$work/sst.out" ||
    { echo "FAIL sentiment alias note"; cat "$work/sst.out"; failures=$((failures + 1)); }
  printf "n't not\nbad\n" >"$work/aliases.txt"
  expect_error bad-alias-table "aliases.txt:2:4: expected two fields" "$weft" train sentiment \
    --data-dir "$data" --max-train 20 --max-eval 10 --epochs 1 --embedding-aliases "$work/aliases.txt"
fi

# Weight averaging: the best checkpoint holds the average the run evaluated on dev, so eval on it
# gives the best epoch's dev figures (the live weights would not). Both in the batch-invariant
# mode, so the two processes' figures agree to the bit (outside it each may calibrate its
# products differently, and the rows' losses differ in their last bits).
"$weft" train calculator --max-train 300 --max-eval 100 --epochs 3 --hidden 8 --average-weights 0.9 \
  --average-every 2 --best-checkpoint "$work/avg.safetensors" --log "$work/avg.jsonl" --progress off \
  --no-compare --batch-invariant >"$work/avg.out" 2>&1 || { echo "FAIL train --average-weights"; cat "$work/avg.out"; failures=$((failures + 1)); }
"$weft" eval calculator --checkpoint "$work/avg.safetensors" --splits dev --batch-size 7 \
  --batch-invariant >"$work/avg-eval.out" 2>/dev/null
python3 - "$work/avg.jsonl" "$work/avg-eval.out" <<'PY' || { echo "FAIL --average-weights best checkpoint"; cat "$work/avg.jsonl" "$work/avg-eval.out"; failures=$((failures + 1)); }
import json, sys
best = [json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["best"]][-1]
dev = json.load(open(sys.argv[2]))["dev"]
assert best["dev"] == dev, (best["dev"], dev)
PY

# A cosine schedule with warm-up over the whole run (the trainer works out its length).
"$weft" train calculator --max-train 200 --max-eval 50 --epochs 1 --hidden 8 --schedule cosine \
  --warmup-steps 2 --progress off --no-compare >"$work/cosine.out" 2>&1 ||
  { echo "FAIL train --schedule cosine --warmup-steps"; cat "$work/cosine.out"; failures=$((failures + 1)); }

# Each model's own flags come from the registry.
# The help is read whole before it is searched: grep -q stops reading at its match, and under
# pipefail the writer's SIGPIPE would fail the check.
help=$("$weft" train sentiment --help)
grep -q -- "--recurrent-dropout" <<<"$help" || { echo "FAIL sentiment --help"; failures=$((failures + 1)); }
help=$("$weft" infer molecules --help)
grep -q -- "--task" <<<"$help" || { echo "FAIL molecules --help"; failures=$((failures + 1)); }
# The Trainer's flags come from its option schema, with the model's recipe as their defaults.
help=$("$weft" train calculator --help)
grep -q -- "--average-weights FLOAT.*weight.*\[default: 0.0\]" <<<"$help" &&
  grep -q -- "--learning-rate FLOAT.*\[default: 0.003\]" <<<"$help" ||
  { echo "FAIL train calculator --help"; echo "$help"; failures=$((failures + 1)); }

expect_error cosine-too-short "the whole run is 4 steps (1 epochs x 4 batches of 64)" \
  "$weft" train calculator --max-train 200 --max-eval 50 --epochs 1 --hidden 8 --schedule cosine \
  --warmup-steps 5 --progress off --no-compare
expect_error unknown-model "unknown model 'nope'" "$weft" train nope --epochs 1
expect_error bad-option "--epochs" "$weft" train calculator --epochs -3
expect_error bad-progress "option 'progress' must be one of auto, bar, lines, off" \
  "$weft" train calculator --progress sometimes
# bench serve checks its output files before it measures for minutes, not after.
expect_error bench-serve-unwritable-out "cannot write the output file '$work/no-such-dir/serve.csv'" \
  "$weft" bench serve --decoding --out "$work/no-such-dir/serve.csv"
expect_error bench-serve-unwritable-plot "cannot write the plot file '$work/no-such-dir/serve.svg'" \
  "$weft" bench serve --decoding --plot "$work/no-such-dir/serve.svg"
expect_error missing-checkpoint "calc-missing" "$weft" eval calculator --checkpoint "$work/calc-missing"
head -c 100 "$work/calc.safetensors" >"$work/truncated.safetensors"
expect_error truncated-checkpoint "truncated.safetensors" \
  "$weft" eval calculator --checkpoint "$work/truncated.safetensors"
expect_error wrong-shape-checkpoint "trained with hidden=16; hidden=32 would not fit" \
  "$weft" eval calculator --hidden 32 --max-eval 50 --checkpoint "$work/calc.safetensors"
expect_error wrong-model-checkpoint "holds a 'calculator' model" \
  "$weft" eval sentiment --checkpoint "$work/calc.safetensors"
printf '{"number": 3}\n{"op": "/", "left": {"number": 1}, "right": {"number": 2}}\n' >"$work/bad.jsonl"
expect_error bad-example "bad.jsonl:2" \
  "$weft" infer calculator --checkpoint "$work/calc.safetensors" --input "$work/bad.jsonl"
printf '{"number": \n' >"$work/broken.jsonl"
expect_error broken-json "broken.jsonl:1" \
  "$weft" infer calculator --checkpoint "$work/calc.safetensors" --input "$work/broken.jsonl"
printf '{"id": 1, "number": 3}\n{"number": 4}\n' >"$work/unkeyed.jsonl"
expect_error missing-key "unkeyed.jsonl:2: --key id needs a JSON object with a 'id' field" \
  "$weft" infer calculator --checkpoint "$work/calc.safetensors" --input "$work/unkeyed.jsonl" --key id
# "weft info" is read whole before it is searched, as the help above.
info=$("$weft" info)
if grep -q "^cuda: not available" <<<"$info"; then
  expect_error bench-cuda-unavailable "--device cuda: CUDA is not available (" \
    "$weft" bench treelstm --device cuda --modes manual --batch-sizes 1 --vector-size 8
fi
# weft info --calibrate measures a model's GEMM classes (cached unless measured under load),
# and names the denormal mode in force.
calibration=$(WEFT_GEMM_CACHE="$work/gemm.txt" WEFT_NUM_THREADS=1 "$weft" info --calibrate calculator)
if grep -q "^calibrated the GEMM classes of calculator" <<<"$calibration" &&
  [[ $(grep -cE '^  (NN|NT|TN|TT)' <<<"$calibration") -ge 1 ]] &&
  grep -q "^denormals: flushed" <<<"$calibration" &&
  grep -q "^denormals: kept" <<<"$(WEFT_DENORMALS=keep "$weft" info)"; then
  echo "ok   info-calibrate"
else
  echo "FAIL info-calibrate:"
  echo "$calibration"
  failures=$((failures + 1))
fi
expect_error info-calibrate-unknown "unknown model 'nosuch'" "$weft" info --calibrate nosuch
# A run with oneDNN held to an older instruction set (ONEDNN_MAX_CPU_ISA, as an AVX2 machine is
# emulated) measures other rates: it must keep its own calibration cache, not the machine's; and
# the backend's summary (bench output's "backend") names the set oneDNN is held to.
if grep -q "^gemm providers built in: .*onednn" <<<"$info"; then
  native=$(env -u ONEDNN_MAX_CPU_ISA -u WEFT_GEMM_CACHE "$weft" info | grep "^gemm cache: ")
  held=$(ONEDNN_MAX_CPU_ISA=SSE41 env -u WEFT_GEMM_CACHE "$weft" info)
  if grep -q "^gemm cpu identity: .* isa sse41;" <<<"$held" &&
    grep -q "^cpu backend: .* cpu=[a-z0-9]* onednn=sse41" <<<"$held" &&
    [[ "$(grep "^gemm cache: " <<<"$held")" != "$native" ]]; then
    echo "ok   gemm-cache-per-isa"
  else
    echo "FAIL gemm-cache-per-isa: $native"
    grep "^gemm c\|^cpu backend" <<<"$held"
    failures=$((failures + 1))
  fi
fi
# --batch-invariant: each line's prediction to the byte, one line a batch or 64 (README, "Batch
# invariance"); WEFT_BATCH_INVARIANT takes 0 or 1 only.
for size in 1 64; do
  "$weft" infer calculator --checkpoint "$work/calc.safetensors" --input "$work/keyed.jsonl" \
    --batch-size "$size" --batch-invariant >"$work/invariant-$size.out" 2>&1
done
invariant_info=$(WEFT_BATCH_INVARIANT=1 "$weft" info)
if cmp -s "$work/invariant-1.out" "$work/invariant-64.out" &&
  [[ $(grep -c '"sign"' "$work/invariant-64.out") -ge 2 ]] &&
  grep -q "^gemm selection: batch-invariant: " <<<"$invariant_info"; then
  echo "ok   batch-invariant"
else
  echo "FAIL batch-invariant:"
  diff "$work/invariant-1.out" "$work/invariant-64.out" | head
  failures=$((failures + 1))
fi
expect_error bad-batch-invariant "WEFT_BATCH_INVARIANT must be 1 (on) or 0 (off), got 'yes'" \
  env WEFT_BATCH_INVARIANT=yes "$weft" info
expect_error bad-num-threads "WEFT_NUM_THREADS must be a number of threads from 1 to 1024, got 'four'" \
  env WEFT_NUM_THREADS=four "$weft" info
expect_error bad-denormals "WEFT_DENORMALS='often' is neither" env WEFT_DENORMALS=often "$weft" info
expect_error missing-data "no-such-dir" "$weft" train sentiment --data-dir "$work/no-such-dir"
expect_error bad-option-value "option 'hidden' must be an integer" "$weft" train calculator --hidden 2.5
expect_error bad-resume "does-not-exist" "$weft" train calculator --resume "$work/does-not-exist"

finish cli_test
