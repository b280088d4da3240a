"""Articles in the Liputan6 release layout built from the sample corpus' sentences, for the
benchmarks that need many articles (`bench_generate`, `bench_finetune`, `bench_liputan6_data`):
sentences lowercased and split into words (punctuation as its own token when `split_punct`),
articles of consecutive sentences, one JSON file per article."""
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sample_sentences(split_punct=False):
    """The sample corpus' sentences of four words or more, each a list of lowercased tokens."""
    with open(os.path.join(ROOT, "corpora", "sample", "indonesian.txt"), encoding="utf-8") as f:
        text = " ".join(line.strip() for line in f if line.strip())
    out = []
    for s in re.split(r"(?<=[.!?])\s+", text):
        if len(s.split()) >= 4:
            s = s.lower()
            out.append((s.replace(".", " .").replace(",", " ,") if split_punct else s).split())
    return out


def articles(sentences, count, shortest, longest, rng):
    """`count` articles of `shortest`..`longest` consecutive sentences starting at random."""
    out = []
    for _ in range(count):
        k = rng.randint(shortest, longest)
        start = rng.randrange(len(sentences) - k)
        out.append(sentences[start:start + k])
    return out


def write_split(root, split, items, summary):
    """`<root>/<split>/NNNNNN.json` for each article, its summary `summary(index, article)`."""
    folder = os.path.join(root, split)
    os.makedirs(folder, exist_ok=True)
    for i, article in enumerate(items):
        item = {"id": f"{split}-{i}", "url": "", "clean_article": article, "clean_summary": summary(i, article)}
        with open(os.path.join(folder, f"{i:06d}.json"), "w", encoding="utf-8") as f:
            json.dump(item, f)
    return folder
