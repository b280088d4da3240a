//! indolm's integration tests, as one test crate (`cargo test --features test-hooks --test it`) with a module per
//! area and `common` for the shared helpers. One binary instead of one per file: libtorch and
//! the library are linked into one executable, and the shared fixtures — the reference HF
//! model built by `common::reference_model()` — are built once per run, not once per file.
//!
//! Everything runs in one process, so the tests are run one at a time (`make test` passes
//! `--test-threads=1`): several seed torch's process-global random generator. Filter to a module
//! with its path, e.g. `cargo test --release --features test-hooks --test it -- --test-threads=1 beam::`.
mod adapters;
mod api_backend;
mod architecture;
mod attention;
mod bad_input;
mod beam;
mod benches;
mod bertabs;
mod bertext;
mod bertscore;
mod bf16_cpu;
mod bias_eval;
mod bias_qa;
mod bias_science;
mod bleu;
mod common;
mod corpora;
mod cuda;
mod decoders;
mod dist;
mod dist_eval;
mod docs;
mod download;
mod eval_integrity;
mod faults;
mod finetune_engine;
mod generation;
mod gpu_readiness;
mod hf_parity;
mod indommlu;
mod liputan6_stats;
mod nusax_baselines;
mod op_counts;
mod papers;
mod pickle_fuzz;
mod pickles;
mod rouge;
mod sandbox;
mod sentencepiece;
mod sentiment;
mod seq2seq;
mod summarization;
mod tokenizer_parity;
mod torch_failures;
mod train;
mod training_kernels;
mod translation;
mod translation_finetune;
mod utility;
mod xlmr;
