"""IndoMMLU references: per-option scores of the questions on a masked LM (the prompt built here
from the paper's text), and IndoMMLU's own evaluate.py/utils.py on a causal LM with the expected
calibration error overall and per area (INDOMMLU_AREAS, the paper's grouping of subjects).

  indommlu DIR CSV MODE OUT [all]  per-option scores of the IndoMMLU questions in CSV with transformers:
                          option-pll (mean PLL of the option's tokens after the prompt, one mask
                          a forward pass) or letter (log-prob of the option letters at one
                          [MASK] after "Jawaban:"); the prompt built here from the paper's text;
                          `all`: every row, the is_for_fewshot demonstrations included, as the
                          paper's zero-shot tables score them.
  indommlu-causal DIR CSV STRATEGY SHOTS OUT [all]  IndoMMLU's own evaluate.py/utils.py on a causal LM
                          (letter or full-answer), zero- or few-shot, one question at a time in
                          fp32: per-question scores, confidence, prediction and prompt ids, the
                          expected calibration error overall and per area, and the paper's
                          breakdowns computed here from the predictions: accuracy per subject and
                          level (Table 4), per area and their average (Table 3), with and without
                          negation per area (Table 5), Indonesian language by grade (Fig. 5), and
                          Pearson's r of the subject/levels' mean confidence with their accuracy
                          (Fig. 8). `all`: every row, as evaluate.py scores them (zero-shot only).
                          OUT JSON.
"""
import csv
import json
import os

import numpy as np
import torch

from .scoring import _load_mlm, _masked_log_probs

INDOMMLU_AREAS = {
    "STEM": ["Kimia", "Biologi", "IPA", "Fisika"],
    "Social science": ["Geografi", "IPS", "Sosiologi", "Ekonomi", "PPKN"],
    "Humanities": ["Sejarah", "Agama Kristen", "Agama Islam", "Agama Hindu", "Kesenian", "Penjaskes"],
    "Indonesian language": ["Bahasa Indonesia"],
    "Local languages and cultures": ["Bahasa Lampung", "Bahasa Bali", "Bahasa Makassar", "Bahasa Banjar",
                                     "Bahasa Madura", "Bahasa Sunda", "Bahasa Jawa", "Bahasa Dayak Ngaju",
                                     "Budaya Alam Minangkabau"],
}


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


def indommlu(model_dir, csv_path, mode, out_path, rows="held-out"):
    model, tok = _load_mlm(model_dir)
    max_len = model.config.max_position_embeddings
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]
    out = []
    with open(csv_path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            if row.get("is_for_fewshot", "0") == "1" and rows != "all":  # demonstrations, not questions
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


NEGATIONS = ["kecuali", "yang bukan", "yang tidak"]  # the paper's footnote 10


def _breakdowns(qs):
    """The paper's tables from per-question dicts (subject, level, kelas, soal, pred, key,
    confidence), computed here independently of indolm."""
    import math

    def acc(sel):
        return 100.0 * sum(q["pred"] == q["key"] for q in sel) / len(sel) if sel else 0.0

    def group(key):
        out = {}
        for q in qs:
            out.setdefault(key(q), []).append(q)
        return out

    subject_level = {k: {"accuracy": acc(v), "questions": len(v),
                         "confidence": 100.0 * float(np.mean([q["confidence"] for q in v]))}
                     for k, v in group(lambda q: f"{q['subject']} / {q['level']}").items()}
    subjects = {k: acc(v) for k, v in group(lambda q: q["subject"]).items()}
    areas, negation = {}, {}
    for area, members in INDOMMLU_AREAS.items():
        accs = [a for s, a in subjects.items() if s in members]
        if accs:
            areas[area] = float(np.mean(accs))
        sel = [q for q in qs if q["subject"] in members]
        if sel:
            neg = [q for q in sel if any(n in q["soal"].lower() for n in NEGATIONS)]
            rest = [q for q in sel if not any(n in q["soal"].lower() for n in NEGATIONS)]
            negation[area] = {"with": [acc(neg), len(neg)], "without": [acc(rest), len(rest)]}
    grades = {}
    for q in qs:
        if q["subject"] == "Bahasa Indonesia":
            g = "UE" if q["level"] == "Seleksi PTN" else str(math.trunc(float(q["kelas"])))
            grades.setdefault(g, []).append(q)
    conf = [v["confidence"] for v in subject_level.values()]
    accs = [v["accuracy"] for v in subject_level.values()]
    r = float(np.corrcoef(conf, accs)[0, 1]) if len(conf) > 1 else None
    return {"subject_level": subject_level, "areas": areas, "average": float(np.mean(list(areas.values()))),
            "negation": negation, "grades": {g: [acc(v), len(v)] for g, v in grades.items()},
            "confidence_accuracy_r": r}


def indommlu_causal(model_dir, csv_path, strategy, shots, out_path, rows="held-out"):
    """IndoMMLU's evaluate.py and utils.py (fajri91/IndoMMLU) on a causal LM in fp32 on the CPU,
    one question (and one option) at a time: the prompt from its template with the CSV's fields,
    tokenizer(prompt) with special tokens; `letter`: logits of the last position at
    tokenizer.encode(letter)[-1], confidence = softmax over them; `full-answer`: the mean
    log-probability of all tokens after the first of prompt + option line. Few-shot: the first
    SHOTS rows with is_for_fewshot == 1 of the same subject and level, each
    "soal\njawaban\n\nJawaban: KEY\n\n", after the instruction. Rows with is_for_fewshot == 1
    are not scored unless `rows` is "all" (evaluate.py's own zero-shot run scores every row).
    Also the accuracy and the expected calibration error (10 bins) overall and per area
    (questions pooled), as percentages. A PEFT adapter folder (adapter_config.json) is run as
    evaluate.py runs --lora_weights: PeftModel over its base (base_model_name_or_path, relative
    to the folder) with the script's `### Input:` … `### Output:` prompt."""
    import math
    import pandas as pd
    from transformers import AutoModelForCausalLM, AutoTokenizer

    shots = int(shots)
    assert rows in ("held-out", "all") and (rows == "held-out" or shots == 0), rows
    template = "Ini adalah soal [SUBJECT] untuk [LEVEL]. Pilihlah salah satu jawaban yang dianggap benar!\n\n[INPUT]\n[OPTION]\n\nJawaban: "
    adapter = os.path.join(model_dir, "adapter_config.json")
    if os.path.exists(adapter):  # evaluate.py --lora_weights: PeftModel over the base, its instruction prompt
        from peft import PeftModel
        with open(adapter) as f:
            base = os.path.join(model_dir, json.load(f)["base_model_name_or_path"])
        tok = AutoTokenizer.from_pretrained(base)
        model = AutoModelForCausalLM.from_pretrained(base, attn_implementation="eager", dtype=torch.float32)
        model = PeftModel.from_pretrained(model, model_dir)
        template = '### Input:\nIni adalah soal [SUBJECT] untuk [LEVEL]. Pilihlah salah satu jawaban yang dianggap benar!\n\n[INPUT]\n[OPTION]\n\nJawaban: ### Output:\n'
    else:
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation="eager", dtype=torch.float32)
    model.eval()
    data = pd.read_csv(csv_path)
    demos = data[data["is_for_fewshot"] == 1]
    out = {"questions": []}
    for idx, row in data.iterrows():
        if row["is_for_fewshot"] == 1 and rows != "all":
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
                                 "ids": ids, "level": row["level"], "kelas": "" if pd.isna(row["kelas"]) else str(row["kelas"]),
                                 "soal": row["soal"]})
    qs = out["questions"]
    conf = [q["confidence"] for q in qs]
    right = [q["pred"] == q["key"] for q in qs]
    out["ece"] = 100 * _ece(conf, right)
    out["areas"] = {}
    for area, subjects in INDOMMLU_AREAS.items():
        sel = [i for i, q in enumerate(qs) if q["subject"] in subjects]
        if sel:
            out["areas"][area] = 100 * _ece([conf[i] for i in sel], [right[i] for i in sel])
    out["breakdowns"] = _breakdowns(qs)
    json.dump(out, open(out_path, "w"))
