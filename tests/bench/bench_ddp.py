"""`make bench-ddp`: data-parallel training on c10d's Gloo against one process, on the same
global batch and the same cores: 2 ranks x 1 thread (torchrun's variables, loopback) against
1 process x 2 threads, the bench-train model and recipe (L4 H256 A4 FF1024, vocab 31,923,
seq 128, batch 32). Prints both tokens/s (medians of the logged windows, the first left out),
their ratio (goal >= 0.85), and the share of update time rank 0 spent in the gradient
all-reduce, from one run, alternating the two systems over rounds."""
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_train import BINARY, STEPS, write_bench_recipe  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))


def rates(stdout):
    found = [float(m) for m in re.findall(r"([0-9.]+) tok/s", stdout)]
    return statistics.median(found[1:])


def one_process(recipe):
    out = subprocess.run([BINARY, "--device", "cpu", "--threads", "2", "train", recipe, "--overwrite", "--stop-after", str(STEPS)], check=True, capture_output=True, text=True)
    return rates(out.stdout)


def two_ranks(recipe):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    ranks = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        ranks.append(subprocess.Popen([BINARY, "--device", "cpu", "--threads", "1", "train", recipe, "--overwrite", "--stop-after", str(STEPS)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [r.communicate() for r in ranks]
    for r, (out, err) in zip(ranks, outs):
        if r.returncode != 0:
            sys.exit(f"a rank failed:\n{out}\n{err}")
    share = float(re.search(r"all-reduce took ([0-9.]+)%", outs[0][0]).group(1))
    return rates(outs[0][0]), share


def main():
    work = tempfile.mkdtemp(prefix="bench-ddp-")
    recipe = write_bench_recipe(work)
    ones, twos, shares = [], [], []
    for r in range(ROUNDS):
        ones.append(one_process(recipe))
        rate, share = two_ranks(recipe)
        twos.append(rate)
        shares.append(share)
        print(f"round {r + 1}: 1 process x 2 threads {ones[-1]:.0f}, 2 Gloo ranks x 1 thread {twos[-1]:.0f} tokens/s, ratio {twos[-1] / ones[-1]:.2f}, all-reduce {share:.1f}% of update time", flush=True)
    one, two, share = statistics.median(ones), statistics.median(twos), statistics.median(shares)
    print(f"global batch 32 x seq 128, {STEPS} steps, medians of {ROUNDS} alternating rounds")
    print(f"1 process x 2 threads:      {one:8.0f} tokens/s")
    print(f"2 Gloo ranks x 1 thread:    {two:8.0f} tokens/s (all-reduce {share:.1f}% of rank 0's update time)")
    print(f"ratio: {two / one:.2f}x (goal >= 0.85)")


if __name__ == "__main__":
    main()
