"""Statistics references: statsmodels' intervals and tests, scikit-learn's macro F1, and
google-research/language's Multi-Bootstrap on bias_pairs.csv files.

  stats IN OUT            statsmodels on the tables of IN: proportion_confint(method="wilson"),
                          mcnemar(exact=True) and multipletests(method="holm"); OUT JSON.
  f1 JSON                  scikit-learn's f1_score(average="macro") of {"gold": [...], "pred": [...]}.
  multibootstrap SPEC OUT  the Multi-Bootstrap of google-research/language's multibootstrap.py
                          with numpy's RandomState on the groups of bias_pairs.csv files in SPEC
                          (JSON: groups, replicates, seed, overall_only); estimates summed in order with Python
                          floats; per language × (overall, domains) and the average over
                          languages; unpaired comparisons of the groups two by two. OUT JSON.
"""
import csv
import json


def stats(in_path, out_path):
    from statsmodels.stats.contingency_tables import mcnemar
    from statsmodels.stats.multitest import multipletests
    from statsmodels.stats.proportion import proportion_confint

    tables = json.load(open(in_path))
    wilson = [list(map(float, proportion_confint(k, n, alpha=0.05, method="wilson"))) for k, n in tables["wilson"]]
    # mcnemar reads the discordant cells off the table's off-diagonal: [[a, b], [c, d]].
    mc = [float(mcnemar([[7, b], [c, 3]], exact=True).pvalue) for b, c in tables["mcnemar"]]
    holm = [list(map(float, multipletests(ps, method="holm")[1])) for ps in tables["holm"]]
    json.dump({"wilson": wilson, "mcnemar": mc, "holm": holm}, open(out_path, "w"))


def f1(json_path):
    from sklearn.metrics import f1_score

    with open(json_path) as f:
        data = json.load(f)
    print(json.dumps([f1_score(c["gold"], c["pred"], average="macro") for c in data]))


def _read_outcomes(path):
    """{language: ([win 0/100 per pair], [domain per pair])} from a bias_pairs.csv."""
    out = {}
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            wins, domains = out.setdefault(row["language"], ([], []))
            wins.append(100.0 if row["preferred"] == "pro" else 0.0)
            domains.append(row["domain"])
    return out


def _categories(files):
    """(language, category) -> rows (one per file) of outcomes, as indolm's report lays them out."""
    per_file = [_read_outcomes(p) for p in files]
    cats = {}
    languages = list(per_file[0].keys())
    for lang in languages:
        domains = per_file[0][lang][1]
        cats[(lang, "overall")] = [pf[lang][0] for pf in per_file]
        for d in dict.fromkeys(domains):
            cols = [j for j, x in enumerate(domains) if x == d]
            cats[(lang, d)] = [[pf[lang][0][j] for j in cols] for pf in per_file]
    n = len(per_file[0][languages[0]][0])
    if len(languages) >= 2 and all(len(per_file[0][l][0]) == n for l in languages):
        k = float(len(languages))
        cats[("all", "overall")] = [[sum([pf[l][0][j] for l in languages]) / k for j in range(n)] for pf in per_file]
    return cats


def _score(rows, seeds, examples):
    total = 0.0
    for s in seeds:
        row = rows[s]
        if examples is None:
            total += sum(row) / len(row)
        else:
            total += sum([row[j] for j in examples]) / len(examples)
    return total / len(seeds)


def _multibootstrap(base, expt, paired, replicates, rng):
    """multibootstrap.py's procedure: seeds resampled (one sample for both arms when paired),
    examples resampled once for both arms; mean within seeds, then across. (The full data's
    estimates, which must equal indolm's exactly, are summed in order by _score.)"""
    import numpy as np

    n = len(base[0])
    base_m, expt_m = np.array(base), np.array(expt)
    ls, l2s, deltas = [], [], []
    for _ in range(replicates):
        sb = rng.choice(len(base), size=len(base), replace=True)
        se = sb if paired else rng.choice(len(expt), size=len(expt), replace=True)
        jj = rng.choice(n, size=n, replace=True)
        # A replicate: each drawn seed's mean over the drawn examples, then the mean over seeds.
        l, l2 = base_m[sb][:, jj].mean(axis=1).mean(), expt_m[se][:, jj].mean(axis=1).mean()
        ls.append(l)
        l2s.append(l2)
        deltas.append(l2 - l)
    q = lambda v: [float(x) for x in np.quantile(v, [0.025, 0.975])]
    return {"base": q(ls), "expt": q(l2s), "difference": q(deltas), "p": float(np.mean(np.array(deltas) <= 0))}


def multibootstrap(spec_path, out_path):
    import numpy as np

    spec = json.load(open(spec_path))
    groups = spec["groups"]  # [[name, [bias_pairs.csv, ...]], ...]
    rng = np.random.RandomState(spec["seed"])
    cats = {name: _categories(files) for name, files in groups}
    if spec.get("overall_only"):
        cats = {name: {k: v for k, v in c.items() if k[1] == "overall"} for name, c in cats.items()}
    estimates, comparisons = [], []
    for name, _ in groups:
        for (lang, cat), rows in cats[name].items():
            seeds = list(range(len(rows)))
            single = _multibootstrap(rows, rows, True, spec["replicates"], rng)
            estimates.append({"group": name, "language": lang, "category": cat, "estimate": _score(rows, seeds, None), "interval": single["base"]})
    for i in range(len(groups)):
        for j in range(i + 1, len(groups)):
            a, b = groups[i][0], groups[j][0]
            for key, base in cats[a].items():
                expt = cats[b][key]
                r = _multibootstrap(base, expt, False, spec["replicates"], rng)
                r.update({"language": key[0], "category": key[1], "base_group": a, "expt_group": b,
                          "base_estimate": _score(base, list(range(len(base))), None),
                          "expt_estimate": _score(expt, list(range(len(expt))), None)})
                comparisons.append(r)
    json.dump({"estimates": estimates, "comparisons": comparisons}, open(out_path, "w"))
