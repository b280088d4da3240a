"""Generation references: transformers' `model.generate` on the tiny causal LMs of decoders.py (greedy,
batched and one prompt at a time), and its sampling warpers on given scores.

  make-decoders ROOT FAMILY...  make-decoder for each FAMILY into ROOT/FAMILY in one process, each kind of
                          tokenizer (and BOS setting) trained once and copied to the families that share it
                          (the BPE trainers give the same tokenizer every time anyway; Unigram's varies
                          from run to run, so sharing one is as good as training each).
  generate DIR PROMPTS OUT MODE [MAX_NEW_TOKENS]  greedy `model.generate` of the causal LM in DIR (fp32, eager
                          attention but for Falcon with ALiBi, as causal-ref; left padding; pad_token_id the
                          generation config's, else the tokenizer's; EOS ids and everything else from DIR's
                          generation_config.json) over PROMPTS (JSON Lines, {"id", "prompt"} a line), each
                          prompt tokenized as `tokenizer(prompt)`, MAX_NEW_TOKENS new tokens at most (12).
                          MODE `batched`: every prompt in one left-padded batch; `alone`: one prompt a call;
                          `both`: OUT holds {"batched": ..., "alone": ...}, each what that mode writes.
                          OUT JSON {"eos": [...], "pad": id, "prompts": [...]}, per prompt: id, prompt_ids,
                          ids (the new tokens up to and with the first EOS), stop_reason (eos or length),
                          completion (the decoded text after the prompt's, special tokens skipped) and
                          min_margin (the smallest gap between the two best logits over its steps: how near
                          greedy came to a tie).
  warp IN OUT             transformers' TemperatureLogitsWarper, TopKLogitsWarper and TopPLogitsWarper, built
                          and ordered as generate builds them for sampling (min_tokens_to_keep 1, filter value
                          -inf), on IN's scores: JSON [{"scores": [[...]], "temperature": T, "top_k": K,
                          "top_p": P}, ...]; OUT JSON [{"scores": [[...]]}, ...], a case each, null where a
                          score was filtered out.
  chat-render DIR MESSAGES OUT [KWARGS_JSON]  DIR's tokenizer (AutoTokenizer) rendering each conversation of
                          MESSAGES (JSON, a list of conversations, each a list of {"role", "content", ...}
                          messages) with `apply_chat_template(messages, tokenize=False,
                          add_generation_prompt=True, **KWARGS)` (KWARGS_JSON: a JSON object, {} when left
                          out: enable_thinking, tools, ...), and its ids with tokenize=True (checked to be
                          `tokenizer(rendered, add_special_tokens=False)`'s). OUT JSON, a conversation each:
                          {"rendered": TEXT, "ids": [...]}, or {"error": MESSAGE, "type": NAME} where the
                          template refused it (its raise_exception) or failed.
"""
import json
import os
import shutil

import torch

from . import decoders
from .decoders import _attn_implementation


def make_decoders(root, *families):
    trained = {}
    train = decoders._decoder_tokenizer

    def shared(kind, out_dir, bos=True):
        from tokenizers import Tokenizer

        if (kind, bos) not in trained:
            train(kind, out_dir, bos=bos)
            trained[(kind, bos)] = out_dir
        else:
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(os.path.join(trained[(kind, bos)], name), out_dir)
        return Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))

    decoders._decoder_tokenizer = shared
    try:
        for family in families:
            decoders.make_decoder(family, os.path.join(root, family))
    finally:
        decoders._decoder_tokenizer = train


def _load(model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation=_attn_implementation(model_dir),
                                                 dtype=torch.float32)
    model.eval()
    return tok, model


def _eos_ids(model):
    eos = model.generation_config.eos_token_id
    if eos is None:
        return []
    return [eos] if isinstance(eos, int) else list(eos)


def _run(tok, model, prompts, max_new_tokens, pad):
    """Greedy generate over `prompts` in one left-padded batch; per prompt its record."""
    enc = tok(prompts, padding=True, return_tensors="pt")
    eos = _eos_ids(model)
    with torch.no_grad():
        out = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=pad,
                             return_dict_in_generate=True, output_logits=True)
    width = enc["input_ids"].shape[1]
    records = []
    for r in range(len(prompts)):
        prompt_ids = [int(t) for t, m in zip(enc["input_ids"][r], enc["attention_mask"][r]) if m]
        new = [int(t) for t in out.sequences[r, width:]]
        ids, stop = [], "length"
        for t in new:
            ids.append(t)
            if t in eos:
                stop = "eos"
                break
        margin = float("inf")
        for step in range(len(ids)):
            top = torch.topk(out.logits[step][r].float(), 2).values
            margin = min(margin, float(top[0] - top[1]))
        text_ids = [t for t in ids if t not in eos]
        before = tok.decode(prompt_ids, skip_special_tokens=True)
        whole = tok.decode(prompt_ids + text_ids, skip_special_tokens=True)
        completion = whole[len(before):] if whole.startswith(before) else tok.decode(text_ids, skip_special_tokens=True)
        records.append({"prompt_ids": prompt_ids, "ids": ids, "stop_reason": stop, "completion": completion,
                        "min_margin": margin if margin != float("inf") else None})
    return records


def generate(model_dir, prompts_path, out_path, mode, max_new_tokens="12"):
    if mode not in ("batched", "alone", "both"):
        raise SystemExit(f"MODE is `batched`, `alone` or `both`, not {mode!r}")
    torch.set_num_threads(1)  # a tiny model: threads only contend
    tok, model = _load(model_dir)
    lines = [json.loads(line) for line in open(prompts_path, encoding="utf-8") if line.strip()]
    texts = [line["prompt"] for line in lines]
    pad = model.generation_config.pad_token_id
    if pad is None:
        pad = tok.pad_token_id
    n = int(max_new_tokens)

    def run(batched):
        if batched:
            records = _run(tok, model, texts, n, pad)
        else:
            records = [_run(tok, model, [t], n, pad)[0] for t in texts]
        for line, record in zip(lines, records):
            record["id"] = line.get("id")
        return {"eos": _eos_ids(model), "pad": pad, "prompts": records}

    if mode == "both":
        out = {"batched": run(True), "alone": run(False)}
    else:
        out = run(mode == "batched")
    json.dump(out, open(out_path, "w"))


def _warp(spec):
    from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper,
                                                        TopKLogitsWarper, TopPLogitsWarper)

    scores = torch.tensor(spec["scores"], dtype=torch.float32)
    warpers = LogitsProcessorList()
    # generate's order and conditions (GenerationMixin._get_logits_processor, sampling, one beam).
    if spec["temperature"] != 1.0:
        warpers.append(TemperatureLogitsWarper(float(spec["temperature"])))
    if spec["top_k"] != 0:
        warpers.append(TopKLogitsWarper(top_k=int(spec["top_k"]), min_tokens_to_keep=1))
    if spec["top_p"] < 1.0:
        warpers.append(TopPLogitsWarper(top_p=float(spec["top_p"]), min_tokens_to_keep=1))
    out = warpers(torch.zeros((scores.shape[0], 1), dtype=torch.long), scores)
    return {"scores": [[None if v == float("-inf") else float(v) for v in row] for row in out.tolist()]}


def warp(in_path, out_path):
    json.dump([_warp(spec) for spec in json.load(open(in_path))], open(out_path, "w"))


def chat_render(model_dir, messages_path, out_path, kwargs_json="{}"):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    with open(messages_path, encoding="utf-8") as f:
        conversations = json.load(f)
    kwargs = json.loads(kwargs_json)
    out = []
    for messages in conversations:
        try:
            rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs)
            ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=True,
                                          **kwargs)["input_ids"]
        except Exception as e:  # noqa: BLE001 - the template's raise_exception, or Jinja's own error
            out.append({"error": str(e), "type": type(e).__name__})
            continue
        plain = tok(rendered, add_special_tokens=False)["input_ids"]
        if list(ids) != list(plain):
            raise SystemExit(f"apply_chat_template's ids {ids} are not tokenizer(rendered, add_special_tokens=False)'s "
                             f"{plain}")
        out.append({"rendered": rendered, "ids": [int(i) for i in ids]})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
