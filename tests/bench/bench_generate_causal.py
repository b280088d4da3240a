"""`make bench-generate-causal`: new tokens per second of greedy batched generation by
`indolm generate` (prompts batched under the CPU token budget, left-padded, one forward into a
key/value cache then a token at a time) and by transformers' `generate` (the same prompts sorted by
length, left-padded batches of BENCH_BATCH, greedy, its default cache and attention), on the same
random Llama-shaped model and the same real sentences, in one run: interleaved rounds
(BENCH_ROUNDS), medians. Prints both figures, the ratio (goal >= 1.5x) and how many completions
are the same token for token both ways.

Sizes from the environment (default): BENCH_PROMPTS (64), BENCH_NEW_TOKENS (64), BENCH_BATCH (16),
BENCH_ROUNDS (3), BENCH_THREADS (2). INDOLM_BIN names the binary (target/release/indolm);
tests/it/benches.rs runs this at a tiny size."""
import json
import os
import statistics
import subprocess
import tempfile
import time

import torch
from transformers import AutoTokenizer, GenerationConfig

from bench_llama import save_llama, sentences

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("INDOLM_BIN", os.path.join(ROOT, "target", "release", "indolm"))
N_PROMPTS = int(os.environ.get("BENCH_PROMPTS", "64"))
NEW_TOKENS = int(os.environ.get("BENCH_NEW_TOKENS", "64"))
BATCH = int(os.environ.get("BENCH_BATCH", "16"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
THREADS = os.environ.get("BENCH_THREADS", "2")


def main():
    torch.manual_seed(0)
    torch.set_num_threads(int(THREADS))
    work = tempfile.mkdtemp(prefix="bench-generate-causal-")
    texts = sentences()
    model = save_llama(work, texts, 512)
    GenerationConfig(bos_token_id=2, eos_token_id=3, pad_token_id=0, do_sample=False).save_pretrained(work)
    hf_tok = AutoTokenizer.from_pretrained(work)
    hf_tok.padding_side = "left"
    # Prompts of different lengths: the first 4..40 tokens' worth of words of each sentence.
    prompts = []
    for i, t in enumerate(texts):
        words = t.split()
        if len(words) < 4:
            continue
        prompts.append(" ".join(words[:4 + (i * 7) % 24]))
        if len(prompts) == N_PROMPTS:
            break
    path = os.path.join(work, "prompts.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for i, p in enumerate(prompts):
            f.write(json.dumps({"id": i, "prompt": p}, ensure_ascii=False) + "\n")
    encoded = [hf_tok(p)["input_ids"] for p in prompts]
    prompt_tokens = sum(len(e) for e in encoded)

    def ours():
        out = os.path.join(work, "ours.jsonl")
        run = subprocess.run([BINARY, "--device", "cpu", "--threads", THREADS, "generate", "--model", work,
                              "--prompts", path, "--out", out, "--max-new-tokens", str(NEW_TOKENS),
                              "--temperature", "0"],
                             check=True, capture_output=True, text=True)
        seconds = float(run.stdout.split(" generated in ")[1].split()[0])
        with open(out, encoding="utf-8") as f:
            records = [json.loads(l) for l in f]
        return sum(r["tokens"] for r in records) / seconds, [r["completion"] for r in records]

    def reference():
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        texts_out = [None] * len(encoded)
        new = 0
        start = time.perf_counter()
        with torch.no_grad():
            for b in range(0, len(order), BATCH):
                rows = [prompts[i] for i in order[b:b + BATCH]]
                batch = hf_tok(rows, return_tensors="pt", padding=True)
                out = model.generate(**batch, max_new_tokens=NEW_TOKENS, do_sample=False)
                width = batch["input_ids"].shape[1]
                for k, i in enumerate(order[b:b + BATCH]):
                    ids = out[k, width:].tolist()
                    if 3 in ids:
                        ids = ids[:ids.index(3) + 1]
                    new += len(ids)
                    texts_out[i] = hf_tok.decode(ids, skip_special_tokens=True)
        return new / (time.perf_counter() - start), texts_out

    rounds = []
    for _ in range(ROUNDS):
        (a, ours_texts), (b, ref_texts) = ours(), reference()
        rounds.append((a, b))
    same = sum(x == y for x, y in zip(ours_texts, ref_texts))
    a, b = statistics.median(r[0] for r in rounds), statistics.median(r[1] for r in rounds)
    print(f"Llama L4 H512 A8 (KV 4) FF1376 vocab 32000, {len(prompts)} prompts of UD sentences ({prompt_tokens} tokens), "
          f"greedy, {NEW_TOKENS} new tokens at most, CPU threads {THREADS}")
    print(f"indolm generate (token budget, KV cache): {a:,.0f} new tokens/s "
          f"(rounds: {', '.join(f'{r[0]:,.0f}' for r in rounds)})")
    print(f"transformers generate, length-sorted left-padded batches of {BATCH}: {b:,.0f} new tokens/s "
          f"(rounds: {', '.join(f'{r[1]:,.0f}' for r in rounds)})")
    print(f"ratio: {a / b:.2f}x   ({same}/{len(prompts)} completions the same both ways)")


if __name__ == "__main__":
    main()
