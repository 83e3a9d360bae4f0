#!/usr/bin/env bash
# `weft bench decode` end to end, small (tiny checkpoints trained by the command itself, a few
# held-out examples, one round): its JSON has, for both models, every arm with a positive rate
# in each round and in the untimed warm-up round before them, the batched = one-at-a-time check run on every measured example, one-length
# batches whose weights add up to the batch and the machine's description; a kept checkpoint
# is measured again as CSV and served by `weft bench serve --decoding`; bad options and
# checkpoints fail with one line naming them.
# Usage: bench_decode_test.sh WEFT_BINARY SOURCE_DIR
set -uo pipefail
weft=$(realpath "$1")  # absolute: parts of the test run in another folder
source_dir=$2
source "$(dirname "$0")/test_helpers.sh"  # $work, $failures, expect_error, finish

small=(--train-examples 40 --train-epochs 1 --hidden 8 --held-out 16 --rounds 1 --beam 2)
if ! "$weft" bench decode "${small[@]}" --batch 5 --format json --out "$work/decode.json" \
    --keep-checkpoints "$work/checkpoints" >"$work/run.out" 2>"$work/run.err"; then
  echo "FAIL bench decode:"; cat "$work/run.err"; exit 1
fi
python3 - "$work/decode.json" <<'EOF' || { echo "FAIL bench decode JSON"; failures=$((failures + 1)); }
import json, sys
doc = json.load(open(sys.argv[1]))
assert [m["model"] for m in doc["models"]] == ["tree2seq", "seq2tree"], doc["models"]
machine = doc["machine"]
assert machine["threads"] == 1 and machine["cpu"] and len(machine["load_average_after"]) == 3
# One untimed warm-up round (issue 44): measured apart, in no round and so in no median.
assert doc["options"]["rounds"] == 1 and doc["options"]["warmup_rounds"] == 1, doc["options"]
assert doc["options"]["warm"] is False, doc["options"]
def positive(arm, where):
    assert arm["median"] > 0 and len(arm["rounds"]) == 1 and min(arm["rounds"]) > 0, (where, arm)
    assert arm["warmup"] > 0 and arm["median"] == arm["rounds"][0], (where, arm)
for m in doc["models"]:
    assert m["checkpoint"] == "trained here" and m["training"]["epochs"] == 1, m
    assert set(m["decode"]) == {"greedy", "beam2"}, m["decode"].keys()
    for name, search in m["decode"].items():
        where = m["model"] + " " + name
        for arm in ("batch", "one_at_a_time", "one_length"):
            positive(search[arm], where + " " + arm)
        assert search["equality_check"] == {"examples": 5, "equal": True}, where
        batches = search["one_length_batches"]
        assert sum(b["examples_in_batch"] for b in batches) == 5, (where, batches)
        assert all(b["steps"] > 0 and 1 <= b["distinct"] <= 5 for b in batches), (where, batches)
        assert search["batch_over_one_at_a_time"] > 0 and search["batch_over_one_length"] > 0
        quality = m["quality"][name]
        assert 0 <= quality["exact_match"] <= 1 and 1 <= quality["min_steps"] <= quality["max_steps"]
    positive(m["train"]["batch"], m["model"] + " train batch")
    positive(m["train"]["one_at_a_time"], m["model"] + " train one at a time")
EOF
for model in tree2seq seq2tree; do  # the warm-up round runs first, then the counted round
  grep -E "^$model: (warm-up round|round [0-9])" "$work/run.err" | cut -d: -f2 | tr '\n' '|' |
    grep -qx " warm-up round (not counted)| round 1/1|" ||
    { echo "FAIL $model's warm-up round before its round"; cat "$work/run.err"; failures=$((failures + 1)); }
done
grep -q "^seq2tree  decode  beam2" "$work/run.err" ||
  { echo "FAIL the table on stderr"; cat "$work/run.err"; failures=$((failures + 1)); }

# A given checkpoint: its model is measured without --model, as CSV (a header and 8 rows).
ckpt="$work/checkpoints/seq2tree.safetensors"
"$weft" bench decode --checkpoint "$ckpt" --batch 4 --rounds 1 --beam 2 --quiet --format csv \
  >"$work/decode.csv" 2>"$work/csv.err" || { echo "FAIL bench decode --checkpoint"; cat "$work/csv.err"; failures=$((failures + 1)); }
python3 - "$work/decode.csv" <<'EOF' || { echo "FAIL bench decode CSV"; cat "$work/decode.csv"; failures=$((failures + 1)); }
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 8 and {r["model"] for r in rows} == {"seq2tree"}, rows
assert all(float(r["rate_median"]) > 0 and r["examples"] == "4" for r in rows), rows
assert {(r["search"], r["arm"]) for r in rows if r["phase"] == "decode"} == {
    (s, a) for s in ("greedy", "beam2") for a in ("batch", "one_at_a_time", "one_length")}
EOF

# --warm: every timed decode call after an untimed one of the same examples; said in the JSON.
# Run from outside the checkout: machine.commit is still the commit the binary was built from.
(cd "$work" && "$weft" bench decode --checkpoint "$ckpt" --batch 4 --rounds 1 --beam 2 --quiet \
  --warm --format json --out "$work/warm.json" 2>"$work/warm.err") ||
  { echo "FAIL bench decode --warm"; cat "$work/warm.err"; failures=$((failures + 1)); }
commit=$(expected_build_commit "$source_dir")
python3 - "$work/warm.json" "$commit" <<'EOF' || { echo "FAIL bench decode --warm JSON"; failures=$((failures + 1)); }
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["options"]["warm"] is True, doc["options"]
assert doc["machine"]["commit"] == sys.argv[2], (doc["machine"]["commit"], sys.argv[2])
for name, search in doc["models"][0]["decode"].items():
    for arm in ("batch", "one_at_a_time", "one_length"):
        assert search[arm]["median"] > 0 and search[arm]["warmup"] > 0, (name, arm, search[arm])
EOF

# --profile: per sequence, both decoding arms' wall time and their kernels' time and bytes by
# kind (products ran; the batch's gathers moved bytes), in the JSON and as table lines.
"$weft" bench decode --checkpoint "$ckpt" --batch 4 --rounds 1 --beam 2 --quiet --profile \
  --format json --out "$work/profile.json" 2>"$work/profile.err" ||
  { echo "FAIL bench decode --profile"; cat "$work/profile.err"; failures=$((failures + 1)); }
python3 - "$work/profile.json" <<'EOF' || { echo "FAIL bench decode --profile JSON"; failures=$((failures + 1)); }
import json, sys
doc = json.load(open(sys.argv[1]))
for name, search in doc["models"][0]["decode"].items():
    for arm in ("batch", "one_length"):
        p = search["profile_per_sequence"][arm]
        assert p["seconds"] > 0 and p["kinds"]["products"]["seconds"] > 0, (name, arm, p)
        assert p["seconds"] >= sum(k["seconds"] for k in p["kinds"].values()), (name, arm, p)
    assert search["profile_per_sequence"]["batch"]["kinds"]["gathers"]["bytes"] > 0, (name, search)
EOF
grep -q "seq2tree greedy profiled, per sequence" "$work/profile.err" ||
  { echo "FAIL the profile's table lines"; cat "$work/profile.err"; failures=$((failures + 1)); }

# `weft bench serve --decoding` on a tree2seq checkpoint: its own held-out examples served at
# iteration level and as whole batches, every request answered, short and long latencies both.
t2s="$work/checkpoints/tree2seq.safetensors"
"$weft" bench serve --decoding --checkpoint "$t2s" --concurrency 2 --rounds 1 --seconds 0.3 \
  --requests 40 --format csv --out "$work/serve.csv" 2>"$work/serve.err" ||
  { echo "FAIL bench serve --decoding tree2seq"; cat "$work/serve.err"; failures=$((failures + 1)); }
python3 - "$work/serve.csv" <<'EOF' || { echo "FAIL bench serve CSV"; cat "$work/serve.csv"; failures=$((failures + 1)); }
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert sorted(r["server"] for r in rows) == ["iterative", "wholebatch"], rows
for r in rows:
    assert int(r["requests"]) > 0 and r["errors"] == "0", r
    assert float(r["short_p50_ms"]) > 0 and float(r["long_p50_ms"]) > 0, r
EOF
"$weft" train calculator --epochs 1 --max-train 16 --max-eval 4 --hidden 4 --progress off \
  --no-compare --checkpoint "$work/calculator.safetensors" >/dev/null 2>&1
expect_error "a model that does not decode" "does not decode" \
  "$weft" bench serve --decoding --checkpoint "$work/calculator.safetensors" --seconds 0.1
expect_error "an unknown device" "--device" \
  "$weft" bench serve --decoding --checkpoint "$t2s" --device tpu

# Bad options and checkpoints: one line each, naming what is wrong.
printf 'not a checkpoint' >"$work/garbage.safetensors"
expect_error "batch 0" "--batch" "$weft" bench decode --batch 0
expect_error "unknown model" "nope" "$weft" bench decode --model nope
expect_error "missing checkpoint" "missing.safetensors" \
  "$weft" bench decode --checkpoint "$work/missing.safetensors"
expect_error "unreadable checkpoint" "garbage.safetensors" \
  "$weft" bench decode --checkpoint "$work/garbage.safetensors"
expect_error "checkpoint of another model" "holds a 'seq2tree' model" \
  "$weft" bench decode --checkpoint "$ckpt" --model tree2seq
expect_error "batch above the held-out examples" "fewer than --batch 40" \
  "$weft" bench decode --checkpoint "$ckpt" --batch 40
expect_error "unwritable output" "cannot write" \
  "$weft" bench decode --checkpoint "$ckpt" --out "$work/no/such/folder/out.json"

finish bench_decode_test
