"""Encoder-decoder references: a tiny random MT5ForConditionalGeneration built with
transformers' own class, with a T5-style Unigram tokenizer trained here with `tokenizers`;
IndoMMLU's own evaluate.py/utils.py (fajri91/IndoMMLU) scoring it as it scores mT0; and a tiny
random MBartForConditionalGeneration with one training step of it.

  make-mt5 DIR            a tiny random MT5ForConditionalGeneration (seeded, eager attention,
                          gated-gelu, 2 encoder and 3 decoder layers, relative-position buckets
                          and distance as mT5's, an lm_head of its own: tie_word_embeddings false
                          as mT0's config.json says) saved with safetensors, and a tokenizer.json
                          trained here (Unigram on the test data and the IndoMMLU fixture, <pad>=0,
                          </s>=1, <unk>=2, whitespace split then Metaspace, a T5 post-processor
                          appending </s>) saved by transformers' PreTrainedTokenizerFast.
  indommlu-mt0 DIR CSV STRATEGY OUT  IndoMMLU's evaluate.py with utils.py's mT0 functions
                          (predict_classification_mt0 for full-answer,
                          predict_classification_mt0_by_letter for letter) on every row of CSV
                          (is_for_fewshot rows too, as the script does), one question at a time
                          in fp32 on the CPU: per-question scores (full-answer: each option's
                          mean label log-probability; letter: each letter's log-probability at
                          the last decoder position), confidence, prediction and key. OUT JSON.
  make-mbart DIR          a tiny random MBartForConditionalGeneration (seeded, eager attention,
                          2 encoder and 3 decoder layers, 4 heads, scale_embedding, gelu, every
                          weight and final_logits_bias moved off its init value, dropout 0)
                          saved with safetensors; no tokenizer (the tests feed ids).
  mbart-step DIR BATCH OUT  BATCH JSON {"input_ids", "attention_mask", "labels" (-100 padding)}:
                          the model's loss with labels (decoder inputs from shift_tokens_right),
                          the decoder inputs, the logits, every parameter's gradient after
                          loss.backward(), and the loss after one torch.optim.AdamW step
                          (lr 1e-3, weight decay 0.01). OUT JSON.
  mbart-generate DIR INPUT OUT  INPUT JSON {"input_ids", "attention_mask", "settings":
                          [{"decoder_start" (ids per row, starting with 2), "num_beams",
                          "max_length", "length_penalty", "early_stopping" (true, false or
                          "never"), "forced_bos_token_id", "forced_eos_token_id"}]}: model.generate with exactly those settings
                          (a fresh GenerationConfig: eos 2, pad 1, no other processor), each
                          setting's sequences and sequences_scores. OUT JSON.
  make-mt-model DIR CSV [SPM_DIR]
                          a tiny random MBartForConditionalGeneration to fine-tune on NusaX-MT
                          (2 encoder and 2 decoder layers, d_model 64, 4 heads, dropout 0.1,
                          scale_embedding, 128 positions, forced_eos_token_id 2), with a
                          tokenizer.json trained here (BPE on every column of CSV lowercased,
                          <s>=0 <pad>=1 </s>=2 <unk>=3 as mBART, then one language token a
                          NusaX language: [ace] … [sun], whitespace split then Metaspace) saved
                          by transformers' PreTrainedTokenizerFast. With SPM_DIR (make-mt-model
                          DIR CSV SPM_DIR), IndoBART-v2's layout instead: SPM_DIR's
                          sentencepiece.bpe.model and tokenizer_config.json (make-spm's, 40000
                          pieces) copied, no tokenizer.json, vocab_size 40004.
  mt-generate DIR INPUT OUT  INPUT JSON {"texts", "source_token", "target_token", "num_beams",
                          "max_length", "length_penalty"}: each text lowercased and tokenized by
                          the folder's tokenizer without special tokens, cut and closed as
                          IndoNLG's mBART collate does (`<sent></s><src>`, at most max_length),
                          translated alone by the folder's model with model.generate
                          (decoder_start_token_id the target token, early_stopping=True, the
                          saved generation config's forced_eos_token_id), decoded with
                          skip_special_tokens=True. OUT JSON list.
"""
import json
import math
import os

import numpy as np
import torch

from .data import data_sentences

# The fixture's CSV (tests/fixtures/indommlu), whose questions the tokenizer also learns from.
INDOMMLU_FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "indommlu",
                                "indoMMLU-fixture.csv")


def _fixture_texts():
    """The fixture's questions and options, so its prompts tokenize into learned pieces."""
    import csv

    with open(INDOMMLU_FIXTURE, newline="", encoding="utf-8") as f:
        return [row["soal"] + "\n" + row["jawaban"] for row in csv.DictReader(f)]


def _mt5_tokenizer(out_dir):
    """A T5-style tokenizer.json (Unigram, <pad>=0, </s>=1, <unk>=2, `$A </s>`) saved by
    transformers; returns the transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True),
    ])
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.UnigramTrainer(vocab_size=700, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>")
    tok.train_from_iterator(data_sentences()[:3000] + _fixture_texts(), trainer=trainer)
    assert [tok.token_to_id(t) for t in ("<pad>", "</s>", "<unk>")] == [0, 1, 2]
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                       special_tokens=[("</s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>")
    fast.save_pretrained(out_dir)
    return fast


def make_mt5(out_dir):
    import transformers as tr

    torch.set_num_threads(1)  # a tiny model: threads only contend
    os.makedirs(out_dir, exist_ok=True)
    tok = _mt5_tokenizer(out_dir)
    torch.manual_seed(2468)
    config = tr.MT5Config(vocab_size=len(tok) + 5, d_model=64, d_kv=16, d_ff=96, num_layers=2, num_decoder_layers=3,
                          num_heads=4, relative_attention_num_buckets=32, relative_attention_max_distance=128,
                          feed_forward_proj="gated-gelu", dropout_rate=0.0, pad_token_id=0, eos_token_id=1,
                          decoder_start_token_id=0)
    config._attn_implementation = "eager"
    model = tr.MT5ForConditionalGeneration(config)
    with torch.no_grad():
        # An lm_head of its own, as mT5's and mT0's checkpoints have (logits of a few units).
        model.lm_head.weight = torch.nn.Parameter(torch.randn(config.vocab_size, config.d_model) * 0.25)
        for p in model.parameters():  # move every parameter off its init value (norm weights 1)
            p.add_(torch.randn_like(p) * 0.1)
    model.eval()
    model.save_pretrained(out_dir)
    # As mT5's and mT0's hub config.json says; transformers keeps the saved lm_head because it
    # differs from the embeddings.
    path = os.path.join(out_dir, "config.json")
    cfg = json.load(open(path))
    cfg["tie_word_embeddings"] = False
    cfg["architectures"] = ["MT5ForConditionalGeneration"]
    json.dump(cfg, open(path, "w"), indent=2)
    # The saved folder gives back the logits of the model in memory.
    loaded = tr.MT5ForConditionalGeneration.from_pretrained(out_dir, attn_implementation="eager",
                                                            dtype=torch.float32).eval()
    ids = torch.tensor([tok("Ibu kota Indonesia adalah Jakarta.")["input_ids"]])
    dec = torch.tensor([[0, 5, 7]])
    with torch.no_grad():
        a, b = model(input_ids=ids, decoder_input_ids=dec).logits, loaded(input_ids=ids, decoder_input_ids=dec).logits
    assert torch.equal(a, b), "the saved folder does not reproduce the model"
    assert not torch.equal(loaded.lm_head.weight, loaded.shared.weight)
    print(json.dumps({"dir": out_dir, "params": sum(p.numel() for p in model.parameters()), "vocab": len(tok)}))


# utils.py's mT0 functions, verbatim but for the device ('cuda' -> the CPU) and what the JSON
# needs besides: the full vocabulary's log-probabilities of the letters.

@torch.no_grad()
def get_logprobs_mt0(model, tokenizer, prompt, device, label_ids=None, label_attn=None):
    import torch.nn.functional as F

    inputs = tokenizer(prompt, return_tensors="pt", truncation=True, max_length=1024).to(device)
    outputs = model(**inputs, decoder_input_ids=model._shift_right(label_ids))
    logits = outputs.logits
    logprobs = torch.gather(F.log_softmax(logits, dim=2), 2, label_ids.unsqueeze(2)) * label_attn.unsqueeze(2)
    return logprobs.sum() / label_attn.sum()


def predict_classification_mt0(model, tokenizer, input_text, labels, device):
    labels_encoded = tokenizer(labels, add_special_tokens=False, padding=True, return_tensors='pt')
    list_label_ids = labels_encoded['input_ids'].to(device)
    list_label_attn = labels_encoded['attention_mask'].to(device)
    probs = [get_logprobs_mt0(model, tokenizer, input_text, device, label_ids.view(1, -1), label_attn.view(1, -1))
             for (label_ids, label_attn) in zip(list_label_ids, list_label_attn)]
    return probs


def predict_classification_mt0_by_letter(model, tokenizer, input_text, labels, device):
    """utils.py's function; also returns the letters' log-probabilities over the vocabulary."""
    choices = ['A', 'B', 'C', 'D', 'E'][:len(labels)]
    choice_ids = [tokenizer.encode(choice)[0] for choice in choices]
    with torch.no_grad():
        start_token = tokenizer('<pad>', return_tensors="pt").to(device)
        inputs = tokenizer(input_text, return_tensors="pt").to(device)
        outputs = model(**inputs, decoder_input_ids=start_token['input_ids'])
        last_token_logits = outputs.logits[:, -1, :]
        choice_logits = last_token_logits[:, choice_ids].detach().cpu().numpy()
        z = choice_logits[0] - choice_logits[0].max()
        conf = np.exp(z) / np.exp(z).sum()  # scipy's softmax
        pred = {0: "A", 1: "B", 2: "C", 3: "D", 4: "E"}[np.argmax(choice_logits[0])]
        log_probs = torch.log_softmax(last_token_logits[0].double(), -1)[choice_ids].tolist()
    return conf, pred, log_probs, choice_ids, start_token['input_ids'][0].tolist()


def indommlu_mt0(model_dir, csv_path, strategy, out_path):
    """evaluate.py's loop for an mT0 model (AutoModelForSeq2SeqLM), every row of the CSV, on the
    CPU in fp32: the prompt from its template with the CSV's fields; `full-answer`
    (predict_classification_mt0): each option line's mean log-probability as the decoder's
    labels, pred = argmax; `letter` (predict_classification_mt0_by_letter): the letters'
    logits at the last decoder position after tokenizer('<pad>'), confidence = their softmax.
    OUT JSON: {"questions": [{"row", "subject", "scores", "confidence", "pred", "key", "ids"}]},
    `ids` the encoder's input ids (full-answer: truncated to 1024 tokens)."""
    import pandas as pd
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    device = "cpu"
    torch.set_num_threads(1)  # a tiny model, one question at a time: threads only contend
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    template = "Ini adalah soal [SUBJECT] untuk [LEVEL]. Pilihlah salah satu jawaban yang dianggap benar!\n\n[INPUT]\n[OPTION]\n\nJawaban: "
    key2id = {'A': 0, 'B': 1, 'C': 2, 'D': 3, 'E': 4}
    data = pd.read_csv(csv_path)
    out = {"questions": []}
    for idx, row in data.iterrows():
        if row['level'] == 'Seleksi PTN':
            level = 'seleksi masuk universitas'
        else:
            try:
                level = f"{math.trunc(float(row['kelas']))} {row['level']}"
            except ValueError:
                level = f"{row['kelas']} {row['level']}"
        prompt = (template.replace('[SUBJECT]', row['subject']).replace('[LEVEL]', level)
                  .replace('[INPUT]', row['soal']).replace('[OPTION]', row['jawaban']))
        labels = row['jawaban'].split('\n')
        if strategy == "letter":
            conf, pred, scores, choice_ids, decoder_ids = predict_classification_mt0_by_letter(
                model, tokenizer, prompt, labels, device)
            pred = key2id[pred]
            ids = tokenizer(prompt)["input_ids"]
            extra = {"choice_ids": choice_ids, "decoder_ids": decoder_ids}
        elif strategy == "full-answer":
            scores = [o.cpu().detach().item() for o in predict_classification_mt0(model, tokenizer, prompt, labels,
                                                                                   device)]
            pred = int(np.argmax(scores))
            z = np.array(scores) - max(scores)
            conf = np.exp(z) / np.exp(z).sum()
            ids = tokenizer(prompt, truncation=True, max_length=1024)["input_ids"]
            extra = {"label_ids": [tokenizer(l, add_special_tokens=False)["input_ids"] for l in labels]}
        else:
            raise SystemExit(f"unknown strategy {strategy} (letter or full-answer)")
        out["questions"].append({"row": int(idx) + 2, "subject": row["subject"],
                                 "for_fewshot": int(row.get("is_for_fewshot", 0) == 1),
                                 "scores": [float(x) for x in scores], "confidence": float(conf[pred]),
                                 "pred": int(pred), "key": key2id[row['kunci']], "ids": ids, **extra})
    json.dump(out, open(out_path, "w"))


def make_mbart(out_dir):
    import transformers as tr

    torch.set_num_threads(1)
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(1357)
    config = tr.MBartConfig(vocab_size=97, d_model=32, encoder_layers=2, decoder_layers=3, encoder_attention_heads=4,
                            decoder_attention_heads=4, encoder_ffn_dim=48, decoder_ffn_dim=40,
                            max_position_embeddings=40, scale_embedding=True, activation_function="gelu",
                            dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, pad_token_id=1,
                            bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
    config._attn_implementation = "eager"
    model = tr.MBartForConditionalGeneration(config)
    with torch.no_grad():
        for p in model.parameters():  # off the init values: layer norms not 1 and 0
            p.add_(torch.randn_like(p) * 0.1)
        model.final_logits_bias.copy_(torch.randn_like(model.final_logits_bias) * 0.5)
        model.final_logits_bias[0, 2] = 1.5  # </s> likely enough that beams finish at varied lengths
    model.eval()
    model.save_pretrained(out_dir)
    loaded = tr.MBartForConditionalGeneration.from_pretrained(out_dir, attn_implementation="eager",
                                                              dtype=torch.float32).eval()
    ids = torch.tensor([[5, 9, 13, 2, 60]])
    with torch.no_grad():
        a = model(input_ids=ids, decoder_input_ids=ids).logits
        b = loaded(input_ids=ids, decoder_input_ids=ids).logits
    assert torch.equal(a, b), "the saved folder does not reproduce the model"
    print(json.dumps({"dir": out_dir, "params": sum(p.numel() for p in model.parameters())}))


def mbart_step(model_dir, batch_path, out_path):
    import transformers as tr
    from transformers.models.mbart.modeling_mbart import shift_tokens_right

    torch.set_num_threads(1)
    model = tr.MBartForConditionalGeneration.from_pretrained(model_dir, attn_implementation="eager",
                                                             dtype=torch.float32)
    model.train()  # dropout 0: train mode changes nothing but is how a step runs
    batch = json.load(open(batch_path))
    ids, mask, labels = (torch.tensor(batch[k]) for k in ("input_ids", "attention_mask", "labels"))
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()
    grads = {name: p.grad.flatten().tolist() for name, p in model.named_parameters() if p.grad is not None}
    result = {
        "loss": out.loss.item(),
        "decoder_input_ids": shift_tokens_right(labels, model.config.pad_token_id).tolist(),
        "logits": out.logits.detach().flatten().tolist(),
        "grads": grads,
    }
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    optimizer.step()
    with torch.no_grad():
        result["loss_after_step"] = model(input_ids=ids, attention_mask=mask, labels=labels).loss.item()
    json.dump(result, open(out_path, "w"))


def mbart_generate(model_dir, input_path, out_path):
    import transformers as tr

    torch.set_num_threads(1)
    model = tr.MBartForConditionalGeneration.from_pretrained(model_dir, attn_implementation="eager",
                                                             dtype=torch.float32).eval()
    # Nothing from the saved generation config (MBartConfig's forced_eos_token_id=2) fills in what
    # a setting leaves unset.
    model.generation_config = tr.GenerationConfig(eos_token_id=2, pad_token_id=1, decoder_start_token_id=2)
    spec = json.load(open(input_path))
    ids, mask = (torch.tensor(spec[k]) for k in ("input_ids", "attention_mask"))
    results = []
    for setting in spec["settings"]:
        setting = dict(setting)
        start = torch.tensor(setting.pop("decoder_start"))
        config = tr.GenerationConfig(do_sample=False, eos_token_id=2, pad_token_id=1, decoder_start_token_id=2,
                                     num_return_sequences=1, return_dict_in_generate=True, output_scores=True,
                                     **setting)
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, decoder_input_ids=start, generation_config=config)
        results.append({"sequences": out.sequences.tolist(), "scores": out.sequences_scores.tolist()})
    json.dump(results, open(out_path, "w"))


# The language tokens of make-mt-model's tokenizer, by NusaX code.
MT_LANGUAGE_CODES = ["ace", "ban", "bbc", "bjn", "bug", "eng", "ind", "jav", "mad", "min", "nij", "sun"]


def make_mt_model(out_dir, csv_path, spm_dir=None):
    import csv
    import shutil

    import transformers as tr
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    torch.set_num_threads(1)
    os.makedirs(out_dir, exist_ok=True)
    if spm_dir is not None:
        # IndoBART-v2's layout: IndoNLG's SentencePiece files, no tokenizer.json, 40004 tokens.
        for name in ["sentencepiece.bpe.model", "tokenizer_config.json"]:
            shutil.copy(os.path.join(spm_dir, name), os.path.join(out_dir, name))
        return _save_mt_model(out_dir, tr, 40004)
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    texts = [v.lower() for row in rows for k, v in row.items() if k]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True),
    ])
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    specials = ["<s>", "<pad>", "</s>", "<unk>"] + [f"[{c}]" for c in MT_LANGUAGE_CODES]
    trainer = trainers.BpeTrainer(vocab_size=2000, min_frequency=2, special_tokens=specials)
    tok.train_from_iterator(texts, trainer=trainer)
    assert [tok.token_to_id(t) for t in specials] == list(range(len(specials)))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   unk_token="<unk>", additional_special_tokens=specials[4:])
    fast.save_pretrained(out_dir)
    _save_mt_model(out_dir, tr, len(fast))


def _save_mt_model(out_dir, tr, vocab_size):
    torch.manual_seed(2468)
    config = tr.MBartConfig(vocab_size=vocab_size, d_model=64, encoder_layers=2, decoder_layers=2,
                            encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                            decoder_ffn_dim=128, max_position_embeddings=128, scale_embedding=True,
                            activation_function="gelu", dropout=0.1, attention_dropout=0.0, activation_dropout=0.0,
                            pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2,
                            forced_eos_token_id=2)
    model = tr.MBartForConditionalGeneration(config)
    model.save_pretrained(out_dir)
    print(json.dumps({"dir": out_dir, "vocab": vocab_size, "params": sum(p.numel() for p in model.parameters())}))


def mt_generate(model_dir, input_path, out_path):
    import transformers as tr

    torch.set_num_threads(1)
    model = tr.MBartForConditionalGeneration.from_pretrained(model_dir, attn_implementation="eager",
                                                             dtype=torch.float32).eval()
    tokenizer = tr.AutoTokenizer.from_pretrained(model_dir)
    spec = json.load(open(input_path))
    src, tgt = (tokenizer.convert_tokens_to_ids(spec[k]) for k in ("source_token", "target_token"))
    out = []
    for text in spec["texts"]:
        words = tokenizer.encode(" ".join(text.splitlines()).lower(), add_special_tokens=False)
        ids = torch.tensor([words[:spec["max_length"] - 2] + [tokenizer.eos_token_id, src]])
        with torch.no_grad():
            hyp = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), num_beams=spec["num_beams"],
                                 max_length=spec["max_length"], early_stopping=True,
                                 length_penalty=spec["length_penalty"], decoder_start_token_id=tgt,
                                 pad_token_id=1, eos_token_id=2, do_sample=False)
        out.append(tokenizer.decode(hyp[0], skip_special_tokens=True))
    json.dump(out, open(out_path, "w"))
