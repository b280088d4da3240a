"""The model and text `make bench-causal` and `make bench-generate-causal` share: the UD Indonesian
sentences in the repository, and a random Llama-shaped model (4 layers, hidden 512, 8 heads over
4 key/value heads, vocabulary 32,000) with a byte-level BPE tokenizer trained on them, saved as a
transformers model folder."""
import glob
import json
import os

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sentences():
    """The `# text = ` lines of the UD Indonesian treebank files under tests/data."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "data", "ud-indonesian", "*.conllu"))):
        with open(path, encoding="utf-8") as f:
            out += [l[9:].strip() for l in f if l.startswith("# text = ")]
    return out


def save_llama(work, texts, max_positions):
    """Trains the tokenizer on `texts`, builds the random model (seeded by the caller's
    torch.manual_seed) and saves both in `work`; returns the model in eval mode."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=8000, special_tokens=["<pad>", "<unk>", "<s>", "</s>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(os.path.join(work, "tokenizer.json"))
    with open(os.path.join(work, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
                   "pad_token": "<pad>", "unk_token": "<unk>", "add_bos_token": False}, f)
    config = LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                         num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=max_positions,
                         bos_token_id=2, eos_token_id=3, pad_token_id=0, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(work)
    return model
