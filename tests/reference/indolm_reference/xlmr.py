"""XLM-R references: a tiny random XLMRobertaForMaskedLM (or XLMRobertaModel, as
multilingual-E5) with a SentencePiece Unigram tokenizer.json, and the ids AutoTokenizer gives the
test sentences (for the decoders' tokenizers too).

  make-xlmr DIR [HEAD]    a tiny random XLMRobertaForMaskedLM (HEAD 0: XLMRobertaModel, no lm_head,
                          as multilingual-E5) with a SentencePiece Unigram tokenizer.json trained
                          on the test sentences (XLM-R's special tokens), and reference.safetensors
                          with a padded batch and transformers' logits.
  tokenize-auto DIR OUT   the ids of every test sentence through AutoTokenizer, as JSON.
"""
import json
import os

import torch

from .data import data_sentences

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
