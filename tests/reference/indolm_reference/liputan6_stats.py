"""The Liputan6 paper's dataset statistics (Koto, Lau and Baldwin, AACL 2020: Tables 1-3, Fig. 2
and Fig. 4), computed for indolm's tests independently of indolm, on the release's layout (one JSON
file per article with `id`, `clean_article`, `clean_summary` and `extractive_summary`), as
`indolm report liputan6-stats` and `indolm report extraction-positions` define them.

The authors published no code for these figures (fajri91/sum_liputan6 holds the download,
cleaning, Oracle-label and Xtreme-copy scripts only), so the text is read as their scripts read it
(`get_string` in 2_create_extractive_label.py and 4_make_data_files_pg.py): a text's tokens joined
by spaces, its sentences joined by spaces, lowercased, `str.split()`. Each token is first
lowercased as indolm's reader does (the release is lowercase already).

- Words and sentences: a text's words as above; its sentences, the entries of its list. The
  vocabulary: the distinct words of a set of articles (or of their summaries).
- Novel n-grams (n = 1..4), per summary: the set of its n-grams (over the words of all its
  sentences, across sentence boundaries) less the set of its article's, as a percentage of its
  distinct n-grams. A set of summaries: the mean of those percentages over the summaries that
  have n-grams of that order ("mean"), and the pooled ratio of all their novel n-grams to all
  their n-grams ("pooled", PreSumm's post_stats.py, with every n-gram). The Xtreme rule (the
  paper's Section 2): a summary is kept when at least 90% of its 4-grams are novel.
- Combined sets: for each variant (the split's folder before its last `/`, e.g. `canonical`),
  `dev+test` (Table 1's sets) when it has dev and test, and `train+dev+test` (Table 3's) when it
  also has train, each article read from its split.
- Fig. 2: the articles of every split read, each id once (the first met; an empty id is never a
  duplicate), ordered by id (numerically when every id is a string of digits, else as text; ties
  keep the reading order), cut into fifths (fifth k holds the articles k*n//5 .. (k+1)*n//5 - 1),
  each with the mean novel n-gram percentages; none for fewer than 5 articles.
- Fig. 4: each picked sentence's position (its index in `clean_article`) counted in bins 0..N-1
  and one bin for the rest; each bin as a percentage of the picked sentences; the share of picks
  at the first two positions; the share of articles whose picks include both (and either) of the
  first two sentences. The Oracle's picks: the released `extractive_summary`, else the label
  liputan6_oracle computes. A `.candidate` file's: each line the summary of the split's article in
  file-name order, its sentences separated by `<q>`, each matched to the first sentence of the
  article (tokens joined by spaces) after the previous match; an empty line picks nothing.

  liputan6-stats DATA SPLITS                 SPLITS: split folders under DATA, comma-separated.
                                             Prints {"splits", "combined", "chronology"}.
  liputan6-positions DATA SPLIT N [NAME=CANDIDATE ...]
                                             Prints {"articles", "positions", "systems"}: the
                                             Oracle's histogram, then each candidate file's.
"""
import json
import os

from indolm_reference import liputan6_oracle

ORDERS = (1, 2, 3, 4)


def _files(data, split):
    """The split folder's `*.json` files in name order (indolm's listing)."""
    folder = os.path.join(data, split)
    names = sorted(n for n in os.listdir(folder) if os.path.splitext(n)[1] == ".json")
    return [os.path.join(folder, n) for n in names]


def _sentences(value):
    """A list of sentences of string tokens, each lowercased (as indolm reads them)."""
    return [[t.lower() for t in sentence if isinstance(t, str)] for sentence in value]


def _read(path):
    with open(path, encoding="utf-8") as f:
        record = json.load(f)
    raw_id = record.get("id", "")
    record_id = raw_id if isinstance(raw_id, str) else json.dumps(raw_id, separators=(",", ":"))
    return {
        "id": record_id,
        "path": path,
        "article": _sentences(record["clean_article"]),
        "summary": _sentences(record["clean_summary"]),
        "extractive": record.get("extractive_summary"),
    }


def _words(sentences):
    """get_string: tokens and sentences joined by spaces, lowercased, split on white space."""
    return " ".join(" ".join(sentence) for sentence in sentences).lower().split()


def _ngrams(words, n):
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _article_record(a):
    article, summary = _words(a["article"]), _words(a["summary"])
    total, novel = [], []
    for n in ORDERS:
        grams = _ngrams(summary, n)
        source = _ngrams(article, n)
        total.append(len(grams))
        novel.append(len(grams - source))
    return {
        "id": a["id"],
        "path": a["path"],
        "article_words": article,
        "summary_words": summary,
        "article_sentences": len(a["article"]),
        "summary_sentences": len(a["summary"]),
        "total": total,
        "novel": novel,
    }


def _novel(records):
    mean, pooled, summaries = [], [], []
    for k in range(len(ORDERS)):
        with_grams = [r for r in records if r["total"][k] > 0]
        s = 0.0
        for r in with_grams:
            s += 100.0 * r["novel"][k] / r["total"][k]
        mean.append(s / len(with_grams) if with_grams else None)
        total = sum(r["total"][k] for r in records)
        pooled.append(100.0 * sum(r["novel"][k] for r in records) / total if total else None)
        summaries.append(len(with_grams))
    eligible = sum(1 for r in records if r["total"][3] > 0 and r["novel"][3] * 10 >= r["total"][3] * 9)
    return {"mean": mean, "pooled": pooled, "summaries": summaries, "xtreme_eligible": eligible}


def _text(records, side):
    n = len(records)
    words = sum(len(r[side + "_words"]) for r in records)
    sentences = sum(r[side + "_sentences"] for r in records)
    vocabulary = set()
    for r in records:
        vocabulary.update(r[side + "_words"])
    return {"mean_words": words / n, "mean_sentences": sentences / n, "vocabulary": len(vocabulary)}


def _set(name, splits, records):
    return {
        "name": name,
        "splits": splits,
        "articles": len(records),
        "article": _text(records, "article"),
        "summary": _text(records, "summary"),
        "novel": _novel(records),
    }


def _variant(split):
    return split.rsplit("/", 1)[0] if "/" in split else ""


def _last(split):
    return split.rsplit("/", 1)[-1]


def _combined(splits):
    """(name, member splits) of each variant's dev+test and train+dev+test sets."""
    variants = []
    for s in splits:
        if _variant(s) not in variants:
            variants.append(_variant(s))
    out = []
    for v in variants:
        members = {_last(s): s for s in splits if _variant(s) == v}
        prefix = f"{v} " if v else ""
        if "dev" in members and "test" in members:
            out.append((prefix + "dev+test", [members["dev"], members["test"]]))
            if "train" in members:
                out.append((prefix + "train+dev+test", [members["train"], members["dev"], members["test"]]))
    return out


def _chronology(records):
    seen, kept = set(), []
    for r in records:
        if r["id"]:
            if r["id"] in seen:
                continue
            seen.add(r["id"])
        kept.append(r)
    n = len(kept)
    if n < 5:
        return None
    numeric = all(r["id"] and all("0" <= c <= "9" for c in r["id"]) for r in kept)
    ordered = sorted(kept, key=(lambda r: int(r["id"])) if numeric else (lambda r: r["id"]))
    fifths = []
    for k in range(5):
        part = ordered[k * n // 5:(k + 1) * n // 5]
        fifths.append({
            "fifth": k + 1,
            "articles": len(part),
            "first_id": part[0]["id"],
            "last_id": part[-1]["id"],
            "novel_mean": _novel(part)["mean"],
        })
    return {"numeric_ids": numeric, "articles": n, "fifths": fifths}


def stats(data, splits):
    """Every figure of `report liputan6-stats` on the SPLITS (comma-separated) of DATA, as JSON."""
    names = [s for s in splits.split(",") if s]
    by_split = {s: [_article_record(_read(f)) for f in _files(data, s)] for s in names}
    out = {
        "splits": [_set(s, [s], by_split[s]) for s in names],
        "combined": [_set(name, members, [r for m in members for r in by_split[m]])
                     for name, members in _combined(names)],
        "chronology": _chronology([r for s in names for r in by_split[s]]),
    }
    print(json.dumps(out))


def _picks(article, line):
    """The sentence indices a `<q>`-separated summary line picks, matched in order."""
    if line == "":
        return []
    picked, after = [], -1
    for segment in line.split("<q>"):
        found = next((j for j in range(after + 1, len(article)) if " ".join(article[j]) == segment), None)
        if found is None:
            raise ValueError(f"{segment!r} is not a sentence of the article after position {after + 1}")
        picked.append(found)
        after = found
    return picked


def _lines(path):
    """A text file's lines as indolm reads them (split at \\n, one \\r before it dropped)."""
    with open(path, encoding="utf-8", newline="") as f:
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _histogram(name, picks, bins):
    counts = [0] * (bins + 1)
    for chosen in picks:
        for j in chosen:
            counts[min(j, bins)] += 1
    picked = sum(counts)
    articles = len(picks)
    first_two = sum(1 for chosen in picks for j in chosen if j < 2)
    both = sum(1 for chosen in picks if 0 in chosen and 1 in chosen)
    either = sum(1 for chosen in picks if 0 in chosen or 1 in chosen)
    return {
        "name": name,
        "articles": articles,
        "picked": picked,
        "counts": counts,
        "percent": [100.0 * c / picked for c in counts],
        "per_article": picked / articles,
        "first_two": 100.0 * first_two / picked,
        "with_both_first_two": 100.0 * both / articles,
        "with_first_or_second": 100.0 * either / articles,
    }


def positions(data, split, bins, *candidates):
    """The Oracle's and each NAME=CANDIDATE file's position histogram on DATA/SPLIT, as JSON."""
    bins = int(bins)
    articles = [_read(f) for f in _files(data, split)]
    oracle = []
    for a in articles:
        label = a["extractive"]
        if label is None:
            label = liputan6_oracle.label(a["article"], a["summary"])
        oracle.append([int(j) for j in label])
    systems = [_histogram("Oracle", oracle, bins)]
    for spec in candidates:
        name, path = spec.split("=", 1)
        lines = _lines(path)
        if len(lines) != len(articles):
            raise ValueError(f"{path}: {len(lines)} lines for {len(articles)} articles")
        picks = [_picks(a["article"], line) for a, line in zip(articles, lines)]
        systems.append(_histogram(name, picks, bins))
    print(json.dumps({"articles": len(articles), "positions": bins, "systems": systems}))
