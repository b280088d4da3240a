"""BERT references with transformers: the small random BertForMaskedLM fixture the parity tests
share, its export check, its tokenizers, and sequence classification.

  make-model DIR          a small random BertForMaskedLM with non-default sizes, a WordPiece
                          vocab trained on UD Indonesian text, and reference.safetensors with a
                          padded batch (input_ids, token_type_ids, attention_mask) and
                          transformers' logits and last hidden states for it.
  check-export DIR REF    load DIR with BertForMaskedLM.from_pretrained and
                          AutoTokenizer.from_pretrained, recompute the logits for REF's batch,
                          print the max abs difference; exit 1 above 1e-4.
  tokenize DIR OUT        the ids of every NusaX sentiment test sentence and UD Indonesian
                          `# text` line through three transformers tokenizers (AutoTokenizer on
                          tokenizer.json, BertTokenizer and the pure-Python BertTokenizerLegacy
                          on vocab.txt), written to OUT as JSON.
  classify DIR TEXTS OUT   class probabilities from BertForSequenceClassification.from_pretrained(DIR)
                          and AutoTokenizer, a text a line; OUT JSON (also checks id2label).
"""
import json
import os
import sys

import torch

from .data import data_sentences, train_vocab

TOLERANCE = 1e-4


def make_model(out_dir, positions="64"):
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(1234)
    train_vocab(out_dir, 1000)
    config = BertConfig(
        vocab_size=1000, hidden_size=96, num_hidden_layers=3, num_attention_heads=6,
        intermediate_size=200, max_position_embeddings=int(positions), type_vocab_size=2, layer_norm_eps=1e-7,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
    )
    model = BertForMaskedLM(config)
    with torch.no_grad():  # move every parameter off its init value (LayerNorm 1/0, zero biases)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.eval()
    model.save_pretrained(out_dir)
    AutoTokenizer.from_pretrained(out_dir).save_pretrained(out_dir)  # writes tokenizer.json too

    lengths = [20, 13, 6, 2 + 0]
    batch, seq = len(lengths), max(lengths)
    ids = torch.randint(5, 1000, (batch, seq))
    types = torch.zeros(batch, seq, dtype=torch.long)
    mask = torch.zeros(batch, seq, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, 0], ids[i, n - 1], ids[i, n:] = 2, 3, 0
        types[i, n // 2:n] = 1
        mask[i, :n] = 1
    with torch.no_grad():
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True)
    from safetensors.torch import save_file

    save_file(
        {"input_ids": ids, "token_type_ids": types, "attention_mask": mask,
         "logits": out.logits.contiguous(), "last_hidden_state": out.hidden_states[-1].contiguous()},
        os.path.join(out_dir, "reference.safetensors"),
    )
    print(json.dumps({"dir": out_dir, "params": sum(p.numel() for p in model.parameters())}))


def check_export(model_dir, ref_path):
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, BertForMaskedLM

    ref = load_file(ref_path)
    model = BertForMaskedLM.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    with torch.no_grad():
        logits = model(input_ids=ref["input_ids"], token_type_ids=ref["token_type_ids"], attention_mask=ref["attention_mask"]).logits
    diff = (logits - ref["logits"]).abs().max().item()
    ids = tok("Ibu kota Indonesia adalah Jakarta.")["input_ids"]
    print(json.dumps({"max_abs_diff": diff, "tokenizer_class": type(tok).__name__, "ids": ids}))
    sys.exit(0 if diff <= TOLERANCE else 1)


def tokenize(model_dir, out_path):
    from transformers import AutoTokenizer
    from transformers.models.bert.tokenization_bert import BertTokenizer
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    vocab = os.path.join(model_dir, "vocab.txt")
    tokenizers = {
        "auto(tokenizer.json)": AutoTokenizer.from_pretrained(model_dir),
        "BertTokenizer(vocab.txt)": BertTokenizer(vocab=vocab, do_lower_case=True),
        "BertTokenizerLegacy(vocab.txt)": BertTokenizerLegacy(vocab_file=vocab, do_lower_case=True),
    }
    texts = data_sentences()
    rows = {name: [tok(t)["input_ids"] for t in texts] for name, tok in tokenizers.items()}
    pair = {name: tok(texts[0], texts[1], return_token_type_ids=True) for name, tok in tokenizers.items()}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"texts": texts, "ids": rows,
                   "pair": {k: {"input_ids": v["input_ids"], "token_type_ids": v["token_type_ids"]} for k, v in pair.items()}}, f)
    print(json.dumps({"sentences": len(texts)}))


def classify(model_dir, texts_path, out_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    with open(texts_path, encoding="utf-8") as f:
        texts = [l.rstrip("\n") for l in f if l.strip()]
    with torch.no_grad():
        enc = tok(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
        probs = torch.softmax(model(**enc).logits.double(), -1)
    with open(out_path, "w") as f:
        json.dump({"probs": probs.tolist(), "id2label": model.config.id2label}, f)
