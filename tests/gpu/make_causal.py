"""A random Llama-shaped causal LM for the device check's `causal` step, built with transformers'
own class (the GPU machine has transformers and tokenizers): a byte-level BPE tokenizer.json
trained on the repository's test sentences with <s>/</s>, and the weights saved in bf16.

  make_causal.py OUT SIZE      SIZE: tiny (CPU rehearsal) or full (8 layers, hidden 1024, GQA 16:4)
"""
import os
import sys

import torch

from indolm_reference.decoders import _decoder_tokenizer


def main(out_dir, size):
    import transformers as tr

    os.makedirs(out_dir, exist_ok=True)
    tok = _decoder_tokenizer("bytelevel", out_dir)
    dims = {"tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2),
            "full": dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                         num_key_value_heads=4)}[size]
    config = tr.LlamaConfig(vocab_size=tok.get_vocab_size(), max_position_embeddings=2048,
                            bos_token_id=tok.token_to_id("<s>"), eos_token_id=tok.token_to_id("</s>"),
                            pad_token_id=tok.token_to_id("<pad>"), tie_word_embeddings=False, **dims)
    torch.manual_seed(0)
    model = tr.LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out_dir)
    print(f"causal LM: Llama-shaped, {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M parameters, bf16")


if __name__ == "__main__":
    main(*sys.argv[1:3])
