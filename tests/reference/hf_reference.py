"""Reference side of indolm's parity tests, run with the project's .venv python:

  python tests/reference/hf_reference.py SUBCOMMAND ARGS...

Builds fixtures with HF transformers and checks indolm's outputs against transformers and the
other libraries the tests compare with. The subcommands are functions of the indolm_reference
package beside this script, a module per area; each module's docstring (below) says what it
reproduces and describes its subcommands.
"""
import sys

from indolm_reference import (adapters, bert, bertscore, data, decoders, generation, indommlu, optim, pickles, rouge155,
                              scoring, seq2seq, stats, summarization, tensorboard_logs, xlmr)
from indolm_reference import nusax_baselines

MODULES = [data, bert, optim, scoring, indommlu, decoders, xlmr, stats, summarization, tensorboard_logs, pickles,
           adapters, seq2seq, bertscore, rouge155, generation, nusax_baselines]

COMMANDS = {
    "train-vocab": data.train_vocab_cmd,
    "write-parquet": data.write_parquet,
    "make-model": bert.make_model,
    "check-export": bert.check_export,
    "tokenize": bert.tokenize,
    "classify": bert.classify,
    "adamw": optim.adamw,
    "fused-adamw": optim.fused_adamw,
    "pll": scoring.pll,
    "crows": scoring.crows,
    "aul": scoring.aul,
    "pll-word-l2r": scoring.pll_word_l2r,
    "indommlu": indommlu.indommlu,
    "indommlu-causal": indommlu.indommlu_causal,
    "make-mt5": seq2seq.make_mt5,
    "indommlu-mt0": seq2seq.indommlu_mt0,
    "make-mbart": seq2seq.make_mbart,
    "mbart-step": seq2seq.mbart_step,
    "mbart-generate": seq2seq.mbart_generate,
    "make-mt-model": seq2seq.make_mt_model,
    "mt-generate": seq2seq.mt_generate,
    "make-decoder": decoders.make_decoder,
    "causal-ref": decoders.causal_ref,
    "decoder-to-bf16": decoders.decoder_to_bf16,
    "bos-template": decoders.bos_template,
    "make-decoders": generation.make_decoders,
    "generate": generation.generate,
    "warp": generation.warp,
    "chat-render": generation.chat_render,
    "make-lora": adapters.make_lora,
    "make-xlmr": xlmr.make_xlmr,
    "tokenize-auto": xlmr.tokenize_auto,
    "stats": stats.stats,
    "f1": stats.f1,
    "multibootstrap": stats.multibootstrap,
    "presumm-decoder": summarization.presumm_decoder,
    "rouge": summarization.rouge,
    "rouge155": rouge155.rouge155,
    "bertscore": bertscore.bertscore,
    "tb-scalars": tensorboard_logs.tb_scalars,
    "tb-bias": tensorboard_logs.tb_bias,
    "save-bin": pickles.save_bin,
    "evil-bin": pickles.evil_bin,
    "fuzz-seeds": pickles.fuzz_seeds,
    "nusax-features": nusax_baselines.features,
    "nusax-fixed": nusax_baselines.fixed,
    "nusax-grid": nusax_baselines.grid,
}

# The Liputan6 paper's dataset statistics and extracted-sentence positions.
from indolm_reference import liputan6_stats  # noqa: E402
MODULES.append(liputan6_stats)
COMMANDS.update({"liputan6-stats": liputan6_stats.stats, "liputan6-positions": liputan6_stats.positions})

# IndoBias-QA: the prompts, the parse rule (regular expressions), SP with Wilson intervals, SP_σ.
from indolm_reference import bias_qa  # noqa: E402
MODULES.append(bias_qa)
COMMANDS.update({"bias-qa": bias_qa.bias_qa})

# indolm's OpenAI-compatible backend: a server's own answers through the openai client.
from indolm_reference import openai_server  # noqa: E402
MODULES.append(openai_server)
COMMANDS.update({"openai-chat": openai_server.chat})

# Utility beside bias: numpy and scipy on `report bias-utility`'s numbers.
from indolm_reference import utility  # noqa: E402
MODULES.append(utility)
COMMANDS.update({"utility-stats": utility.utility_stats})

# Corpus BLEU and chrF: the sacrebleu package's scores, printouts and signatures.
from indolm_reference import sacrebleu_ref  # noqa: E402
MODULES.append(sacrebleu_ref)
COMMANDS.update({"sacrebleu": sacrebleu_ref.sacrebleu})

# IndoNLG's SentencePiece tokenizer: a BPE model trained by `sentencepiece`, the authors' class.
from indolm_reference import indonlg  # noqa: E402
MODULES.append(indonlg)
COMMANDS.update({"make-spm": indonlg.make_spm, "indonlg-tokenize": indonlg.indonlg_tokenize})


def usage():
    """This docstring, then each module's, which describe the subcommands."""
    return __doc__ + "".join(f"\n{m.__name__}:\n{m.__doc__}" for m in MODULES)


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(usage())
    COMMANDS[sys.argv[1]](*sys.argv[2:])
