"""`make bench-finetune`: fine-tuning throughput against transformers on the same machine, same
architecture, same data and batch, medians of alternating rounds (`BENCH_ROUNDS`, default 3;
goal >= 1.5x):
  - sentiment: training examples/s of `indolm finetune sentiment` on NusaX Indonesian (500
    texts, batch 32, max_len 128, 2 epochs, AdamW lr 1e-4 constant, weight decay 0.01, clipping
    at 1.0) against transformers' BertForSequenceClassification in a plain PyTorch loop with
    torch's AdamW (its default implementation) and clip_grad_norm_. Both tokenize every text
    once before training (indolm when it builds the task, the reference as `datasets.map`
    would) and pad each batch inside the timed loop;
  - BertExt: training articles/s of `indolm finetune summarize` (task ext, batch 8) on 64
    articles built from the sample corpus against transformers' BertModel with PreSumm's
    two-layer inter-sentence transformer and sentence scorer written in torch below (the same
    sizes: 8 heads, feed-forward 2048, sinusoidal positions, pre-LayerNorm), BCE on the Oracle
    labels. Both sides tokenize every article once before training (indolm caches the token ids
    beside the data) and pad each batch inside the timed loop.
The BERT is random, L4 H256 A4 FF1024 with IndoBERT's vocabulary size (31,923). indolm's figure is
the rate over its optimizer steps as it reports it; the reference's is timed the same way.

Sizes from the environment (default): BENCH_ROUNDS (3), BENCH_TEXTS, the first texts of each
NusaX split (all: 500 to train on), BENCH_EPOCHS of sentiment (2), BENCH_ARTICLES for BertExt
(64), BENCH_STEPS of BertExt (24), BENCH_THREADS (2). INDOLM_BIN names the binary
(target/release/indolm); tests/it/benches.rs runs this at a tiny size."""
import math
import os
import random
import re
import subprocess
import tempfile
import time

import torch
from torch import nn

import liputan6_fake as fake
import transformers

# The load reports (the new classifier's weights are missing, as they should be) and progress
# bars would bury the figures.
transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("INDOLM_BIN", os.path.join(ROOT, "target", "release", "indolm"))
THREADS = int(os.environ.get("BENCH_THREADS", "2"))
TEXTS = int(os.environ["BENCH_TEXTS"]) if os.environ.get("BENCH_TEXTS") else None
EPOCHS = int(os.environ.get("BENCH_EPOCHS", "2"))
ARTICLES = int(os.environ.get("BENCH_ARTICLES", "64"))
STEPS = int(os.environ.get("BENCH_STEPS", "24"))


def make_init(work):
    from indolm_reference.data import train_vocab
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    init = os.path.join(work, "init")
    os.makedirs(init)
    train_vocab(init, 8000)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=31923, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
    BertForMaskedLM(config).save_pretrained(init)
    AutoTokenizer.from_pretrained(init).save_pretrained(init)
    return init


def indolm(args):
    out = subprocess.run([BINARY, "--device", "cpu", "--threads", str(THREADS)] + args, check=True, capture_output=True, text=True).stdout
    return float(re.findall(r"\(([0-9.]+) (?:examples|articles)/s\)", out)[-1])


# ---- sentiment ----------------------------------------------------------------------------

def nusax_root(work):
    """NusaX's sentiment folder; with BENCH_TEXTS, a copy of its Indonesian splits cut to their
    first BENCH_TEXTS texts."""
    import csv
    root = os.path.join(ROOT, "tests", "data", "nusax", "sentiment")
    if TEXTS is None:
        return root
    cut = os.path.join(work, "nusax")
    os.makedirs(os.path.join(cut, "indonesian"))
    for split in ("train", "valid", "test"):
        with open(os.path.join(root, "indonesian", f"{split}.csv"), encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        with open(os.path.join(cut, "indonesian", f"{split}.csv"), "w", encoding="utf-8", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(rows[:1 + TEXTS])
    return cut


def nusax_indonesian(root):
    import csv
    with open(os.path.join(root, "indonesian", "train.csv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    labels = {"negative": 0, "neutral": 1, "positive": 2}
    return [r["text"] for r in rows], [labels[r["label"]] for r in rows]


def sentiment_indolm(work, init, root):
    recipe = os.path.join(work, "sentiment.toml")
    with open(recipe, "w", encoding="utf-8") as f:
        f.write(f"""kind = "sentiment"
name = "bench-sentiment"
output_dir = "{work}/ck"
init = "{init}"
[data]
root = "{root}"
languages = ["indonesian"]
setting = "monolingual"
max_len = 128
[optimizer]
lr = 1e-4
schedule = "constant"
weight_decay = 0.01
grad_clip = 1.0
batch_size = 32
max_epochs = {EPOCHS}
[eval]
patience = 5
[checkpoint]
every = 1000
[logging]
tensorboard = "{work}/runs"
""")
    return indolm(["finetune", "sentiment", recipe, "--overwrite"])


def sentiment_reference(init, texts, labels):
    from transformers import AutoTokenizer, BertForSequenceClassification

    tok = AutoTokenizer.from_pretrained(init)
    model = BertForSequenceClassification.from_pretrained(init, num_labels=3).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    rng = random.Random(0)
    encoded = [tok(t, truncation=True, max_length=128) for t in texts]  # once, before training
    seconds, seen = 0.0, 0
    for _ in range(EPOCHS):
        order = list(range(len(texts)))
        rng.shuffle(order)
        for i in range(0, len(order), 32):
            chunk = order[i:i + 32]
            start = time.perf_counter()
            enc = tok.pad([encoded[j] for j in chunk], return_tensors="pt")
            loss = model(**enc, labels=torch.tensor([labels[j] for j in chunk])).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            seconds += time.perf_counter() - start
            seen += len(chunk)
    return seen / seconds


# ---- BertExt ------------------------------------------------------------------------------

def ext_indolm(work, init, articles):
    data = os.path.join(work, "liputan6")
    for split, items in [("train", articles), ("dev", articles[:2]), ("test", articles[:2])]:
        fake.write_split(data, split, items, lambda _, a: [a[0], a[-1]])
    recipe = os.path.join(work, "ext.toml")
    with open(recipe, "w", encoding="utf-8") as f:
        f.write(f"""kind = "summarize"
name = "bench-ext"
output_dir = "{work}/ck"
task = "ext"
init = "{init}"
[data]
root = "{data}"
[optimizer]
lr = 0.002
schedule = "noam"
eps = 1e-9
weight_decay = 0.0
grad_clip = 0.0
warmup_steps = 10
max_steps = {STEPS}
batch_size = 8
[eval]
every = {STEPS}
articles = 2
[checkpoint]
every = 1000
[logging]
tensorboard = "{work}/runs"
""")
    return indolm(["finetune", "summarize", recipe, "--overwrite"])


class FeedForward(nn.Module):
    def __init__(self, d, ff, p):
        super().__init__()
        self.norm, self.w1, self.w2, self.drop = nn.LayerNorm(d, eps=1e-6), nn.Linear(d, ff), nn.Linear(ff, d), nn.Dropout(p)

    def forward(self, x):
        return self.drop(self.w2(self.drop(nn.functional.gelu(self.w1(self.norm(x)), approximate="tanh")))) + x


class InterLayer(nn.Module):
    def __init__(self, d, heads, ff, p):
        super().__init__()
        self.norm, self.attn = nn.LayerNorm(d, eps=1e-6), nn.MultiheadAttention(d, heads, dropout=p, batch_first=True)
        self.ff, self.drop = FeedForward(d, ff, p), nn.Dropout(p)

    def forward(self, i, x, mask):
        h = x if i == 0 else self.norm(x)
        ctx, _ = self.attn(h, h, h, key_padding_mask=~mask, need_weights=False)
        return self.ff(self.drop(ctx) + x)


class ExtReference(nn.Module):
    """transformers' BertModel, then PreSumm's ExtTransformerEncoder and scorer."""

    def __init__(self, init):
        super().__init__()
        from transformers import BertModel

        self.bert = BertModel.from_pretrained(init, add_pooling_layer=False)
        d = self.bert.config.hidden_size
        self.layers = nn.ModuleList([InterLayer(d, 8, 2048, 0.1) for _ in range(2)])
        self.norm, self.scorer, self.d = nn.LayerNorm(d, eps=1e-6), nn.Linear(d, 1), d

    def positions(self, n):
        pos = torch.arange(n).unsqueeze(1).float()
        div = torch.exp(torch.arange(0, self.d, 2).float() * -(math.log(10000.0) / self.d))
        return torch.stack([torch.sin(pos * div), torch.cos(pos * div)], 2).view(n, -1)[:, :self.d]

    def forward(self, ids, segs, att, cls, smask):
        top = self.bert(input_ids=ids, token_type_ids=segs, attention_mask=att).last_hidden_state
        x = top[torch.arange(top.size(0)).unsqueeze(1), cls] * smask.unsqueeze(-1).float()
        x = x + self.positions(x.size(1)).unsqueeze(0)
        for i, layer in enumerate(self.layers):
            x = layer(i, x, smask)
        return torch.sigmoid(self.scorer(self.norm(x)).squeeze(-1)) * smask.float()


def encode_one(tok, article):
    """PreSumm's encoder input of one article: ids, segment ids, [CLS] positions."""
    ids, segs, pos = [], [], []
    for i, s in enumerate(article):
        pieces = tok.convert_tokens_to_ids(tok.tokenize(" ".join(s)))
        room = 512 - len(ids) - 2
        if room <= 0:
            break
        pos.append(len(ids))
        ids += [tok.cls_token_id] + pieces[:room] + [tok.sep_token_id]
        segs += [i % 2] * (len(pieces[:room]) + 2)
        if len(pieces) > room:
            break
    return ids, segs, pos


def collate(encoded):
    w, s = max(len(e[0]) for e in encoded), max(len(e[2]) for e in encoded)
    ids = torch.tensor([e[0] + [0] * (w - len(e[0])) for e in encoded])
    segs = torch.tensor([e[1] + [0] * (w - len(e[1])) for e in encoded])
    att = (ids != 0).long()
    cls_t = torch.tensor([e[2] + [0] * (s - len(e[2])) for e in encoded])
    smask = torch.tensor([[k < len(e[2]) for k in range(s)] for e in encoded])
    return ids, segs, att, cls_t, smask


def ext_reference(init, articles):
    from indolm_reference.liputan6_oracle import label
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(init)
    model = ExtReference(init).train()
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.999))
    oracles = [label(a, [a[0], a[-1]]) for a in articles]
    encoded = [encode_one(tok, a) for a in articles]
    seconds, seen = 0.0, 0
    for step in range(STEPS):
        batch = [(step * 8 + k) % len(articles) for k in range(8)]
        start = time.perf_counter()
        ids, segs, att, cls, smask = collate([encoded[i] for i in batch])
        gold = torch.zeros(smask.shape)
        for r, i in enumerate(batch):
            for j in oracles[i]:
                if j < gold.size(1):
                    gold[r, j] = 1.0
        scores = model(ids, segs, att, cls, smask)
        loss = (nn.functional.binary_cross_entropy(scores, gold, reduction="none") * smask.float()).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        seconds += time.perf_counter() - start
        seen += len(batch)
    return seen / seconds


ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


def main():
    import statistics
    torch.set_num_threads(THREADS)
    work = tempfile.mkdtemp(prefix="bench-finetune-")
    init = make_init(work)
    root = nusax_root(work)
    texts, labels = nusax_indonesian(root)
    articles = fake.articles(fake.sample_sentences(), ARTICLES, 8, 20, random.Random(3407))
    rounds = {"ours_s": [], "ref_s": [], "ours_e": [], "ref_e": []}
    # Alternate the systems and take medians: this machine's speed drifts between runs.
    for r in range(ROUNDS):
        rounds["ours_s"].append(sentiment_indolm(work, init, root))
        rounds["ref_s"].append(sentiment_reference(init, texts, labels))
        rounds["ours_e"].append(ext_indolm(work, init, articles))
        rounds["ref_e"].append(ext_reference(init, articles))
        print(f"round {r + 1}: sentiment {rounds['ours_s'][-1] / rounds['ref_s'][-1]:.2f}x, BertExt {rounds['ours_e'][-1] / rounds['ref_e'][-1]:.2f}x", flush=True)
    m = {k: statistics.median(v) for k, v in rounds.items()}
    print(f"medians of {ROUNDS} alternating rounds, {THREADS} CPU threads")
    print(f"sentiment ({len(texts)} NusaX texts x {EPOCHS} epochs, batch 32): indolm {m['ours_s']:.1f} vs transformers {m['ref_s']:.1f} examples/s, {m['ours_s'] / m['ref_s']:.2f}x (goal >= 1.5x)")
    print(f"BertExt ({ARTICLES} articles of 8-20 sentences, {STEPS} steps of 8): indolm {m['ours_e']:.2f} vs transformers + torch {m['ref_e']:.2f} articles/s, {m['ours_e'] / m['ref_e']:.2f}x (goal >= 1.5x)")


if __name__ == "__main__":
    main()
