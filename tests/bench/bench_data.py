"""`make bench-data`: (1) tokenization throughput of `indolm corpus prepare` (reading, tokenizing
with both cores, writing the shard) next to the Python `tokenizers` package's `encode_batch` on
the same paragraphs and tokenizer (encoding only), and the ratio (goal >= 0.9); (2) the data
loader's batches/s (`indolm corpus stats`) next to the rate the tiny training recipe consumes
them (goal >= 10x). One run, same machine.

Sizes from the environment (default): BENCH_REPEAT, copies of the paragraphs in the corpus (12),
BENCH_STEPS, updates of the tiny recipe (60). INDOLM_BIN names the binary
(target/release/indolm); tests/it/benches.rs runs this at a tiny size."""
import glob
import os
import re
import subprocess
import tempfile
import time

from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEST_DATA = os.path.join(ROOT, "tests", "data")
BIN = os.environ.get("INDOLM_BIN", os.path.join(ROOT, "target", "release", "indolm"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "12"))
STEPS = int(os.environ.get("BENCH_STEPS", "60"))


def paragraphs():
    out = []
    for path in sorted(glob.glob(os.path.join(TEST_DATA, "ud-indonesian", "*.conllu"))):
        with open(path, encoding="utf-8") as f:
            out += [l[9:].strip() for l in f if l.startswith("# text = ")]
    with open(os.path.join(ROOT, "corpora", "sample", "indonesian.txt"), encoding="utf-8") as f:
        out += [l.strip() for l in f if l.strip()]
    return out


def main():
    work = tempfile.mkdtemp(prefix="bench-data-")
    paras = paragraphs()
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w", encoding="utf-8") as f:
        for r in range(REPEAT):
            for i, p in enumerate(paras):
                f.write(f"{p}\n" + ("\n" if i % 5 == 4 else ""))
    recipe = os.path.join(work, "r.toml")
    with open(recipe, "w") as f:
        f.write(f'''kind = "pretrain"
name = "bench-data"
output_dir = "{work}/ck"
[model]
preset = "tiny"
[tokenizer]
path = "{work}/tok"
[data]
corpus = "bench"
corpora_dir = "{work}/corpora"
seq_len = 64
heldout_fraction = 0.0
[[data.sources]]
name = "text"
lang = "id"
paths = ["{corpus}"]
[optimizer]
lr = 1e-3
batch_size = 16
warmup_steps = 10
max_steps = {STEPS}
[checkpoint]
every = 1000
[logging]
tensorboard = "{work}/runs"
every = 10
''')
    subprocess.run([BIN, "tokenizer", "train", "--recipe", recipe, "--vocab-size", "8000", "--sample-paragraphs", "20000"], check=True, capture_output=True)
    out = subprocess.run([BIN, "corpus", "prepare", recipe], check=True, capture_output=True, text=True).stdout
    ours = float(re.search(r"([0-9.]+) tokens/s", out).group(1))
    tokens = int(re.search(r"documents, ([0-9]+) tokens", out).group(1))

    tok = Tokenizer.from_file(os.path.join(work, "tok", "tokenizer.json"))
    texts = paras * REPEAT
    start = time.perf_counter()
    n = 0
    for i in range(0, len(texts), 4096):
        n += sum(len(e.ids) for e in tok.encode_batch(texts[i:i + 4096], add_special_tokens=False))
    theirs = n / (time.perf_counter() - start)

    stats = subprocess.run([BIN, "corpus", "stats", recipe, "--sequences", "1000"], check=True, capture_output=True, text=True).stdout
    loader = float(re.search(r"data loader: ([0-9.]+) batches/s", stats).group(1))
    train = subprocess.run([BIN, "--device", "cpu", "train", recipe], check=True, capture_output=True, text=True).stdout
    rates = [float(m) for m in re.findall(r"([0-9.]+) tok/s", train)][1:]
    steps_per_s = sorted(rates)[len(rates) // 2] / (16 * 64)

    print(f"corpus: {len(texts):,} paragraphs, {tokens:,} tokens (shard incl. [SEP]s), tokenizer 8,000 pieces, 2 cores")
    print(f"indolm corpus prepare (read + tokenize + write): {ours:12,.0f} tokens/s")
    print(f"tokenizers encode_batch (Python, encode only):   {theirs:12,.0f} tokens/s")
    print(f"ratio: {ours / theirs:.2f} (goal >= 0.9)")
    print(f"data loader: {loader:,.0f} batches/s; tiny recipe trains {steps_per_s:.1f} batches/s; ratio {loader / steps_per_s:,.0f}x (goal >= 10x)")


if __name__ == "__main__":
    main()
