"""Utility beside bias: numpy and scipy on the numbers `indolm report bias-utility` reports.

  utility-stats JSON      JSON is {"per_language": [[macro-F1 of each language] per step],
                          "win_rate": [win rate per step]}: numpy's mean of each step's
                          per-language macro-F1, and scipy.stats.pearsonr of the win rates with
                          those means (null with fewer than 3 steps or a constant series, where
                          indolm reports none); JSON {"mean": [...], "pearson": r} on stdout.
"""
import json


def utility_stats(json_path):
    import numpy as np
    from scipy import stats

    with open(json_path) as f:
        data = json.load(f)
    means = [float(np.mean(row)) for row in data["per_language"]]
    wins = [float(w) for w in data["win_rate"]]
    r = None
    if len(means) >= 3 and np.ptp(means) > 0 and np.ptp(wins) > 0:
        r = float(stats.pearsonr(wins, means).statistic)
    print(json.dumps({"mean": means, "pearson": r}))
