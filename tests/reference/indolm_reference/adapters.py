"""PEFT LoRA adapters (IndoMMLU's Bactrian-X is one, over LLaMA 7B): a LoRA adapter made with
peft over a tiny causal LM from make-decoder, saved as peft saves one, and the per-token
log-probabilities of PeftModel.from_pretrained(base, adapter) (the adapter applied beside each
layer, not merged; what IndoMMLU's evaluate.py runs), which indolm's merge at load must give.

  make-lora BASE OUT [VARIANT]  a LoRA adapter over the causal LM in BASE (make-decoder llama): r=4,
                          lora_alpha=8 on q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj and
                          down_proj, every LoRA B set to seeded random values (not peft's zero init,
                          so that the adapter changes the scores), saved with save_pretrained to
                          OUT (adapter_config.json, adapter_model.safetensors) with
                          base_model_name_or_path the path of BASE relative to OUT; then
                          decoders.py's causal-ref rule on BASE/sentences.txt, scored by PeftModel
                          over BASE, into OUT/reference.json. VARIANT rslora: use_rslora (scaling
                          alpha/sqrt(r)) with rank_pattern {model.layers.0.self_attn.q_proj: 2,
                          down_proj: 6} and alpha_pattern {v_proj: 3}; bin: the plain adapter saved
                          as adapter_model.bin (safe_serialization=False, torch.save's zip archive:
                          how older adapters such as Bactrian-X ship).
"""
import json
import os
import sys
from unittest import mock

import torch

from . import decoders

LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def make_lora(base_dir, out_dir, variant="plain"):
    from peft import LoraConfig, PeftModel, get_peft_model
    import transformers

    if variant not in ("plain", "rslora", "bin"):
        sys.exit(f"unknown variant {variant} (plain, rslora or bin)")
    os.makedirs(out_dir, exist_ok=True)
    extra = {}
    if variant == "rslora":
        extra = dict(use_rslora=True, rank_pattern={"model.layers.0.self_attn.q_proj": 2, "down_proj": 6},
                     alpha_pattern={"v_proj": 3})
    load = transformers.AutoModelForCausalLM.from_pretrained
    base = load(base_dir, attn_implementation="eager", dtype=torch.float32)
    torch.manual_seed(2468)
    config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=LORA_TARGETS, task_type="CAUSAL_LM",
                        **extra)
    model = get_peft_model(base, config)
    with torch.no_grad():  # peft starts B at zero (a no-op adapter): give every B values
        for name, p in model.named_parameters():
            if ".lora_B." in name:
                p.copy_(torch.randn_like(p) * 0.1)
    model.save_pretrained(out_dir, safe_serialization=(variant != "bin"))
    config_path = os.path.join(out_dir, "adapter_config.json")
    with open(config_path) as f:
        saved = json.load(f)
    saved["base_model_name_or_path"] = os.path.relpath(os.path.abspath(base_dir), os.path.abspath(out_dir))
    with open(config_path, "w") as f:
        json.dump(saved, f, indent=2, sort_keys=True)

    # The reference: decoders.causal_ref with its model load answered by PeftModel over BASE (the
    # adapter read back from OUT's files, not merged).
    class PeftOverBase:
        @staticmethod
        def from_pretrained(_model_dir, **kwargs):
            return PeftModel.from_pretrained(load(base_dir, **kwargs), out_dir).eval()

    # mock.patch looks transformers up in sys.modules when entered (importing peft replaces the module
    # object this function imported), so causal_ref's own `from transformers import` sees the patch.
    with mock.patch("transformers.AutoModelForCausalLM", PeftOverBase):
        decoders.causal_ref(base_dir, os.path.join(base_dir, "sentences.txt"), os.path.join(out_dir, "reference.json"))
    lora = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    print(json.dumps({"dir": out_dir, "base": saved["base_model_name_or_path"], "variant": variant,
                      "lora_params": lora}))
