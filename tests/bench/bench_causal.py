"""`make bench-causal`: tokens scored per second by `indolm eval pll` on a causal LM (batched
under a token budget, logits in chunks) and by transformers' LlamaForCausalLM batched the way
lm-evaluation-harness batches log-likelihoods (sorted by length, right-padded batches of 32,
its default attention), on the same random Llama-shaped model and the same real sentences, in
one run: interleaved rounds (BENCH_ROUNDS), medians. Prints both figures and the ratio (goal >= 1.5x).

Sizes from the environment (default): BENCH_SENTENCES (200), BENCH_ROUNDS (3), BENCH_THREADS (2).
INDOLM_BIN names the binary (target/release/indolm); tests/it/benches.rs runs this at a tiny size."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from transformers import AutoTokenizer

from bench_llama import save_llama, sentences

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("INDOLM_BIN", os.path.join(ROOT, "target", "release", "indolm"))
N_SENTENCES = int(os.environ.get("BENCH_SENTENCES", "200"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
THREADS = os.environ.get("BENCH_THREADS", "2")
BATCH = 32


def main():
    torch.manual_seed(0)
    torch.set_num_threads(int(THREADS))
    work = tempfile.mkdtemp(prefix="bench-causal-")
    texts = sentences()
    model = save_llama(work, texts, 256)
    hf_tok = AutoTokenizer.from_pretrained(work)
    texts = [t for t in texts if len(hf_tok(t, add_special_tokens=False)["input_ids"]) <= 96][:N_SENTENCES]
    path = os.path.join(work, "sentences.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(texts) + "\n")
    encoded = [[hf_tok.bos_token_id] + hf_tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    tokens = sum(len(e) - 1 for e in encoded)

    def ours():
        out = subprocess.run([BINARY, "--device", "cpu", "--threads", THREADS,
                              "eval", "pll", "--model", work, "--text", path, "--json"],
                             check=True, capture_output=True, text=True)
        line = [l for l in out.stderr.splitlines() if l.startswith("scored ")][-1]
        seconds = float(line.split(" in ")[1].split()[0])
        return tokens / seconds, [json.loads(l)["log_likelihood"] for l in out.stdout.splitlines()]

    def reference():
        order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i]))
        sums = [0.0] * len(encoded)
        start = time.perf_counter()
        with torch.no_grad():
            for b in range(0, len(order), BATCH):
                rows = [encoded[i] for i in order[b:b + BATCH]]
                width = max(len(r) for r in rows)
                ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
                mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
                logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), -1)
                for k, r in enumerate(rows):
                    target = torch.tensor(r[1:])
                    sums[order[b + k]] = float(logp[k, :len(r) - 1].gather(-1, target[:, None]).sum())
        return tokens / (time.perf_counter() - start), sums

    rounds = []
    for _ in range(ROUNDS):
        (a, ours_sums), (b, ref_sums) = ours(), reference()
        rounds.append((a, b))
    worst = max(abs(x - y) / abs(y) for x, y in zip(ours_sums, ref_sums))
    a, b = statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds)
    print(f"Llama L4 H512 A8 (KV 4) FF1376 vocab 32000, {len(texts)} UD sentences, {tokens} tokens scored, CPU threads {THREADS}")
    print(f"indolm eval pll (causal, token budget): {a:,.0f} tokens/s (rounds: {', '.join(f'{r[0]:,.0f}' for r in rounds)})")
    print(f"transformers, length-sorted batches of {BATCH}: {b:,.0f} tokens/s (rounds: {', '.join(f'{r[1]:,.0f}' for r in rounds)})")
    print(f"ratio: {a / b:.2f}x   (max relative sum difference {worst:.1e})")


if __name__ == "__main__":
    main()
