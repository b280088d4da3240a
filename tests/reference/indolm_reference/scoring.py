"""Bias-scoring references on a masked LM with transformers, one sentence at a time: the
pseudo-log-likelihood (mlm-scoring's, and minicons' PLL-word-l2r), CrowS-Pairs' metric.py and
Kaneko & Bollegala's AUL/AULA. _load_mlm and _masked_log_probs (one mask a forward pass) serve
indommlu.py too.

  pll DIR SENTENCES OUT    per-sentence PLL with transformers' BertForMaskedLM, masking one token
                          per forward pass as mlm-scoring does ([CLS]/[SEP] never scored); OUT JSON.
  crows DIR PAIRS OUT      CrowS-Pairs metric.py scoring of tab-separated pairs: difflib "equal"
                          blocks of the two id lists, first/last shared skipped, one mask a pass.
  aul DIR SENTENCES OUT    Kaneko & Bollegala's evaluate.py on each sentence, one at a time:
                          BertForMaskedLM (eager attention, output_attentions=True), nothing
                          masked; AUL = mean log-prob of tokens 1..n-1, AULA = mean of the
                          log-probs weighted by the attention each position receives (mean over
                          layers, then heads, then queries; not renormalised); also the rank-1
                          hits. OUT JSON.
  pll-word-l2r DIR SENTENCES OUT  PLL-word-l2r (minicons within_word_l2r): for each token, mask
                          it and the later tokens of its word (the fast tokenizer's word_ids()),
                          one forward pass per token; also the rank-1 hits. OUT JSON.
"""
import json

import torch


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
