#!/usr/bin/env bash
# indolm's GPU checks, as one script for a GPU machine lent for about 15 minutes (torch installed
# there, no Rust): carry a stripped release binary built here and run this from the repository
# root, under one command limit of 10 minutes. The steps, most valuable first:
#   nccl        BERT-base (vocabulary 31,923, seq 512, batch 64, bf16) data parallel on NCCL under
#               torchrun (world size 1): dist-check, then updates with --step-times (the split into
#               batch, forward, backward, all-reduce, optimizer) and --op-counts (host waits: 0?)
#   throughput  the same model in one process: tokens/s and MFU against the H200's bf16 peak
#   pll         pseudo-log-likelihoods of a BERT-base model on the GPU (bf16) against the CPU (fp32)
#   bias        the time of one IndoBias-Pairs evaluation of a BERT-base model (the fixture pairs)
#   causal      a random Llama-shaped causal LM (bf16, built by transformers there): sentence
#               log-likelihoods and IndoMMLU two-shot letter scores on the GPU (bf16) against the
#               CPU (fp32), and the GPU's scoring tokens/s
#   decode      a tiny BertAbs fine-tuned a few steps, then decoded one article at a time and 8
#               at a time (articles/s, identical output?)
#   tiny        the demo's tiny pretraining with its bias hook at a checkpoint, then BertExt
# Every step runs under its own timeout (and within the whole script's DEADLINE); a failing or
# timed-out step is recorded and the next one runs. $OUT receives at most three files, written as
# the script goes: device_check.log (every step's output, appended), summary.json (rewritten after
# every step: status, seconds, figures, GPU memory peak) and gpu_memory.csv (sampled every 0.5 s).
#
# A CPU rehearsal of the plumbing (make test runs it): DEVICE=cpu SIZE=tiny; HANG_STEP=<step>
# makes a step hang (to see its timeout), FAIL_STEP=<step> makes it fail, BUDGET_<step>=<s>
# sets a step's timeout. WORK (default: the repository root) is where checkpoints and prepared
# corpora go; the recipes and sample data are read from the repository.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/indolm-gpu}
BIN=$(realpath "${BIN:-$REPO/target/release/indolm}")
PYTHON=$(realpath -s "$(command -v "${PYTHON:-python3}")")
DEVICE=${DEVICE:-cuda}
SIZE=${SIZE:-full}
WORK=${WORK:-$REPO}
DEADLINE=${DEADLINE:-570}
mkdir -p "$OUT" "$WORK"
LOG="$OUT/device_check.log"
SUMMARY="$OUT/summary.json"
MEMORY="$OUT/gpu_memory.csv"
STARTED=$(date +%s)
# The driver's scratch folder and torch's library folder, found once (importing torch takes
# seconds) and handed to every step it runs (`$0 --step NAME`) through the environment.
SCRATCH=${DEVICE_CHECK_SCRATCH:-$(mktemp -d)}
TORCH_LIB=${DEVICE_CHECK_TORCH_LIB:-$($PYTHON -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')}
export DEVICE_CHECK_SCRATCH=$SCRATCH DEVICE_CHECK_TORCH_LIB=$TORCH_LIB
export LD_LIBRARY_PATH="$TORCH_LIB:${LD_LIBRARY_PATH:-}"

# Sizes: the real ones on a GPU, tiny ones for the CPU rehearsal.
if [ "$SIZE" = tiny ]; then
  RECIPE=$REPO/recipes/tiny/sample.toml NCCL_STEPS=5 THROUGHPUT_STEPS=5 ABS_STEPS=3 TINY_STEPS=10
  BASE_CONFIG='{"vocab_size": 3200, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128, "max_position_embeddings": 128}'
else
  RECIPE=$REPO/recipes/gpu/indobert-base-throughput.toml NCCL_STEPS=30 THROUGHPUT_STEPS=60 ABS_STEPS=40 TINY_STEPS=200
  BASE_CONFIG='{"vocab_size": 31923, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512}'
fi

# ---- the steps (each runs as `device_check.sh --step NAME`, under its own timeout) ----------
step_prepare() {
  cd "$WORK" || return 1
  mkdir -p corpora checkpoints
  [ -e corpora/sample ] || cp -r "$REPO/corpora/sample" corpora/
  [ -e corpora/liputan6-sample ] || cp -r "$REPO/corpora/liputan6-sample" corpora/
  [ -e tests/fixtures ] || { mkdir -p tests && ln -s "$REPO/tests/fixtures" tests/fixtures; }
  for t in recipes/tiny/sample.toml "${RECIPE#"$REPO"/}"; do
    "$BIN" tokenizer train --recipe "$REPO/$t" --vocab-size 3000 --overwrite | tail -1 || return 1
  done
  echo "$BASE_CONFIG" > checkpoints/device-check-config.json
  "$BIN" --device cpu init --config checkpoints/device-check-config.json --tokenizer corpora/sample-tokenizer \
    --out checkpoints/device-check-base --overwrite || return 1
}

step_nccl() {
  cd "$WORK" || return 1
  local torchrun="$PYTHON -m torch.distributed.run --nproc-per-node 1 --no-python"
  $torchrun "$BIN" --device "$DEVICE" dist-check --megabytes 256 --timeout 60 || return 1
  $torchrun "$BIN" --device "$DEVICE" train "$RECIPE" --overwrite --stop-after "$NCCL_STEPS" \
    --step-times --op-counts --dist-timeout 120
}

step_throughput() {
  cd "$WORK" && "$BIN" --device "$DEVICE" train "$RECIPE" --overwrite --stop-after "$THROUGHPUT_STEPS"
}

step_pll() {
  cd "$WORK" || return 1
  grep -h "" corpora/sample/indonesian.txt | head -40 | sed 's/\. .*/./' > "$SCRATCH/sentences.txt"
  local model=checkpoints/device-check-base
  "$BIN" --device "$DEVICE" eval pll --model $model --text "$SCRATCH/sentences.txt" --json > "$SCRATCH/pll-device.json" || return 1
  "$BIN" --device cpu eval pll --model $model --text "$SCRATCH/sentences.txt" --json > "$SCRATCH/pll-cpu.json" || return 1
  $PYTHON - "$SCRATCH" <<'PY'
import json, sys
d = sys.argv[1]
a, b = ([json.loads(l) for l in open(f"{d}/pll-{x}.json") if l.strip()] for x in ("device", "cpu"))
diffs = sorted(abs(p["pll"] - q["pll"]) / max(1e-9, abs(q["pll"])) for p, q in zip(a, b))
print(f"PLL on {len(diffs)} sentences, device against CPU fp32: median relative difference {diffs[len(diffs)//2]:.2e}, max {diffs[-1]:.2e}")
PY
}

step_bias() {
  cd "$WORK" || return 1
  local started ended
  started=$(date +%s.%N)
  "$BIN" --device "$DEVICE" eval bias --model checkpoints/device-check-base --pairs "$REPO/tests/fixtures/indobias" || return 1
  ended=$(date +%s.%N)
  echo "bias evaluation of the fixture pairs (4 languages x 40 pairs; IndoBias-Pairs has 544 a language): $($PYTHON -c "print(round($ended - $started, 2))") s"
}

step_causal() {
  cd "$WORK" || return 1
  local model=checkpoints/device-check-llama
  PYTHONPATH="$REPO/tests/reference" $PYTHON "$REPO/tests/gpu/make_causal.py" "$model" "$SIZE" 2>&1 | grep -v "^Writing\|^Loading" || return 1
  grep -h "" corpora/sample/indonesian.txt | head -40 | sed 's/\. .*/./' > "$SCRATCH/causal.txt"
  for d in "$DEVICE" cpu; do
    "$BIN" --device "$d" eval pll --model $model --text "$SCRATCH/causal.txt" --json > "$SCRATCH/causal-$d.json" \
      2> "$SCRATCH/causal-$d.log" || { cat "$SCRATCH/causal-$d.log"; return 1; }
    "$BIN" --device "$d" eval indommlu --model $model --data "$REPO/tests/fixtures/indommlu/indoMMLU-fixture.csv" \
      --shots 2 --out "$SCRATCH/mmlu-$d" --overwrite > /dev/null 2>> "$SCRATCH/causal-$d.log" || { cat "$SCRATCH/causal-$d.log"; return 1; }
  done
  $PYTHON - "$SCRATCH" "$DEVICE" <<'PY'
import csv, json, re, sys
d, device = sys.argv[1:3]
tokens, seconds = re.findall(r"^scored (\d+) tokens in ([\d.]+) s", open(f"{d}/causal-{device}.log").read(), re.M)[-1]
print(f"causal scoring on {device}: {tokens} tokens in {seconds} s, {int(tokens) / max(float(seconds), 1e-9):,.0f} tokens/s")
a, b = ([json.loads(l) for l in open(f"{d}/causal-{x}.json") if l.strip()] for x in (device, "cpu"))
diffs = sorted(abs(p["log_likelihood"] - q["log_likelihood"]) / max(1e-9, abs(q["log_likelihood"])) for p, q in zip(a, b))
print(f"causal log-likelihoods of {len(diffs)} sentences, device against CPU fp32: median relative difference {diffs[len(diffs)//2]:.2e}, max {diffs[-1]:.2e}")
rows = [list(csv.DictReader(open(f"{d}/mmlu-{x}/indommlu_questions.csv"))) for x in (device, "cpu")]
same = sum(r["prediction"] == s["prediction"] for r, s in zip(*rows))
gap = max(abs(float(r[k]) - float(s[k])) for r, s in zip(*rows) for k in r if k.startswith("score_") and r[k])
print(f"causal IndoMMLU 2-shot letter scores, device against CPU fp32: {same} of {len(rows[0])} predictions equal, max score difference {gap:.3f}")
PY
}

step_decode() {
  cd "$WORK" || return 1
  sed -e "s/^max_steps = .*/max_steps = $ABS_STEPS/" -e "s/^every = .*/every = $ABS_STEPS/" \
    -e 's/^name = .*/name = "device-check-abs"/' "$REPO/recipes/finetune/liputan6-bertabs-tiny.toml" > "$SCRATCH/abs.toml"
  "$BIN" --device "$DEVICE" finetune summarize "$SCRATCH/abs.toml" --init checkpoints/device-check-base --overwrite | tail -3 || return 1
  for b in 1 8; do
    "$BIN" --device "$DEVICE" summarize --model checkpoints/device-check-abs/best --liputan6 corpora/liputan6-sample/test \
      --batch-size $b --out "$SCRATCH/decode-$b.txt" > /dev/null 2> "$SCRATCH/decode-$b.log" || { cat "$SCRATCH/decode-$b.log"; return 1; }
    echo "batch $b: $(tail -1 "$SCRATCH/decode-$b.log")"
  done
  cmp -s "$SCRATCH/decode-1.txt" "$SCRATCH/decode-8.txt" && echo "batched and one-at-a-time summaries identical" \
    || echo "batched and one-at-a-time summaries differ"
}

step_tiny() {
  cd "$WORK" || return 1
  "$BIN" --device "$DEVICE" train "$REPO/recipes/tiny/sample.toml" --overwrite --stop-after "$TINY_STEPS" || return 1
  sed -e 's/^max_steps = .*/max_steps = 20/' -e 's/^every = .*/every = 20/' -e 's/^name = .*/name = "device-check-ext"/' \
    "$REPO/recipes/finetune/liputan6-bertext-tiny.toml" > "$SCRATCH/ext.toml"
  "$BIN" --device "$DEVICE" finetune summarize "$SCRATCH/ext.toml" --init "checkpoints/tiny-sample/step-$TINY_STEPS" --overwrite | tail -3
}

if [ "${1:-}" = "--step" ]; then
  [ "${HANG_STEP:-}" = "$2" ] && sleep 100000
  [ "${FAIL_STEP:-}" = "$2" ] && { echo "failing on purpose (FAIL_STEP)"; exit 3; }
  "step_$2"
  exit $?
fi

# ---- the driver --------------------------------------------------------------------------
: > "$LOG"
echo "step,started,ended" > "$SCRATCH/windows.csv"
if [ "$DEVICE" != cpu ] && command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$LOG" 2>&1
  nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader,nounits -lms 500 > "$MEMORY" 2>/dev/null &
  SAMPLER=$!
fi
{ echo "indolm device check: DEVICE=$DEVICE SIZE=$SIZE DEADLINE=${DEADLINE}s"; "$BIN" --version 2>&1;
  $PYTHON -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.version.cuda)'; } >> "$LOG" 2>&1

# Rewrites summary.json from the steps run so far.
summarize() {
  $PYTHON - "$SCRATCH" "$SUMMARY" "$MEMORY" "$DEVICE" "$SIZE" <<'PY'
import csv, datetime, json, os, re, sys
scratch, summary, memory, device, size = sys.argv[1:6]
patterns = {
    "nccl": [r"all-reduce of .*", r"step times .*", r"data parallel over .*", r"host syncs per update: \d+", r"operations: \d+",
             r"attention: .*", r"determinism: .{0,60}", r"[\d.]+ tok/s.*", r"error: .*"],
    "throughput": [r"[\d.]+ tok/s.*", r"attention: .*", r"error: .*"],
    "pll": [r"PLL on .*", r"error: .*"],
    "bias": [r"bias evaluation of .*", r"error: .*"],
    "causal": [r"causal LM: .*", r"causal scoring on .*", r"causal log-likelihoods .*", r"causal IndoMMLU .*", r"error: .*"],
    "decode": [r"batch 1: .*", r"batch 8: .*", r"summaries (identical|differ)", r"error: .*"],
    "tiny": [r"bias win rate .*", r"finished at step .*", r"ROUGE.*", r"error: .*"],
    "prepare": [r"error: .*"],
}
samples = []
if os.path.exists(memory):
    for row in csv.reader(open(memory)):
        try:
            t = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            samples.append((t, float(row[1]), float(row[2])))
        except (ValueError, IndexError):
            pass
steps = []
for row in csv.DictReader(open(os.path.join(scratch, "results.csv"))):
    text = open(os.path.join(scratch, f"step-{row['step']}.log"), errors="replace").read()
    figures = {}
    for p in patterns.get(row["step"], []):
        found = re.findall(p, text)
        if found:
            figures[p] = found[-1] if isinstance(found[-1], str) else " ".join(found[-1])
    window = [s for s in samples if float(row["started"]) <= s[0] <= float(row["ended"])]
    steps.append({
        "step": row["step"], "status": row["status"], "exit": int(row["exit"]),
        "seconds": round(float(row["ended"]) - float(row["started"]), 1), "timeout_s": int(row["timeout"]),
        "figures": list(figures.values()),
        "gpu_memory_peak_mib": max((s[1] for s in window), default=None),
        "gpu_utilization_mean": round(sum(s[2] for s in window) / len(window), 1) if window else None,
    })
out = {"device": device, "size": size, "steps": steps,
       "gpu_memory_peak_mib": max((s[1] for s in samples), default=None)}
tmp = summary + ".part"
json.dump(out, open(tmp, "w"), indent=1)
os.replace(tmp, summary)
PY
}

echo "step,status,exit,started,ended,timeout" > "$SCRATCH/results.csv"
# run_step NAME BUDGET: runs the step under min(BUDGET, what is left of DEADLINE).
run_step() {
  local name=$1 budget_var="BUDGET_$1" budget=$2 now left started code status
  budget=${!budget_var:-$budget}
  now=$(date +%s)
  left=$((DEADLINE - (now - STARTED) - 5))
  started=$(date +%s.%N)
  if [ "$left" -lt 10 ]; then
    echo "=== $name: skipped, ${left}s left of the ${DEADLINE}s deadline" | tee -a "$LOG"
    echo "$name,skipped,0,$started,$started,0" >> "$SCRATCH/results.csv"
    : > "$SCRATCH/step-$name.log"
    summarize
    return
  fi
  [ "$budget" -gt "$left" ] && budget=$left
  echo "=== $name (timeout ${budget}s)" | tee -a "$LOG"
  timeout --kill-after=5 "$budget" "$0" --step "$name" > "$SCRATCH/step-$name.log" 2>&1
  code=$?
  case $code in
    0) status=ok ;;
    124 | 137) status=timeout ;;
    *) status=failed ;;
  esac
  cat "$SCRATCH/step-$name.log" >> "$LOG"
  echo "=== $name: $status (exit $code) after $(( $(date +%s) - ${started%.*} ))s" | tee -a "$LOG"
  echo "$name,$status,$code,$started,$(date +%s.%N),$budget" >> "$SCRATCH/results.csv"
  summarize
}

run_step prepare 60
run_step nccl 130
run_step throughput 110
run_step pll 45
run_step bias 60
run_step causal 60
run_step decode 90
run_step tiny 90
[ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2> /dev/null
summarize
echo
echo "summary ($SUMMARY):"
$PYTHON - "$SUMMARY" <<'PY'
import json, sys
for s in json.load(open(sys.argv[1]))["steps"]:
    print(f"  {s['step']:<11} {s['status']:<8} {s['seconds']:>6}s  " + " | ".join(s["figures"]))
PY
rm -rf "$SCRATCH"
