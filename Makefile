# indolm: `make demo` and `make test` set everything up themselves (see README.md).
SHELL := /bin/bash
VENV := $(CURDIR)/.venv
PYTHON := $(VENV)/bin/python
BIN := target/release/indolm
# torch 2.11.0 is the libtorch that tch 0.24.0 is built for; the wheel serves CPU and CUDA 13.
TORCH_VERSION := 2.11.0

export LIBTORCH_USE_PYTORCH := 1
export VIRTUAL_ENV := $(VENV)
export PATH := $(VENV)/bin:$(PATH)

.PHONY: setup build test test-light lint demo demo-bias clean help

help:
	@echo "make setup   create .venv (torch $(TORCH_VERSION) + test references) and build indolm"
	@echo "make test    setup, then run the whole test suite"
	@echo "make test-light  the unit tests of the crates without libtorch (core, metrics), without the venv"
	@echo "make lint    rustfmt --check and clippy with warnings as errors"
	@echo "make demo    setup, then pretrain the tiny demo on the Indonesian text in the repository"
	@echo "make demo-bias  two seeds of the sample recipe with dense bias curves, compared (report bias-*)"
	@echo "make demo-utility  after demo: NusaX sentiment from each demo checkpoint, macro-F1 beside the bias curves"

# The venv is rebuilt only when the pinned requirements change.
$(VENV)/.installed: tests/reference/requirements.txt
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q torch==$(TORCH_VERSION)
	$(PYTHON) -m pip install -q -r tests/reference/requirements.txt
	touch $@

# CUDA's compiler headers for the NCCL part of the c10d shim (a few MB; the torch wheel brings
# CUDA's runtime headers and NCCL's, not these). Without them indolm builds without NCCL.
CUDA_HEADERS := nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85
$(VENV)/.cuda-headers: $(VENV)/.installed
	$(PYTHON) -m pip install -q --no-deps $(CUDA_HEADERS)
	touch $@

build: $(VENV)/.installed $(VENV)/.cuda-headers
	cargo build --release

setup: build

# The crates without libtorch (crates/core, crates/metrics): their unit tests, built and run without
# the torch wheel (no venv needed), in seconds once their few dependencies are built.
test-light:
	cargo test --release -p indolm-core -p indolm-metrics

# Not `setup`: its `cargo build --release` is the binary without the test hooks, and a second
# build of every crate with the tests' features and dev-dependencies (#51: CI's time doubled).
# `cargo test` builds the binary the tests run.
test: $(VENV)/.installed $(VENV)/.cuda-headers
	cargo test --release --workspace --features indolm/test-hooks -- --test-threads=1

# The gate every commit passes: formatting (rustfmt.toml) and clippy with warnings as errors,
# on every target (library, binary, tests). Clippy needs the venv for torch-sys's build script.
lint: $(VENV)/.installed $(VENV)/.cuda-headers
	cargo fmt --all --check
	cargo clippy --release --workspace --all-targets -- -D warnings
	cargo clippy --release --workspace --all-targets --all-features -- -D warnings

# The main job: train a tokenizer on the Indonesian text in the repository, prepare it, pretrain
# the tiny demo recipe with checkpoints, held-out losses and bias evaluations, then ask its first
# and last checkpoints to fill the same [MASK] (what it learned in between) and say where the
# logs are. The picture goes beside the run's TensorBoard folder, not into it: `train --overwrite`
# removes only what training wrote, so a picture inside would stop the next `make demo`.
DEMO_RECIPE := recipes/tiny/demo.toml
DEMO_RUN := checkpoints/tiny-demo
DEMO_FIRST := $(DEMO_RUN)/step-250
DEMO_LAST := $(DEMO_RUN)/step-2000
DEMO_TEXT := Petani menanam [MASK] di sawah.
demo: setup
	$(BIN) tokenizer train --recipe $(DEMO_RECIPE) --vocab-size 4000 --overwrite
	$(BIN) corpus prepare $(DEMO_RECIPE)
	$(BIN) train $(DEMO_RECIPE) --overwrite
	@echo
	@echo "Before: after 250 steps ($(DEMO_FIRST)) the model fills the mask with"
	@$(BIN) fill-mask --model $(DEMO_FIRST) --text "$(DEMO_TEXT)"
	@echo "After: at the last step ($(DEMO_LAST))"
	@$(BIN) fill-mask --model $(DEMO_LAST) --text "$(DEMO_TEXT)"
	$(BIN) report bias-curve --run $(DEMO_RUN) --out runs/tiny-demo-bias-curve.png
	@echo
	@echo "Checkpoints (bias.json and bias_pairs.csv at each): $(DEMO_RUN)/"
	@echo "TensorBoard logs: runs/tiny-demo/ (bias curves: one run per language, bias-<lang>/; interval bands in the Custom Scalars tab)"
	@echo "Bias-over-steps picture: runs/tiny-demo-bias-curve.png"
	@echo "View the curves with:  $(VENV)/bin/tensorboard --logdir runs"

# The bias reports on two tiny runs that differ only in their seed, each with dense curves (a
# bias evaluation every 20 steps as well as at checkpoints): the runs side by side with pairwise
# tests, a paired diff of two checkpoints, and when each pair's preference settles.
BIAS_REPORT := runs/bias-report
SAMPLE_RECIPE := recipes/tiny/sample.toml
demo-bias: setup
	test -f corpora/sample-tokenizer/tokenizer.json || $(BIN) tokenizer train --recipe $(SAMPLE_RECIPE) --vocab-size 3000
	$(BIN) train recipes/tiny/bias-seed-a.toml --overwrite
	$(BIN) train recipes/tiny/bias-seed-b.toml --overwrite
	mkdir -p $(BIAS_REPORT)
	$(BIN) report bias-compare checkpoints/tiny-bias-a checkpoints/tiny-bias-b --out $(BIAS_REPORT)/compare.md --plot $(BIAS_REPORT)/compare.png
	$(BIN) report bias-diff checkpoints/tiny-bias-a/step-200 checkpoints/tiny-bias-a/step-600 --out $(BIAS_REPORT)/diff-a-200-600.md
	$(BIN) report bias-flips --run checkpoints/tiny-bias-a --out $(BIAS_REPORT)/flips-a.md --plot $(BIAS_REPORT)/flips-a.png
	$(BIN) report bias-curve --run checkpoints/tiny-bias-a --out $(BIAS_REPORT)/curve-a.png
	@echo
	@echo "Reports and pictures: $(BIAS_REPORT)/   TensorBoard: $(VENV)/bin/tensorboard --logdir runs (Custom Scalars tab for the interval bands)"

# Utility beside bias, after `make demo`: NusaX sentiment (Indonesian) fine-tuned from every
# checkpoint of the demo run, each step's test macro-F1 written into runs/tiny-demo/ beside the
# bias curves (runs/tiny-demo/utility-nusax-utility-tiny/), and the win rate and macro-F1 over
# the steps drawn for the guide (docs/bias.md#utility-beside-bias) with the table beside the run.
UTILITY_RECIPE := recipes/finetune/nusax-utility-tiny.toml
.PHONY: demo-utility
demo-utility: setup
	@test -f $(DEMO_LAST)/model.safetensors || { echo "$(DEMO_LAST) is missing: run make demo first"; exit 1; }
	$(BIN) finetune sentiment $(UTILITY_RECIPE) --from-run $(DEMO_RUN) --overwrite
	$(BIN) report bias-utility --run $(DEMO_RUN) --out docs/bias-utility.png --csv runs/tiny-demo-utility.csv
	@echo
	@echo "Sub-runs (one per checkpoint): checkpoints/nusax-utility-tiny/from-step-<N>/"
	@echo "TensorBoard: runs/tiny-demo/ (utility-nusax-utility-tiny/ beside bias-<lang>/)   Picture: docs/bias-utility.png"

clean:
	cargo clean

# Benchmarks: our figure, the reference's, and the ratio, from one run. They import the Python
# references as a package (tests/reference/indolm_reference), found through PYTHONPATH. These run
# them at full size; `make test` runs each target's recipe at a tiny size (tests/it/benches.rs,
# through the variables each script's docstring names).
BENCH_PYTHON := PYTHONPATH=$(CURDIR)/tests/reference $(PYTHON)
.PHONY: bench-bias
bench-bias: setup
	$(BENCH_PYTHON) tests/bench/bench_bias.py

.PHONY: bench-train
bench-train: setup
	$(BENCH_PYTHON) tests/bench/bench_train.py

.PHONY: bench-ddp
bench-ddp: setup
	$(BENCH_PYTHON) tests/bench/bench_ddp.py

.PHONY: bench-data
bench-data: setup
	$(BENCH_PYTHON) tests/bench/bench_data.py

.PHONY: bench-finetune
bench-finetune: setup
	$(BENCH_PYTHON) tests/bench/bench_finetune.py

.PHONY: bench-translation
bench-translation: setup
	$(BENCH_PYTHON) tests/bench/bench_translation.py

.PHONY: bench-liputan6-data
bench-liputan6-data: setup
	$(BENCH_PYTHON) tests/bench/bench_liputan6_data.py

.PHONY: bench-ops
bench-ops: setup
	$(BENCH_PYTHON) tests/bench/bench_ops.py

.PHONY: bench-causal
bench-causal: setup
	$(BENCH_PYTHON) tests/bench/bench_causal.py

.PHONY: bench-generate
bench-generate: setup
	$(BENCH_PYTHON) tests/bench/bench_generate.py

.PHONY: bench-generate-causal
bench-generate-causal: setup
	$(BENCH_PYTHON) tests/bench/bench_generate_causal.py
