//! PEFT LoRA adapters, merged at load. An adapter folder (`adapter_config.json` with
//! `adapter_model.safetensors` or `adapter_model.bin`, as peft's `save_pretrained` writes it) is
//! scored as its base model — `base_model_name_or_path`, a local folder, absolute or relative to
//! the adapter's — with every LoRA pair merged into its base weight before the network takes it,
//! as peft's `merge_and_unload` does: `W += scaling · B·A` (transposed with `fan_in_fan_out`),
//! `scaling = lora_alpha / r` (`lora_alpha / √r` with `use_rslora`), `r` and `lora_alpha` per
//! module from `rank_pattern` and `alpha_pattern`. Scoring then costs what the base model costs.
//!
//! The merge is computed in fp32 and stored in each weight's own dtype. A LoRA bias
//! (`lora_bias`) is added to the base bias; LoRA on an embedding (`lora_embedding_A`/`_B`) is
//! merged like peft's `Embedding` layer; a module saved whole (`modules_to_save`, or an embedding
//! peft saved beside its LoRA pair) replaces the base's tensor. Adapters that are not plain LoRA
//! (another `peft_type`, DoRA and the other LoRA variants, trainable tokens, initialisations that
//! change the base weights as peft loads them) are refused with one line.
//!
//! This sits with the causal LMs because they are what it merges into: PEFT adapters of the
//! evaluated models (IndoMMLU's Bactrian-X) are adapters of decoders, and [`super::load::Weights`]
//! is the decoders' weight store. A BERT folder's loader (`model_dir`) reads no adapter.
use super::load::Weights;
use crate::error::{Error, Result, TorchContext};
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use tch::{Kind, Tensor};

/// The file that makes a folder a PEFT adapter.
pub(crate) const ADAPTER_CONFIG: &str = "adapter_config.json";

/// The adapter's weight files, in the order they are looked for.
const ADAPTER_WEIGHTS: [&str; 2] = ["adapter_model.safetensors", "adapter_model.bin"];

/// The prefix of every tensor name peft saves for a transformers model: the `PeftModel`'s
/// `base_model` (the LoRA tuner) and its `model` (the transformers model).
const PEFT_PREFIX: &str = "base_model.model.";

/// Fields of `adapter_config.json` that turn on a LoRA variant whose update is not `B·A` (or
/// that peft applies otherwise than to every token), each refused when set.
const VARIANTS: [&str; 8] = [
    "use_dora",
    "alora_invocation_tokens",
    "velora_config",
    "monteclora_config",
    "use_bdlora",
    "arrow_config",
    "kasa_config",
    "use_qalora",
];

/// Whether `dir` is a PEFT adapter folder (it has `adapter_config.json`).
pub(crate) fn is_adapter_dir(dir: &Path) -> bool {
    dir.join(ADAPTER_CONFIG).is_file()
}

/// A JSON object's entries in the file's order (peft takes the first pattern that matches a
/// module, in the order the file lists them).
#[derive(Debug, Default)]
struct Ordered(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        /// Collects a map's entries as they come.
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Ordered;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of module patterns")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Ordered, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    entries.push(entry);
                }
                Ok(Ordered(entries))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

/// `rank_pattern` and `alpha_pattern`, read in the file's order.
#[derive(Debug, Default, Deserialize)]
struct PatternFields {
    #[serde(default)]
    rank_pattern: Option<Ordered>,
    #[serde(default)]
    alpha_pattern: Option<Ordered>,
}

/// An adapter folder: its configuration, checked, and its base model's folder.
#[derive(Debug)]
pub struct Adapter {
    /// The adapter folder.
    pub dir: PathBuf,
    /// Its `adapter_config.json`.
    config_path: PathBuf,
    /// The base model's folder (`base_model_name_or_path`, resolved).
    pub base: PathBuf,
    /// `r`: the rank of modules no `rank_pattern` names.
    r: u64,
    /// `lora_alpha`: the alpha of modules no `alpha_pattern` names.
    alpha: f64,
    /// `use_rslora`: scaling `alpha / √r` instead of `alpha / r`.
    rslora: bool,
    /// `fan_in_fan_out`: the base weights are stored [in, out] (GPT-2's `Conv1D`).
    fan_in_fan_out: bool,
    /// `rank_pattern`: per-module ranks, in the file's order.
    rank_pattern: Vec<(String, u64)>,
    /// `alpha_pattern`: per-module alphas, in the file's order.
    alpha_pattern: Vec<(String, f64)>,
}

/// What merging an adapter did, for the load note.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedAdapter {
    /// The adapter folder.
    pub dir: PathBuf,
    /// The base model's folder.
    pub base: PathBuf,
    /// `r`.
    pub r: u64,
    /// `lora_alpha`.
    pub alpha: f64,
    /// `use_rslora`.
    pub rslora: bool,
    /// Whether `rank_pattern` or `alpha_pattern` set some modules' rank or alpha.
    pub per_module: bool,
    /// LoRA pairs merged.
    pub modules: usize,
    /// Base tensors replaced by tensors the adapter saved whole (`modules_to_save`).
    pub replaced: usize,
    /// Adapter tensors of a multimodal checkpoint's vision tower or projector, not read.
    pub not_text: usize,
}

impl fmt::Display for MergedAdapter {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "merged LoRA adapter {} (r={}, alpha={}", self.dir.display(), self.r, self.alpha)?;
        if self.rslora {
            f.write_str(", rsLoRA")?;
        }
        if self.per_module {
            f.write_str(", per-module r/alpha from rank_pattern/alpha_pattern")?;
        }
        write!(f, ", {} modules", self.modules)?;
        if self.replaced > 0 {
            write!(f, ", {} tensor(s) replaced by modules_to_save", self.replaced)?;
        }
        if self.not_text > 0 {
            write!(f, ", {} vision tensor(s) not read", self.not_text)?;
        }
        write!(f, ") over {}", self.base.display())
    }
}

/// Field `key` of `config`, typed; none when absent or null. A value of the wrong type is an
/// error naming the file and the field.
fn field<T: serde::de::DeserializeOwned>(config: &Value, path: &Path, key: &str) -> Result<Option<T>> {
    match config.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|e| Error::field(path, key, e.to_string())),
    }
}

/// Whether a config value turns its option on (true, a non-empty list or object, a non-zero
/// number, a non-empty string).
fn is_set(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Whether a `rank_pattern`/`alpha_pattern` key names `module`: peft's
/// `re.match(rf"(.*\.)?({key})$", module)` for keys without regular-expression syntax — the
/// module's whole name or a dotted ending of it.
fn pattern_matches(key: &str, module: &str) -> bool {
    module.strip_suffix(key).is_some_and(|head| head.is_empty() || head.ends_with('.'))
}

/// Whether a pattern names `module`.
fn matched<T>(patterns: &[(String, T)], module: &str) -> bool {
    patterns.iter().any(|(key, _)| pattern_matches(key, module))
}

/// The value the first matching pattern gives `module`, else `default`.
fn per_module<T: Copy>(patterns: &[(String, T)], module: &str, default: T) -> T {
    patterns.iter().find(|(key, _)| pattern_matches(key, module)).map_or(default, |(_, v)| *v)
}

impl Adapter {
    /// Reads `dir/adapter_config.json` when `dir` is an adapter folder (none otherwise): refuses
    /// what is not plain LoRA, and resolves the base model's folder.
    pub fn open(dir: &Path) -> Result<Option<Adapter>> {
        if !is_adapter_dir(dir) {
            return Ok(None);
        }
        let path = dir.join(ADAPTER_CONFIG);
        let text = indolm_core::files::read_to_string(&path)?;
        let config: Value = serde_json::from_str(&text).map_err(|e| Error::json(&path, &e))?;
        if !config.is_object() {
            return Err(Error::invalid(&path, "expected a JSON object (a PEFT adapter configuration)"));
        }
        match field::<String>(&config, &path, "peft_type")?.as_deref() {
            Some("LORA") => {}
            Some(other) => {
                return Err(Error::field(
                    &path,
                    "peft_type",
                    format!("`{other}` adapters are not supported: indolm merges LORA adapters only"),
                ))
            }
            None => return Err(Error::field(&path, "peft_type", "missing (a PEFT adapter names its type: LORA)")),
        }
        for key in VARIANTS {
            if let Some(v) = config.get(key).filter(|v| is_set(v)) {
                let what = if key == "use_dora" { "DoRA" } else { "this LoRA variant" };
                return Err(Error::field(
                    &path,
                    key,
                    format!("{v}: {what} is not supported; indolm merges plain LoRA adapters only (W + scaling·B·A)"),
                ));
            }
        }
        if let Some(init) = config.get("init_lora_weights").and_then(Value::as_str) {
            let lower = init.to_lowercase();
            if lower == "mica" {
                let why = "`mica`: this LoRA variant is not supported; indolm merges plain LoRA adapters only";
                return Err(Error::field(&path, "init_lora_weights", why));
            }
            if ["pissa", "corda", "olora", "loftq"].iter().any(|p| lower.starts_with(p)) {
                return Err(Error::field(
                    &path,
                    "init_lora_weights",
                    format!(
                        "`{init}` changes the base weights as peft loads the adapter, which indolm does not reproduce: \
                         convert it to a plain LoRA adapter (peft's path_initial_model_for_weight_conversion)"
                    ),
                ));
            }
        }
        for (key, what) in [
            ("trainable_token_indices", "trainable tokens are not supported"),
            ("layer_replication", "layer replication is not supported"),
            ("target_parameters", "LoRA on parameters (not modules) is not supported"),
        ] {
            if let Some(v) = config.get(key).filter(|v| is_set(v)) {
                return Err(Error::field(&path, key, format!("{v}: {what}; indolm merges plain LoRA adapters only")));
            }
        }
        let r = field::<u64>(&config, &path, "r")?.unwrap_or(8);
        if r == 0 {
            return Err(Error::field(&path, "r", "0: a LoRA rank is a positive integer"));
        }
        let alpha = field::<f64>(&config, &path, "lora_alpha")?.unwrap_or(8.0);
        let rslora = field::<bool>(&config, &path, "use_rslora")?.unwrap_or(false);
        let fan_in_fan_out = field::<bool>(&config, &path, "fan_in_fan_out")?.unwrap_or(false);
        for key in ["rank_pattern", "alpha_pattern"] {
            if config.get(key).is_some_and(|v| !v.is_null() && !v.is_object()) {
                return Err(Error::field(
                    &path,
                    key,
                    format!("expected an object of module patterns, found {}", config[key]),
                ));
            }
        }
        let ordered: PatternFields = serde_json::from_str(&text).map_err(|e| Error::json(&path, &e))?;
        let rank_pattern = patterns(&path, "rank_pattern", ordered.rank_pattern, |v| v.as_u64().filter(|&r| r > 0))?;
        let alpha_pattern = patterns(&path, "alpha_pattern", ordered.alpha_pattern, Value::as_f64)?;
        let base = base_folder(dir, &path, &config)?;
        Ok(Some(Adapter {
            dir: dir.to_path_buf(),
            config_path: path,
            base,
            r,
            alpha,
            rslora,
            fan_in_fan_out,
            rank_pattern,
            alpha_pattern,
        }))
    }

    /// Where the tokenizer comes from: the adapter folder when it has its own `tokenizer.json`,
    /// else the base model's folder.
    pub fn tokenizer_dir(&self) -> &Path {
        if self.dir.join("tokenizer.json").is_file() {
            &self.dir
        } else {
            &self.base
        }
    }

    /// The rank and scaling of `module`.
    fn rank_and_scaling(&self, module: &str) -> (u64, f64) {
        let r = per_module(&self.rank_pattern, module, self.r);
        let alpha = per_module(&self.alpha_pattern, module, self.alpha);
        let scaling = if self.rslora { alpha / (r as f64).sqrt() } else { alpha / r as f64 };
        (r, scaling)
    }

    /// Reads the adapter's tensors and merges them into the base model's `weights` (already
    /// reduced to the text model for a `multimodal` checkpoint): modules saved whole replace
    /// the base's tensors, then each LoRA pair is added to its base weight. Every adapter tensor
    /// must name a base tensor of the right shape.
    pub(crate) fn merge_into(&self, weights: &mut Weights, multimodal: bool) -> Result<MergedAdapter> {
        let file = ADAPTER_WEIGHTS.iter().map(|f| self.dir.join(f)).find(|p| p.is_file()).ok_or_else(|| {
            Error::MissingFile {
                path: self.dir.join(ADAPTER_WEIGHTS[0]),
                hint: "a PEFT adapter folder holds adapter_config.json and adapter_model.safetensors (or \
                       adapter_model.bin)"
                    .into(),
            }
        })?;
        let tensors = crate::model::weights::read_any(&file)?;
        let mut pairs: BTreeMap<String, Pair> = BTreeMap::new();
        let mut whole: Vec<(String, String, Tensor)> = Vec::new();
        for (name, t) in tensors {
            match parse_name(&name).map_err(|why| Error::invalid(&file, format!("tensor `{name}`: {why}")))? {
                Entry::Whole(target) => whole.push((name, target, t)),
                Entry::Lora { module, role } => {
                    let pair = pairs.entry(module.clone()).or_default();
                    let slot = match role {
                        Role::A | Role::EmbeddingA => &mut pair.a,
                        Role::B | Role::EmbeddingB => &mut pair.b,
                        Role::BBias => &mut pair.b_bias,
                    };
                    if let Some((earlier, _)) = slot {
                        let why =
                            format!("tensors `{earlier}` and `{name}` are both {} of module `{module}`", role.name());
                        return Err(Error::invalid(&file, why));
                    }
                    *slot = Some((name, t));
                    pair.embedding |= matches!(role, Role::EmbeddingA | Role::EmbeddingB);
                }
            }
        }
        let mut merged = MergedAdapter {
            dir: self.dir.clone(),
            base: self.base.clone(),
            r: self.r,
            alpha: self.alpha,
            rslora: self.rslora,
            per_module: false,
            modules: 0,
            replaced: 0,
            not_text: 0,
        };
        let base_file = weights.path.clone();
        let no_base = |name: &str, target: &str| {
            let why = format!("tensor `{name}` names no base weight: `{target}` is not in {}", base_file.display());
            Error::invalid(&file, why)
        };
        for (name, target, t) in &whole {
            match resolve(weights, target, multimodal) {
                Target::Found(base_name) => {
                    check_shape(weights, &file, name, &base_name, &t.size())?;
                    weights.replace(&base_name, t)?;
                    merged.replaced += 1;
                }
                Target::NotText => merged.not_text += 1,
                Target::Missing => return Err(no_base(name, target)),
            }
        }
        for (module, pair) in &pairs {
            let (Some((a_name, a)), Some((b_name, b))) = (&pair.a, &pair.b) else {
                let (have, lacks) = if pair.a.is_some() { ("lora_A", "lora_B") } else { ("lora_B", "lora_A") };
                let why = format!("module `{module}` has {have} but no {lacks} tensor");
                return Err(Error::invalid(&file, why));
            };
            let weight = format!("{module}.weight");
            let base_weight = match resolve(weights, &weight, multimodal) {
                Target::Found(n) => n,
                Target::NotText => {
                    merged.not_text += 2 + usize::from(pair.b_bias.is_some());
                    continue;
                }
                Target::Missing => return Err(no_base(a_name, &weight)),
            };
            let (a_shape, b_shape) = (a.size(), b.size());
            if a_shape.len() != 2 || b_shape.len() != 2 {
                let why = format!(
                    "tensors `{a_name}` {a_shape:?} and `{b_name}` {b_shape:?}: only LoRA on Linear and Embedding \
                     layers (2-D A and B) is merged"
                );
                return Err(Error::invalid(&file, why));
            }
            let rank = a_shape[0];
            if b_shape[1] != rank {
                let why = format!("tensors `{a_name}` {a_shape:?} and `{b_name}` {b_shape:?} differ in rank");
                return Err(Error::invalid(&file, why));
            }
            let (r, scaling) = self.rank_and_scaling(module);
            if rank != r as i64 {
                let why = format!(
                    "module `{module}` has rank {rank} but {} gives it r={r} (r, rank_pattern)",
                    self.config_path.display()
                );
                return Err(Error::invalid(&file, why));
            }
            merged.per_module |= matched(&self.rank_pattern, module) || matched(&self.alpha_pattern, module);
            // peft's Linear: transpose(B @ A, fan_in_fan_out); its Embedding: (B @ A)ᵀ.
            let transpose = pair.embedding || self.fan_in_fan_out;
            let out = if transpose { [a_shape[1], b_shape[0]] } else { [b_shape[0], a_shape[1]] };
            check_shape(weights, &file, b_name, &base_weight, &out)?;
            let delta =
                lora_delta(a, b, scaling, transpose).torch_ctx(&format!("computing the update of `{module}`"))?;
            weights.merge_lora(&base_weight, &delta)?;
            if let Some((bias_name, bias)) = &pair.b_bias {
                let target = format!("{module}.bias");
                let Target::Found(base_bias) = resolve(weights, &target, multimodal) else {
                    return Err(no_base(bias_name, &target));
                };
                check_shape(weights, &file, bias_name, &base_bias, &bias.size())?;
                let delta = bias.f_to_kind(Kind::Float).and_then(|t| t.f_mul_scalar(scaling));
                weights.merge_lora(&base_bias, &delta.torch_ctx(&format!("scaling `{bias_name}`"))?)?;
            }
            merged.modules += 1;
        }
        Ok(merged)
    }
}

/// `scaling · B·A` in fp32, transposed when `transpose` (peft's `get_delta_weight`).
fn lora_delta(a: &Tensor, b: &Tensor, scaling: f64, transpose: bool) -> std::result::Result<Tensor, tch::TchError> {
    let product = b.f_to_kind(Kind::Float)?.f_matmul(&a.f_to_kind(Kind::Float)?)?;
    let product = if transpose { product.f_tr()? } else { product };
    product.f_mul_scalar(scaling)
}

/// Refuses an adapter tensor whose update (or replacement) has not the shape of the base's
/// tensor `base_name`.
fn check_shape(weights: &Weights, file: &Path, name: &str, base_name: &str, shape: &[i64]) -> Result<()> {
    let base_shape = weights.shape_of(base_name).unwrap_or_default();
    if base_shape == shape {
        return Ok(());
    }
    Err(Error::invalid(
        file,
        format!(
            "tensor `{name}` gives `{base_name}` the shape {shape:?} but the base model's is {base_shape:?} (an \
             adapter of another model?)"
        ),
    ))
}

/// `rank_pattern` or `alpha_pattern`: each key a module name or dotted ending, each value
/// checked by `value`.
fn patterns<T>(
    path: &Path,
    key: &str,
    entries: Option<Ordered>,
    value: impl Fn(&Value) -> Option<T>,
) -> Result<Vec<(String, T)>> {
    let mut out = Vec::new();
    for (pattern, v) in entries.unwrap_or_default().0 {
        let name = format!("{key}.{pattern}");
        if pattern.is_empty() || pattern.contains(|c: char| "\\^$*+?()[]{}|".contains(c)) {
            return Err(Error::field(
                path,
                name,
                "a regular expression or an empty key: indolm matches pattern keys as module names or their dotted \
                 endings (q_proj, model.layers.0.self_attn.q_proj)",
            ));
        }
        let expected = if key == "rank_pattern" { "a positive integer" } else { "a number" };
        let v = value(&v).ok_or_else(|| Error::field(path, &name, format!("expected {expected}, found {v}")))?;
        out.push((pattern, v));
    }
    Ok(out)
}

/// The base model's folder: `base_model_name_or_path`, absolute or relative to the adapter
/// folder, which must be a local folder holding a model (not another adapter); canonical, for
/// the load note.
fn base_folder(dir: &Path, path: &Path, config: &Value) -> Result<PathBuf> {
    const KEY: &str = "base_model_name_or_path";
    let given = field::<String>(config, path, KEY)?.unwrap_or_default();
    if given.is_empty() {
        return Err(Error::field(
            path,
            KEY,
            "missing: write the base model's local folder here (absolute, or relative to the adapter folder)",
        ));
    }
    let base = if Path::new(&given).is_absolute() { PathBuf::from(&given) } else { dir.join(&given) };
    if !base.is_dir() {
        return Err(Error::field(
            path,
            KEY,
            format!(
                "`{given}` is not a local folder (indolm does not fetch from the hub): download the base model and \
                 write its local path here, absolute or relative to the adapter folder"
            ),
        ));
    }
    if is_adapter_dir(&base) {
        return Err(Error::field(
            path,
            KEY,
            format!(
                "`{given}` is itself a PEFT adapter: the base must be a full model folder (stacked adapters are not \
                 supported)"
            ),
        ));
    }
    Ok(base.canonicalize().unwrap_or(base))
}

/// The two LoRA tensors of one module, each with its name in the file.
#[derive(Default)]
struct Pair {
    a: Option<(String, Tensor)>,
    b: Option<(String, Tensor)>,
    /// `lora_B`'s bias (`lora_bias`).
    b_bias: Option<(String, Tensor)>,
    /// LoRA on an embedding (`lora_embedding_A`/`_B`).
    embedding: bool,
}

/// What a LoRA tensor is to its module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// `lora_A.weight`: [r, in].
    A,
    /// `lora_B.weight`: [out, r].
    B,
    /// `lora_B.bias`: [out].
    BBias,
    /// `lora_embedding_A`: [r, vocabulary].
    EmbeddingA,
    /// `lora_embedding_B`: [dim, r].
    EmbeddingB,
}

impl Role {
    /// The role as peft names the tensor.
    fn name(self) -> &'static str {
        match self {
            Role::A => "lora_A",
            Role::B => "lora_B",
            Role::BBias => "lora_B's bias",
            Role::EmbeddingA => "lora_embedding_A",
            Role::EmbeddingB => "lora_embedding_B",
        }
    }
}

/// An adapter tensor, by its name.
#[derive(Debug, PartialEq, Eq)]
enum Entry {
    /// A LoRA tensor of `module` (the module's name in the transformers model).
    Lora { module: String, role: Role },
    /// A tensor saved whole, replacing the base tensor of this name.
    Whole(String),
}

/// Reads a peft tensor name: `base_model.model.<module>.lora_A.weight` (or `lora_B`, with or
/// without an adapter name such as `.default` before `weight`), `lora_B.bias`,
/// `<module>.lora_embedding_A` (or `_B`, with or without an adapter name), or a tensor saved
/// whole, `base_model.model.<name>` (`.base_layer` dropped: the wrapped layer's own tensor).
fn parse_name(name: &str) -> std::result::Result<Entry, String> {
    let rest = name.strip_prefix(PEFT_PREFIX).ok_or_else(|| {
        format!("not a PEFT tensor of a transformers model (expected {PEFT_PREFIX}<module>.lora_A.weight and the like)")
    })?;
    let parts: Vec<&str> = rest.split('.').collect();
    let Some(at) = parts.iter().position(|p| p.starts_with("lora_")) else {
        let mut kept = Vec::with_capacity(parts.len());
        let mut i = 0;
        while i < parts.len() {
            match parts[i] {
                "base_layer" | "original_module" => i += 1,
                "modules_to_save" => i += 2,
                p => {
                    kept.push(p);
                    i += 1;
                }
            }
        }
        if kept.is_empty() {
            return Err("names no tensor".into());
        }
        return Ok(Entry::Whole(kept.join(".")));
    };
    let module = parts[..at].join(".");
    if module.is_empty() {
        return Err("names no module".into());
    }
    let tail = &parts[at + 1..];
    let last = tail.last().copied();
    let role = match (parts[at], tail.len(), last) {
        ("lora_A", 1 | 2, Some("weight")) => Role::A,
        ("lora_B", 1 | 2, Some("weight")) => Role::B,
        ("lora_B", 1 | 2, Some("bias")) => Role::BBias,
        ("lora_embedding_A", 0 | 1, _) => Role::EmbeddingA,
        ("lora_embedding_B", 0 | 1, _) => Role::EmbeddingB,
        ("lora_magnitude_vector", ..) => return Err("a DoRA magnitude: DoRA adapters are not supported".into()),
        ("lora_A" | "lora_B" | "lora_embedding_A" | "lora_embedding_B", ..) => {
            return Err(format!("unexpected name after `{}`", parts[at]))
        }
        (other, ..) => return Err(format!("`{other}` is not a plain LoRA tensor (lora_A, lora_B)")),
    };
    Ok(Entry::Lora { module, role })
}

/// Where an adapter's name for a base tensor is found in the checkpoint.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    /// Under this name.
    Found(String),
    /// Outside a multimodal checkpoint's text model (the vision tower, the projector): not read.
    NotText,
    /// Nowhere.
    Missing,
}

/// Finds `name` (as the transformers model names it) among the base's tensors: as it is; for
/// BLOOM without `transformer.` (a checkpoint saved from the bare model); for a multimodal
/// checkpoint, under the causal LM's names its text model was given (`model.language_model.X`
/// and `language_model.model.X` are `model.X`, `language_model.lm_head` is `lm_head`).
fn resolve(weights: &Weights, name: &str, multimodal: bool) -> Target {
    let mut candidates = vec![name.to_string()];
    candidates.extend(name.strip_prefix("transformer.").map(str::to_string));
    if multimodal {
        let text = name.strip_prefix("model.language_model.").or_else(|| name.strip_prefix("language_model.model."));
        candidates.extend(text.map(|rest| format!("model.{rest}")));
        candidates
            .extend(name.strip_prefix("language_model.").filter(|r| r.starts_with("lm_head.")).map(str::to_string));
    }
    if let Some(found) = candidates.into_iter().find(|c| weights.has(c)) {
        return Target::Found(found);
    }
    let outside_text = name.split('.').any(|p| matches!(p, "vision_tower" | "vision_model" | "multi_modal_projector"));
    if multimodal && outside_text {
        Target::NotText
    } else {
        Target::Missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Device;

    #[test]
    fn peft_names_map_to_modules_with_or_without_an_adapter_name() {
        let lora = |module: &str, role| Ok(Entry::Lora { module: module.into(), role });
        let q = "model.layers.0.self_attn.q_proj";
        assert_eq!(parse_name(&format!("base_model.model.{q}.lora_A.weight")), lora(q, Role::A));
        assert_eq!(parse_name(&format!("base_model.model.{q}.lora_B.default.weight")), lora(q, Role::B));
        assert_eq!(parse_name(&format!("base_model.model.{q}.lora_B.bias")), lora(q, Role::BBias));
        let e = "model.embed_tokens";
        assert_eq!(parse_name(&format!("base_model.model.{e}.lora_embedding_A")), lora(e, Role::EmbeddingA));
        assert_eq!(parse_name(&format!("base_model.model.{e}.lora_embedding_B.default")), lora(e, Role::EmbeddingB));
        let whole = |n: &str| Ok(Entry::Whole(n.into()));
        assert_eq!(parse_name("base_model.model.model.norm.weight"), whole("model.norm.weight"));
        assert_eq!(
            parse_name("base_model.model.model.embed_tokens.base_layer.weight"),
            whole("model.embed_tokens.weight")
        );
        assert_eq!(parse_name("base_model.model.lm_head.modules_to_save.default.weight"), whole("lm_head.weight"));
        assert!(parse_name(&format!("base_model.model.{q}.lora_magnitude_vector")).unwrap_err().contains("DoRA"));
        assert!(parse_name(&format!("base_model.model.{q}.lora_E")).unwrap_err().contains("`lora_E`"));
        assert!(parse_name(&format!("{q}.lora_A.weight")).unwrap_err().contains("not a PEFT tensor"));
        assert!(parse_name("base_model.model.lora_A.weight").is_err());
    }

    #[test]
    fn patterns_match_whole_names_and_dotted_endings_first_match_wins() {
        let q = "model.layers.0.self_attn.q_proj";
        assert!(pattern_matches("q_proj", q));
        assert!(pattern_matches("self_attn.q_proj", q));
        assert!(pattern_matches(q, q));
        assert!(!pattern_matches("proj", q), "a key matches whole name segments");
        assert!(!pattern_matches("layers.1.self_attn.q_proj", q));
        let patterns = vec![("model.layers.0.self_attn.q_proj".to_string(), 2), ("q_proj".to_string(), 6)];
        assert_eq!(per_module(&patterns, q, 4), 2);
        assert_eq!(per_module(&patterns, "model.layers.1.self_attn.q_proj", 4), 6);
        assert_eq!(per_module(&patterns, "model.layers.1.self_attn.k_proj", 4), 4);
    }

    /// Writes an adapter folder with `config` over a base folder beside it; returns the adapter's.
    fn adapter_dir(root: &Path, config: &str) -> PathBuf {
        let (base, adapter) = (root.join("base"), root.join("adapter"));
        std::fs::create_dir_all(&base).unwrap();
        std::fs::create_dir_all(&adapter).unwrap();
        std::fs::write(adapter.join(ADAPTER_CONFIG), config).unwrap();
        adapter
    }

    #[test]
    fn configs_that_are_not_plain_lora_are_refused_with_the_field() {
        let root = tempfile::tempdir().unwrap();
        let cases = [
            (r#"{"peft_type": "IA3", "base_model_name_or_path": "../base"}"#, "field `peft_type`: `IA3` adapters"),
            (
                r#"{"peft_type": "LORA", "use_dora": true, "base_model_name_or_path": "../base"}"#,
                "field `use_dora`: true: DoRA",
            ),
            (r#"{"peft_type": "LORA", "init_lora_weights": "pissa"}"#, "field `init_lora_weights`: `pissa`"),
            (r#"{"peft_type": "LORA", "trainable_token_indices": [1, 2]}"#, "field `trainable_token_indices`"),
            (r#"{"peft_type": "LORA", "r": "eight"}"#, "field `r`: invalid type"),
            (r#"{"peft_type": "LORA", "rank_pattern": {"layers\\.0\\..*": 2}}"#, "a regular expression"),
            (
                r#"{"peft_type": "LORA", "alpha_pattern": {"q_proj": "x"}}"#,
                "field `alpha_pattern.q_proj`: expected a number",
            ),
            (r#"{"peft_type": "LORA"}"#, "field `base_model_name_or_path`: missing"),
            (
                r#"{"peft_type": "LORA", "base_model_name_or_path": "decapoda-research/llama-7b-hf"}"#,
                "adapter_config.json: field `base_model_name_or_path`: `decapoda-research/llama-7b-hf` is not a local \
                 folder",
            ),
        ];
        for (config, expected) in cases {
            let dir = adapter_dir(root.path(), config);
            let Err(err) = Adapter::open(&dir) else { panic!("{config}: accepted") };
            let err = err.to_string();
            assert!(err.contains(expected), "{config}: {err}");
            assert!(!err.contains('\n'), "{err}");
        }
        let dir = adapter_dir(root.path(), r#"{"peft_type": "LORA", "base_model_name_or_path": "../base", "r": 4}"#);
        let adapter = Adapter::open(&dir).unwrap().unwrap();
        assert_eq!(adapter.base, root.path().join("base").canonicalize().unwrap());
        assert_eq!(adapter.tokenizer_dir(), adapter.base.as_path(), "no tokenizer.json in the adapter folder");
        assert!(Adapter::open(root.path()).unwrap().is_none(), "not an adapter folder");
    }

    #[test]
    fn the_merge_is_peft_s_in_fp32_and_keeps_each_weight_s_dtype() {
        let root = tempfile::tempdir().unwrap();
        let adapter = adapter_dir(
            root.path(),
            r#"{"peft_type": "LORA", "base_model_name_or_path": "../base", "r": 2, "lora_alpha": 3,
                "use_rslora": true, "rank_pattern": {"k": 1}, "alpha_pattern": {"k": 5}}"#,
        );
        let base = root.path().join("base");
        let opts = (Kind::Float, Device::Cpu);
        let w = Tensor::arange(12, opts).view([3, 4]) / 8.0;
        let (a, b) = (Tensor::arange(8, opts).view([2, 4]) / 4.0, Tensor::arange(6, opts).view([3, 2]) / 2.0);
        let (ka, kb) = (Tensor::ones([1, 4], opts), Tensor::ones([3, 1], opts));
        let base_tensors = vec![
            ("m.q.weight".to_string(), w.shallow_clone()),
            ("m.k.weight".to_string(), w.to_kind(Kind::BFloat16)),
            ("m.norm.weight".to_string(), Tensor::ones([4], opts)),
        ];
        crate::model::weights::write_file(&base.join("model.safetensors"), &base_tensors).unwrap();
        let adapter_tensors = vec![
            ("base_model.model.m.q.lora_A.weight".to_string(), a.shallow_clone()),
            ("base_model.model.m.q.lora_B.default.weight".to_string(), b.shallow_clone()),
            ("base_model.model.m.k.lora_A.weight".to_string(), ka.shallow_clone()),
            ("base_model.model.m.k.lora_B.weight".to_string(), kb.shallow_clone()),
            ("base_model.model.m.norm.weight".to_string(), Tensor::full([4], 2.0, opts)),
        ];
        crate::model::weights::write_file(&adapter.join("adapter_model.safetensors"), &adapter_tensors).unwrap();
        let mut weights = Weights::open(&base, Kind::Float, Device::Cpu).unwrap();
        let merged = Adapter::open(&adapter).unwrap().unwrap().merge_into(&mut weights, false).unwrap();
        assert_eq!((merged.modules, merged.replaced, merged.per_module), (2, 1, true));
        let note = merged.to_string();
        assert!(note.starts_with("merged LoRA adapter ") && note.contains("(r=2, alpha=3, rsLoRA"), "{note}");
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let q = weights.take(&vs, "m.q.weight", &[3, 4]).unwrap();
        let expected = &w + b.matmul(&a) * (3.0 / 2f64.sqrt());
        assert!(q.allclose(&expected, 1e-6, 1e-6, false));
        let k = weights.take(&vs, "m.k.weight", &[3, 4]).unwrap();
        assert_eq!(k.kind(), Kind::BFloat16, "merged in fp32, stored as the file has it");
        let expected = (w.to_kind(Kind::BFloat16).to_kind(Kind::Float) + kb.matmul(&ka) * 5.0).to_kind(Kind::BFloat16);
        assert!(k.equal(&expected));
        assert!(weights.take(&vs, "m.norm.weight", &[4]).unwrap().equal(&Tensor::full([4], 2.0, opts)));

        // An adapter tensor that names no base weight, and one of another shape.
        let cases = [
            ("base_model.model.m.v.lora_A.weight", [2i64, 4], "names no base weight: `m.v.weight` is not in"),
            ("base_model.model.m.q.lora_A.weight", [2, 5], "gives `m.q.weight` the shape [3, 5]"),
        ];
        for (name, shape, expected) in cases {
            let mut tensors = vec![(name.to_string(), Tensor::ones(shape, opts))];
            tensors.push((name.replace("lora_A", "lora_B"), Tensor::ones([3, 2], opts)));
            crate::model::weights::write_file(&adapter.join("adapter_model.safetensors"), &tensors).unwrap();
            let mut weights = Weights::open(&base, Kind::Float, Device::Cpu).unwrap();
            let err =
                Adapter::open(&adapter).unwrap().unwrap().merge_into(&mut weights, false).unwrap_err().to_string();
            assert!(err.contains(expected), "{err}");
        }
    }
}
