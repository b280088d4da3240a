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
  fuzz-seeds OUT_DIR                  the fuzz test's seeds in OUT_DIR: zip.bin and legacy.bin,
                                      torch.save of one small state dict (float, half, bfloat16,
                                      int64 and bool tensors; a tied pair on one storage; a view
                                      with an offset, a transposed one, an expanded one with a
                                      zero stride; _metadata as transformers' state dicts carry
                                      it) in both layouts, and p0.pkl, p2.pkl, p4.pkl: pickles of
                                      plain data (every data opcode) in protocols 0, 2 and 4 (bytes
                                      and non-ASCII text in 2 and 4 only)
"""
import collections
import json
import os
import pickle
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


def fuzz_seeds(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 4, generator=g)
    sd = collections.OrderedDict()
    sd["emb.weight"] = base
    sd["head.weight"] = base
    sd["half"] = torch.randn(3, 2, generator=g).half()
    sd["bf16"] = torch.ones(2, dtype=torch.bfloat16)
    sd["ids"] = torch.arange(8).expand(1, -1)
    sd["t"] = base.t()
    sd["rows"] = base[2:4]
    sd["flags"] = torch.tensor([True, False, True])
    sd._metadata = collections.OrderedDict([("", {"version": 1}), ("emb", {"version": 1})])
    for layout in ("zip", "legacy"):
        torch.save(sd, os.path.join(out_dir, f"{layout}.bin"), _use_new_zipfile_serialization=(layout == "zip"))
    plain = {"a": [1, -2, 300, 70000, 2**40, -2**63], "b": (1.5, True, False, None),
             "d": {"nested": [(), (1,), (1, 2), (1, 2, 3)]}, 7: [[]] * 3}
    for protocol in (0, 2, 4):
        if protocol:
            plain.update({"c": b"x\x00\xff", "e": "teks \u00e9"})
        with open(os.path.join(out_dir, f"p{protocol}.pkl"), "wb") as f:
            f.write(pickle.dumps(plain, protocol=protocol))
    print(json.dumps(sorted(os.listdir(out_dir))))
