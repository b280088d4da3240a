"""`make bench-liputan6-data`: Liputan6 training data at its real size. Generates a folder in the
released layout with as many articles as the canonical training split (193,883; one JSON file
each, 8-30 sentences drawn from the sample corpus, a two-sentence summary; not committed, under
/tmp), then measures in one run:
  - indolm: reading every file and building its Oracle labels on all cores, then caching the
    split beside the data, and tokenizing every article and summary for a model (an uncased
    WordPiece of 8,000 pieces trained on UD Indonesian, positions 512) on all cores, then
    caching the token ids (`indolm corpus liputan6 --model`, what `finetune summarize` does on
    its first run); and reading both again from their caches (every later run);
  - the reference: the release's way, `json.load` of each file and the Oracle script's greedy
    search (tests/reference/indolm_reference/liputan6_oracle.py) in Python, then PreSumm's
    tokenization of each sentence with transformers' (fast) BertTokenizer, on the first
    REF_ARTICLES files (it is slow), as articles/s.
Prints articles/s of each and the ratios.

Sizes from the environment (default): BENCH_ARTICLES generated (193883), REF_ARTICLES the
reference reads (5000). INDOLM_BIN names the binary (target/release/indolm); tests/it/benches.rs
runs this at a tiny size."""
import json
import os
import random
import re
import subprocess
import tempfile
import time

import liputan6_fake as fake

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("INDOLM_BIN", os.path.join(ROOT, "target", "release", "indolm"))
ARTICLES = int(os.environ.get("BENCH_ARTICLES", "193883"))
REF_ARTICLES = int(os.environ.get("REF_ARTICLES", "5000"))


def generate(root):
    rng = random.Random(3407)
    items = fake.articles(fake.sample_sentences(split_punct=True), ARTICLES, 8, 30, rng)
    return fake.write_split(root, "train", items, lambda _, a: [a[0], a[rng.randrange(1, len(a))]])


def make_model(work):
    """A model folder with what tokenizing needs: tokenizer files and config.json."""
    from indolm_reference.data import train_vocab
    from transformers import AutoTokenizer, BertConfig

    model = os.path.join(work, "model")
    os.makedirs(model)
    train_vocab(model, 8000)
    BertConfig(vocab_size=8000, max_position_embeddings=512).save_pretrained(model)
    AutoTokenizer.from_pretrained(model).save_pretrained(model)
    return model


def indolm(root, model):
    out = subprocess.run([BINARY, "corpus", "liputan6", "--data", root, "--model", model], check=True, capture_output=True, text=True).stdout
    rates = [float(r) for r in re.findall(r"\(([0-9.]+) articles/s\)", out)]
    mapped = re.search(r"mapped from the cache in ([0-9.]+)s", out)
    return rates[0], rates[1] if len(rates) > 1 else float(mapped.group(1)), out.strip()


def reference(split, model):
    from indolm_reference.liputan6_oracle import label
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    files = sorted(os.listdir(split))[:REF_ARTICLES]
    items, start = [], time.perf_counter()
    for name in files:
        with open(os.path.join(split, name), encoding="utf-8") as f:
            item = json.load(f)
        label(item["clean_article"], item["clean_summary"])
        items.append(item)
    read = len(files) / (time.perf_counter() - start)
    start = time.perf_counter()
    for item in items:
        for s in item["clean_article"] + item["clean_summary"]:
            tok.convert_tokens_to_ids(tok.tokenize(" ".join(s)))
    return read, len(files) / (time.perf_counter() - start)


def main():
    work = tempfile.mkdtemp(prefix="bench-liputan6-")
    root = os.path.join(work, "data")
    started = time.perf_counter()
    split = generate(root)
    print(f"generated {ARTICLES} articles in {time.perf_counter() - started:.0f}s under {root}")
    model = make_model(work)
    cold, cold_tok, cold_line = indolm(root, model)
    warm, warm_tok, warm_line = indolm(root, model)
    print(cold_line)
    print(warm_line)
    ref, ref_tok = reference(split, model)
    both = lambda a, b: 1 / (1 / a + 1 / b)
    print(f"reading + Oracle labels: indolm first run (on {os.cpu_count()} cores, then cached) {cold:.0f}, later runs (cache) {warm:.0f}; reference (json.load + the Oracle script, 1 core, {REF_ARTICLES} articles) {ref:.0f} articles/s; ratios {cold / ref:.1f}x, {warm / ref:.1f}x")
    print(f"tokenizing: indolm first run (on {os.cpu_count()} cores, then cached) {cold_tok:.0f} articles/s, later runs map the cache in {warm_tok:.2f}s; reference (transformers' fast BertTokenizer per sentence, 1 core) {ref_tok:.0f} articles/s; ratio {cold_tok / ref_tok:.1f}x")
    print(f"the whole split, both steps: indolm {ARTICLES / both(cold, cold_tok):.0f}s the first time and {ARTICLES / warm + warm_tok:.0f}s after; reference {ARTICLES / both(ref, ref_tok):.0f}s every time")

if __name__ == "__main__":
    main()
