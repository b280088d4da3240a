"""Reference side of indolm's parity tests, run with the project's .venv python.

Builds fixtures with HF transformers and checks indolm's outputs against transformers:

  make-model DIR          a small random BertForMaskedLM with non-default sizes, a WordPiece
                          vocab trained on UD Indonesian text, and reference.safetensors with a
                          padded batch (input_ids, token_type_ids, attention_mask) and
                          transformers' logits and last hidden states for it.
  check-export DIR REF    load DIR with BertForMaskedLM.from_pretrained and
                          AutoTokenizer.from_pretrained, recompute the logits for REF's batch,
                          print the max abs difference; exit 1 above 1e-4.
  adamw DIR OUT           3 training steps of DIR's model on REF's batch with torch.optim.AdamW
                          (fused=True; no decay for biases and LayerNorm weights, as run_mlm), clipping at 1.0
                          and get_linear_schedule_with_warmup(2 warmup, 10 total), dropout off;
                          writes the labels used and the final parameters to OUT.
  fused-adamw OUT         20 steps of torch.optim.AdamW(fused=True) on a few named tensors (no
                          decay for biases and LayerNorm weights) with seeded gradients and a
                          linear schedule; step 7 is skipped (as GradScaler skips a non-finite
                          one); OUT holds the initial tensors, every gradient, the learning
                          rates and the final tensors.
  tb-scalars LOGDIR       every scalar tag with its steps and values, read by TensorBoard's own
                          EventAccumulator, as JSON on stdout.
  tb-bias LOGDIR          each TensorBoard run under LOGDIR as TensorBoard's backend loads it
                          (plugin_event_accumulator, with the simple_value migration): its scalar
                          tags with steps and values, each tag's description, and the
                          custom-scalars layout parsed with layout_pb2; JSON on stdout.
  stats IN OUT            statsmodels on the tables of IN: proportion_confint(method="wilson"),
                          mcnemar(exact=True) and multipletests(method="holm"); OUT JSON.
  pll DIR SENTENCES OUT    per-sentence PLL with transformers' BertForMaskedLM, masking one token
                          per forward pass as mlm-scoring does ([CLS]/[SEP] never scored); OUT JSON.
  crows DIR PAIRS OUT      CrowS-Pairs metric.py scoring of tab-separated pairs: difflib "equal"
                          blocks of the two id lists, first/last shared skipped, one mask a pass.
  train-vocab TEXTS N OUT  HF tokenizers' BertWordPieceTokenizer trained on TEXTS (a paragraph a
                          line) with vocabulary N; its vocabulary (one token a line) to OUT.
  write-parquet OUT JSON   a parquet file with the columns and rows of JSON ({"col": [...]}).
  f1 JSON                  scikit-learn's f1_score(average="macro") of {"gold": [...], "pred": [...]}.
  classify DIR TEXTS OUT   class probabilities from BertForSequenceClassification.from_pretrained(DIR)
                          and AutoTokenizer, a text a line; OUT JSON (also checks id2label).
  indommlu DIR CSV MODE OUT  per-option scores of the IndoMMLU questions in CSV with transformers:
                          option-pll (mean PLL of the option's tokens after the prompt, one mask
                          a forward pass) or letter (log-prob of the option letters at one
                          [MASK] after "Jawaban:"); the prompt built here from the paper's text.
  indommlu-causal DIR CSV STRATEGY SHOTS OUT  IndoMMLU's own evaluate.py/utils.py on a causal LM
                          (letter or full-answer), zero- or few-shot, one question at a time in
                          fp32: per-question scores, confidence, prediction and prompt ids, and the
                          expected calibration error overall and per area. OUT JSON.
  bos-template DIR        a Llama-style <s> post-processor for DIR's tokenizer.json.
  presumm-decoder DIR REF  BertAbs teacher-forced log-probabilities and loss recomputed for REF's
                          batch: the encoder by transformers' BertModel.from_pretrained(DIR), the
                          decoder by torch.nn.TransformerDecoder (pre-norm layers, tanh GELU,
                          eps 1e-6) on DIR's decoder weights, PreSumm's positional encoding and
                          LabelSmoothingLoss (KL to 1-e on the gold, e/(V-2) elsewhere, pad 0);
                          prints the max abs log-prob difference and both losses as JSON.
  rouge PAIRS OUT         rouge-score's ROUGE-1/2/L (no stemming) of [[prediction, reference], ...].
  aul DIR SENTENCES OUT    Kaneko & Bollegala's evaluate.py on each sentence, one at a time:
                          BertForMaskedLM (eager attention, output_attentions=True), nothing
                          masked; AUL = mean log-prob of tokens 1..n-1, AULA = mean of the
                          log-probs weighted by the attention each position receives (mean over
                          layers, then heads, then queries; not renormalised); also the rank-1
                          hits. OUT JSON.
  pll-word-l2r DIR SENTENCES OUT  PLL-word-l2r (minicons within_word_l2r): for each token, mask
                          it and the later tokens of its word (the fast tokenizer's word_ids()),
                          one forward pass per token; also the rank-1 hits. OUT JSON.
  multibootstrap SPEC OUT  the Multi-Bootstrap of google-research/language's multibootstrap.py
                          with numpy's RandomState on the groups of bias_pairs.csv files in SPEC
                          (JSON: groups, replicates, seed, overall_only); estimates summed in order with Python
                          floats; per language × (overall, domains) and the average over
                          languages; unpaired comparisons of the groups two by two. OUT JSON.
  make-xlmr DIR [HEAD]    a tiny random XLMRobertaForMaskedLM (HEAD 0: XLMRobertaModel, no lm_head,
                          as multilingual-E5) with a SentencePiece Unigram tokenizer.json trained
                          on the test sentences (XLM-R's special tokens), and reference.safetensors
                          with a padded batch and transformers' logits.
  tokenize-auto DIR OUT   the ids of every test sentence through AutoTokenizer, as JSON.
  tokenize DIR OUT        the ids of every NusaX sentiment test sentence and UD Indonesian
                          `# text` line through three transformers tokenizers (AutoTokenizer on
                          tokenizer.json, BertTokenizer and the pure-Python BertTokenizerLegacy
                          on vocab.txt), written to OUT as JSON.
  make-decoder FAMILY DIR [POSITIONS]  a tiny random causal LM of FAMILY (llama, llama3, mistral, qwen2, qwen3,
                          gemma2, gemma3, olmo2, olmo3, bloom; gemma3mm: a Gemma3ForConditionalGeneration
                          with a vision tower and a config as sparse as the hub's) built with transformers' own class
                          (seeded, eager attention, GQA 4:2 where the family has it, a sliding
                          window shorter than the test sentences), saved with safetensors (sharded
                          for some), and a tokenizer.json trained here with `tokenizers` (byte-level
                          BPE, Metaspace BPE or Unigram, with <s>/</s>); then causal-ref on
                          DECODER_SENTENCES (DIR/sentences.txt) into DIR/reference.json.
                          POSITIONS: max_position_embeddings (128).
  causal-ref DIR SENTENCES OUT  per-token log-probabilities of each sentence (a line) after the
                          prefix token, lm-evaluation-harness's rule for CrowS-Pairs: AutoTokenizer
                          ids without special tokens, context [bos_token_id, else eos_token_id], no
                          EOS; one sentence a forward pass (batch 1, no padding). OUT JSON.
"""
import csv
import glob
import json
import shutil
import os
import sys

import numpy as np
import torch

TEST_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")  # tests/data
TOLERANCE = 1e-4


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


def adamw(model_dir, out_path):
    from safetensors.torch import load_file, save_file
    from transformers import BertForMaskedLM, get_linear_schedule_with_warmup

    ref = load_file(os.path.join(model_dir, "reference.safetensors"))
    model = BertForMaskedLM.from_pretrained(model_dir).eval()  # eval: no dropout
    ids, types, mask = ref["input_ids"], ref["token_type_ids"], ref["attention_mask"]
    labels = torch.full_like(ids, -100)
    pick = (mask == 1) & (torch.arange(ids.shape[1]) % 3 == 1)
    labels[pick] = ids[pick]
    no_decay = ["bias", "LayerNorm.weight"]
    named = list(model.named_parameters())
    groups = [
        {"params": [p for n, p in named if not any(nd in n for nd in no_decay)], "weight_decay": 0.01},
        {"params": [p for n, p in named if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, fused=True)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=2, num_training_steps=10)
    lrs, norms, losses = [], [], []
    for _ in range(3):
        opt.zero_grad()
        loss = model(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels).loss
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
        lrs.append(opt.param_groups[0]["lr"])
        losses.append(loss.item())
        opt.step()
        sched.step()
    tensors = {n: p.detach().contiguous() for n, p in named}
    tensors["labels"] = labels
    save_file(tensors, out_path)
    print(json.dumps({"lrs": lrs, "grad_norms": norms, "losses": losses}))


def fused_adamw(out_path):
    from safetensors.torch import save_file

    torch.manual_seed(0)
    shapes = {"l.weight": (7, 5), "l.bias": (7,), "LayerNorm.weight": (5,), "LayerNorm.bias": (5,), "e.weight": (11, 5)}
    params = {n: torch.nn.Parameter(torch.randn(s)) for n, s in shapes.items()}
    tensors = {f"init.{n}": p.detach().clone() for n, p in params.items()}
    no_decay = [p for n, p in params.items() if n.endswith(".bias") or "LayerNorm." in n]
    decay = [p for n, p in params.items() if not (n.endswith(".bias") or "LayerNorm." in n)]
    groups = [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, fused=True)
    steps, warmup, skipped = 20, 5, 7
    lrs = [1e-3 * (k + 1) / warmup if k < warmup else 1e-3 * (steps - k) / (steps - warmup) for k in range(steps)]
    for k in range(steps):
        for n, p in params.items():
            p.grad = torch.randn(p.shape) * (0.1 + 0.05 * k)
            tensors[f"grad.{k}.{n}"] = p.grad.clone()
        if k == skipped:
            continue  # the update whose gradients were not finite: nothing moves, nothing counts
        for g in opt.param_groups:
            g["lr"] = lrs[k]
        opt.step()
    for n, p in params.items():
        tensors[f"final.{n}"] = p.detach().clone()
    tensors["lrs"] = torch.tensor(lrs, dtype=torch.float64)
    save_file(tensors, out_path)
    print(json.dumps({"steps": steps, "skipped": skipped}))


def _load_mlm(model_dir):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    return AutoModelForMaskedLM.from_pretrained(model_dir).eval(), AutoTokenizer.from_pretrained(model_dir)


def _masked_log_probs(model, tok, ids, positions):
    """ln p(ids[p]) with ids[p] masked, one forward pass per position (batch 1)."""
    out = []
    for p in positions:
        masked = list(ids)
        masked[p] = tok.mask_token_id
        with torch.no_grad():
            logits = model(torch.tensor([masked])).logits[0, p]
        out.append(torch.log_softmax(logits, -1)[ids[p]].item())
    return out


def pll(model_dir, sentences_path, out_path):
    model, tok = _load_mlm(model_dir)
    with open(sentences_path, encoding="utf-8") as f:
        sentences = [l.rstrip("\n") for l in f if l.strip()]
    rows = []
    for s in sentences:
        ids = tok(s)["input_ids"]
        rows.append({"pll": sum(_masked_log_probs(model, tok, ids, range(1, len(ids) - 1))), "tokens": len(ids) - 2})
    with open(out_path, "w") as f:
        json.dump(rows, f)


def crows(model_dir, pairs_path, out_path):
    import difflib

    model, tok = _load_mlm(model_dir)
    rows = []
    with open(pairs_path, encoding="utf-8") as f:
        for line in f:
            a, b = line.rstrip("\n").split("\t")
            ia, ib = tok(a)["input_ids"], tok(b)["input_ids"]
            ta, tb = [], []
            for op in difflib.SequenceMatcher(None, [str(x) for x in ia], [str(x) for x in ib]).get_opcodes():
                if op[0] == "equal":
                    ta += list(range(op[1], op[2]))
                    tb += list(range(op[3], op[4]))
            rows.append({"a": sum(_masked_log_probs(model, tok, ia, ta[1:-1])), "b": sum(_masked_log_probs(model, tok, ib, tb[1:-1])), "shared": len(ta) - 2})
    with open(out_path, "w") as f:
        json.dump(rows, f)


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


def f1(json_path):
    from sklearn.metrics import f1_score

    with open(json_path) as f:
        data = json.load(f)
    print(json.dumps([f1_score(c["gold"], c["pred"], average="macro") for c in data]))


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


def indommlu(model_dir, csv_path, mode, out_path):
    model, tok = _load_mlm(model_dir)
    max_len = model.config.max_position_embeddings
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]
    out = []
    with open(csv_path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("is_for_fewshot", "0") == "1":  # demonstrations, not questions
                continue
            options = [l.strip() for l in row["jawaban"].split("\n") if l.strip()]
            letters = [o[0].upper() for o in options]
            texts = [o[1:].lstrip(".):").strip() for o in options]
            level = "seleksi masuk universitas" if "seleksi" in row["level"].lower() else f"{row['kelas']} {row['level']}".strip()
            header = enc(f"Ini adalah soal {row['subject']} untuk {level}. Pilihlah salah satu jawaban yang dianggap benar!")
            tail = "\n".join(f"{l}. {t}" for l, t in zip(letters, texts)) + "\nJawaban:"
            middle = enc(row["soal"]) + enc(tail)

            def build(extra):
                room = max_len - 2 - len(header) - len(extra)
                mid = middle[len(middle) - room:] if len(middle) > room else middle
                ids = [tok.cls_token_id] + header + mid
                return ids + extra + [tok.sep_token_id], len(ids)

            if mode == "option-pll":
                scores = []
                for t in texts:
                    opt = enc(t) or [tok.unk_token_id]
                    ids, start = build(opt)
                    lps = _masked_log_probs(model, tok, ids, range(start, start + len(opt)))
                    scores.append(sum(lps) / len(lps))
            else:
                ids, start = build([tok.mask_token_id])
                with torch.no_grad():
                    logits = model(torch.tensor([ids])).logits[0, start]
                lp = torch.log_softmax(logits.double(), -1)
                scores = [lp[tok.convert_tokens_to_ids(l.lower())].item() for l in letters]
            out.append(scores)
    with open(out_path, "w") as f:
        json.dump(out, f)


def rouge(pairs_path, out_path):
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=False)
    with open(pairs_path, encoding="utf-8") as f:
        pairs = json.load(f)
    out = []
    for pred, ref in pairs:
        s = scorer.score(ref, pred)  # (target, prediction)
        out.append({k: [v.precision, v.recall, v.fmeasure] for k, v in s.items()})
    with open(out_path, "w") as f:
        json.dump(out, f)


def presumm_decoder(model_dir, ref_path):
    import math

    import torch.nn.functional as F
    from safetensors.torch import load_file
    from transformers import BertModel

    ref = load_file(ref_path)
    weights = load_file(os.path.join(model_dir, "model.safetensors"))
    with open(os.path.join(model_dir, "config.json")) as f:
        abs_cfg = json.load(f)["indolm_abs"]
    encoder = BertModel.from_pretrained(model_dir, add_pooling_layer=False).eval()
    emb = weights["decoder.embeddings.weight"]
    vocab, hidden = emb.shape
    layer = torch.nn.TransformerDecoderLayer(
        hidden, abs_cfg["heads"], abs_cfg["ff"], dropout=0.0, activation=lambda x: F.gelu(x, approximate="tanh"),
        layer_norm_eps=1e-6, batch_first=True, norm_first=True)
    decoder = torch.nn.TransformerDecoder(layer, abs_cfg["layers"], norm=torch.nn.LayerNorm(hidden, eps=1e-6)).eval()
    state = {"norm.weight": weights["decoder.layer_norm.weight"], "norm.bias": weights["decoder.layer_norm.bias"]}
    for i in range(abs_cfg["layers"]):
        src = f"decoder.transformer_layers.{i}."
        dst = f"layers.{i}."
        for ours, theirs in (("self_attn", "self_attn"), ("context_attn", "multihead_attn")):
            for kind in ("weight", "bias"):
                state[f"{dst}{theirs}.in_proj_{kind}"] = torch.cat([weights[f"{src}{ours}.linear_{n}.{kind}"] for n in ("query", "keys", "values")])
                state[f"{dst}{theirs}.out_proj.{kind}"] = weights[f"{src}{ours}.final_linear.{kind}"]
        for kind in ("weight", "bias"):
            state[f"{dst}norm1.{kind}"] = weights[f"{src}layer_norm_1.{kind}"]
            state[f"{dst}norm2.{kind}"] = weights[f"{src}layer_norm_2.{kind}"]
            state[f"{dst}norm3.{kind}"] = weights[f"{src}feed_forward.layer_norm.{kind}"]
            state[f"{dst}linear1.{kind}"] = weights[f"{src}feed_forward.w_1.{kind}"]
            state[f"{dst}linear2.{kind}"] = weights[f"{src}feed_forward.w_2.{kind}"]
    decoder.load_state_dict(state, strict=True)

    targets = ref["targets"]
    tgt_in, gold = targets[:, :-1], targets[:, 1:]
    length = tgt_in.shape[1]
    pe = torch.zeros(length, hidden)
    position = torch.arange(0, length).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, hidden, 2, dtype=torch.float) * -(math.log(10000.0) / hidden))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    with torch.no_grad():
        memory = encoder(input_ids=ref["input_ids"], token_type_ids=ref["segments"], attention_mask=ref["attention"]).last_hidden_state
        x = F.embedding(tgt_in, emb) * math.sqrt(hidden) + pe.unsqueeze(0)
        causal = torch.nn.Transformer.generate_square_subsequent_mask(length)
        out = decoder(x, memory, tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=ref["attention"] == 0)
        log_probs = torch.log_softmax(out @ emb.T + weights["generator.bias"], dim=-1)
    pad = int(ref["pad"].item())
    keep = gold.reshape(-1) != pad
    flat_gold = gold.reshape(-1)[keep]
    flat = log_probs.reshape(-1, vocab)[keep]
    smoothing = abs_cfg["label_smoothing"]
    one_hot = torch.full((vocab,), smoothing / (vocab - 2))
    one_hot[pad] = 0
    model_prob = one_hot.repeat(flat_gold.size(0), 1)
    model_prob.scatter_(1, flat_gold.unsqueeze(1), 1.0 - smoothing)
    loss = F.kl_div(flat, model_prob, reduction="sum") / flat_gold.size(0)
    ours = ref["log_probs"].reshape(-1, vocab)[keep]
    print(json.dumps({"max_abs_log_prob": (ours - flat).abs().max().item(), "loss": loss.item(), "ours": ref["loss"].item(), "tokens": int(flat_gold.size(0))}))


def tb_scalars(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(logdir, size_guidance={"scalars": 0})
    acc.Reload()
    out = {tag: [[e.step, e.value] for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    print(json.dumps(out))


def tb_bias(logdir):
    from google.protobuf import json_format
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea
    from tensorboard.plugins.custom_scalar import layout_pb2
    from tensorboard.util import tensor_util

    out = {}
    for run in sorted(os.listdir(logdir)):
        path = os.path.join(logdir, run)
        if not os.path.isdir(path):
            continue
        acc = pea.EventAccumulator(path, size_guidance={"tensors": 0})
        acc.Reload()
        scalar_tags = sorted(acc.PluginTagToContent("scalars"))
        scalars = {t: [[e.step, float(tensor_util.make_ndarray(e.tensor_proto))] for e in acc.Tensors(t)] for t in scalar_tags}
        descriptions = {t: acc.SummaryMetadata(t).summary_description for t in scalar_tags}
        layout = None
        if "custom_scalars__config__" in acc.PluginTagToContent("custom_scalars"):
            proto = layout_pb2.Layout()
            proto.ParseFromString(acc.Tensors("custom_scalars__config__")[0].tensor_proto.string_val[0])
            layout = json_format.MessageToDict(proto)
        out[run] = {"scalars": scalars, "descriptions": descriptions, "layout": layout}
    print(json.dumps(out))


def stats(in_path, out_path):
    from statsmodels.stats.contingency_tables import mcnemar
    from statsmodels.stats.multitest import multipletests
    from statsmodels.stats.proportion import proportion_confint

    tables = json.load(open(in_path))
    wilson = [list(map(float, proportion_confint(k, n, alpha=0.05, method="wilson"))) for k, n in tables["wilson"]]
    # mcnemar reads the discordant cells off the table's off-diagonal: [[a, b], [c, d]].
    mc = [float(mcnemar([[7, b], [c, 3]], exact=True).pvalue) for b, c in tables["mcnemar"]]
    holm = [list(map(float, multipletests(ps, method="holm")[1])) for ps in tables["holm"]]
    json.dump({"wilson": wilson, "mcnemar": mc, "holm": holm}, open(out_path, "w"))


def aul(model_dir, sentences_path, out_path):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    model = AutoModelForMaskedLM.from_pretrained(model_dir, attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    with open(sentences_path, encoding="utf-8") as f:
        sentences = [l.rstrip("\n") for l in f if l.strip()]
    rows = []
    for s in sentences:
        ids = torch.tensor([tok(s)["input_ids"]])
        with torch.no_grad():
            out = model(ids, output_attentions=True)
        log_probs = torch.log_softmax(out.logits.squeeze(0), -1)
        token_log_probs = log_probs.gather(1, ids.view(-1, 1))[1:-1]
        # evaluate.py: attentions cat over layers (batch 1), mean over layers, heads, queries.
        attentions = torch.mean(torch.cat(out.attentions, 0), 0)
        averaged = torch.mean(torch.mean(attentions, 0), 0)
        weighted = token_log_probs.squeeze(1) * averaged[1:-1]
        hits = (log_probs.argmax(-1)[1:-1] == ids[0, 1:-1]).sum().item()
        rows.append({"aul": torch.mean(token_log_probs).item(), "aula": torch.mean(weighted).item(), "tokens": ids.shape[1] - 2, "correct": hits})
    with open(out_path, "w") as f:
        json.dump(rows, f)


def pll_word_l2r(model_dir, sentences_path, out_path):
    model, tok = _load_mlm(model_dir)
    with open(sentences_path, encoding="utf-8") as f:
        sentences = [l.rstrip("\n") for l in f if l.strip()]
    rows = []
    for s in sentences:
        enc = tok(s)
        ids, words = enc["input_ids"], enc.word_ids()
        total, hits = 0.0, 0
        for p in range(1, len(ids) - 1):
            masked = list(ids)
            masked[p] = tok.mask_token_id
            for q in range(p + 1, len(ids)):
                if words[q] is not None and words[q] == words[p]:
                    masked[q] = tok.mask_token_id
            with torch.no_grad():
                logits = model(torch.tensor([masked])).logits[0, p]
            lp = torch.log_softmax(logits, -1)
            total += lp[ids[p]].item()
            hits += int(lp.argmax().item() == ids[p])
        rows.append({"pll": total, "tokens": len(ids) - 2, "correct": hits})
    with open(out_path, "w") as f:
        json.dump(rows, f)


def _read_outcomes(path):
    """{language: ([win 0/100 per pair], [domain per pair])} from a bias_pairs.csv."""
    out = {}
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            wins, domains = out.setdefault(row["language"], ([], []))
            wins.append(100.0 if row["preferred"] == "pro" else 0.0)
            domains.append(row["domain"])
    return out


def _categories(files):
    """(language, category) -> rows (one per file) of outcomes, as indolm's report lays them out."""
    per_file = [_read_outcomes(p) for p in files]
    cats = {}
    languages = list(per_file[0].keys())
    for lang in languages:
        domains = per_file[0][lang][1]
        cats[(lang, "overall")] = [pf[lang][0] for pf in per_file]
        for d in dict.fromkeys(domains):
            cols = [j for j, x in enumerate(domains) if x == d]
            cats[(lang, d)] = [[pf[lang][0][j] for j in cols] for pf in per_file]
    n = len(per_file[0][languages[0]][0])
    if len(languages) >= 2 and all(len(per_file[0][l][0]) == n for l in languages):
        k = float(len(languages))
        cats[("all", "overall")] = [[sum([pf[l][0][j] for l in languages]) / k for j in range(n)] for pf in per_file]
    return cats


def _score(rows, seeds, examples):
    total = 0.0
    for s in seeds:
        row = rows[s]
        if examples is None:
            total += sum(row) / len(row)
        else:
            total += sum([row[j] for j in examples]) / len(examples)
    return total / len(seeds)


def _multibootstrap(base, expt, paired, replicates, rng):
    """multibootstrap.py's procedure: seeds resampled (one sample for both arms when paired),
    examples resampled once for both arms; mean within seeds, then across. (The full data's
    estimates, which must equal indolm's exactly, are summed in order by _score.)"""
    import numpy as np

    n = len(base[0])
    base_m, expt_m = np.array(base), np.array(expt)
    ls, l2s, deltas = [], [], []
    for _ in range(replicates):
        sb = rng.choice(len(base), size=len(base), replace=True)
        se = sb if paired else rng.choice(len(expt), size=len(expt), replace=True)
        jj = rng.choice(n, size=n, replace=True)
        # A replicate: each drawn seed's mean over the drawn examples, then the mean over seeds.
        l, l2 = base_m[sb][:, jj].mean(axis=1).mean(), expt_m[se][:, jj].mean(axis=1).mean()
        ls.append(l)
        l2s.append(l2)
        deltas.append(l2 - l)
    q = lambda v: [float(x) for x in np.quantile(v, [0.025, 0.975])]
    return {"base": q(ls), "expt": q(l2s), "difference": q(deltas), "p": float(np.mean(np.array(deltas) <= 0))}


XLMR_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]


def make_xlmr(out_dir, with_head="1"):
    """A tiny random XLMRobertaForMaskedLM (XLMRobertaModel, as multilingual-E5, when with_head
    is 0) and a SentencePiece Unigram tokenizer.json trained on the test sentences with XLM-R's
    special tokens, Metaspace and `<s> X </s>` post-processing; reference.safetensors holds a
    padded batch of the test sentences through AutoTokenizer and transformers' logits."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import AutoTokenizer, XLMRobertaConfig, XLMRobertaForMaskedLM, XLMRobertaModel

    os.makedirs(out_dir, exist_ok=True)
    tok = Tokenizer(models.Unigram())
    # The pipeline transformers 5's XLMRobertaTokenizer rebuilds around the vocabulary (no
    # charsmap normalizer, whitespace split then Metaspace), so that tokenizer.json as written
    # is what AutoTokenizer runs.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")])
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(vocab_size=600, special_tokens=XLMR_SPECIALS, unk_token="<unk>", shrinking_factor=0.75)
    tok.train_from_iterator(data_sentences(), trainer=trainer)
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    specials = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>",
                "pad_token": "<pad>", "cls_token": "<s>", "mask_token": "<mask>"}
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "XLMRobertaTokenizer", "model_max_length": 512, **specials}, f)
    with open(os.path.join(out_dir, "special_tokens_map.json"), "w") as f:
        json.dump(specials, f)

    torch.manual_seed(4321)
    config = XLMRobertaConfig(
        vocab_size=tok.get_vocab_size(), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=128, max_position_embeddings=130, type_vocab_size=1, layer_norm_eps=1e-5,
        pad_token_id=1, bos_token_id=0, eos_token_id=2)
    model = (XLMRobertaForMaskedLM if with_head == "1" else XLMRobertaModel)(config)
    with torch.no_grad():  # move every parameter off its init value (LayerNorm 1/0, zero biases)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    model.eval()
    model.save_pretrained(out_dir)

    auto = AutoTokenizer.from_pretrained(out_dir)
    texts = data_sentences()[:6]
    enc = auto(texts, padding=True, truncation=True, max_length=64, return_tensors="pt")
    result = {"dir": out_dir, "tokenizer_class": type(auto).__name__, "mask_token": auto.mask_token,
              "params": sum(p.numel() for p in model.parameters())}
    if with_head == "1":
        with torch.no_grad():
            logits = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).logits
        from safetensors.torch import save_file

        save_file({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "logits": logits.contiguous()},
                  os.path.join(out_dir, "reference.safetensors"))
    print(json.dumps(result))


def tokenize_auto(model_dir, out_path):
    """The ids of every test sentence (data_sentences) and a pair through AutoTokenizer."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    texts = data_sentences()
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"texts": texts, "ids": [tok(t)["input_ids"] for t in texts],
                   "mask": tok("saya <mask> nasi")["input_ids"]}, f)


def multibootstrap(spec_path, out_path):
    import numpy as np

    spec = json.load(open(spec_path))
    groups = spec["groups"]  # [[name, [bias_pairs.csv, ...]], ...]
    rng = np.random.RandomState(spec["seed"])
    cats = {name: _categories(files) for name, files in groups}
    if spec.get("overall_only"):
        cats = {name: {k: v for k, v in c.items() if k[1] == "overall"} for name, c in cats.items()}
    estimates, comparisons = [], []
    for name, _ in groups:
        for (lang, cat), rows in cats[name].items():
            seeds = list(range(len(rows)))
            single = _multibootstrap(rows, rows, True, spec["replicates"], rng)
            estimates.append({"group": name, "language": lang, "category": cat, "estimate": _score(rows, seeds, None), "interval": single["base"]})
    for i in range(len(groups)):
        for j in range(i + 1, len(groups)):
            a, b = groups[i][0], groups[j][0]
            for key, base in cats[a].items():
                expt = cats[b][key]
                r = _multibootstrap(base, expt, False, spec["replicates"], rng)
                r.update({"language": key[0], "category": key[1], "base_group": a, "expt_group": b,
                          "base_estimate": _score(base, list(range(len(base))), None),
                          "expt_estimate": _score(expt, list(range(len(expt))), None)})
                comparisons.append(r)
    json.dump({"estimates": estimates, "comparisons": comparisons}, open(out_path, "w"))


DECODER_SENTENCES = [
    "Ibu kota Indonesia adalah Jakarta, kota terbesar di negeri ini.",
    "Dia membeli buah di pasar.",
    "Para petani di desa itu menanam padi dan jagung setiap musim hujan, lalu menjualnya ke kota.",
    "Saya suka membaca buku sejarah tentang kerajaan Majapahit dan Sriwijaya pada malam hari.",
    "Anak-anak bermain bola di lapangan.",
    "Pemerintah mengumumkan kebijakan baru mengenai pendidikan tinggi, yang akan berlaku mulai tahun depan.",
]

DECODER_TOKENIZERS = {"llama": "metaspace", "llama3": "bytelevel", "mistral": "metaspace", "qwen2": "bytelevel",
                      "qwen3": "bytelevel", "gemma2": "unigram", "gemma3": "unigram", "olmo2": "bytelevel",
                      "olmo3": "metaspace", "bloom": "bytelevel", "gemma3mm": "unigram"}


def _decoder_tokenizer(kind, out_dir, bos=True):
    """A tokenizer.json of `kind` trained on the test data, with <s> (BOS), </s> (EOS), <pad>, <unk>;
    without `bos`, tokenizer_config.json says "bos_token": null (as Qwen's do)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers, normalizers

    special = ["<pad>", "<unk>", "<s>", "</s>"]
    if kind == "bytelevel":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=special,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    elif kind == "metaspace":
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
        trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=special)
    elif kind == "unigram":
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        trainer = trainers.UnigramTrainer(vocab_size=400, special_tokens=special, unk_token="<unk>")
    else:
        sys.exit(f"unknown tokenizer kind {kind}")
    tok.train_from_iterator(data_sentences()[:3000] + DECODER_SENTENCES, trainer=trainer)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>" if bos else None, "eos_token": "</s>",
                   "pad_token": "<pad>", "unk_token": "<unk>", "add_bos_token": False}, f)
    return tok


def make_decoder(family, out_dir, positions="128"):
    import transformers as tr

    os.makedirs(out_dir, exist_ok=True)
    tok = _decoder_tokenizer(DECODER_TOKENIZERS[family], out_dir, bos=(family != "qwen2"))
    vocab = tok.get_vocab_size() + 3  # an embedding table larger than the tokenizer, as HF pads them
    ids = dict(bos_token_id=tok.token_to_id("<s>"), eos_token_id=tok.token_to_id("</s>"),
               pad_token_id=tok.token_to_id("<pad>"))
    torch.manual_seed(4321)
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=112, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=int(positions), **ids)
    shard = None
    if family in ("llama", "llama3"):
        extra = dict(tie_word_embeddings=(family == "llama"), rms_norm_eps=1e-5)
        if family == "llama3":
            extra["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
            extra["rope_theta"] = 500000.0
            shard = "60KB"
        config, cls = tr.LlamaConfig(**common, **extra), tr.LlamaForCausalLM
    elif family == "mistral":
        config, cls = tr.MistralConfig(**common, sliding_window=7, head_dim=24), tr.MistralForCausalLM
    elif family == "qwen2":
        config, cls = tr.Qwen2Config(**common, tie_word_embeddings=True), tr.Qwen2ForCausalLM
    elif family == "qwen3":
        config, cls = tr.Qwen3Config(**common, head_dim=20, tie_word_embeddings=False), tr.Qwen3ForCausalLM
        shard = "50KB"
    elif family == "gemma2":
        config = tr.Gemma2Config(**common, head_dim=24, sliding_window=6, query_pre_attn_scalar=20,
                                 final_logit_softcapping=3.0, attn_logit_softcapping=2.0)
        cls = tr.Gemma2ForCausalLM
    elif family == "gemma3":
        config = tr.Gemma3TextConfig(**{**common, "num_hidden_layers": 4}, head_dim=24, sliding_window=6,
                                     query_pre_attn_scalar=24, rope_local_base_freq=100.0,
                                     layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"])
        cls = tr.Gemma3ForCausalLM
    elif family == "gemma3mm":  # gemma-3-4b's layout: Gemma3ForConditionalGeneration, a vision tower
        text = dict(**{**common, "num_hidden_layers": 4}, head_dim=24, sliding_window=6, query_pre_attn_scalar=24,
                    rope_local_base_freq=100.0,
                    layer_types=["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"])
        vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28,
                      patch_size=14)
        config = tr.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4, **ids)
        cls = tr.Gemma3ForConditionalGeneration
    elif family == "olmo2":
        config, cls = tr.Olmo2Config(**common, tie_word_embeddings=False), tr.Olmo2ForCausalLM
    elif family == "olmo3":
        config = tr.Olmo3Config(**common, sliding_window=5,
                                layer_types=["sliding_attention", "full_attention", "sliding_attention"])
        cls = tr.Olmo3ForCausalLM
    elif family == "bloom":
        config = tr.BloomConfig(vocab_size=vocab, hidden_size=64, n_layer=3, n_head=4, **ids)
        cls = tr.BloomForCausalLM
    else:
        sys.exit(f"unknown family {family}")
    config._attn_implementation = "eager"
    model = cls(config)
    with torch.no_grad():  # move every parameter off its init value (norm weights 1 or 0, zero biases)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    model.eval()
    model.save_pretrained(out_dir, **({"max_shard_size": shard} if shard else {}))
    if family == "gemma3mm":
        _sparse_gemma3_config(out_dir)
    sentences = os.path.join(out_dir, "sentences.txt")
    with open(sentences, "w", encoding="utf-8") as f:
        f.write("\n".join(DECODER_SENTENCES) + "\n")
    causal_ref(out_dir, sentences, os.path.join(out_dir, "reference.json"))
    print(json.dumps({"dir": out_dir, "family": family, "params": sum(p.numel() for p in model.parameters())}))


def _sparse_gemma3_config(out_dir):
    """Rewrites a saved multimodal Gemma 3 config.json as the hub's gemma-3-4b files have it:
    text_config holds only what differs from Gemma3TextConfig's defaults, with the RoPE bases as
    rope_theta and rope_local_base_freq (no rope_parameters, no layer_types: the pattern of 6
    decides)."""
    import transformers as tr

    path = os.path.join(out_dir, "config.json")
    cfg = json.load(open(path))
    text = cfg["text_config"]
    defaults = tr.Gemma3TextConfig().to_dict()
    rope = text.pop("rope_parameters")
    text["rope_theta"] = rope["full_attention"]["rope_theta"]
    text["rope_local_base_freq"] = rope["sliding_attention"]["rope_theta"]
    text.pop("layer_types")
    text.pop("_sliding_window_pattern", None)
    text["sliding_window_pattern"] = 3  # layers 3 and 6 full, as layer_types had layer 3
    cfg["text_config"] = {k: v for k, v in text.items()
                          if k == "model_type" or k not in defaults or defaults[k] != v}
    json.dump(cfg, open(path, "w"), indent=2)


def causal_ref(model_dir, sentences_path, out_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    prefix = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    sentences = [line.rstrip("\n") for line in open(sentences_path, encoding="utf-8") if line.strip()]
    out = {"prefix_token_id": prefix, "prefix_token": tok.convert_ids_to_tokens(prefix),
           "prefix_is": "bos" if tok.bos_token_id is not None else "eos", "sentences": []}
    for s in sentences:
        ids = tok(s, add_special_tokens=False)["input_ids"]
        inp = torch.tensor([[prefix] + ids])
        with torch.no_grad():
            logits = model(inp).logits[0].float()
        lp = torch.log_softmax(logits, dim=-1)[:-1].gather(-1, torch.tensor(ids)[:, None])[:, 0]
        out["sentences"].append({"text": s, "ids": ids, "logprobs": [float(x) for x in lp],
                                 "sum": float(lp.double().sum())})
    json.dump(out, open(out_path, "w"))


def decoder_to_bf16(src_dir, out_dir):
    """The causal LM in src_dir saved in bf16 to out_dir, with its tokenizer and a reference.json
    computed by transformers in fp32 from the saved (bf16-rounded) weights."""
    from transformers import AutoModelForCausalLM

    os.makedirs(out_dir, exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(src_dir, dtype=torch.float32)
    model.to(torch.bfloat16).save_pretrained(out_dir)
    for f in os.listdir(src_dir):
        if f.startswith("tokenizer") or f in ("special_tokens_map.json", "sentences.txt"):
            shutil.copy(os.path.join(src_dir, f), out_dir)
    causal_ref(out_dir, os.path.join(out_dir, "sentences.txt"), os.path.join(out_dir, "reference.json"))


INDOMMLU_AREAS = {
    "STEM": ["Kimia", "Biologi", "IPA", "Fisika"],
    "Social science": ["Geografi", "IPS", "Sosiologi", "Ekonomi", "PPKN"],
    "Humanities": ["Sejarah", "Agama Kristen", "Agama Islam", "Agama Hindu", "Kesenian", "Penjaskes"],
    "Indonesian language": ["Bahasa Indonesia"],
    "Local languages and cultures": ["Bahasa Lampung", "Bahasa Bali", "Bahasa Makassar", "Bahasa Banjar",
                                     "Bahasa Madura", "Bahasa Sunda", "Bahasa Jawa", "Bahasa Dayak Ngaju",
                                     "Budaya Alam Minangkabau"],
}


def bos_template(model_dir):
    """Gives DIR's tokenizer.json the post-processor Llama's has (<s> before every text) and says
    add_bos_token in tokenizer_config.json, so that tokenizer(text) starts with <s>."""
    from tokenizers import Tokenizer, processors

    path = os.path.join(model_dir, "tokenizer.json")
    tok = Tokenizer.from_file(path)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)])
    tok.save(path)
    cfg_path = os.path.join(model_dir, "tokenizer_config.json")
    cfg = json.load(open(cfg_path))
    cfg["add_bos_token"] = True
    json.dump(cfg, open(cfg_path, "w"))


def _ece(conf, correct, bins=10):
    """Expected calibration error: bins (lo, hi] of width 1/bins (0 in the first), weighted gaps."""
    conf, correct = np.asarray(conf, dtype=float), np.asarray(correct, dtype=float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = 0.0
    for i in range(bins):
        lo, hi = edges[i], edges[i + 1]
        m = (conf > lo) & (conf <= hi) if i > 0 else (conf >= lo) & (conf <= hi)
        if m.any():
            total += m.sum() / len(conf) * abs(correct[m].mean() - conf[m].mean())
    return total


def indommlu_causal(model_dir, csv_path, strategy, shots, out_path):
    """IndoMMLU's evaluate.py and utils.py (fajri91/IndoMMLU) on a causal LM in fp32 on the CPU,
    one question (and one option) at a time: the prompt from its template with the CSV's fields,
    tokenizer(prompt) with special tokens; `letter`: logits of the last position at
    tokenizer.encode(letter)[-1], confidence = softmax over them; `full-answer`: the mean
    log-probability of all tokens after the first of prompt + option line. Few-shot: the first
    SHOTS rows with is_for_fewshot == 1 of the same subject and level, each
    "soal\njawaban\n\nJawaban: KEY\n\n", after the instruction. Rows with is_for_fewshot == 1
    are not scored. Also the accuracy and the expected calibration error (10 bins) overall and per
    area (questions pooled), as percentages."""
    import math
    import pandas as pd
    from transformers import AutoModelForCausalLM, AutoTokenizer

    shots = int(shots)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    data = pd.read_csv(csv_path)
    demos = data[data["is_for_fewshot"] == 1]
    template = "Ini adalah soal [SUBJECT] untuk [LEVEL]. Pilihlah salah satu jawaban yang dianggap benar!\n\n[INPUT]\n[OPTION]\n\nJawaban: "
    out = {"questions": []}
    for idx, row in data.iterrows():
        if row["is_for_fewshot"] == 1:
            continue
        if row["level"] == "Seleksi PTN":
            level = "seleksi masuk universitas"
        else:
            try:
                level = f"{math.trunc(float(row['kelas']))} {row['level']}"
            except ValueError:
                level = f"{row['kelas']} {row['level']}"
        shown = demos[(demos["subject"] == row["subject"]) & (demos["level"] == row["level"])].head(shots)
        solved = "".join(f"{d['soal']}\n{d['jawaban']}\n\nJawaban: {d['kunci']}\n\n" for _, d in shown.iterrows())
        prompt = (template.replace("[SUBJECT]", row["subject"]).replace("[LEVEL]", level)
                  .replace("[INPUT]", solved + row["soal"]).replace("[OPTION]", row["jawaban"]))
        labels = row["jawaban"].split("\n")
        with torch.no_grad():
            if strategy == "letter":
                choices = ["A", "B", "C", "D", "E"][: len(labels)]
                choice_ids = [tok.encode(c)[-1] for c in choices]
                inputs = tok(prompt, return_tensors="pt")
                logits = model(**inputs).logits[0, -1]
                choice_logits = logits[choice_ids].numpy()
                z = choice_logits - choice_logits.max()
                conf = np.exp(z) / np.exp(z).sum()
                scores = torch.log_softmax(logits.double(), -1)[choice_ids].tolist()
                pred = int(np.argmax(choice_logits))
                ids = inputs["input_ids"][0].tolist()
            else:
                scores = []
                for label in labels:
                    inputs = tok(prompt + label, return_tensors="pt")
                    logits = model(**inputs).logits.to(torch.double)
                    lp = torch.gather(torch.log_softmax(logits, dim=2), 2, inputs["input_ids"][:, 1:].unsqueeze(2))
                    scores.append(lp.mean().item())
                z = np.array(scores) - max(scores)
                conf = np.exp(z) / np.exp(z).sum()
                pred = int(np.argmax(scores))
                ids = tok(prompt + labels[0])["input_ids"]
        key = "ABCDE".index(row["kunci"])
        out["questions"].append({"row": int(idx) + 2, "subject": row["subject"], "scores": [float(x) for x in scores],
                                 "confidence": float(conf[pred]), "pred": pred, "key": key, "shots": len(shown),
                                 "ids": ids})
    qs = out["questions"]
    conf = [q["confidence"] for q in qs]
    right = [q["pred"] == q["key"] for q in qs]
    out["ece"] = 100 * _ece(conf, right)
    out["areas"] = {}
    for area, subjects in INDOMMLU_AREAS.items():
        sel = [i for i, q in enumerate(qs) if q["subject"] in subjects]
        if sel:
            out["areas"][area] = 100 * _ece([conf[i] for i in sel], [right[i] for i in sel])
    json.dump(out, open(out_path, "w"))


if __name__ == "__main__":
    commands = {"make-model": make_model, "check-export": check_export, "tokenize": tokenize, "adamw": adamw, "fused-adamw": fused_adamw, "tb-scalars": tb_scalars, "pll": pll, "crows": crows, "train-vocab": train_vocab_cmd, "write-parquet": write_parquet, "f1": f1, "classify": classify, "indommlu": indommlu, "rouge": rouge, "presumm-decoder": presumm_decoder, "tb-bias": tb_bias, "stats": stats, "aul": aul, "pll-word-l2r": pll_word_l2r, "multibootstrap": multibootstrap, "make-decoder": make_decoder, "causal-ref": causal_ref, "decoder-to-bf16": decoder_to_bf16, "make-xlmr": make_xlmr, "tokenize-auto": tokenize_auto, "bos-template": bos_template, "indommlu-causal": indommlu_causal}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    commands[sys.argv[1]](*sys.argv[2:])
