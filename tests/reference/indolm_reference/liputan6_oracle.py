"""An independent reference for the Liputan6 release's Oracle labels (fajri91/sum_liputan6,
`2_create_extractive_label.py`), written for indolm's tests from the script's published logic,
step by step, with the same Python and NumPy types where they decide the outcome:

- Text: each sentence's tokens joined by spaces, all sentences joined by spaces, lowercased,
  split on whitespace; unigram counts.
- Score of a selection: ROUGE-1 F1 with clipped counts (precision over the selection's tokens,
  recall over the summary's; 0 when both are 0).
- Only the first 100 sentences are considered.
- For each seed sentence in order: the candidates are `list(set(np.arange(n)) - set(ids))`
  (CPython's set order decides ties); every candidate j gives the selection ids + [j]; the best
  is the first of the highest scores in candidate order (a stable sort, descending). The first
  step takes the best pair unconditionally; later steps stop when the best new score is below
  the current one (ties continue), recording the current selection. When no candidate is left,
  the selection is recorded only if nothing has been recorded yet (by any seed).
- The label is the recorded selection with the highest score, the first recorded among equals,
  in selection order; a document with nothing recorded (one sentence) gets [0].

Usage: liputan6_oracle.py ARTICLES.jsonl > LABELS.json
Each input line is {"clean_article": [[token, ...], ...], "clean_summary": [[...], ...]};
the output is a JSON list with one label list per line.

       liputan6_oracle.py --set-orders CASES.json > ORDERS.json
CASES is a JSON list of [n, ids]; the output lists `list(set(np.arange(n)) - set(ids))` for each,
the candidate order CPython gives the script.
"""

import json
import sys

import numpy as np

MAX_SENTENCES = 100


def unigrams(sentences):
    text = " ".join(" ".join(sentence) for sentence in sentences).lower()
    counts = {}
    for word in text.split():
        counts[word] = counts.get(word, 0) + 1
    return counts


def clipped_overlap_ratio(counted, over):
    """Clipped overlap of `counted` with `over`, divided by the number of tokens in `over`."""
    total = sum(over.values())
    overlap = sum(min(counted.get(word, 0), n) for word, n in over.items())
    return overlap / total


def f1(selection_counts, summary_counts):
    precision = clipped_overlap_ratio(summary_counts, selection_counts)
    recall = clipped_overlap_ratio(selection_counts, summary_counts)
    if precision == 0 and recall == 0:
        return 0
    return 2 * precision * recall / (precision + recall)


def label(article, summary):
    article = article[:MAX_SENTENCES]
    n = len(article)
    summary_counts = unigrams(summary)
    recorded = []  # (selection, score), in the order they are recorded
    for seed in range(n):
        best = None  # (selection, score) of the last step taken
        ids = [seed]
        while True:
            candidates = list(set(np.arange(n)) - set(ids))
            if not candidates:
                if best is not None and not recorded:
                    recorded.append(best)
                break
            scored = []
            for j in candidates:
                selection = list(ids) + [j]
                scored.append((selection, f1(unigrams([article[i] for i in selection]), summary_counts)))
            top = sorted(scored, key=lambda pair: pair[1], reverse=True)[0]
            if best is not None and best[1] > top[1]:
                recorded.append(best)
                break
            best = top
            ids = top[0]
    if not recorded:
        assert n == 1, "only a one-sentence document records nothing"
        return [0]
    chosen = sorted(recorded, key=lambda pair: pair[1], reverse=True)[0][0]
    return [int(i) for i in chosen]


def main():
    if sys.argv[1] == "--set-orders":
        with open(sys.argv[2], encoding="utf-8") as cases:
            orders = [[int(i) for i in set(np.arange(n)) - set(ids)] for n, ids in json.load(cases)]
        json.dump(orders, sys.stdout)
        return
    labels = []
    with open(sys.argv[1], encoding="utf-8") as lines:
        for line in lines:
            doc = json.loads(line)
            labels.append(label(doc["clean_article"], doc["clean_summary"]))
    json.dump(labels, sys.stdout)


if __name__ == "__main__":
    main()
