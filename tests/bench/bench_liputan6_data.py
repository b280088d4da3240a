"""`make bench-liputan6-data`: Liputan6 training data at its real size. Generates a folder in the
released layout with as many articles as the canonical training split (193,883; one JSON file
each, 8-30 sentences drawn from the sample corpus, a two-sentence summary; not committed, under
/tmp), then measures in one run:
  - indolm: reading every file and building its Oracle labels on all cores, then caching the
    split beside the data (`indolm corpus liputan6`, what `finetune summarize` does on its first
    run), and reading it again from the cache (every later run);
  - the reference: the release's way, `json.load` of each file and the Oracle script's greedy
    search (tests/reference/liputan6_oracle.py) in Python, on the first REF_ARTICLES files (it
    is slow), as articles/s.
Prints articles/s of each and the ratios."""
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

import liputan6_fake as fake

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.path.join(ROOT, "target", "release", "indolm")
ARTICLES = int(os.environ.get("BENCH_ARTICLES", "193883"))
REF_ARTICLES = int(os.environ.get("REF_ARTICLES", "5000"))


def generate(root):
    rng = random.Random(3407)
    items = fake.articles(fake.sample_sentences(split_punct=True), ARTICLES, 8, 30, rng)
    return fake.write_split(root, "train", items, lambda _, a: [a[0], a[rng.randrange(1, len(a))]])


def indolm(root):
    out = subprocess.run([BINARY, "corpus", "liputan6", "--data", root], check=True, capture_output=True, text=True).stdout
    return float(re.search(r"\(([0-9.]+) articles/s\)", out).group(1)), out.strip()


def reference(split):
    sys.path.insert(0, os.path.join(ROOT, "tests", "reference"))
    from liputan6_oracle import label

    files = sorted(os.listdir(split))[:REF_ARTICLES]
    start = time.perf_counter()
    for name in files:
        with open(os.path.join(split, name), encoding="utf-8") as f:
            item = json.load(f)
        label(item["clean_article"], item["clean_summary"])
    return len(files) / (time.perf_counter() - start)


def main():
    root = tempfile.mkdtemp(prefix="bench-liputan6-")
    started = time.perf_counter()
    split = generate(root)
    print(f"generated {ARTICLES} articles in {time.perf_counter() - started:.0f}s under {root}")
    cold, cold_line = indolm(root)
    warm, warm_line = indolm(root)
    print(cold_line)
    print(warm_line)
    ref = reference(split)
    print(f"indolm first run (read + Oracle labels on {os.cpu_count()} cores + cache): {cold:.0f} articles/s")
    print(f"indolm later runs (from the cache): {warm:.0f} articles/s")
    print(f"reference (json.load + the Oracle script in Python, 1 core, {REF_ARTICLES} articles): {ref:.0f} articles/s")
    print(f"ratios: first run {cold / ref:.1f}x, cached {warm / ref:.1f}x")
    print(f"the whole split: {ARTICLES / cold:.0f}s the first time, {ARTICLES / warm:.0f}s after")


if __name__ == "__main__":
    main()
