"""Causal LM (decoder) references: tiny random models of each family indolm loads, built with
transformers' own classes, with tokenizers trained here with `tokenizers` (_decoder_tokenizer,
also used by tests/gpu/make_causal.py); per-token log-probabilities as lm-evaluation-harness
computes them; a bf16 copy and a Llama-style BOS template.

  make-decoder FAMILY DIR [POSITIONS]  a tiny random causal LM of FAMILY (llama, llama3, mistral, qwen2, qwen3,
                          gemma2, gemma3, olmo2, olmo3, bloom, xglm; gemma3mm: a Gemma3ForConditionalGeneration
                          with a vision tower and a config as sparse as the hub's; olmo3yarn: OLMo 3 with
                          YaRN RoPE scaling on its full-attention layers; falcon: falcon-7b's layout (rotary,
                          multi-query, parallel attention, no biases); falcon40b: falcon-40b's (the new
                          decoder architecture, 2 key/value groups over 4 heads, ln_attn and ln_mlp);
                          falconalibi: falcon-rw's (ALiBi, biases, sequential attention and MLP, one key
                          and value per head); gpt2: GPT2LMHeadModel, IndoGPT's layout (learned positions,
                          Conv1D projections, gelu_new, tied head)) built with transformers' own class
                          (seeded, eager attention, GQA 4:2 where the family has it, a sliding
                          window shorter than the test sentences), saved with safetensors (sharded
                          for some), and a tokenizer.json trained here with `tokenizers` (byte-level
                          BPE, Metaspace BPE or Unigram, with <s>/</s>); then causal-ref on
                          DECODER_SENTENCES (DIR/sentences.txt) into DIR/reference.json.
                          POSITIONS: max_position_embeddings (128).
  causal-ref DIR SENTENCES OUT  per-token log-probabilities of each sentence (a line) after the
                          prefix token, lm-evaluation-harness's rule for CrowS-Pairs: AutoTokenizer
                          ids without special tokens, context [bos_token_id, else eos_token_id], no
                          EOS; one sentence a forward pass (batch 1, no padding), eager attention but
                          for Falcon with ALiBi (SDPA: see _attn_implementation). OUT JSON.
  decoder-to-bf16 SRC OUT  the causal LM in SRC saved in bf16 to OUT, with its tokenizer and a
                          reference.json computed by transformers in fp32 from the saved
                          (bf16-rounded) weights.
  bos-template DIR        a Llama-style <s> post-processor for DIR's tokenizer.json.
"""
import json
import os
import shutil
import sys

import torch

from .data import data_sentences

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
                      "olmo3": "metaspace", "olmo3yarn": "metaspace", "bloom": "bytelevel", "gemma3mm": "unigram",
                      "xglm": "unigram", "falcon": "bytelevel", "falcon40b": "bytelevel", "falconalibi": "bytelevel",
                      "gpt2": "bytelevel"}


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
    elif family == "olmo3yarn":  # OLMo 3 7B's long-context layout: YaRN on the full-attention layers
        yarn = {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 8.0, "original_max_position_embeddings": 16,
                "beta_fast": 32, "beta_slow": 1}
        config = tr.Olmo3Config(**common, sliding_window=5,
                                layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                rope_parameters={"full_attention": yarn,
                                                 "sliding_attention": {"rope_type": "default", "rope_theta": 500000.0}})
        cls = tr.Olmo3ForCausalLM
    elif family == "bloom":
        config = tr.BloomConfig(vocab_size=vocab, hidden_size=64, n_layer=3, n_head=4, **ids)
        cls = tr.BloomForCausalLM
    elif family == "xglm":  # xglm-564M's layout; pad_token_id 4 (hub: 1) makes transformers zero the sinusoidal
        # table's row 4, the third position's (an unused row for the hub's pad id 1)
        config = tr.XGLMConfig(vocab_size=vocab, d_model=64, ffn_dim=112, num_layers=3, attention_heads=4,
                               max_position_embeddings=int(positions), activation_function="gelu",
                               scale_embedding=True, **{**ids, "pad_token_id": 4})
        cls = tr.XGLMForCausalLM
    elif family in ("falcon", "falcon40b", "falconalibi"):
        shared = dict(vocab_size=vocab, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                      max_position_embeddings=int(positions), **ids)
        if family == "falcon":  # falcon-7b: rotary, one key/value head, attention and MLP in parallel
            extra = dict(multi_query=True, parallel_attn=True, bias=False, alibi=False, new_decoder_architecture=False,
                         rope_theta=500.0)
        elif family == "falcon40b":  # falcon-40b: key/value groups in the fused projection, ln_attn and ln_mlp
            extra = dict(new_decoder_architecture=True, num_kv_heads=2, multi_query=True, parallel_attn=True,
                         bias=False, alibi=False, ffn_hidden_size=112, tie_word_embeddings=False)
        else:  # falcon-rw-1b: ALiBi, biases, attention then MLP, a key and value per head
            extra = dict(alibi=True, bias=True, parallel_attn=False, multi_query=False, new_decoder_architecture=False)
        config, cls = tr.FalconConfig(**shared, **extra), tr.FalconForCausalLM
    elif family == "gpt2":  # IndoGPT's layout (GPT2LMHeadModel); n_inner narrower than 4 × n_embd
        config = tr.GPT2Config(vocab_size=vocab, n_embd=64, n_layer=3, n_head=4, n_inner=112,
                               n_positions=int(positions), activation_function="gelu_new", **ids)
        cls = tr.GPT2LMHeadModel
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


def _attn_implementation(model_dir):
    """Eager attention, except for Falcon with ALiBi: transformers 5's eager FalconAttention adds the ALiBi bias
    twice (to the scores, and again through the causal mask FalconModel folds it into), while its SDPA path, its
    4.x eager path and the original Falcon code add it once; SDPA (fp32 here) is what those models compute."""
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    return "sdpa" if cfg.get("model_type") == "falcon" and cfg.get("alibi") else "eager"


def causal_ref(model_dir, sentences_path, out_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, attn_implementation=_attn_implementation(model_dir),
                                                 dtype=torch.float32)
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
