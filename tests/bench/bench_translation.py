"""`make bench-translation`: translation fine-tuning throughput against transformers on the same
machine, same architecture, same data and batch, medians of alternating rounds (`BENCH_ROUNDS`,
default 3; goal >= 1.5x): training pairs/s of `indolm finetune translation` on NusaX-MT
ind -> sun (the 500 training pairs, lowercased, batch 16, max_len 128, AdamW lr 1e-4 constant,
weight decay 0.01, clipping at 1.0, dropout 0.1) against transformers'
MBartForConditionalGeneration in a plain PyTorch loop with torch's AdamW (its default
implementation) and clip_grad_norm_, on IndoNLG's rows (`<sent></s><src>` -> labels
`<sent></s><tgt>`, the decoder inputs from shift_tokens_right). Both tokenize every pair once
before training and pad each batch inside the timed loop.

The mBART is random and mBART-shaped (d_model 256, 3 + 3 layers, 4 heads, feed-forward 1024,
scale_embedding), its BPE tokenizer trained on the training split (2,000 tokens). indolm's figure
is the rate over its optimizer steps as it reports it; the reference's is timed the same way.

Sizes from the environment (default): BENCH_ROUNDS (3), BENCH_PAIRS, the first pairs of each
split (all: 500 to train on), BENCH_EPOCHS (2), BENCH_THREADS (2). INDOLM_BIN names the binary
(target/release/indolm); tests/it/benches.rs runs this at a tiny size."""
import csv
import os
import random
import re
import statistics
import subprocess
import tempfile
import time

import torch
import transformers

transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

from indolm_reference import seq2seq  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("INDOLM_BIN", os.path.join(ROOT, "target", "release", "indolm"))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
PAIRS = int(os.environ["BENCH_PAIRS"]) if os.environ.get("BENCH_PAIRS") else None
EPOCHS = int(os.environ.get("BENCH_EPOCHS", "2"))
BATCH = 16
MAX_LEN = 128


def corpus(work):
    """NusaX-MT's carried splits (the validation split also as the test split), cut to
    BENCH_PAIRS rows each when set."""
    out = os.path.join(work, "nusax", "mt")
    os.makedirs(out)
    for split, source in (("train", "train"), ("valid", "valid"), ("test", "valid")):
        with open(os.path.join(ROOT, "tests", "data", "nusax", "mt", f"{source}.csv"), encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        if PAIRS is not None:
            rows = rows[:1 + PAIRS]
        with open(os.path.join(out, f"{split}.csv"), "w", encoding="utf-8", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)
    return os.path.dirname(out)


def make_init(work):
    """make-mt-model's tokenizer, with a larger random mBART in place of its tiny one."""
    init = os.path.join(work, "init")
    seq2seq.make_mt_model(init, os.path.join(ROOT, "tests", "data", "nusax", "mt", "train.csv"))
    torch.manual_seed(0)
    config = transformers.MBartConfig.from_pretrained(init)
    for key, value in dict(d_model=256, encoder_layers=3, decoder_layers=3, encoder_attention_heads=4,
                           decoder_attention_heads=4, encoder_ffn_dim=1024, decoder_ffn_dim=1024).items():
        setattr(config, key, value)
    transformers.MBartForConditionalGeneration(config).save_pretrained(init)
    return init


def ours(work, init, root):
    recipe = os.path.join(work, "translation.toml")
    with open(recipe, "w", encoding="utf-8") as f:
        f.write(f"""kind = "translation"
name = "bench-translation"
output_dir = "{work}/ck"
init = "{init}"
[data]
root = "{root}"
directions = ["ind-sun"]
max_len = {MAX_LEN}
[model.language_tokens]
ind = "[ind]"
sun = "[sun]"
[optimizer]
lr = 1e-4
schedule = "constant"
weight_decay = 0.01
grad_clip = 1.0
batch_size = {BATCH}
max_epochs = {EPOCHS}
[eval]
patience = 5
beam_size = 1
[checkpoint]
every = 100000
[logging]
tensorboard = "{work}/runs"
""")
    out = subprocess.run([BINARY, "--device", "cpu", "--threads", str(THREADS), "finetune", "translation", recipe,
                          "--overwrite"], check=True, capture_output=True, text=True).stdout
    return float(re.findall(r"\(([0-9.]+) pairs/s\)", out)[-1])


def reference(init, root):
    tok = transformers.AutoTokenizer.from_pretrained(init)
    model = transformers.MBartForConditionalGeneration.from_pretrained(init).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    with open(os.path.join(root, "mt", "train.csv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    src, tgt, eos = tok.convert_tokens_to_ids("[ind]"), tok.convert_tokens_to_ids("[sun]"), tok.eos_token_id

    def ids(text):
        return tok.encode(" ".join(text.splitlines()).lower(), add_special_tokens=False)[:MAX_LEN - 2]

    pairs = [(ids(r["indonesian"]) + [eos, src], ids(r["sundanese"]) + [eos, tgt]) for r in rows]  # once
    rng = random.Random(0)
    seconds, seen = 0.0, 0
    for _ in range(EPOCHS):
        order = list(range(len(pairs)))
        rng.shuffle(order)
        for i in range(0, len(order), BATCH):
            chunk = [pairs[j] for j in order[i:i + BATCH]]
            start = time.perf_counter()
            width_s, width_t = max(len(s) for s, _ in chunk), max(len(t) for _, t in chunk)
            input_ids = torch.tensor([s + [tok.pad_token_id] * (width_s - len(s)) for s, _ in chunk])
            mask = torch.tensor([[1] * len(s) + [0] * (width_s - len(s)) for s, _ in chunk])
            labels = torch.tensor([t + [-100] * (width_t - len(t)) for _, t in chunk])
            loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            seconds += time.perf_counter() - start
            seen += len(chunk)
    return seen / seconds


def main():
    torch.set_num_threads(THREADS)
    work = tempfile.mkdtemp(prefix="bench-translation-")
    root = corpus(work)
    init = make_init(work)
    rounds = {"ours": [], "ref": []}
    # Alternate the systems and take medians: this machine's speed drifts between runs.
    for r in range(ROUNDS):
        rounds["ours"].append(ours(work, init, root))
        rounds["ref"].append(reference(init, root))
        print(f"round {r + 1}: {rounds['ours'][-1] / rounds['ref'][-1]:.2f}x", flush=True)
    m = {k: statistics.median(v) for k, v in rounds.items()}
    print(f"medians of {ROUNDS} alternating rounds, {THREADS} CPU threads")
    print(f"translation (ind -> sun, {PAIRS or 500} pairs x {EPOCHS} epochs, batch {BATCH}): indolm {m['ours']:.1f} vs "
          f"transformers {m['ref']:.1f} pairs/s, ratio {m['ours'] / m['ref']:.2f} (goal >= 1.5)")


if __name__ == "__main__":
    main()
