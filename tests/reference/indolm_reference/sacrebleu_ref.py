"""Corpus BLEU and chrF from the `sacrebleu` package (2.6.0, tests/reference/requirements.txt),
through its metric classes as `sacrebleu.corpus_bleu` and `sacrebleu.corpus_chrf` use them.

  sacrebleu CASES OUT  CASES: JSON {"bleu_options": {name: BLEU(...) keyword arguments},
                       "chrf_options": {name: CHRF(...) keyword arguments}, "cases": [{"name",
                       "hyps": [...], "refs": [[one reference per hypothesis], ...]}]}. Scores
                       every case with every option set, a fresh metric each time, and writes
                       OUT (JSON): {case name: {"bleu": {option name: {"score", "counts",
                       "totals", "precisions", "bp", "sys_len", "ref_len", "str" (str() of the
                       score), "signature" (the metric's get_signature() after scoring)}},
                       "chrf": {option name: {"score", "str", "signature"}}}}.
"""
import json


def sacrebleu(cases_path, out_path):
    from sacrebleu.metrics import BLEU, CHRF

    with open(cases_path, encoding="utf-8") as f:
        spec = json.load(f)
    out = {}
    for case in spec["cases"]:
        hyps, refs = case["hyps"], case["refs"]
        bleu, chrf = {}, {}
        for name, kwargs in spec["bleu_options"].items():
            metric = BLEU(**kwargs)
            s = metric.corpus_score(hyps, refs)
            bleu[name] = {
                "score": s.score,
                # add-k adds its value to the counts and totals of orders 2 and up, as floats.
                "counts": [float(c) for c in s.counts],
                "totals": [float(t) for t in s.totals],
                "precisions": s.precisions,
                "bp": s.bp,
                "sys_len": s.sys_len,
                "ref_len": s.ref_len,
                "str": str(s),
                "signature": str(metric.get_signature()),
            }
        for name, kwargs in spec["chrf_options"].items():
            metric = CHRF(**kwargs)
            s = metric.corpus_score(hyps, refs)
            chrf[name] = {"score": s.score, "str": str(s), "signature": str(metric.get_signature())}
        out[case["name"]] = {"bleu": bleu, "chrf": chrf}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)
