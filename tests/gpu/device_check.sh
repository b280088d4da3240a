#!/usr/bin/env bash
# indolm's GPU checks, as one script for a GPU machine lent for about 15 minutes (torch installed
# there, no Rust toolchain, no network): a stripped x86-64 release binary built here is carried
# there and run with that machine's own torch, from the repository root, under one command limit
# of 10 minutes (docs/architecture.md#the-gpu-device-check says how to build, strip and carry it,
# and how to call the device tool). First a preflight (one line, and no step runs, when the
# binary is missing, stale or does not run, torch does not import or sees no CUDA, libtorch is
# not found, or torch's CUDA or NCCL major version differs from the one the binary was built
# against; it prints torch's CUDA and NCCL versions, the loaded NCCL library's and the binary's,
# and skips a step, with a line, whose Python packages do not import), then the steps, most
# valuable first, each under its own budget (seconds):
#   prepare     30  tokenizers (`tokenizer train`, with CUDA hidden: it needs none) and a BERT-base
#   nccl        35  one rank of NCCL (RANK=0 WORLD_SIZE=1, as torchrun sets them; the CPU
#                   rehearsal runs Gloo, and says so): dist-check (ProcessGroupNCCL made against
#                   the installed library, the collectives, the hooks all-reducing buckets from
#                   autograd's thread, Work::wait ordering the streams, fp32 and bf16), then the
#                   tiny model trained a few updates with --grad-reduce bf16 --op-counts (host
#                   waits under NCCL: 0?) and its exit (the communicator released; the error
#                   path's abort and _exit need a failure, which this step does not make)
#   attention   15  the kernel scaled_dot_product_attention picks for the decoders' grouped-query
#                   shapes (batch 4, 32 query heads over 8 key/value heads, 512 tokens, head dim
#                   128, bf16), without a mask and with their padding masks, the key/value heads
#                   in place and expanded, and which of the two the decoders take
#   throughput 100  BERT-base (vocabulary 31,923, seq 512, batch 64, bf16) in one process: tokens/s
#                   and MFU against the H200's bf16 peak with --op-counts (host waits: 0?), then a
#                   shorter run with --step-times (batch, forward, backward, optimizer)
#   two_ranks   70  two ranks on the one GPU under torchrun, Gloo over CUDA tensors (NCCL refuses
#                   two ranks on one device): dist-check (collective values, a store wait, the
#                   gradient buckets all-reduced by hooks on autograd's CUDA thread during
#                   backward, fp32 and bf16), the tiny model trained by both (collectives in the
#                   same order on both, buckets launched during backward), and the
#                   lost-rank path (rank 0 killed while it evaluates: rank 1 names it, and when)
#   op_counts   50  `finetune sentiment`, BertExt and BertAbs (`finetune summarize`) with
#                   --op-counts: host waits per update (skipped, with a line, where the flag is
#                   missing)
#   causal      50  a random Llama-shaped causal LM (bf16, built by transformers there): sentence
#                   log-likelihoods and IndoMMLU two-shot letter scores on the GPU (bf16) against
#                   the CPU (fp32), and the GPU's scoring tokens/s (skipped, with a line, where
#                   transformers, tokenizers or safetensors does not import)
#   pll         30  pseudo-log-likelihoods of the BERT-base on the GPU (bf16) against the CPU (fp32)
#   bias        40  the time of one IndoBias-Pairs evaluation of the BERT-base (the fixture pairs)
#   decode      65  a tiny BertAbs fine-tuned a few steps, then decoded one article at a time and 8
#                   at a time (articles/s, identical output?)
#   tiny        50  the tiny pretraining with its bias hook at a checkpoint, then BertExt
# The budgets add up to 535 s (at most 540: the preflight refuses more), inside the script's
# DEADLINE (570 s) and the device's 600 s command limit. No GPU has run them yet: they are
# estimates, each above its step's time in the CPU rehearsal. A failing or timed-out step is
# recorded and the next one runs. Every step is timed; $OUT receives at most three files, written
# as the script goes: device_check.log (every step's output, appended), summary.json (rewritten
# after every step: status, seconds, budget, figures, GPU memory peak) and gpu_memory.csv
# (sampled every 0.5 s on a GPU).
#
# The CPU rehearsal (`device_check.sh --rehearse`, or DEVICE=cpu SIZE=tiny; make test runs it):
# every step at tiny sizes on the CPU, printing each step's time (OpenMP's threads wait
# passively there, OMP_WAIT_POLICY=PASSIVE unless set, so that a busy machine slows it less). HANG_STEP=<step> makes a step
# hang (to see its timeout), FAIL_STEP=<step> makes it fail, BUDGET_<step>=<s> sets a step's
# budget, ONLY=<step>,<step> runs only those (after the whole preflight: a rerun of the steps
# that failed, while the machine is still lent; a step's own inputs, such as prepare's, must be
# in WORK already). WORK (default: the repository root) is where checkpoints and prepared corpora
# go; the recipes and sample data are read from the repository. BIN (default: .device/indolm,
# else target/release/indolm), PYTHON (default: python3) and TORCH_EXPECTED (the libtorch version
# the binary was built against, default 2.11) can be set; CAUSAL_PACKAGES (default: transformers
# tokenizers safetensors) are the modules the causal step needs, imported by the preflight.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = "--rehearse" ]; then
  export DEVICE=cpu SIZE=tiny
  shift
fi
OUT=${OUT:-/tmp/indolm-gpu}
# The binary: BIN, else the carried one (.device/indolm), else this checkout's release build.
if [ -z "${BIN:-}" ]; then
  BIN=$REPO/target/release/indolm
  [ -e "$REPO/.device/indolm" ] && BIN=$REPO/.device/indolm
fi
BIN=$(realpath -m "$BIN")
PYTHON=$(realpath -m -s "$(command -v "${PYTHON:-python3}" || echo "${PYTHON:-python3}")")
DEVICE=${DEVICE:-cuda}
SIZE=${SIZE:-full}
# On a shared CPU, libtorch's OpenMP threads spinning at their barriers while other programs hold
# the cores made rehearsal steps 3 to 5 times slower (decode past its 65 s budget beside two busy
# processes, 21 s with passive waits): the rehearsal checks the script, not the CPU's speed.
if [ "$DEVICE" = cpu ]; then
  export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
fi
WORK=${WORK:-$REPO}
DEADLINE=${DEADLINE:-570}
# The torch the binary was built against (tch 0.24: libtorch 2.11).
TORCH_EXPECTED=${TORCH_EXPECTED:-2.11}
mkdir -p "$OUT" "$WORK"
LOG="$OUT/device_check.log"
SUMMARY="$OUT/summary.json"
MEMORY="$OUT/gpu_memory.csv"
STARTED=$(date +%s)
# Each step's budget, in the order the steps run (most valuable first).
STEPS=(prepare:30 nccl:35 attention:15 throughput:100 two_ranks:70 op_counts:50 causal:50 pll:30 bias:40 decode:65
  tiny:50)
BUDGET_LIMIT=540

# Sizes: the real ones on a GPU, tiny ones for the CPU rehearsal.
if [ "$SIZE" = tiny ]; then
  RECIPE=$REPO/recipes/tiny/sample.toml THROUGHPUT_STEPS=5 TIMES_STEPS=4 ABS_STEPS=3 TINY_STEPS=10 TWO_STEPS=8
  NCCL_STEPS=6
  DIST_MB=1 RANK_THREADS=(--threads 1)
  # Heartbeats 100 ms apart (test-only), so that the lost rank is named in 2 s, not 10.
  LOST_BEAT_MS=100
  BASE_CONFIG='{"vocab_size": 3200, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 128, "max_position_embeddings": 128}'
else
  RECIPE=$REPO/recipes/gpu/indobert-base-throughput.toml THROUGHPUT_STEPS=60 TIMES_STEPS=20 ABS_STEPS=40
  TINY_STEPS=200 TWO_STEPS=30 NCCL_STEPS=10 DIST_MB=64 LOST_BEAT_MS= RANK_THREADS=()
  BASE_CONFIG='{"vocab_size": 31923, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "max_position_embeddings": 512}'
fi

# A TCP port nobody listens on now (for a torchrun job's store).
free_port() {
  $PYTHON -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The seconds between two `date +%s.%N` readings, to a tenth.
seconds_between() {
  awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'
}

# ---- the steps (each runs as `device_check.sh --step NAME`, under its own timeout) ----------
step_prepare() {
  cd "$WORK" || return 1
  mkdir -p corpora checkpoints tests
  [ -e corpora/sample ] || cp -r "$REPO/corpora/sample" corpora/
  [ -e corpora/liputan6-sample ] || cp -r "$REPO/corpora/liputan6-sample" corpora/
  [ -e tests/fixtures ] || ln -s "$REPO/tests/fixtures" tests/fixtures
  [ -e tests/data ] || ln -s "$REPO/tests/data" tests/data
  for t in recipes/tiny/sample.toml "${RECIPE#"$REPO"/}"; do
    # A tokenizer needs no GPU: CUDA hidden, so that it starts none.
    CUDA_VISIBLE_DEVICES= "$BIN" tokenizer train --recipe "$REPO/$t" --vocab-size 3000 --overwrite | tail -1 || return 1
  done
  echo "$BASE_CONFIG" > checkpoints/device-check-config.json
  "$BIN" --device cpu init --config checkpoints/device-check-config.json --tokenizer corpora/sample-tokenizer \
    --out checkpoints/device-check-base --overwrite || return 1
}

# One rank of a data-parallel job, launched as torchrun would launch it (RANK=0 WORLD_SIZE=1
# LOCAL_RANK=0, a store on a free port) but without torchrun's Python start: NCCL on a GPU,
# Gloo on the CPU (NCCL needs CUDA). Prints the dist-check verdict, then trains the tiny model a
# few updates with the gradients summed in bf16 in buckets of 0.25 MiB (several for the tiny
# model) and prints the host waits of a steady-state update; fails unless both pass and the
# waits are 0.
step_nccl() {
  cd "$WORK" || return 1
  local name=NCCL check=(--backend nccl) train=(--dist-backend nccl) failed=0 verdict syncs
  if [ "$DEVICE" = cpu ]; then
    name=Gloo check=() train=()
    echo "nccl: rehearsed with one Gloo rank on the CPU (NCCL needs CUDA)"
  fi
  local one=(env RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1)
  "${one[@]}" MASTER_PORT="$(free_port)" "$BIN" "${RANK_THREADS[@]}" --device "$DEVICE" dist-check "${check[@]}" \
    --megabytes "$DIST_MB" --timeout 60 > "$SCRATCH/nccl-check.log" 2>&1
  verdict=$?
  cat "$SCRATCH/nccl-check.log"
  if [ $verdict = 0 ]; then
    echo "dist-check on one $name rank: passed"
  else
    echo "dist-check on one $name rank: failed (exit $verdict): $(grep -m1 "^error: " "$SCRATCH/nccl-check.log")"
    failed=1
  fi
  # The run renamed (the first `name`, not the source's: its corpus is the one the other steps
  # use), no bias evaluation.
  sed -e '0,/^name = .*/s//name = "device-check-nccl"/' -e '/^\[eval.bias\]/,$d' "$REPO/recipes/tiny/sample.toml" \
    > "$SCRATCH/nccl.toml"
  "${one[@]}" MASTER_PORT="$(free_port)" "$BIN" "${RANK_THREADS[@]}" --device "$DEVICE" train "$SCRATCH/nccl.toml" \
    --overwrite --stop-after "$NCCL_STEPS" --op-counts --grad-reduce bf16 --bucket-mb 0.25 --dist-timeout 60 \
    "${train[@]}" > "$SCRATCH/nccl-train.log" 2>&1 || { cat "$SCRATCH/nccl-train.log"; return 1; }
  cat "$SCRATCH/nccl-train.log"
  syncs=$(grep -m1 -o "^host syncs per update: [0-9]*" "$SCRATCH/nccl-train.log" | grep -o "[0-9]*$")
  echo "one-rank $name training, gradients summed in bf16: host syncs per update: ${syncs:-none printed}"
  [ "${syncs:-}" = 0 ] || { echo "expected no host wait in an update"; failed=1; }
  return $failed
}

# The kernels scaled_dot_product_attention picks for the decoders' grouped-query attention at a
# Llama-3-8B-like shape (IndoMMLU's padded batches), and whether the decoders expand the heads.
step_attention() {
  "$BIN" --device "$DEVICE" info --attention --attention-shape 4,32,8,512,128 --attention-dtype bf16
}

step_throughput() {
  cd "$WORK" || return 1
  local recipe=$RECIPE
  # The BERT-base recipe evaluates nothing at its checkpoint; the tiny one evaluates bias there,
  # which the rehearsal leaves out (tens of seconds on a loaded CPU, no part of a throughput).
  if [ "$SIZE" = tiny ]; then
    recipe=$SCRATCH/throughput.toml
    sed -e '/^\[eval.bias\]/,$d' "$RECIPE" > "$recipe"
  fi
  "$BIN" --device "$DEVICE" train "$recipe" --overwrite --stop-after "$THROUGHPUT_STEPS" --op-counts || return 1
  "$BIN" --device "$DEVICE" train "$recipe" --overwrite --stop-after "$TIMES_STEPS" --step-times
}

step_two_ranks() {
  cd "$WORK" || return 1
  local torchrun=("$PYTHON" -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1)
  local gloo=()
  [ "$DEVICE" != cpu ] && gloo=(--dist-backend gloo)
  "${torchrun[@]}" --master-port "$(free_port)" --no-python "$BIN" "${RANK_THREADS[@]}" --device "$DEVICE" \
    dist-check --backend gloo --megabytes "$DIST_MB" --timeout 60 || return 1
  # The tiny model on both ranks, the collectives in the same order on each (else a hang or a
  # mismatch ends it), rank 0 preparing the corpus while rank 1 waits for it in the store.
  sed -e 's/^name = .*/name = "device-check-two"/' "$REPO/recipes/tiny/sample.toml" > "$SCRATCH/two.toml"
  "${torchrun[@]}" --master-port "$(free_port)" --no-python "$BIN" "${RANK_THREADS[@]}" --device "$DEVICE" \
    train "$SCRATCH/two.toml" --overwrite --stop-after "$TWO_STEPS" --step-times --dist-timeout 60 "${gloo[@]}" \
    || return 1
  # The lost-rank path: rank 0 held at the end of its step-12 checkpoint and evaluations
  # (test-only INDOLM_TEST_HOLD_RANK0), then killed; rank 1, waiting for it, must name it.
  sed -e 's/^name = .*/name = "device-check-lost"/' -e '/^\[eval.bias\]/,$d' "$REPO/recipes/tiny/sample.toml" \
    > "$SCRATCH/lost.toml"
  local hold=$SCRATCH/hold logs=$SCRATCH/lost-logs agent killed ended line
  INDOLM_TEST_HOLD_RANK0="12:$hold" INDOLM_TEST_HEARTBEAT_MS=$LOST_BEAT_MS \
    "${torchrun[@]}" --master-port "$(free_port)" --redirects 3 --log-dir "$logs" --no-python "$BIN" \
    "${RANK_THREADS[@]}" --device "$DEVICE" train "$SCRATCH/lost.toml" --overwrite --stop-after 12 \
    --dist-timeout 60 "${gloo[@]}" > "$SCRATCH/lost-agent.log" 2>&1 &
  agent=$!
  for _ in $(seq 900); do
    [ -s "$hold" ] && break
    sleep 0.1
  done
  if [ ! -s "$hold" ]; then
    echo "lost rank: rank 0 never reached its hold at step 12"
    kill "$agent" 2> /dev/null
    tail -5 "$SCRATCH/lost-agent.log"
    return 1
  fi
  killed=$(date +%s.%N)
  kill -KILL "$(cat "$hold")"
  wait "$agent"
  ended=$(date +%s.%N)
  line=$(cat "$logs"/*/attempt_0/1/stderr.log 2> /dev/null | grep "^error: " | tail -1)
  echo "lost rank: rank 0 killed while rank 1 waited for it; rank 1 ended after $(seconds_between "$killed" "$ended") s with: ${line:-no error line}"
  [[ "$line" == *"rank 0 stopped (no heartbeat in the store)"* ]]
}

# `finetune <kind> RECIPE --op-counts` a few updates from the BERT-base, or a line saying the
# flag is missing; prints `<label>: host syncs per update: N`.
op_counts_of() {
  local label=$1 kind=$2 recipe=$3 log=$SCRATCH/op-counts-$1.log
  if ! "$BIN" finetune "$kind" --help 2> /dev/null | grep -q -- "--op-counts"; then
    echo "$label: skipped: flag missing (finetune $kind has no --op-counts)"
    return 0
  fi
  "$BIN" --device "$DEVICE" finetune "$kind" "$recipe" --init checkpoints/device-check-base --overwrite \
    --stop-after 6 --op-counts > "$log" 2>&1 || { tail -3 "$log"; return 1; }
  local syncs
  syncs=$(grep -m1 -o "host syncs per update: [0-9]*" "$log")
  echo "$label: ${syncs:-no op-count line printed} ($(grep -m1 -o "operations: [0-9]*" "$log" || echo "operations: ?"))"
}

step_op_counts() {
  cd "$WORK" || return 1
  sed -e 's/^name = .*/name = "device-check-sentiment"/' "$REPO/recipes/finetune/nusax-sentiment-tiny.toml" \
    > "$SCRATCH/sentiment.toml"
  # One dev article scored before training (the summarizers evaluate the untrained model first).
  for t in ext abs; do
    sed -e "s/^name = .*/name = \"device-check-ops-$t\"/" -e 's/^\[eval\]$/[eval]\narticles = 1/' \
      "$REPO/recipes/finetune/liputan6-bert$t-tiny.toml" > "$SCRATCH/ops-$t.toml"
  done
  local failed=0
  op_counts_of sentiment sentiment "$SCRATCH/sentiment.toml" || failed=1
  op_counts_of BertExt summarize "$SCRATCH/ops-ext.toml" || failed=1
  op_counts_of BertAbs summarize "$SCRATCH/ops-abs.toml" || failed=1
  return $failed
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
  echo "bias evaluation of the fixture pairs (4 languages x 40 pairs; IndoBias-Pairs has 544 a language): $(seconds_between "$started" "$ended") s"
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

# ---- the preflight: one line and exit 2 before any step when the check cannot run ----------
: > "$LOG"
preflight_fails() {
  echo "preflight failed: $*" | tee -a "$LOG"
  exit 2
}
BUDGET_TOTAL=0
BUDGET_LIST=""
for entry in "${STEPS[@]}"; do
  BUDGET_TOTAL=$((BUDGET_TOTAL + ${entry#*:}))
  BUDGET_LIST="$BUDGET_LIST${BUDGET_LIST:+ + }${entry%%:*} ${entry#*:}"
done
[ "$BUDGET_TOTAL" -le "$BUDGET_LIMIT" ] \
  || preflight_fails "the step budgets add up to ${BUDGET_TOTAL}s, over ${BUDGET_LIMIT}s: $BUDGET_LIST"
[ -e "$BIN" ] || preflight_fails "no indolm binary at $BIN: build and strip it here, carry it as .device/indolm (docs/architecture.md#the-gpu-device-check), or set BIN"
[ -x "$BIN" ] || preflight_fails "$BIN is not executable (chmod +x it before carrying it)"
command -v "$PYTHON" > /dev/null || preflight_fails "no python at $PYTHON (set PYTHON to the machine's python3 with torch)"
# One Python start: torch's library folder and versions (its CUDA; the NCCL it reports, that is
# the one it was built with, and the NCCL library loaded), then which of the causal step's
# packages do not import ("-": none).
CAUSAL_PACKAGES=${CAUSAL_PACKAGES:-transformers tokenizers safetensors}
TORCH_FACTS=$($PYTHON - "$CAUSAL_PACKAGES" 2>&1 <<'PY' | tail -1
import ctypes, importlib, os, sys
import torch
try:
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.version.cuda else "none"
except Exception:
    nccl = "none"
try:
    version = ctypes.c_int()
    ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(version))
    code = version.value
    loaded = f"{code // 10000}.{code // 100 % 100}.{code % 100}" if code >= 10000 else f"{code // 1000}.{code // 100 % 10}.{code % 100}"
except Exception:
    loaded = "none"
missing = []
for name in sys.argv[1].split():
    try:
        importlib.import_module(name)
    except Exception:
        missing.append(name)
print(os.path.join(os.path.dirname(torch.__file__), "lib"), torch.__version__, int(torch.cuda.is_available()),
      torch.version.cuda, nccl, loaded, ",".join(missing) or "-")
PY
)
read -r TORCH_LIB TORCH_VERSION TORCH_CUDA TORCH_CUDA_VERSION TORCH_NCCL NCCL_LOADED PACKAGES_MISSING <<< "$TORCH_FACTS"
[ -f "${TORCH_LIB:-}/libtorch_cpu.so" ] \
  || preflight_fails "torch does not import with $PYTHON (it said: $TORCH_FACTS)"
[[ "$TORCH_VERSION" == "$TORCH_EXPECTED"* ]] \
  || preflight_fails "torch $TORCH_VERSION at $TORCH_LIB, but the binary was built against libtorch $TORCH_EXPECTED (tch 0.24)"
export LD_LIBRARY_PATH="$TORCH_LIB:${LD_LIBRARY_PATH:-}"
if command -v ldd > /dev/null; then
  MISSING=$(ldd "$BIN" 2>&1 | grep "not found" | awk '{print $1}' | tr '\n' ' ')
  [ -z "$MISSING" ] || preflight_fails "libraries not found for $BIN with LD_LIBRARY_PATH=$TORCH_LIB: $MISSING"
fi
VERSION=$("$BIN" --version 2>&1) || preflight_fails "$BIN does not run: $(echo "$VERSION" | head -1)"
# What the binary was built against (`indolm info --build`: `torch`, `cuda` and `nccl` lines).
BUILD=$("$BIN" info --build 2>&1) \
  || preflight_fails "$BIN does not say what it was built against (info --build: $(echo "$BUILD" | head -1)): a binary older than this script? build, strip and carry it again"
built() { echo "$BUILD" | awk -v name="$1" '$1 == name { print $2 }'; }
BUILT_TORCH=$(built torch) BUILT_CUDA=$(built cuda) BUILT_NCCL=$(built nccl)
major() { echo "${1%%.*}"; }
if [ "$DEVICE" != cpu ]; then
  [ "$TORCH_CUDA" = 1 ] || preflight_fails "torch $TORCH_VERSION at $TORCH_LIB sees no CUDA device (driver? CUDA_VISIBLE_DEVICES?)"
  if command -v ldd > /dev/null; then
    ldd "$BIN" | grep -q "libtorch_cuda.so" \
      || preflight_fails "$BIN does not load libtorch_cuda.so: CUDA would be silently off (rebuild: crates/torch/build.rs forces it in when torch has it)"
  fi
  [ "$(major "$TORCH_CUDA_VERSION")" = "$(major "$BUILT_CUDA")" ] \
    || preflight_fails "torch $TORCH_VERSION here is built for CUDA $TORCH_CUDA_VERSION, but $BIN against torch $BUILT_TORCH for CUDA $BUILT_CUDA (its shims use that CUDA's headers)"
  if [ "$BUILT_NCCL" != none ]; then
    # torch's NCCL (the one it was built with), else the library loaded.
    TORCH_SIDE=$TORCH_NCCL
    [ "$TORCH_SIDE" = none ] && TORCH_SIDE=$NCCL_LOADED
    [ "$(major "$TORCH_SIDE")" = "$(major "$BUILT_NCCL")" ] \
      || preflight_fails "torch $TORCH_VERSION here has NCCL $TORCH_SIDE, but $BIN's c10d shim was compiled with NCCL $BUILT_NCCL's headers"
  fi
fi
# Steps that cannot run here, skipped with a line: name -> why.
declare -A SKIP=()
[ "$PACKAGES_MISSING" = - ] \
  || SKIP[causal]="Python packages missing with $PYTHON: ${PACKAGES_MISSING//,/, } (the causal LM is built by transformers there)"
[ "$DEVICE" != cpu ] && [ "$BUILT_NCCL" = none ] \
  && SKIP[nccl]="$BIN was built without NCCL (CUDA's headers were not found when it was built)"
# The driver's scratch folder and torch's library folder, handed to every step it runs
# (`$0 --step NAME`) through the environment.
SCRATCH=${DEVICE_CHECK_SCRATCH:-$(mktemp -d)}
export DEVICE_CHECK_SCRATCH=$SCRATCH SCRATCH

# ---- the driver --------------------------------------------------------------------------
echo "step,started,ended" > "$SCRATCH/windows.csv"
if [ "$DEVICE" != cpu ] && command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$LOG" 2>&1
  nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv,noheader,nounits -lms 500 > "$MEMORY" 2>/dev/null &
  SAMPLER=$!
fi
{
  echo "indolm device check: DEVICE=$DEVICE SIZE=$SIZE DEADLINE=${DEADLINE}s; $VERSION at $BIN"
  echo "torch $TORCH_VERSION (CUDA ${TORCH_CUDA_VERSION}, available: $TORCH_CUDA; NCCL $TORCH_NCCL, library loaded: $NCCL_LOADED) at $TORCH_LIB"
  echo "binary built against torch $BUILT_TORCH (CUDA $BUILT_CUDA), its c10d shim with NCCL $BUILT_NCCL's headers"
  if [ "$BUILT_NCCL" != none ] && [ "$TORCH_NCCL" != none ] && [ "${TORCH_NCCL%.*}" != "${BUILT_NCCL%.*}" ]; then
    echo "note: torch's NCCL $TORCH_NCCL and the shim's headers ($BUILT_NCCL) differ in their minor version"
  fi
  echo "python packages of the causal step (${CAUSAL_PACKAGES}): $([ "$PACKAGES_MISSING" = - ] && echo "all import" || echo "missing: $PACKAGES_MISSING")"
  echo "budgets: $BUDGET_LIST = ${BUDGET_TOTAL}s of at most ${BUDGET_LIMIT}s"
} | tee -a "$LOG"

# Rewrites summary.json from the steps run so far.
summarize() {
  $PYTHON - "$SCRATCH" "$SUMMARY" "$MEMORY" "$DEVICE" "$SIZE" "$BUDGET_TOTAL" "$BUDGET_LIMIT" <<'PY'
import csv, datetime, json, os, re, sys
scratch, summary, memory, device, size = sys.argv[1:6]
budget_total, budget_limit = int(sys.argv[6]), int(sys.argv[7])
patterns = {
    "nccl": [r"nccl: rehearsed .*", r"rank 0 of 1 .*", r"rank 0: gradients all-reduced .*", r"all-reduce of .* over 1 .*",
             r"dist-check on one .*", r"data parallel: .*", r"one-rank .* training, .*", r"expected no host wait.*",
             r"error: .*"],
    "attention": [r"attention kernels .*", r"attention, no mask: .*", r"attention, boolean padding mask: .*",
                  r"attention, additive padding mask: .*", r"error: .*"],
    "throughput": [r"[\d.]+ tok/s.*", r"host syncs per update: \d+", r"operations: \d+", r"step times .*",
                   r"attention: .*", r"determinism: .{0,60}", r"error: .*"],
    "two_ranks": [r"all-reduce of .*", r"rank 0: gradients all-reduced .*", r"data parallel: .*", r"data parallel over .*", r"step times .*", r"lost rank: .*", r"error: .*"],
    "op_counts": [r"sentiment: .*", r"BertExt: .*", r"BertAbs: .*", r"error: .*"],
    "pll": [r"PLL on .*", r"error: .*"],
    "bias": [r"bias evaluation of .*", r"error: .*"],
    "causal": [r"causal: skipped: .*", r"causal LM: .*", r"causal scoring on .*", r"causal log-likelihoods .*", r"causal IndoMMLU .*", r"error: .*"],
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
    for p in patterns.get(row["step"], []) + [rf"{row['step']}: skipped: .*"]:
        found = re.findall(p, text)
        if found:
            figures[p] = found[-1] if isinstance(found[-1], str) else " ".join(found[-1])
    window = [s for s in samples if float(row["started"]) <= s[0] <= float(row["ended"])]
    steps.append({
        "step": row["step"], "status": row["status"], "exit": int(row["exit"]),
        "seconds": round(float(row["ended"]) - float(row["started"]), 1), "timeout_s": int(row["timeout"]),
        "budget_s": int(row["budget"]), "figures": list(figures.values()),
        "gpu_memory_peak_mib": max((s[1] for s in window), default=None),
        "gpu_utilization_mean": round(sum(s[2] for s in window) / len(window), 1) if window else None,
    })
out = {"device": device, "size": size, "budget_total_s": budget_total, "budget_limit_s": budget_limit,
       "steps": steps, "gpu_memory_peak_mib": max((s[1] for s in samples), default=None)}
tmp = summary + ".part"
json.dump(out, open(tmp, "w"), indent=1)
os.replace(tmp, summary)
PY
}

echo "step,status,exit,started,ended,timeout,budget" > "$SCRATCH/results.csv"
# run_step NAME BUDGET: runs the step under min(BUDGET, what is left of DEADLINE).
run_step() {
  local name=$1 budget_var="BUDGET_$1" budget=$2 planned now left started code status
  budget=${!budget_var:-$budget}
  planned=$budget
  now=$(date +%s)
  left=$((DEADLINE - (now - STARTED) - 5))
  started=$(date +%s.%N)
  if [ "$left" -lt 10 ]; then
    echo "=== $name: skipped, ${left}s left of the ${DEADLINE}s deadline" | tee -a "$LOG"
    echo "$name,skipped,0,$started,$started,0,$planned" >> "$SCRATCH/results.csv"
    : > "$SCRATCH/step-$name.log"
    summarize
    return
  fi
  if [ -n "${SKIP[$name]:-}" ]; then
    echo "$name: skipped: ${SKIP[$name]}" > "$SCRATCH/step-$name.log"
    echo "=== $name: skipped: ${SKIP[$name]}" | tee -a "$LOG"
    echo "$name,skipped,0,$started,$(date +%s.%N),0,$planned" >> "$SCRATCH/results.csv"
    summarize
    return
  fi
  [ "$budget" -gt "$left" ] && budget=$left
  echo "=== $name (budget ${budget}s)" | tee -a "$LOG"
  timeout --kill-after=5 "$budget" "$0" --step "$name" > "$SCRATCH/step-$name.log" 2>&1
  code=$?
  case $code in
    0) status=ok ;;
    124 | 137) status=timeout ;;
    *) status=failed ;;
  esac
  cat "$SCRATCH/step-$name.log" >> "$LOG"
  echo "=== $name: $status (exit $code) after $(seconds_between "$started" "$(date +%s.%N)")s of ${budget}s" | tee -a "$LOG"
  echo "$name,$status,$code,$started,$(date +%s.%N),$budget,$planned" >> "$SCRATCH/results.csv"
  summarize
}

for entry in "${STEPS[@]}"; do
  if [ -n "${ONLY:-}" ] && [[ " ${ONLY//,/ } " != *" ${entry%%:*} "* ]]; then
    continue
  fi
  run_step "${entry%%:*}" "${entry#*:}"
done
[ -n "${SAMPLER:-}" ] && kill "$SAMPLER" 2> /dev/null
summarize
echo
echo "summary ($SUMMARY):"
$PYTHON - "$SUMMARY" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
for s in summary["steps"]:
    print(f"  {s['step']:<11} {s['status']:<8} {s['seconds']:>6}s of {s['timeout_s']:>3}s  " + " | ".join(s["figures"]))
print(f"  budgets {summary['budget_total_s']}s of at most {summary['budget_limit_s']}s")
PY
rm -rf "$SCRATCH"
