"""IndoNLG's SentencePiece tokenizer: a SentencePiece BPE model trained here with the
`sentencepiece` package in the layout of IndoBART-v2's released folder, and the authors' own
`IndoNLGTokenizer` (tests/reference/third_party/indonlg, IndoNLG's modules/tokenization_indonlg.py)
and the PyPI class of the same name (indobenchmark-toolkit) tokenizing with it.

  make-spm DIR CSV VOCAB BYTE_FALLBACK  trains `sentencepiece` BPE (model_type bpe, VOCAB
                          pieces, byte_fallback when BYTE_FALLBACK is 1, the default nmt_nfkc
                          normalizer and character coverage) on every column of CSV lowercased,
                          with <s>=0 <pad>=1 </s>=2 <unk>=3 as IndoNLG's
                          `..._bos_pad_eos_unk.model`, and writes DIR/sentencepiece.bpe.model
                          and DIR/tokenizer_config.json ({"tokenizer_class": "IndoNLGTokenizer"}),
                          as the released IndoBART-v2 folder holds them. Prints {"pieces"}.
  indonlg-tokenize DIR INPUT OUT  INPUT JSON list of texts; for each, `sentencepiece` itself on
                          DIR's model (`sp_pieces`, `sp_ids`: encode with out_type str and int;
                          `sp_decode`: decode of sp_ids; `sp_normalized`: normalize), and, when
                          the model has 40000 pieces, the authors' class (`pieces`: tokenize;
                          `ids`: encode without special tokens; `ids_special`: encode with them;
                          `decode` and `decode_skip`: decode of ids_special with
                          skip_special_tokens false and true) and the PyPI class on the text
                          lowercased (`pypi_lower_ids`: convert_tokens_to_ids of tokenize, what
                          its encode without special tokens returns; see below). OUT JSON
                          list, one object per text, and {"vocab_size"} first.

Running the classes under transformers 5.24 (neither runs there as published):

- The authors' class calls `PreTrainedTokenizer.__init__` before it loads its SentencePiece model
  and sets its tables; transformers 5's constructor lists the vocabulary (`get_vocab`) to place
  the special tokens, which reads `self.sp_model`, `self.special_tokens_to_ids`,
  `self.special_ids_to_tokens` and `self.decode_special_token` before they exist. `Authors`
  below sets those four attributes, to exactly the values the class's `__init__` gives them
  after its `super().__init__` call (which then sets them again), and calls the class's own
  `__init__`: the order of construction changes, no method does.
- The PyPI class (0.1.7) imports `is_tf_available` from `transformers.utils` and `_is_jax`,
  `_is_numpy`, `_is_tensorflow`, `_is_torch`, `_is_torch_device` from
  `transformers.utils.generic`, which transformers 5 removed; its own `pad` alone uses them.
  `pypi_class` defines them (TensorFlow and JAX absent, numpy and torch by type) before the
  import. Its `pad` also lacks the `padding_side` argument transformers 5's `encode` passes it,
  so its ids are taken as `encode` computes them before padding,
  `convert_tokens_to_ids(tokenize(text))`. Its tokenization is untouched.
"""
import json
import os

SPM_FILE = "sentencepiece.bpe.model"
THIRD_PARTY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "third_party", "indonlg")


def make_spm(out_dir, csv_path, vocab_size, byte_fallback):
    import csv

    import sentencepiece as spm

    os.makedirs(out_dir, exist_ok=True)
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    texts = [v.lower() for row in rows for k, v in row.items() if k]
    prefix = os.path.join(out_dir, "spm")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_prefix=prefix, model_type="bpe",
                                   vocab_size=int(vocab_size), byte_fallback=byte_fallback == "1", bos_id=0,
                                   pad_id=1, eos_id=2, unk_id=3, num_threads=1, minloglevel=2)
    os.replace(prefix + ".model", os.path.join(out_dir, SPM_FILE))
    os.remove(prefix + ".vocab")
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "IndoNLGTokenizer"}, f)
    sp = spm.SentencePieceProcessor(model_file=os.path.join(out_dir, SPM_FILE))
    assert [sp.id_to_piece(i) for i in range(4)] == ["<s>", "<pad>", "</s>", "<unk>"]
    print(json.dumps({"pieces": len(sp)}))


def authors_class():
    """The authors' IndoNLGTokenizer, constructed in the order transformers 5 needs (above)."""
    import importlib.util

    import sentencepiece as spm

    spec = importlib.util.spec_from_file_location("tokenization_indonlg",
                                                  os.path.join(THIRD_PARTY, "tokenization_indonlg.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Authors(module.IndoNLGTokenizer):
        def __init__(self, vocab_file, **kwargs):
            # The four attributes transformers 5's constructor reads, with the values the
            # class's __init__ sets after its super().__init__ (it sets them again there).
            self.sp_model = spm.SentencePieceProcessor()
            self.sp_model.Load(str(vocab_file))
            self.decode_special_token = True
            self.special_tokens_to_ids = {"[java]": 40000, "[sunda]": 40001, "[indonesia]": 40002, "<mask>": 40003}
            self.special_ids_to_tokens = {v: k for k, v in self.special_tokens_to_ids.items()}
            super().__init__(vocab_file, **kwargs)

    return Authors


def pypi_class():
    """indobenchmark-toolkit's IndoNLGTokenizer, with the names it imports that transformers 5
    removed defined first (above)."""
    import numpy as np
    import torch
    import transformers.utils
    import transformers.utils.generic as generic

    shims = {"_is_jax": lambda x: False, "_is_tensorflow": lambda x: False,
             "_is_numpy": lambda x: isinstance(x, np.ndarray), "_is_torch": lambda x: isinstance(x, torch.Tensor),
             "_is_torch_device": lambda x: isinstance(x, torch.device)}
    for name, fn in shims.items():
        if not hasattr(generic, name):
            setattr(generic, name, fn)
    if not hasattr(transformers.utils, "is_tf_available"):
        transformers.utils.is_tf_available = lambda: False
    from indobenchmark import IndoNLGTokenizer
    return IndoNLGTokenizer


def indonlg_tokenize(model_dir, input_path, out_path):
    import sentencepiece as spm

    with open(input_path, encoding="utf-8") as f:
        texts = json.load(f)
    model_file = os.path.join(model_dir, SPM_FILE)
    sp = spm.SentencePieceProcessor(model_file=model_file)
    authors = pypi = None
    if len(sp) == 40000:
        authors = authors_class()(model_file)
        pypi = pypi_class()(model_file)
    out = [{"vocab_size": authors.vocab_size if authors else None}]
    for text in texts:
        ids = sp.encode(text)
        row = {"sp_pieces": sp.encode(text, out_type=str), "sp_ids": ids, "sp_decode": sp.decode(ids),
               "sp_normalized": sp.normalize(text)}
        if authors:
            special = authors.encode(text)
            row.update({"pieces": authors.tokenize(text), "ids": authors.encode(text, add_special_tokens=False),
                        "ids_special": special, "decode": authors.decode(special),
                        "decode_skip": authors.decode(special, skip_special_tokens=True),
                        "pypi_lower_ids": pypi.convert_tokens_to_ids(pypi.tokenize(text.lower())),
                        "lower": text.lower()})
        out.append(row)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
