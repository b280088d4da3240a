"""Summarization references: rouge-score's ROUGE, and PreSumm's BertAbs decoder and label-smoothed
loss recomputed in torch for a model indolm saved. (The Liputan6 Oracle labels are
liputan6_oracle.py's.)

  presumm-decoder DIR REF  BertAbs teacher-forced log-probabilities and loss recomputed for REF's
                          batch: the encoder by transformers' BertModel.from_pretrained(DIR), the
                          decoder by torch.nn.TransformerDecoder (pre-norm layers, tanh GELU,
                          eps 1e-6) on DIR's decoder weights, PreSumm's positional encoding and
                          LabelSmoothingLoss (KL to 1-e on the gold, e/(V-2) elsewhere, pad 0);
                          prints the max abs log-prob difference and both losses as JSON.
  rouge PAIRS OUT         rouge-score's ROUGE-1/2/L (no stemming) of [[prediction, reference], ...].
"""
import json
import os

import torch


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
