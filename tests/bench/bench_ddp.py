"""`make bench-ddp`: data-parallel training on c10d's Gloo against one process, on the same
global batch and the same cores: 2 ranks x 1 thread (torchrun's variables, loopback) against
1 process x 2 threads, the bench-train model and recipe (L4 H256 A4 FF1024, vocab 31,923,
seq 128, batch 32). Prints both tokens/s (medians of the logged windows, the first left out),
their ratio (goal >= 0.85), and the share of update time rank 0 spent in the gradient
all-reduce, from one run, alternating the systems over rounds. The two ranks run twice a round:
with the gradient all-reduce overlapping backward in buckets (the default, `--bucket-mb 25`)
and with every gradient summed after backward (`--bucket-mb 0`); the bench prints both and
their ratio (with the overlap, the share is the time the update still waited for the sums
after backward). Each two-rank job takes a
port the OS picks; when something else takes it before rank 0 binds it ("address already in
use"), the job runs again on another.

Sizes from the environment (default), bench-train's: BENCH_ROUNDS (2), BENCH_STEPS (30), BENCH_SEQ
(128), BENCH_BATCH (32, split over the ranks: even). INDOLM_BIN names the binary
(target/release/indolm); tests/it/benches.rs runs this at a tiny size."""
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_train import BATCH, BINARY, SEQ, STEPS, write_bench_recipe  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))


def rates(stdout):
    found = [float(m) for m in re.findall(r"([0-9.]+) tok/s", stdout)]
    return statistics.median(found[1:])


def one_process(recipe):
    out = subprocess.run([BINARY, "--device", "cpu", "--threads", "2", "train", recipe, "--overwrite", "--stop-after", str(STEPS)], check=True, capture_output=True, text=True)
    return rates(out.stdout)


def free_port():
    """A port nobody listens on: the OS's pick, released (rank 0's store binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def run_ranks(recipe, port, extra):
    """Both ranks on `port`; returns each one's (exit status, stdout, stderr). When one fails the
    other is stopped: it would wait for the failed one until the rendezvous timed out."""
    with tempfile.TemporaryDirectory(prefix="bench-ddp-logs-") as logs:
        ranks, files = [], []
        for rank in range(2):
            env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
            out = open(os.path.join(logs, f"{rank}.out"), "w+", encoding="utf-8")
            err = open(os.path.join(logs, f"{rank}.err"), "w+", encoding="utf-8")
            files.append((out, err))
            ranks.append(subprocess.Popen([BINARY, "--device", "cpu", "--threads", "1", "train", recipe, "--overwrite", "--stop-after", str(STEPS), *extra], env=env, stdout=out, stderr=err, text=True))
        while any(r.poll() is None for r in ranks):
            if any(r.returncode not in (None, 0) for r in ranks):
                for r in ranks:
                    if r.poll() is None:
                        r.kill()
            time.sleep(0.05)
        results = []
        for r, (out, err) in zip(ranks, files):
            out.seek(0)
            err.seek(0)
            results.append((r.returncode, out.read(), err.read()))
            out.close()
            err.close()
        return results


def two_ranks(recipe, extra=()):
    for attempt in range(3):
        results = run_ranks(recipe, free_port(), extra)
        if all(code == 0 for code, _, _ in results):
            break
        if attempt < 2 and any("address already in use" in err for _, _, err in results):
            print("the port was taken before rank 0 bound it; another one", file=sys.stderr, flush=True)
            continue
        sys.exit("a rank failed:\n" + "\n".join(f"rank {k} (exit {code}):\n{out}\n{err}" for k, (code, out, err) in enumerate(results)))
    stdout = results[0][1]
    share = float(re.search(r"all-reduce took ([0-9.]+)%", stdout).group(1))
    return rates(stdout), share


def main():
    work = tempfile.mkdtemp(prefix="bench-ddp-")
    recipe = write_bench_recipe(work)
    ones, twos, shares, afters, after_shares = [], [], [], [], []
    for r in range(ROUNDS):
        ones.append(one_process(recipe))
        rate, share = two_ranks(recipe)
        twos.append(rate)
        shares.append(share)
        rate, share = two_ranks(recipe, ("--bucket-mb", "0"))
        afters.append(rate)
        after_shares.append(share)
        print(f"round {r + 1}: 1 process x 2 threads {ones[-1]:.0f}, 2 Gloo ranks x 1 thread {twos[-1]:.0f} tokens/s (all-reduce during backward, {shares[-1]:.1f}% of update time left waiting), ratio {twos[-1] / ones[-1]:.2f}; summed after backward {afters[-1]:.0f} tokens/s ({after_shares[-1]:.1f}%), overlap gain {twos[-1] / afters[-1]:.2f}x", flush=True)
    one, two, share = statistics.median(ones), statistics.median(twos), statistics.median(shares)
    after, after_share = statistics.median(afters), statistics.median(after_shares)
    gains = statistics.median(t / a for t, a in zip(twos, afters))
    print(f"global batch {BATCH} x seq {SEQ}, {STEPS} steps, medians of {ROUNDS} alternating rounds")
    print(f"1 process x 2 threads:      {one:8.0f} tokens/s")
    print(f"2 Gloo ranks x 1 thread:    {two:8.0f} tokens/s (all-reduce during backward; {share:.1f}% of rank 0's update time left waiting for it)")
    print(f"  summed after backward:    {after:8.0f} tokens/s (all-reduce {after_share:.1f}% of rank 0's update time)")
    print(f"ratio: {two / one:.2f}x (goal >= 0.85); overlap gain {gains:.2f}x (median of the rounds' ratios)")


if __name__ == "__main__":
    main()
