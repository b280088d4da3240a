#!/usr/bin/env bash
# The GPU checks, in one short script for a session lent a GPU machine (torch preinstalled, no
# Rust there): carry a release binary built here (strip it), run this from the repository root.
#   1. CUDA is visible (torch there; indolm's training log names the device).
#   2. BERT-base bf16 pretraining throughput at the IndoBias settings (seq 512, batch 64):
#      tokens/s and MFU against the H200's dense bf16 peak, 60 steps.
#   3. The demo's tiny pretraining on CUDA with the bias evaluation at each checkpoint, then
#      BertExt and BertAbs on the sample summaries (the CUDA paths of the hooks and heads).
#   4. Pseudo-log-likelihoods on CUDA (bf16) against CPU (fp32) for the same model and text.
#   5. BertAbs batched decoding against one article at a time (articles/s, identical output),
#      and the time of one bias evaluation of a BERT-base model (the dense-curve cost).
#   6. NCCL: `dist-check` in a world-size-1 group under torchrun (init, all-reduce, broadcast,
#      barrier, bandwidth), then BERT-base steps data-parallel under torchrun with the step time
#      split into batch, forward, backward, all-reduce and optimizer (`train --step-times`),
#      and the same single-process for comparison.
# Every output goes to $OUT (default /tmp/indolm-gpu); the summary is printed at the end.
set -euo pipefail
OUT=${OUT:-/tmp/indolm-gpu}
BIN=${BIN:-target/release/indolm}
PYTHON=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}  # DEVICE=cpu THROUGHPUT_RECIPE=recipes/tiny/sample.toml: a dry run without a GPU
mkdir -p "$OUT"
TORCH_LIB=$($PYTHON -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
export LD_LIBRARY_PATH="$TORCH_LIB:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/gpu.txt" || true

step() { echo; echo "=== $*"; }

step "1. CUDA visible"
$PYTHON -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.version.cuda)' | tee -a "$OUT/gpu.txt"

step "2. BERT-base bf16 throughput (seq 512, batch 64)"
R=${THROUGHPUT_RECIPE:-recipes/gpu/indobert-base-throughput.toml}
$BIN tokenizer train --recipe $R --vocab-size 3000 --overwrite > "$OUT/tokenizer.log" 2>&1
$BIN --device $DEVICE train $R --overwrite --stop-after 60 2>&1 | tee "$OUT/throughput.log" | grep -E "tok/s|device|error" || true

step "3. tiny pretraining with bias hooks, BertExt and BertAbs on CUDA"
T=recipes/tiny/sample.toml
$BIN tokenizer train --recipe $T --vocab-size 3000 --overwrite > "$OUT/tiny-tokenizer.log" 2>&1
$BIN --device $DEVICE train $T --overwrite > "$OUT/tiny-train.log" 2>&1 && tail -3 "$OUT/tiny-train.log"
ls checkpoints/tiny-sample/step-600/bias.json
for t in ext abs; do
  $BIN --device $DEVICE finetune summarize recipes/finetune/liputan6-bert$t-tiny.toml > "$OUT/sum-$t.log" 2>&1 && tail -9 "$OUT/sum-$t.log"
done

step "4. PLL: CUDA bf16 against CPU fp32"
grep -h "" corpora/sample/indonesian.txt | head -40 | sed 's/\. .*/./' > "$OUT/sentences.txt"
$BIN --device $DEVICE eval pll --model checkpoints/tiny-sample/step-600 --text "$OUT/sentences.txt" --json > "$OUT/pll-cuda.json"
$BIN --device cpu eval pll --model checkpoints/tiny-sample/step-600 --text "$OUT/sentences.txt" --json > "$OUT/pll-cpu.json"
$PYTHON - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
a, b = ([json.loads(l) for l in open(f"{out}/pll-{d}.json") if l.strip()] for d in ("cuda", "cpu"))
diffs = [abs(p["pll"] - q["pll"]) / max(1e-9, abs(q["pll"])) for p, q in zip(a, b)]
print(f"PLL on {len(diffs)} sentences: CUDA bf16 vs CPU fp32, median relative difference {sorted(diffs)[len(diffs)//2]:.2e}, max {max(diffs):.2e}")
PY

step "5. batched BertAbs decoding (bf16) and the bias evaluation of a BERT-base model"
A=checkpoints/liputan6-bertabs-tiny/best
for b in 1 8; do
  $BIN --device $DEVICE summarize --model $A --liputan6 corpora/liputan6-sample/test --batch-size $b > "$OUT/decode-$b.txt" 2> "$OUT/decode-$b.log"
  echo "batch $b: $(tail -1 "$OUT/decode-$b.log")"
done
cmp -s "$OUT/decode-1.txt" "$OUT/decode-8.txt" && echo "batched and one-at-a-time summaries identical" || echo "batched and one-at-a-time summaries DIFFER"
# 40 fixture pairs a language; the real IndoBias has 544 (x13.6 the masked rows).
started=$(date +%s.%N)
$BIN --device $DEVICE eval bias --model checkpoints/gpu-indobert-base-throughput/step-60 --pairs tests/fixtures/indobias > "$OUT/bias-base.md" 2>&1
echo "BERT-base bias evaluation of the fixture pairs (4 x 40 pairs): $($PYTHON -c "print(round($(date +%s.%N) - $started, 2))") s" | tee -a "$OUT/bias-base.md"

step "6. NCCL (world size 1 under torchrun) and the step-time split"
TORCHRUN="$PYTHON -m torch.distributed.run --nproc-per-node 1 --no-python"
$TORCHRUN $BIN --device $DEVICE dist-check --megabytes 256 --timeout 120 2>&1 | tee "$OUT/nccl-check.log" | grep -E "rank|all-reduce|error" || true
$TORCHRUN $BIN --device $DEVICE train $R --overwrite --stop-after 30 --step-times --dist-timeout 300 > "$OUT/nccl-train.log" 2>&1 || true
grep -E "tok/s|step times|all-reduce took|error" "$OUT/nccl-train.log" | tail -4
$BIN --device $DEVICE train $R --overwrite --stop-after 30 --step-times > "$OUT/single-steps.log" 2>&1 || true
grep -E "step times|error" "$OUT/single-steps.log" | tail -2

step "summary"
grep -E "tok/s" "$OUT/throughput.log" | tail -3
