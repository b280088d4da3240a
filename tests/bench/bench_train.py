"""`make bench-train`: training tokens/s of `indolm train` and of HF transformers'
BertForMaskedLM in a plain PyTorch loop (AdamW, 15% masking, logits at every position, as HF
computes them), same config (L4 H256 A4 FF1024, vocab 31,923), seq 128, batch 32, same threads,
in one run. Prints both, the ratio (goal >= 3.0), indolm's useful FLOP/s and the machine's fp32
GEMM rate (goal >= 40%).

Sizes from the environment (default): BENCH_ROUNDS (2), BENCH_STEPS (30), BENCH_SEQ (128),
BENCH_BATCH (32), BENCH_GEMM, the side of the square matrices timed for the GEMM rate (2048),
BENCH_THREADS (2). INDOLM_BIN names the binary (target/release/indolm); tests/it/benches.rs
runs this at a tiny size."""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("INDOLM_BIN", os.path.join(ROOT, "target", "release", "indolm"))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))
STEPS = int(os.environ.get("BENCH_STEPS", "30"))
SEQ = int(os.environ.get("BENCH_SEQ", "128"))
BATCH = int(os.environ.get("BENCH_BATCH", "32"))
GEMM = int(os.environ.get("BENCH_GEMM", "2048"))
L, H, A, FF, V = 4, 256, 4, 1024, 31923


def gemm_gflops():
    import torch

    a, b = torch.randn(GEMM, GEMM), torch.randn(GEMM, GEMM)
    for _ in range(3):
        a @ b
    t = time.perf_counter()
    for _ in range(10):
        a @ b
    return 2 * GEMM**3 * 10 / (time.perf_counter() - t) / 1e9


def useful_flops_per_token():
    """Forward + backward (x3) of the encoder's matrix products and attention, plus the MLM head
    at the 15% predicted positions only (the same formula as BertConfig::training_flops_per_token)."""
    per_layer = 2 * (4 * H * H + 2 * H * FF) + 2 * 2 * SEQ * H
    head = 0.15 * (2 * H * H + 2 * H * V)
    return 3 * (L * per_layer + head)


def write_bench_recipe(work):
    """The benchmark's recipe and its tokenizer under `work`; returns the recipe's path."""
    from transformers import BertConfig

    config = BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=A, intermediate_size=FF, max_position_embeddings=512)
    config.to_json_file(os.path.join(work, "config.json"))
    data = os.path.join(ROOT, "tests", "data")
    recipe = f"""kind = "pretrain"
name = "bench"
output_dir = "{work}/ck"
precision = "fp32"
[model]
config = "{work}/config.json"
[tokenizer]
path = "{work}/tok"
[data]
corpus = "bench"
corpora_dir = "{work}/corpora"
seq_len = {SEQ}
heldout_fraction = 0.0
[[data.sources]]
name = "ud"
lang = "id"
paths = ["{data}/ud-indonesian/*.conllu", "{data}/nusax/mt/train.csv"]
text_field = "indonesian"
[optimizer]
lr = 1e-4
batch_size = {BATCH}
warmup_steps = 10
max_steps = {STEPS}
[checkpoint]
every = {STEPS * 10}
[logging]
tensorboard = "{work}/runs"
every = 5
"""
    path = os.path.join(work, "bench.toml")
    with open(path, "w") as f:
        f.write(recipe)
    subprocess.run([BINARY, "tokenizer", "train", "--recipe", path, "--vocab-size", "16000"], check=True, capture_output=True)
    return path


def indolm_tokens_per_s(work):
    path = write_bench_recipe(work)
    binary = BINARY
    out = subprocess.run([binary, "--device", "cpu", "--threads", str(THREADS), "train", path, "--stop-after", str(STEPS)], check=True, capture_output=True, text=True).stdout
    rates = [float(m) for m in re.findall(r"([0-9.]+) tok/s", out)]
    return statistics.median(rates[1:])  # the first window includes start-up


def hf_tokens_per_s():
    import torch
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=A, intermediate_size=FF)
    model = BertForMaskedLM(config).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    times = []
    for step in range(min(STEPS, 15)):
        ids = torch.randint(5, V, (BATCH, SEQ))
        labels = torch.full_like(ids, -100)
        pick = torch.rand(BATCH, SEQ) < 0.15
        labels[pick] = ids[pick]
        ids = ids.masked_fill(pick & (torch.rand(BATCH, SEQ) < 0.8), 4)
        t = time.perf_counter()
        opt.zero_grad()
        model(input_ids=ids, labels=labels).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t)
    return BATCH * SEQ / statistics.median(times[2:])


ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))


def main():
    import torch

    torch.set_num_threads(THREADS)
    # Alternate the two systems and take medians: this machine's speed drifts between runs.
    peaks, ours_all, theirs_all = [], [], []
    for r in range(ROUNDS):
        peaks.append(gemm_gflops())
        ours_all.append(indolm_tokens_per_s(tempfile.mkdtemp(prefix="bench-train-")))
        theirs_all.append(hf_tokens_per_s())
        print(f"round {r + 1}: indolm {ours_all[-1]:.0f}, HF {theirs_all[-1]:.0f} tokens/s, ratio {ours_all[-1] / theirs_all[-1]:.2f}", flush=True)
    peak, ours, theirs = statistics.median(peaks), statistics.median(ours_all), statistics.median(theirs_all)
    useful = ours * useful_flops_per_token() / 1e9
    print(f"config L{L} H{H} A{A} FF{FF} vocab {V}, seq {SEQ}, batch {BATCH}, {THREADS} CPU threads, medians of {ROUNDS} alternating rounds")
    print(f"indolm train:                       {ours:8.0f} tokens/s")
    print(f"HF BertForMaskedLM (PyTorch loop):  {theirs:8.0f} tokens/s")
    print(f"ratio: {ours / theirs:.2f}x (goal >= 3.0)")
    print(f"indolm useful FLOP/s: {useful:.1f} GFLOP/s = {100 * useful / peak:.0f}% of this machine's fp32 GEMM rate {peak:.1f} GFLOP/s (goal >= 40%)")


if __name__ == "__main__":
    main()
