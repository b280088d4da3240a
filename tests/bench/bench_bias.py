"""`make bench-bias`: masked positions scored per second by `indolm eval pll` (batched, logits
only at masked rows) and by the per-token reference loop CrowS-Pairs' script uses (one masked
copy per forward pass, batch 1, transformers' BertForMaskedLM), on the same model and the same
real sentences, in one run. Prints both figures and the ratio (goal >= 10x on CPU).

Sizes from the environment (default): BENCH_SENTENCES (120), BENCH_THREADS (2). INDOLM_BIN names
the binary (target/release/indolm); tests/it/benches.rs runs this at a tiny size."""
import glob
import json
import os
import subprocess
import tempfile
import time

import torch
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_DATA = os.path.join(ROOT, "tests", "data")
BINARY = os.environ.get("INDOLM_BIN", os.path.join(ROOT, "target", "release", "indolm"))
N_SENTENCES = int(os.environ.get("BENCH_SENTENCES", "120"))
THREADS = os.environ.get("BENCH_THREADS", "2")


def main():
    torch.manual_seed(0)
    torch.set_num_threads(int(THREADS))
    work = tempfile.mkdtemp(prefix="bench-bias-")
    from indolm_reference.data import train_vocab

    train_vocab(work, 8000)
    # IndoBERT's vocabulary size (the tokenizer uses the first 8,000 ids): the reference loop
    # projects every position onto all of it, as it would with the real model.
    config = BertConfig(vocab_size=31923, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
    model = BertForMaskedLM(config).eval()
    model.save_pretrained(work)
    tok = AutoTokenizer.from_pretrained(work)
    tok.save_pretrained(work)
    sentences = []
    for path in sorted(glob.glob(os.path.join(TEST_DATA, "ud-indonesian", "*.conllu"))):
        with open(path, encoding="utf-8") as f:
            sentences += [l[9:].strip() for l in f if l.startswith("# text = ")]
    sentences = [s for s in sentences if len(tok(s)["input_ids"]) <= 64][:N_SENTENCES]
    with open(os.path.join(work, "sentences.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(sentences) + "\n")
    positions = sum(len(tok(s)["input_ids"]) - 2 for s in sentences)

    out = subprocess.run([BINARY, "--device", "cpu", "--threads", THREADS,
                          "eval", "pll", "--model", work, "--text", os.path.join(work, "sentences.txt"), "--json"],
                         check=True, capture_output=True, text=True)
    # Scoring time as indolm reports it (model loading excluded, as for the reference).
    ours = float(out.stderr.strip().splitlines()[-1].split("(")[1].split()[0])
    ours_pll = [json.loads(l)["pll"] for l in out.stdout.splitlines()]

    start = time.perf_counter()
    ref_pll = []
    with torch.no_grad():
        for s in sentences:
            ids = tok(s)["input_ids"]
            total = 0.0
            for p in range(1, len(ids) - 1):
                masked = list(ids)
                masked[p] = tok.mask_token_id
                logits = model(torch.tensor([masked])).logits[0, p]
                total += torch.log_softmax(logits, -1)[ids[p]].item()
            ref_pll.append(total)
    ref = positions / (time.perf_counter() - start)
    worst = max(abs(a - b) / abs(b) for a, b in zip(ours_pll, ref_pll))
    print(f"model L4 H256 A4 FF1024 vocab 31923, {len(sentences)} UD sentences, {positions} masked positions, CPU threads {torch.get_num_threads()}")
    print(f"indolm eval pll (batched, logits at masked rows only): {ours:,.0f} masked positions/s")
    print(f"reference per-token loop (transformers, batch 1): {ref:,.0f} masked positions/s")
    print(f"ratio: {ours / ref:.1f}x   (max relative PLL difference {worst:.1e})")


if __name__ == "__main__":
    main()
