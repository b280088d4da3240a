"""The Liputan6 release's Oracle labels, as a command line: indolm_reference/liputan6_oracle.py
(its docstring says what it reproduces and how to call it).

  python tests/reference/liputan6_oracle.py ARTICLES.jsonl > LABELS.json
  python tests/reference/liputan6_oracle.py --set-orders CASES.json > ORDERS.json
"""
from indolm_reference import liputan6_oracle

if __name__ == "__main__":
    liputan6_oracle.main()
