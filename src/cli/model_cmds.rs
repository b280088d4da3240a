//! Model subcommands: import/export between HF and indolm directories, random init, info (of a
//! model, of the build, of the attention kernels libtorch picks), tokenize and fill-mask.
use indolm_core::outln;
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::error::{Error, Result};
use indolm_torch::model::model_dir::{check_vocab, load_masked_lm, save_model_dir, save_model_files};
use indolm_torch::model::{BertConfig, BertForMaskedLM, LoadNote};
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// Loading notes on stderr, so stdout stays the command's output.
fn print_notes(notes: &[LoadNote]) {
    for note in notes {
        eprintln!("note: {note}");
    }
}

/// Loads any model directory and writes it with canonical HF names, fp32, full tokenizer files.
pub fn convert(src: &Path, out: &Path, overwrite: bool, verb: &str) -> Result<()> {
    indolm_core::outputs::check_replaceable(out, overwrite, &[src], indolm_torch::model::model_dir::is_model_file)?;
    let loaded = load_masked_lm(src, Device::Cpu)?;
    print_notes(&loaded.notes);
    save_model_dir(out, overwrite, &[src], |dir| save_model_files(dir, &loaded.config, &loaded.vs, &loaded.tokenizer))?;
    let n: i64 = loaded.vs.variables().values().map(|t| t.numel() as i64).sum();
    outln!("{verb} {} -> {} ({} tensors, {n} parameters)", src.display(), out.display(), loaded.vs.variables().len());
    Ok(())
}

/// `convert`: a model directory of any family with its weights in any layout indolm reads
/// (`model.safetensors`, PyTorch's `pytorch_model.bin`, or shards of either) written as one
/// `model.safetensors`, the tensors as they are (names and dtypes), with its configuration and
/// tokenizer files copied beside it.
pub fn to_safetensors(src: &Path, out: &Path, overwrite: bool) -> Result<()> {
    use indolm_torch::model::model_dir::{is_converted_file, is_hf_side_file, WEIGHTS_FILE};
    indolm_core::outputs::check_replaceable(out, overwrite, &[src], is_converted_file)?;
    let (from, tensors) = indolm_torch::model::weights::read_model_weights(src)?;
    let mut side = Vec::new();
    for entry in std::fs::read_dir(src).map_err(|e| indolm_torch::error::Error::io(src, e))?.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().to_string();
        if is_hf_side_file(&name) && entry.path().is_file() {
            side.push((name, entry.path()));
        }
    }
    indolm_core::outputs::write_dir(out, overwrite, &[src], is_converted_file, |dir| {
        std::fs::create_dir_all(dir).map_err(|e| indolm_torch::error::Error::io(dir, e))?;
        let named: Vec<(String, tch::Tensor)> = tensors.iter().map(|(n, t)| (n.clone(), t.shallow_clone())).collect();
        indolm_torch::model::weights::write_file(&dir.join(WEIGHTS_FILE), &named)?;
        for (name, path) in &side {
            std::fs::copy(path, dir.join(name)).map_err(|e| indolm_torch::error::Error::io(path, e))?;
        }
        Ok(())
    })?;
    let n: i64 = tensors.values().map(|t| t.numel() as i64).sum();
    let copied: Vec<&str> = side.iter().map(|(n, _)| n.as_str()).collect();
    outln!(
        "converted {} -> {} ({} tensors, {n} values, from {}; copied {})",
        src.display(),
        out.join(WEIGHTS_FILE).display(),
        tensors.len(),
        from.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default(),
        copied.join(", ")
    );
    Ok(())
}

/// `init`: a randomly initialised masked LM for a config and a tokenizer.
pub fn init(config_path: &Path, tokenizer_path: &Path, out: &Path, seed: u64, overwrite: bool) -> Result<()> {
    let config = BertConfig::from_file(config_path)?;
    let tokenizer = TextTokenizer::from_path(tokenizer_path)?;
    print_notes(&check_vocab(&config, config_path, &tokenizer)?.into_iter().collect::<Vec<_>>());
    tch::manual_seed(seed as i64);
    let vs = tch::nn::VarStore::new(Device::Cpu);
    let _model = BertForMaskedLM::new(&vs.root(), &config, false);
    save_model_dir(out, overwrite, &[config_path, tokenizer_path], |dir| {
        save_model_files(dir, &config, &vs, &tokenizer)
    })?;
    outln!(
        "initialised {} ({} layers, hidden {}, vocab {}) with seed {seed}",
        out.display(),
        config.num_hidden_layers,
        config.hidden_size,
        config.vocab_size
    );
    Ok(())
}

/// `info`: configuration, parameter count, tokenizer and loading notes of a model directory.
pub fn info(model: &Path) -> Result<()> {
    let loaded = load_masked_lm(model, Device::Cpu)?;
    let c = &loaded.config;
    let n: i64 = loaded.vs.variables().values().map(|t| t.numel() as i64).sum();
    outln!("model         {}", model.display());
    outln!("layers        {}", c.num_hidden_layers);
    outln!("hidden        {} ({} heads of {})", c.hidden_size, c.num_attention_heads, c.head_dim());
    outln!("feed-forward  {} ({})", c.intermediate_size, c.hidden_act);
    outln!("positions     {}", c.max_position_embeddings);
    outln!(
        "vocabulary    {} (tokenizer: {} ids, {}cased, from {})",
        c.vocab_size,
        loaded.tokenizer.vocab_size(),
        if loaded.tokenizer.lowercase { "un" } else { "" },
        loaded.tokenizer.source.display()
    );
    outln!(
        "pooler        {}",
        if loaded.model.bert.pool(&Tensor::zeros([1, 1, c.hidden_size], (Kind::Float, Device::Cpu))).is_some() {
            "yes"
        } else {
            "no"
        }
    );
    outln!("parameters    {n}");
    print_notes(&loaded.notes);
    Ok(())
}

/// `info --build`: the versions this binary was built against, one `name  value (what)` line
/// each (the GPU check's preflight reads them).
pub fn build_info() {
    let info = indolm_torch::device::build_info::build_info();
    outln!("indolm        {}", env!("CARGO_PKG_VERSION"));
    outln!("torch         {} (the wheel it was built against)", info.torch);
    outln!("cuda          {} (the CUDA that torch was built for)", info.cuda);
    outln!("nccl          {} (the nccl.h its c10d shim was compiled with)", info.nccl);
}

/// The dtype `info --attention` asks about.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionDtype {
    /// bf16, as the decoders run on CUDA.
    Bf16,
    /// fp16.
    Fp16,
    /// fp32, as the decoders run on the CPU.
    Fp32,
}

/// `info --attention`: the kernels libtorch picks on `device` for the decoders' attention at
/// `shape` ("batch,heads,kv_heads,tokens,head_dim") in `dtype`, for each mask, the grouped heads
/// read in place and expanded, and the form the decoders take
/// ([`indolm_torch::model::decoder::layers::GroupedKernels`]).
pub fn attention_kernels(shape: &str, dtype: AttentionDtype, device: Device) -> Result<()> {
    use indolm_torch::model::decoder::layers::{attention_kernels, AttentionShape, GroupedHeads};
    let sizes: Vec<i64> = shape.split(',').map(|n| n.trim().parse().ok()).collect::<Option<_>>().unwrap_or_default();
    let [batch, heads, kv_heads, seq, head_dim] = sizes[..] else {
        return Err(Error::argument(
            "--attention-shape",
            format!("expected five numbers, batch,heads,kv_heads,tokens,head_dim, found {shape:?}"),
        ));
    };
    let kind = match dtype {
        AttentionDtype::Bf16 => Kind::BFloat16,
        AttentionDtype::Fp16 => Kind::Half,
        AttentionDtype::Fp32 => Kind::Float,
    };
    let found = attention_kernels(AttentionShape { batch, heads, kv_heads, seq, head_dim }, kind, device)?;
    outln!(
        "attention kernels libtorch picks on {} for batch {batch}, {heads} query heads over {kv_heads} key/value heads, {seq} tokens, head dim {head_dim}, {kind:?}:",
        indolm_torch::device::describe(device)
    );
    for case in found {
        let g = case.kernels;
        let used = match g.heads() {
            GroupedHeads::InPlace => "read in place",
            GroupedHeads::Expanded => "expanded",
        };
        outln!(
            "attention, {}: {} with the grouped heads in place, {} with them expanded; the decoders' heads: {used}",
            case.mask,
            g.in_place.name(),
            g.expanded.name()
        );
    }
    Ok(())
}

/// `tokenize`: the word pieces and ids of a text (or a pair).
pub fn tokenize(path: &Path, texts: &[String]) -> Result<()> {
    let tok = TextTokenizer::from_path(path)?;
    let (ids, types) = match texts {
        [a] => {
            let ids = tok.encode(a)?;
            let n = ids.len();
            (ids, vec![0; n])
        }
        [a, b] => tok.encode_pair(a, b)?,
        _ => unreachable!("clap allows one or two texts"),
    };
    let pieces: Vec<String> = ids.iter().map(|&i| tok.id_to_token(i).unwrap_or_else(|| "?".into())).collect();
    outln!("pieces  {}", pieces.join(" "));
    outln!("ids     {}", ids.iter().map(u32::to_string).collect::<Vec<_>>().join(" "));
    if texts.len() == 2 {
        outln!("types   {}", types.iter().map(u32::to_string).collect::<Vec<_>>().join(" "));
    }
    Ok(())
}

/// `fill-mask`: the `top_k` predictions at each `[MASK]` of a text.
pub fn fill_mask(model: &Path, text: &str, top_k: i64, device: Device) -> Result<()> {
    let mut loaded = load_masked_lm(model, device)?;
    print_notes(&loaded.notes);
    loaded.model.set_precision(indolm_torch::device::default_precision(device));
    let ids: Vec<i64> =
        loaded.tokenizer.encode(&loaded.tokenizer.with_model_mask(text))?.into_iter().map(i64::from).collect();
    let mask_id = loaded.tokenizer.special.mask;
    let positions: Vec<i64> = ids.iter().enumerate().filter(|(_, &t)| t == mask_id).map(|(i, _)| i as i64).collect();
    if positions.is_empty() {
        let mask = loaded.tokenizer.special_names.mask();
        let or_model = if mask == "[MASK]" { String::new() } else { format!(" (or the model's {mask})") };
        return Err(Error::argument("--text", format!("the text has no [MASK] token{or_model}")));
    }
    let limit = loaded.model.max_positions() as i64;
    if ids.len() as i64 > limit {
        return Err(Error::argument(
            "--text",
            format!(
                "{} tokens with [CLS] and [SEP], but the model takes at most {limit} (max_position_embeddings): shorten the text around the [MASK]",
                ids.len()
            ),
        ));
    }
    let input = Tensor::from_slice(&ids).view([1, -1]).to_device(device);
    let probs = tch::no_grad(|| {
        let hidden = loaded.model.bert.forward(&input, None, None, false);
        loaded
            .model
            .logits_at(&hidden, &Tensor::from_slice(&positions).to_device(device))
            .softmax(-1, Kind::Float)
            .to_device(Device::Cpu)
    });
    let k = top_k.min(loaded.config.vocab_size);
    let (top_p, top_i) = probs.topk(k, -1, true, true);
    for (row, pos) in positions.iter().enumerate() {
        outln!("[MASK] at position {pos}:");
        for j in 0..k {
            let id = top_i.int64_value(&[row as i64, j]);
            let token = loaded.tokenizer.id_to_token(id as u32).unwrap_or_else(|| format!("<{id}>"));
            outln!("  {:>7.4}  {token}", top_p.double_value(&[row as i64, j]));
        }
    }
    Ok(())
}
