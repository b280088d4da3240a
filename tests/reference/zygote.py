"""A fork server for the reference subcommands: imports torch, transformers and the other
libraries the references use once, then runs each request in a child forked from that state, so
a request costs a fork instead of the seconds of imports a fresh interpreter spends, and still
runs in a process of its own (nothing one request sets, seeds or loads is seen by the next).

  python tests/reference/zygote.py

reads one JSON request a line on stdin, {"argv": ["make-model", DIR], "stdout": PATH,
"stderr": PATH}, runs `hf_reference.py ARGV...` in a forked child with its output going to the
two files (stdin from /dev/null), and answers one JSON line on stdout, {"code": EXIT_STATUS},
once the child has exited. A request with "script": PATH (and "env", the whole environment,
"cwd", and "timeout" in seconds) runs that script instead, as `python PATH ARGV...` run in
`cwd` with `env` would (the benchmark scripts, which import torch and transformers themselves);
a script still running after `timeout` is ended by SIGALRM. The test helper (`reference()` in tests/it/common.rs) starts it on
first use and falls back to a fresh interpreter when it cannot.

No torch operation runs before the fork: libtorch's thread pools start in each child, as in a
fresh process.
"""
import json
import os
import runpy
import signal
import sys
import tempfile
import traceback

import hf_reference

# What the subcommands import inside their functions, imported once here (each is optional: a
# library that fails to import is imported, and fails, in the child as before).
PRELOAD = [
    "numpy", "torch", "torch.nn.functional", "safetensors.torch", "tokenizers", "transformers",
    "transformers.models.bert.modeling_bert", "transformers.models.bert.tokenization_bert",
    "transformers.models.xlm_roberta.modeling_xlm_roberta", "transformers.models.llama.modeling_llama",
    "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto",
    "pandas", "pyarrow.parquet", "sklearn.metrics", "statsmodels.stats.proportion",
    "statsmodels.stats.multitest", "statsmodels.stats.contingency_tables", "rouge_score.rouge_scorer",
    "tensorboard.backend.event_processing.event_accumulator",
    "tensorboard.backend.event_processing.plugin_event_accumulator",
    "tensorboard.plugins.custom_scalar.layout_pb2",
]


def preload():
    import importlib
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the child imports it again and reports the failure
            pass
    # transformers resolves its lazy classes on first attribute access: resolve the ones used.
    import transformers
    for cls in ["AutoTokenizer", "AutoModelForMaskedLM", "AutoModelForCausalLM", "AutoModelForSequenceClassification",
                "BertConfig", "BertForMaskedLM", "BertModel", "XLMRobertaConfig", "XLMRobertaForMaskedLM",
                "XLMRobertaModel", "get_linear_schedule_with_warmup"]:
        getattr(transformers, cls, None)


def run_child(request):
    """In the forked child: the request's output files as stdout and stderr, then the subcommand."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, key in [(1, "stdout"), (2, "stderr")]:
        target = os.open(request[key], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    code = 0
    try:
        if "script" in request:
            run_script(request)
        else:
            argv = request["argv"]
            sys.argv = [hf_reference.__file__] + argv
            if not argv or argv[0] not in hf_reference.COMMANDS:
                sys.exit(hf_reference.usage())
            hf_reference.COMMANDS[argv[0]](*argv[1:])
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - reported as a fresh interpreter would
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_script(request):
    """In the forked child: the script as a fresh `python SCRIPT ARGV...` in `cwd` with `env`."""
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    tempfile.tempdir = None  # read from TMPDIR again
    script = os.path.abspath(request["script"])
    sys.argv = [script] + request.get("argv", [])
    sys.path.insert(0, os.path.dirname(script))
    for entry in reversed(request["env"].get("PYTHONPATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(1, entry)
    if request.get("timeout"):
        signal.alarm(int(request["timeout"]))
    runpy.run_path(script, run_name="__main__")


def main():
    preload()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            run_child(request)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"code": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main()
