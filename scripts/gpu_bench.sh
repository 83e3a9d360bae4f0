#!/usr/bin/env bash
# Issue 35's device run, from the bundle scripts/gpu_bundle.sh made (build/gpu-bundle): `weft
# info`, issue 33's served decoding on the GPU and one host core (when the bundle has a tree2seq
# checkpoint), the ICLR table on the GPU (train and infer; N = 128, 1024; B = 256, 1024; manual and
# full-dynamic, woven ahead and in turn), sentiment training on the GPU against the host's one
# core, the CUDA tests, the PyTorch peer where torch sees the GPU, any CPU rows asked for
# (cpu_rows), and compute-sanitizer on the CUDA tests (memcheck also on the loom's, whose
# gathers read the batch's one packed upload: loom/batch_plan.h). The table's CSVs carry each
# batch's host-to-device copies and waits (the target: one copy per batch). Every step is
# bounded by `timeout` and by what is left of WEFT_GPU_BUDGET_S (default 330 s), and records a
# line in steps.csv before the next starts, so a failing or slow step leaves the others'
# results.
# Writes into $OUT (default build/gpu-out). Without a GPU the CUDA steps fail fast and the
# rest still runs, which is how it is checked on the workstation.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
repo=$PWD

out=${OUT:-$repo/build/gpu-out}
mkdir -p "$out"
out=$(cd "$out" && pwd)
budget=${WEFT_GPU_BUDGET_S:-330}
repeats=${WEFT_GPU_REPEATS:-10}
bundle=${WEFT_GPU_BUNDLE:-$repo/build/gpu-bundle/weft-gpu.tar.xz}
run_dir=${WEFT_GPU_RUN_DIR:-${TMPDIR:-/tmp}/weft-gpu-$$}
weft=$run_dir/bin/weft
cuda_tests=$run_dir/bin/weft_cuda_tests
export out bundle run_dir weft cuda_tests  # read by the functions step runs

echo "step,status,rc,seconds,limit_s" >"$out/steps.csv"
# step NAME LIMIT_S COMMAND...: runs COMMAND with its output in NAME.log, at most LIMIT_S
# seconds and never past the budget; appends its line to steps.csv. Returns COMMAND's status.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - SECONDS))
  if ((left < 10)); then
    echo "$name,skipped-budget,,0,$limit" >>"$out/steps.csv"
    echo "== $name: skipped, ${left}s of the budget left"
    return 1
  fi
  ((limit > left)) && limit=$left
  echo "== $name (at most ${limit}s)"
  local start=$SECONDS rc=0
  if declare -F "$1" >/dev/null; then  # a function of this script: in a bash of its own
    timeout -k 5 "$limit" bash -c "$(declare -f "$1")"'; "$@"' _ "$@" >>"$out/$name.log" 2>&1 ||
      rc=$?
  else
    timeout -k 5 "$limit" "$@" >>"$out/$name.log" 2>&1 || rc=$?
  fi
  local status=ok
  ((rc == 124 || rc == 137)) && status=timeout
  ((rc != 0 && rc != 124 && rc != 137)) && status=failed
  echo "$name,$status,$rc,$((SECONDS - start)),$limit" >>"$out/steps.csv"
  echo "   $status (rc $rc, $((SECONDS - start))s)"
  tail -n 3 "$out/$name.log" | sed 's/^/   | /'
  return "$rc"
}

unpack() {
  mkdir -p "$run_dir" && tar -xJf "$bundle" -C "$run_dir"
}
if ! step unpack 60 unpack; then
  echo "gpu_bench: cannot unpack $bundle (made by scripts/gpu_bundle.sh)" >&2
  exit 1
fi
trap 'rm -rf "$run_dir"' EXIT
cp "$run_dir/COMMIT" "$out/bundle_commit.txt"
cuda_libs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib64; do
  [[ -d "$d" ]] && cuda_libs+=":$d"
done
export LD_LIBRARY_PATH="$run_dir/lib${cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The bundle's libstdc++ / libgcc_s only where the device's own cannot load the binaries.
if ! "$weft" --version >/dev/null 2>&1; then
  export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$run_dir/lib/fallback"
  echo "gpu_bench: using the bundle's libstdc++ (lib/fallback)" | tee -a "$out/info.log"
fi

machine_info() {
  "$weft" info
  echo "--- nvidia-smi"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv || true
  echo "--- lscpu"
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Flags' | cut -c1-200 || true
  echo "--- date"
  date -u
}
step info 30 machine_info

# Issue 33's GPU figure first: a trained tree2seq (the bundle's, WEFT_BUNDLE_DECODER) served at
# iteration level and as whole batches, on the GPU and then on one host core, each point
# alternating the two servers (serve_decoding_<device>.csv; the target: iteration level >= 2x
# the whole-batch server's throughput at 64 clients).
serve_decoding() {
  local checkpoint=$run_dir/tree2seq.safetensors device
  if [[ ! -f "$checkpoint" ]]; then
    echo "serve_decoding,skipped-no-checkpoint,,0,0" >>"$out/steps.csv"
    echo "== serve_decoding: skipped (no tree2seq.safetensors in the bundle)"
    return 0
  fi
  for device in cuda cpu; do
    step "serve_decoding_$device" 60 "$weft" bench serve --decoding --checkpoint "$checkpoint" \
      --device "$device" --concurrency 1 16 64 --rounds 2 --seconds 2 --requests 1000000 \
      --format csv --out "$out/serve_decoding_$device.csv"
  done
}
serve_decoding

# The issue's table (N = 128, 1024; B = 256, 1024), train then infer for each variant: woven
# ahead on one thread (manual beside it), woven ahead on 4 threads, woven in turn (the way the
# issue's figures were taken), and the first again, so a drift of the machine shows. One CSV
# per command, then all of them in table.csv with the variant in front.
treelstm_variants=(
  "ahead:--modes manual,full-dynamic --weave-ahead on --weave-threads 1"
  "ahead4:--modes full-dynamic --weave-ahead on --weave-threads 4"
  "inturn:--modes full-dynamic --weave-ahead off"
  "again:--modes manual,full-dynamic --weave-ahead on --weave-threads 1"
)
treelstm_table() {
  local variant name flags phase
  for variant in "${treelstm_variants[@]}"; do
    name=${variant%%:*}
    flags=${variant#*:}
    for phase in train infer; do
      # shellcheck disable=SC2086  # the variant's flags and WEFT_GPU_TABLE_FLAGS: split
      step "treelstm_${phase}_${name}" 60 "$weft" bench treelstm --device cuda "--$phase" \
        --vector-size 128,1024 --batch-sizes 256,1024 $flags --repeats "$repeats" \
        --format csv --out "$out/treelstm_${phase}_${name}.csv" ${WEFT_GPU_TABLE_FLAGS:-}
    done
  done
  local first=1 file
  for file in "$out"/treelstm_*.csv; do
    [[ -s "$file" ]] || continue
    name=${file##*/treelstm_}
    if ((first)); then
      echo "variant,$(head -n 1 "$file")" >"$out/table.csv"
      first=0
    fi
    tail -n +2 "$file" | sed "s/^/${name%.csv},/" >>"$out/table.csv"
  done
}
treelstm_table

# Sentiment training (one epoch, the paper's Tree-LSTM, batch 25) on the GPU and on one host
# core, alternated; sentiment.csv has one line per run.
find_data() {
  local d
  for d in "${WEFT_DATA_DIR:-}" "$repo/shared/data" "$repo/../shared/data" "$run_dir/data"; do
    [[ -n "$d" && -f "$d/sst/train.txt" && -f "$d/glove-sst/glove.6B.100d.sst.txt" ]] &&
      echo "$d" && return 0
  done
  return 1
}
sentiment() {
  local data
  if ! data=$(find_data); then
    echo "sentiment,skipped-no-data,,0,0" >>"$out/steps.csv"
    echo "== sentiment: skipped (no sst/ and glove-sst/ under shared/data or the bundle)"
    return 0
  fi
  echo "device,run,examples_per_second,seconds,data_dir" >"$out/sentiment.csv"
  local k device
  for k in 1 2 3; do
    device=cuda
    ((k == 2)) && device=cpu
    rm -f "$out/sentiment_$k.jsonl"
    local extra=()  # the first GPU run's weights start the PyTorch peer (peer_sentiment)
    ((k == 1)) && extra=(--checkpoint "$run_dir/sentiment.safetensors")
    step "sentiment_${device}_$k" 60 "$weft" train sentiment --data-dir "$data" \
      --device "$device" --threads 1 --epochs 1 --max-eval 500 --progress off --no-compare \
      --log "$out/sentiment_$k.jsonl" "${extra[@]}"
    local rate seconds
    rate=$(grep -o '"examples_per_second":[0-9.e+-]*' "$out/sentiment_$k.jsonl" 2>/dev/null |
      head -n 1 | cut -d: -f2)
    seconds=$(grep -o '"seconds":[0-9.e+-]*' "$out/sentiment_$k.jsonl" 2>/dev/null |
      head -n 1 | cut -d: -f2)
    echo "$device,$k,${rate:-},${seconds:-},$data" >>"$out/sentiment.csv"
  done
}
sentiment

cuda_tests() {
  "$cuda_tests" --gtest_output="xml:$out/cuda_tests.xml" --gtest_brief=0
}
step cuda_tests 120 cuda_tests
grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/cuda_tests.log" >"$out/cuda_tests_summary.txt"

# The PyTorch peer of sentiment training on the GPU (bench/peers/torch_sentiment.py --device
# cuda), from the weights of the first GPU run above, checked equal to Weft's figures on them
# first; two epochs (the second is the one to compare). Skipped without a Python whose torch
# sees the GPU.
peer_sentiment() {
  local python="" candidate data
  for candidate in "${WEFT_PEER_PYTHON:-}" python3 /usr/bin/python3; do
    if [[ -n "$candidate" ]] &&
      "$candidate" -c 'import numpy, torch; assert torch.cuda.is_available()' 2>/dev/null; then
      python=$candidate
      break
    fi
  done
  if [[ -z "$python" || ! -f "$run_dir/sentiment.safetensors" ]] || ! data=$(find_data); then
    echo "peer_sentiment,skipped-no-torch-or-checkpoint,,0,0" >>"$out/steps.csv"
    echo "== peer_sentiment: skipped (no torch with CUDA, or no checkpoint of a GPU run)"
    return 0
  fi
  step peer_sentiment 90 "$python" "$repo/bench/peers/torch_sentiment.py" --train --device cuda \
    --init "$run_dir/sentiment.safetensors" --weft "$weft" --data-dir "$data" --epochs 2 \
    --max-eval 200 --threads 1 --log "$out/peer_sentiment.jsonl"
}
peer_sentiment

# ---- Hook for the coordinator: CPU-side rows (e.g. the Intel host's denormal measurements).
# CPU_ROWS holds rows separated by ';', each the arguments of one `weft bench treelstm
# --device cpu` run, e.g.
#   CPU_ROWS='--train --vector-size 128 --batch-sizes 256 --modes full-dynamic --threads 1'
# Each row writes cpu_row_<k>.csv (and .log) and has at most CPU_ROW_LIMIT_S seconds (60).
cpu_rows() {
  local rows=${CPU_ROWS:-} k=0 row
  [[ -z "$rows" ]] && return 0
  IFS=';' read -r -a row_list <<<"$rows"
  for row in "${row_list[@]}"; do
    [[ -z "${row// /}" ]] && continue
    k=$((k + 1))
    echo "$row" >"$out/cpu_row_$k.args"
    # shellcheck disable=SC2086  # a row is a list of arguments
    step "cpu_row_$k" "${CPU_ROW_LIMIT_S:-60}" "$weft" bench treelstm --device cpu $row \
      --format csv --out "$out/cpu_row_$k.csv"
  done
}
cpu_rows
# ---- end of the hook

sanitizer=$(command -v compute-sanitizer)
for candidate in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda*/bin/compute-sanitizer \
  /opt/nvidia/*/compute-sanitizer; do
  [[ -z "$sanitizer" && -x "$candidate" ]] && sanitizer=$candidate
done
if [[ -n "$sanitizer" && -x "$sanitizer" ]]; then
  for tool in memcheck racecheck synccheck; do
    step "sanitizer_$tool" 50 "$sanitizer" --tool "$tool" --error-exitcode 1 "$cuda_tests" \
      --gtest_filter='CudaOps.*:CudaBackend.*'
  done
  # The loom's gathers read their references from the batch's packed upload and their chunk
  # tables from kernel parameters (loom/batch_plan.h): memcheck them too, last (the budget).
  step sanitizer_memcheck_loom 60 "$sanitizer" --tool memcheck --error-exitcode 1 "$cuda_tests" \
    --gtest_filter='CudaLoomProperty.*'
else
  echo "sanitizer,skipped-not-found,,0,0" >>"$out/steps.csv"
  echo "== compute-sanitizer not found; skipped"
fi

echo "gpu_bench: done in ${SECONDS}s; results in $out:"
cat "$out/steps.csv"
