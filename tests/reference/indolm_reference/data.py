"""The test data and small files built from it: the sentences of tests/data (NusaX sentiment test
texts in all 12 languages, UD Indonesian raw sentences), WordPiece vocabularies trained with HF
tokenizers (the shared fixture's, and train-vocab's on given paragraphs), and parquet files
written by pyarrow.

  train-vocab TEXTS N OUT  HF tokenizers' BertWordPieceTokenizer trained on TEXTS (a paragraph a
                          line) with vocabulary N; its vocabulary (one token a line) to OUT.
  write-parquet OUT JSON   a parquet file with the columns and rows of JSON ({"col": [...]}).
"""
import csv
import glob
import json
import os
import sys

TEST_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data")  # tests/data


def data_sentences():
    """NusaX sentiment test texts (all 12 languages) and UD Indonesian raw sentences in tests/data."""
    out = []
    for path in sorted(glob.glob(os.path.join(TEST_DATA, "nusax", "sentiment", "*", "test.csv"))):
        with open(path, newline="", encoding="utf-8") as f:
            out.extend(row["text"] for row in csv.DictReader(f))
    for path in sorted(glob.glob(os.path.join(TEST_DATA, "ud-indonesian", "*.conllu"))):
        with open(path, encoding="utf-8") as f:
            out.extend(line[len("# text = "):].rstrip("\n") for line in f if line.startswith("# text = "))
    if len(out) < 1000:
        sys.exit(f"expected the test data under {TEST_DATA}, found {len(out)} sentences")
    return out


def train_vocab(out_dir, vocab_size):
    """An uncased WordPiece vocab trained on UD Indonesian text (fixture only)."""
    from tokenizers import BertWordPieceTokenizer

    ud = []
    for path in sorted(glob.glob(os.path.join(TEST_DATA, "ud-indonesian", "*.conllu"))):
        with open(path, encoding="utf-8") as f:
            ud.extend(line[len("# text = "):] for line in f if line.startswith("# text = "))
    tok = BertWordPieceTokenizer(lowercase=True)
    tok.train_from_iterator(ud, vocab_size=vocab_size, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tok.save_model(out_dir)


def train_vocab_cmd(texts_path, n, out_path):
    from tokenizers import BertWordPieceTokenizer

    with open(texts_path, encoding="utf-8") as f:
        paragraphs = [l.rstrip("\n") for l in f if l.strip()]
    tok = BertWordPieceTokenizer(lowercase=True)
    tok.train_from_iterator(paragraphs, vocab_size=int(n), special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    with open(out_path, "w", encoding="utf-8") as f:
        vocab = tok.get_vocab()
        f.write("\n".join(sorted(vocab, key=vocab.get)) + "\n")


def write_parquet(out_path, json_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(json_path, encoding="utf-8") as f:
        columns = json.load(f)
    pq.write_table(pa.table(columns), out_path, compression="snappy")
