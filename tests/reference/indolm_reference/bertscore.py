"""BERTScore references: the `bert-score` package (0.3.13) run on a model directory, as
`bert_score.score(cands, refs, model_type=DIR, num_layers=LAYER)` computes it on the CPU.

  bertscore PAIRS DIR LAYER OUT [BASELINE] [BATCH]
                          per-pair BERTScore of [[candidate, reference], ...] (JSON) with DIR's
                          hidden states after LAYER layers, without and with idf weights (idf
                          from the references), written to OUT as {"plain": {"P", "R", "F"},
                          "idf": {...}, "rescaled": {...}, "ids": [[candidate ids, reference
                          ids], ...]} (lists in pair order; "rescaled", with BASELINE, a
                          rescale_baseline CSV: the plain scores rescaled by its row LAYER; "ids":
                          the tokens bert-score encodes each text into). BATCH: bert-score's
                          batch_size (default 64, its own).

bert-score 0.3.13 predates transformers 5, which removed the tokenizers' method
`build_inputs_with_special_tokens` that it calls on an empty sentence: the method is put back
here as transformers 4 had it for BERT and XLM-R (`[CLS] ids [SEP]`, `<s> ids </s>`), and nothing
else of bert-score is changed. A tokenizer whose `model_max_length` is unset (transformers' 1e30)
makes bert-score's truncation overflow in transformers 5: the fixtures set it.
"""
import json


def restore_build_inputs():
    """transformers 4's single-sequence `build_inputs_with_special_tokens`, where missing."""
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    if not hasattr(PreTrainedTokenizerBase, "build_inputs_with_special_tokens"):
        def build_inputs_with_special_tokens(self, ids):
            return [self.cls_token_id] + list(ids) + [self.sep_token_id]

        PreTrainedTokenizerBase.build_inputs_with_special_tokens = build_inputs_with_special_tokens


def bertscore(pairs_path, model_dir, layer, out_path, baseline=None, batch="64"):
    import bert_score
    from bert_score.utils import get_tokenizer, sent_encode

    restore_build_inputs()
    with open(pairs_path, encoding="utf-8") as f:
        pairs = json.load(f)
    cands = [c for c, _ in pairs]
    refs = [r for _, r in pairs]

    def run(**kwargs):
        p, r, f = bert_score.score(cands, refs, model_type=model_dir, num_layers=int(layer), device="cpu",
                                   batch_size=int(batch), nthreads=0, **kwargs)
        return {"P": p.tolist(), "R": r.tolist(), "F": f.tolist()}

    tokenizer = get_tokenizer(model_dir, False)  # as score() gets it
    out = {"plain": run(), "idf": run(idf=True),
           "ids": [[sent_encode(tokenizer, c), sent_encode(tokenizer, r)] for c, r in pairs]}
    if baseline:
        # bert-score asks for a language whenever it rescales; with baseline_path it is not read.
        out["rescaled"] = run(rescale_with_baseline=True, baseline_path=baseline, lang="id")
    with open(out_path, "w") as f:
        json.dump(out, f)
