"""`make bench-ops`: the ATen operations of one steady-state pretraining update, indolm's
(`indolm train --op-counts`, libtorch's RecordFunction hook) against HF transformers'
BertForMaskedLM with torch.optim.AdamW(fused=True) and clip_grad_norm_ in a plain PyTorch loop
(torch.profiler on the CPU, every `aten::` event at any depth, as indolm counts them), on the same
configuration: the demo's tiny model (L2 H128 A2 FF512, dropout 0.1), seq 64, batch 16. Prints
both totals, their ratio, the top-level (issued by the program) counts and the operations that
make the host wait for the device in each. On a GPU each operation is at least one kernel launch
(about 5 us of host time), so the totals bound the host's share of an update.

Sizes from the environment (default): BENCH_SEQ (64), BENCH_BATCH (16), BENCH_THREADS (2).
INDOLM_BIN names the binary (target/release/indolm); tests/it/benches.rs runs this at a tiny size."""
import os
import re
import subprocess
import tempfile

os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # the profiler's "no GPU" lines
import torch  # noqa: E402
from transformers import BertConfig, BertForMaskedLM  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("INDOLM_BIN", os.path.join(ROOT, "target", "release", "indolm"))
THREADS = os.environ.get("BENCH_THREADS", "2")
SEQ = int(os.environ.get("BENCH_SEQ", "64"))
BATCH = int(os.environ.get("BENCH_BATCH", "16"))
L, H, A, FF = 2, 128, 2, 512
# The operations indolm's counter calls host waits (crates/torch/src/device/torch_shim.cpp), by name.
WAITS = {"aten::_local_scalar_dense", "aten::item", "aten::nonzero", "aten::is_nonzero", "aten::equal",
         "aten::masked_select", "aten::unique", "aten::_unique2", "aten::allclose"}


def ours(work):
    tokenizer = os.path.join(work, "tok")
    data = os.path.join(ROOT, "tests", "data")
    recipe = f"""kind = "pretrain"
name = "ops"
seed = 3407
output_dir = "{work}/ck"
precision = "fp32"
[model]
preset = "tiny"
hidden_size = {H}
num_hidden_layers = {L}
num_attention_heads = {A}
intermediate_size = {FF}
[tokenizer]
path = "{tokenizer}"
[data]
corpus = "ops"
corpora_dir = "{work}/corpora"
seq_len = {SEQ}
heldout_fraction = 0.0
[[data.sources]]
name = "ud"
lang = "id"
paths = ["{data}/ud-indonesian/*.conllu"]
[optimizer]
lr = 1e-3
batch_size = {BATCH}
warmup_steps = 5
max_steps = 8
[checkpoint]
every = 100
[logging]
tensorboard = "{work}/runs"
every = 5
"""
    path = os.path.join(work, "ops.toml")
    with open(path, "w") as f:
        f.write(recipe)
    subprocess.run([BINARY, "tokenizer", "train", "--recipe", path, "--vocab-size", "3000"], check=True, capture_output=True)
    out = subprocess.run([BINARY, "--device", "cpu", "--threads", THREADS, "train", path, "--op-counts"], check=True, capture_output=True, text=True).stdout
    total, top = map(int, re.search(r"operations: (\d+) \((\d+) issued", out).groups())
    syncs = int(re.search(r"host syncs per update: (\d+)", out).group(1))
    vocab = int(re.search(r" V(\d+) on", out).group(1))
    return total, top, syncs, vocab


def theirs(vocab):
    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocab, hidden_size=H, num_hidden_layers=L, num_attention_heads=A, intermediate_size=FF, max_position_embeddings=128)
    model = BertForMaskedLM(config).train()
    no_decay = [p for n, p in model.named_parameters() if n.endswith(".bias") or "LayerNorm." in n]
    decay = [p for n, p in model.named_parameters() if not (n.endswith(".bias") or "LayerNorm." in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-3, fused=True)

    def update():
        ids = torch.randint(5, vocab, (BATCH, SEQ))
        labels = torch.full_like(ids, -100)
        pick = torch.rand(BATCH, SEQ) < 0.15
        labels[pick] = ids[pick]
        masked = ids.masked_fill(pick, 4)
        return masked, labels

    for _ in range(2):
        ids, labels = update()
        opt.zero_grad()
        model(input_ids=ids, labels=labels).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    ids, labels = update()  # drawn and masked outside the counted update, as indolm's loader does
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], acc_events=True) as prof:
        opt.zero_grad()
        model(input_ids=ids, labels=labels).loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    events = [e for e in prof.events() if e.name.startswith("aten::")]
    top = [e for e in events if e.cpu_parent is None or not e.cpu_parent.name.startswith("aten::")]
    waits = sum(1 for e in events if e.name in WAITS and (e.cpu_parent is None or e.cpu_parent.name not in WAITS | {"aten::_fused_adamw_"}))
    return len(events), len(top), waits


def main():
    torch.set_num_threads(int(THREADS))
    total, top, syncs, vocab = ours(tempfile.mkdtemp(prefix="bench-ops-"))
    ref_total, ref_top, ref_waits = theirs(vocab)
    print(f"one pretraining update: L{L} H{H} A{A} FF{FF} vocab {vocab}, seq {SEQ}, batch {BATCH}, dropout 0.1, CPU")
    print(f"indolm train --op-counts:                          {total:5d} ATen operations ({top} issued by indolm), host waits {syncs}")
    print(f"HF BertForMaskedLM + AdamW(fused=True) + clipping: {ref_total:5d} ATen operations ({ref_top} issued by the loop or modules), host waits {ref_waits} (by name)")
    print(f"ratio (HF / indolm): {ref_total / total:.2f}x")


if __name__ == "__main__":
    main()
