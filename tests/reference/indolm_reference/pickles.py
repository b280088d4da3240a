"""PyTorch's pickled weight files, as transformers and torch write them.

  save-bin MODEL_DIR OUT_DIR LAYOUT   MODEL_DIR (a masked or causal LM, loaded by transformers)
                                      saved again into OUT_DIR with pytorch_model.bin: LAYOUT
                                      `zip` is torch.save(model.state_dict()), what transformers
                                      4's save_pretrained(safe_serialization=False) wrote (torch's
                                      zip archive; transformers 5 writes safetensors only), with
                                      tied weights sharing one storage; `legacy` is the same with
                                      _use_new_zipfile_serialization=False (torch < 1.6's layout)
  evil-bin MODEL_DIR OUT_DIR MARKER   OUT_DIR: MODEL_DIR's configuration and tokenizer beside a
                                      pytorch_model.bin whose unpickling would run
                                      `touch MARKER` (os.system)
"""
import json
import os
import shutil

import torch

WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def _side_files(model_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(model_dir):
        path = os.path.join(model_dir, name)
        if os.path.isfile(path) and name not in WEIGHTS and not name.startswith("model-"):
            shutil.copy(path, os.path.join(out_dir, name))


def _model_class(model_dir):
    import transformers as tr
    config = json.load(open(os.path.join(model_dir, "config.json")))
    causal = any(a.endswith("ForCausalLM") for a in config.get("architectures") or [])
    return tr.AutoModelForCausalLM if causal else tr.AutoModelForMaskedLM


def save_bin(model_dir, out_dir, layout):
    model = _model_class(model_dir).from_pretrained(model_dir, torch_dtype="auto")
    _side_files(model_dir, out_dir)
    if layout not in ("zip", "legacy"):
        raise SystemExit(f"unknown layout {layout}")
    torch.save(model.state_dict(), os.path.join(out_dir, "pytorch_model.bin"),
               _use_new_zipfile_serialization=(layout == "zip"))
    with open(os.path.join(out_dir, "pytorch_model.bin"), "rb") as f:
        head = f.read(4)
    print(json.dumps({"zip": head == b"PK\x03\x04", "files": sorted(os.listdir(out_dir))}))


class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def evil_bin(model_dir, out_dir, marker):
    _side_files(model_dir, out_dir)
    torch.save({"bert.embeddings.word_embeddings.weight": _Evil(marker)}, os.path.join(out_dir, "pytorch_model.bin"))
