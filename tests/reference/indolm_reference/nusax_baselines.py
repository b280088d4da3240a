"""NusaX Table 3's classical baselines as the authors ran them (IndoNLP/nusax,
code/notebook/sentiment_analysis_nusax_classical.ipynb): NLTK word_tokenize, tokens joined by
spaces, CountVectorizer() or TfidfVectorizer() fit on train.csv, and GridSearchCV over a
PredefinedSplit (fit on train, scored on valid by the estimator's accuracy, refit on both) of
MultinomialNB() (alpha in np.linspace(0.001, 1, 50)), SVC() (C in [0.01, 0.1, 1, 10, 100] x kernel
in ["rbf", "linear"]) and LogisticRegression() (C in np.linspace(0.001, 10, 100)), predicting
xtest.toarray(). NLTK's Punkt data cannot be downloaded here: without it each text is tokenized
by NLTKWordTokenizer whole (word_tokenize(preserve_line=True)), and the output says so. The
logistic regression is solved to convergence (solver="newton-cg", tol=1e-10, the same problem as
the default lbfgs, which stops at tol=1e-4 and 100 iterations) unless LR_SOLVER is `authors`.
Labels are written as strings; features as CSR (indptr, indices, data).

  nusax-features DATA LANGS OUT            per language (comma-separated) and feature kind: the
                                           vocabulary, the idf (tfidf) and the train, valid and
                                           test matrices.
  nusax-fixed DATA LANGS OUT               per language and feature kind, estimators with fixed
                                           hyper-parameters fit on train: test predictions, and
                                           SVC's gamma, -intercept_ (libsvm's rho), n_iter_ and
                                           support_.
  nusax-grid DATA LANGS OUT [EVERY [LR_SOLVER]]
                                           per language, model and feature kind, the authors'
                                           GridSearchCV (LR's grid thinned to every EVERY-th C,
                                           default 1): the selected point, its validation score,
                                           every point's score, test macro-F1 and predictions.
"""
import json

FIXED = {
    "nb": [{"alpha": 0.05}, {"alpha": 1.0}],
    "svm": [{"C": 0.1, "kernel": "linear"}, {"C": 1.0, "kernel": "linear"}, {"C": 1.0, "kernel": "rbf"},
            {"C": 10.0, "kernel": "rbf"}],
    "lr": [{"C": 0.5}, {"C": 5.0}],
}


def _tokenizer():
    """(tokenize, description): word_tokenize with Punkt when its data is installed."""
    import nltk
    from nltk.tokenize import NLTKWordTokenizer, word_tokenize
    try:
        word_tokenize("Punkt. Here?")
        return word_tokenize, "nltk.word_tokenize (Punkt sentence splitting)"
    except LookupError:
        tok = NLTKWordTokenizer()
        return tok.tokenize, f"nltk {nltk.__version__} NLTKWordTokenizer on each whole text (Punkt data not installed)"


def _load(path, tokenize):
    """The authors' load_data: texts tokenized and joined by spaces, and labels."""
    import pandas as pd
    df = pd.read_csv(path)
    return [" ".join(tokenize(s)) for s in df["text"]], [str(x) for x in df["label"]]


def _vectorized(data, lang, feature, tokenize):
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    splits = {s: _load(f"{data}/{lang}/{s}.csv", tokenize) for s in ("train", "valid", "test")}
    vectorizer = CountVectorizer() if feature == "bow" else TfidfVectorizer()
    vectorizer.fit(splits["train"][0])
    return vectorizer, {s: (vectorizer.transform(t), y) for s, (t, y) in splits.items()}


def _csr(m):
    m = m.tocsr()
    return {"indptr": m.indptr.tolist(), "indices": m.indices.tolist(), "data": [float(v) for v in m.data]}


def _estimator(model, lr_solver="converged"):
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import MultinomialNB
    from sklearn.svm import SVC
    if model == "nb":
        return MultinomialNB()
    if model == "svm":
        return SVC()
    if lr_solver == "authors":
        return LogisticRegression()
    return LogisticRegression(solver="newton-cg", tol=1e-10, max_iter=10000)


def _grid(model, every=1):
    import numpy as np
    if model == "nb":
        return {"alpha": np.linspace(0.001, 1, 50)}
    if model == "svm":
        return {"C": [0.01, 0.1, 1, 10, 100], "kernel": ["rbf", "linear"]}
    return {"C": np.linspace(0.001, 10, 100)[::every]}


def _params(p):
    return {k: (v if isinstance(v, str) else float(v)) for k, v in p.items()}


def features(data, langs, out):
    tokenize, how = _tokenizer()
    result = {"tokenizer": how, "languages": {}}
    for lang in langs.split(","):
        result["languages"][lang] = {}
        for feature in ("bow", "tfidf"):
            vectorizer, mats = _vectorized(data, lang, feature, tokenize)
            entry = {"vocabulary": vectorizer.get_feature_names_out().tolist()}
            if feature == "tfidf":
                entry["idf"] = vectorizer.idf_.tolist()
            for split, (x, _) in mats.items():
                entry[split] = _csr(x)
            result["languages"][lang][feature] = entry
    json.dump(result, open(out, "w"))


def fixed(data, langs, out):
    tokenize, how = _tokenizer()
    result = {"tokenizer": how, "languages": {}}
    for lang in langs.split(","):
        per_lang = result["languages"][lang] = {}
        for feature in ("bow", "tfidf"):
            _, mats = _vectorized(data, lang, feature, tokenize)
            (xtr, ytr), (xte, _) = mats["train"], mats["test"]
            runs = []
            for model, points in FIXED.items():
                for p in points:
                    est = _estimator(model).set_params(**p).fit(xtr, ytr)
                    run = {"model": model, "params": p, "pred": [str(v) for v in est.predict(xte.toarray())]}
                    if model == "svm":
                        run.update(gamma=float(est._gamma), rho=(-est.intercept_).tolist(),
                                   n_iter=[int(n) for n in est.n_iter_], support=est.support_.tolist())
                    runs.append(run)
            per_lang[feature] = runs
    json.dump(result, open(out, "w"))


def grid(data, langs, out, every="1", lr_solver="converged"):
    from scipy.sparse import vstack
    from sklearn.metrics import f1_score
    from sklearn.model_selection import GridSearchCV, PredefinedSplit

    tokenize, how = _tokenizer()
    result = {"tokenizer": how, "lr_solver": lr_solver, "languages": {}}
    for lang in langs.split(","):
        per_lang = result["languages"][lang] = {}
        for feature in ("bow", "tfidf"):
            _, mats = _vectorized(data, lang, feature, tokenize)
            (xtr, ytr), (xva, yva), (xte, yte) = mats["train"], mats["valid"], mats["test"]
            for model in ("nb", "svm", "lr"):
                ps = PredefinedSplit([-1] * len(ytr) + [0] * len(yva))
                clf = GridSearchCV(_estimator(model, lr_solver), _grid(model, int(every)), cv=ps)
                clf = clf.fit(vstack([xtr, xva]), ytr + yva)
                pred = clf.predict(xte.toarray())
                per_lang.setdefault(model, {})[feature] = {
                    "params": _params(clf.best_params_),
                    "dev_score": float(clf.best_score_),
                    "scores": [float(s) for s in clf.cv_results_["mean_test_score"]],
                    "grid": [_params(p) for p in clf.cv_results_["params"]],
                    "test_macro_f1": float(f1_score(yte, pred, average="macro")),
                    "pred": [str(v) for v in pred],
                }
    json.dump(result, open(out, "w"))
