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
                                      and non-ASCII text in 2 and 4 only); the same bytes on
                                      every run (torch's random serialization id and the legacy
                                      stream's storage addresses replaced)
"""
import collections
import io
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


def _fixed_zip_id(data):
    """torch's zip with its random .data/serialization_id set to zeros (and its CRC fixed)."""
    import struct
    import zlib
    import zipfile
    info = next(i for i in zipfile.ZipFile(io.BytesIO(data)).infolist() if i.filename.endswith("serialization_id"))
    local = info.header_offset
    name_len, extra_len = struct.unpack_from("<HH", data, local + 26)
    start = local + 30 + name_len + extra_len
    fixed = b"0" * info.file_size
    crc = struct.pack("<I", zlib.crc32(fixed))
    old_crc = struct.pack("<I", info.CRC)
    out = bytearray(data[:start] + fixed + data[start + info.file_size:])
    out[local + 14:local + 18] = crc
    at = bytes(out).index(b"PK\x01\x02")
    while True:
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", out, at + 28)
        if bytes(out[at + 46:at + 46 + name_len]).decode() == info.filename:
            assert bytes(out[at + 16:at + 20]) == old_crc
            out[at + 16:at + 20] = crc
            return bytes(out)
        at += 46 + name_len + extra_len + comment_len


def _fixed_legacy_keys(data):
    """torch's legacy stream with its storage keys (the storages' addresses, in their sorted
    order) renamed 0, 1, ... in the order the state dict first names them, and the keys' list and
    the storages after it in that order: the same bytes on every run. The stream is five pickles
    (the magic number, the version, the system information, the state dict, the keys), then
    each storage's element count and bytes."""
    import pickletools
    import struct
    ends, at = [], 0
    for _ in range(5):
        for op, _arg, pos in pickletools.genops(data[at:]):
            if op.name == "STOP":
                break
        at += pos + 1
        ends.append(at)
    state_dict = data[ends[2]:ends[3]]
    named = {}

    sizes = {"FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2, "LongStorage": 8, "BoolStorage": 1}

    class Names(pickle.Unpickler):
        def find_class(self, module, name):
            return collections.OrderedDict if name == "OrderedDict" else name if name in sizes else lambda *a: None

        def persistent_load(self, pid):
            named.setdefault(pid[2], sizes[pid[1]])

    Names(io.BytesIO(state_dict)).load()
    storages, at = {}, ends[4]
    for key in pickle.loads(data[ends[3]:ends[4]]):
        (numel,) = struct.unpack_from("<q", data, at)
        storages[key] = data[at:at + 8 + numel * named[key]]
        at += len(storages[key])
    assert at == len(data)

    def binunicode(s):
        return b"X" + struct.pack("<I", len(s)) + s.encode()

    new = {key: str(i) for i, key in enumerate(named)}
    for key, name in new.items():
        state_dict = state_dict.replace(binunicode(key), binunicode(name))
    keys = pickle.dumps(list(new.values()), protocol=2)
    return data[:ends[2]] + state_dict + keys + b"".join(storages[key] for key in new)


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
        path = os.path.join(out_dir, f"{layout}.bin")
        torch.save(sd, path, _use_new_zipfile_serialization=(layout == "zip"))
        with open(path, "rb") as f:
            data = f.read()
        fixed = _fixed_zip_id(data) if layout == "zip" else _fixed_legacy_keys(data)
        again = torch.load(io.BytesIO(fixed))
        assert list(again) == list(sd) and all(torch.equal(again[k], sd[k]) for k in sd), layout
        with open(path, "wb") as f:
            f.write(fixed)
    plain = {"a": [1, -2, 300, 70000, 2**40, -2**63], "b": (1.5, True, False, None),
             "d": {"nested": [(), (1,), (1, 2), (1, 2, 3)]}, 7: [[]] * 3}
    for protocol in (0, 2, 4):
        if protocol:
            plain.update({"c": b"x\x00\xff", "e": "teks \u00e9"})
        with open(os.path.join(out_dir, f"p{protocol}.pkl"), "wb") as f:
            f.write(pickle.dumps(plain, protocol=protocol))
    print(json.dumps(sorted(os.listdir(out_dir))))
