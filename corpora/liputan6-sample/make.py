"""Writes corpora/liputan6-sample: the embedded sample corpus (corpora/sample/indonesian.txt, text
written for indolm) in the Liputan6 release layout, for the tiny summarization recipes.

Each document (paragraphs up to a blank line) becomes one article: sentences split after . ! ?,
lowercased, punctuation split off as Liputan6's `clean_article` is. Its "summary" is the first
sentence of the first paragraph and the first sentence of the last paragraph: not written by a
person, but a signal in the article that Lead-N cannot reproduce, so that training shows.
Documents 1-35 go to train/, 36-42 to dev/, the rest to test/. Run from the repository root:
    python3 corpora/liputan6-sample/make.py
"""
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "..", "sample", "indonesian.txt")


def tokens(sentence):
    return re.findall(r"\w+(?:[-']\w+)*|[^\w\s]", sentence.lower())


def sentences(paragraph):
    return [tokens(s) for s in re.split(r"(?<=[.!?])\s+", paragraph.strip()) if s.strip()]


def main():
    with open(SOURCE, encoding="utf-8") as f:
        documents = [d for d in f.read().split("\n\n") if d.strip()]
    for i, document in enumerate(documents):
        paragraphs = [p for p in document.split("\n") if p.strip()]
        article, firsts = [], []
        for p in paragraphs:
            firsts.append(len(article))
            article.extend(sentences(p))
        picks = sorted({firsts[0], firsts[-1]})
        split = "train" if i < 35 else "dev" if i < 42 else "test"
        os.makedirs(os.path.join(HERE, split), exist_ok=True)
        record = {
            "id": f"sample-{i + 1:03d}",
            "url": "",
            "clean_article": article,
            "clean_summary": [article[k] for k in picks],
            "extractive_summary": picks,
        }
        with open(os.path.join(HERE, split, f"{i + 1:03d}.json"), "w", encoding="utf-8") as f:
            json.dump(record, f, ensure_ascii=False)
            f.write("\n")
    print(f"{len(documents)} articles")


if __name__ == "__main__":
    main()
