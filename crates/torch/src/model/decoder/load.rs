//! A decoder's weights, memory-mapped: every safetensors file of the directory (single or
//! sharded) is mapped copy-on-write and its tensors are views of the mapping, never read into a
//! buffer first (PyTorch's `pytorch_model.bin` is read instead, without executing anything). [`Weights::take`] checks a tensor's shape, casts it to the run's dtype and device
//! (no copy at all when both already match) and registers it in the `VarStore` under its HF
//! name, so the store's paths are the checkpoint's tensor names.
use crate::error::{Error, IoContext, Result};
use safetensors::SafeTensors;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// The tensors of a model directory, as views of their mapped files.
pub struct Weights {
    /// `model.safetensors` or the shard index, for messages.
    pub path: PathBuf,
    tensors: BTreeMap<String, Tensor>,
    /// The mappings the views point into; each loaded model keeps them alive.
    pub maps: Vec<Arc<memmap2::MmapMut>>,
    kind: Kind,
    device: Device,
}

/// `t` in the compute dtype `kind`: itself when it already is, else a cast copy (a weight kept
/// in its file's half precision, cast for one use).
pub(crate) fn as_compute(t: &Tensor, kind: Kind) -> Tensor {
    if t.kind() == kind {
        t.shallow_clone()
    } else {
        t.to_kind(kind)
    }
}

/// Maps one file and makes a tensor view of each of its tensors.
fn map_file(path: &Path, out: &mut BTreeMap<String, Tensor>) -> Result<Arc<memmap2::MmapMut>> {
    let file = std::fs::File::open(path).with_path(path)?;
    // SAFETY: a private copy-on-write mapping: writes (none are made) would not reach the file,
    // and the views below never outlive it (the model holds the Arc).
    let map = Arc::new(unsafe { memmap2::MmapOptions::new().map_copy(&file) }.with_path(path)?);
    let st = SafeTensors::deserialize(&map[..])
        .map_err(|e| Error::invalid(path, format!("not a valid safetensors file: {e}")))?;
    for (name, view) in st.tensors() {
        let floating = |k: &Kind| matches!(k, Kind::Float | Kind::Half | Kind::BFloat16 | Kind::Double);
        let kind = crate::model::weights::kind_of(view.dtype()).filter(floating).ok_or_else(|| {
            Error::invalid(path, format!("tensor `{name}` has dtype {:?} (expected F32, F16 or BF16)", view.dtype()))
        })?;
        let shape = crate::model::weights::checked_shape(&name, view.shape(), path)?;
        let elt = kind.elt_size_in_bytes();
        let data = view.data();
        if !(data.as_ptr() as usize).is_multiple_of(elt) {
            // Unaligned in the file (safetensors does not promise alignment): copy this one.
            let t = Tensor::f_from_data_size(data, &shape, kind)
                .map_err(|e| Error::torch(format!("tensor `{name}`"), e))?;
            out.insert(name, t);
            continue;
        }
        let mut strides = vec![1i64; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * shape[i + 1];
        }
        // SAFETY: `data` lies inside the mapping, which outlives the tensor (kept in `Weights`
        // and then in the model), and its length is the shape's size (checked by safetensors).
        let t = unsafe { Tensor::f_from_blob(data.as_ptr(), &shape, &strides, kind, Device::Cpu) }
            .map_err(|e| Error::torch(format!("mapping tensor `{name}`"), e))?;
        out.insert(name, t);
    }
    Ok(map)
}

impl Weights {
    /// Maps `model.safetensors`, or every shard named by `model.safetensors.index.json`; the
    /// tensors will be cast to `kind` on `device` as they are taken.
    pub fn open(dir: &Path, kind: Kind, device: Device) -> Result<Self> {
        let (path, shards) = crate::model::weights::weight_files(dir)?;
        let mut tensors = BTreeMap::new();
        let mut maps = Vec::new();
        for shard in shards {
            if shard.extension().is_some_and(|e| e == "bin") {
                // PyTorch's pickled layout: read (not mapped) without executing anything.
                for (name, t) in crate::model::torch_file::read_file(&shard)? {
                    if !matches!(t.kind(), Kind::Float | Kind::Half | Kind::BFloat16 | Kind::Double) {
                        let why = format!("tensor `{name}` has dtype {:?} (expected F32, F16 or BF16)", t.kind());
                        return Err(Error::invalid(&shard, why));
                    }
                    tensors.insert(name, t);
                }
            } else {
                maps.push(map_file(&shard, &mut tensors)?);
            }
        }
        Ok(Weights { path, tensors, maps, kind, device })
    }

    /// Whether the checkpoint has `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    /// Drops the tensor `name` if the checkpoint has it (a buffer the network does not read,
    /// such as GPT-2's saved causal masks), so that it is not reported as unused.
    pub(crate) fn discard(&mut self, name: &str) {
        self.tensors.remove(name);
    }

    /// Renames every tensor without `prefix` to `prefix` + its name (BLOOM checkpoints saved
    /// from the bare model lack `transformer.`).
    pub(crate) fn add_prefix_if_bare(&mut self, prefix: &str, probe: &str) {
        if !self.tensors.contains_key(&format!("{prefix}{probe}")) && self.tensors.contains_key(probe) {
            let old = std::mem::take(&mut self.tensors);
            self.tensors =
                old.into_iter()
                    .map(|(n, t)| {
                        if n.starts_with(prefix) || n == "lm_head.weight" {
                            (n, t)
                        } else {
                            (format!("{prefix}{n}"), t)
                        }
                    })
                    .collect();
        }
    }

    /// Keeps a multimodal checkpoint's text model under the causal LM's names: the hub's
    /// `language_model.model.*` and `language_model.lm_head.weight`, or `model.language_model.*`
    /// as later transformers name them in memory, become `model.*` and `lm_head.weight`; every
    /// other tensor (the vision tower, the projector) is dropped. Returns how many were dropped.
    pub(crate) fn keep_text_model(&mut self) -> usize {
        let old = std::mem::take(&mut self.tensors);
        let before = old.len();
        for (name, t) in old {
            let renamed = if let Some(rest) = name.strip_prefix("language_model.model.") {
                format!("model.{rest}")
            } else if let Some(rest) = name.strip_prefix("model.language_model.") {
                format!("model.{rest}")
            } else if name == "language_model.lm_head.weight" || name == "lm_head.weight" {
                "lm_head.weight".to_string()
            } else {
                continue;
            };
            self.tensors.insert(renamed, t);
        }
        before - self.tensors.len()
    }

    /// The dtype the network computes in.
    pub fn compute_kind(&self) -> Kind {
        self.kind
    }

    /// The device the tensors are put on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The tensor `name` with shape `shape` on the run's device, registered in `vs` at the path
    /// `name`. On the CPU a half-precision tensor (bf16, fp16) stays as the file has it, a view
    /// of the mapping: the layers cast it to the compute dtype as they use it
    /// ([`as_compute`]), so a bf16 checkpoint scored in fp32 takes its file's size in memory,
    /// not twice it. Everything else is cast to the compute dtype here.
    pub fn take(&mut self, vs: &VarStore, name: &str, shape: &[i64]) -> Result<Tensor> {
        let t = self.tensors.remove(name).ok_or_else(|| {
            Error::invalid(
                &self.path,
                format!("tensor `{name}` is missing (is this checkpoint the family config.json names?)"),
            )
        })?;
        if t.size() != shape {
            return Err(Error::Shape {
                path: self.path.clone(),
                tensor: name.into(),
                expected: shape.to_vec(),
                found: t.size(),
            });
        }
        let stored_as_is =
            self.device == Device::Cpu && self.kind == Kind::Float && matches!(t.kind(), Kind::BFloat16 | Kind::Half);
        let t = if stored_as_is { t } else { t.to_device(self.device).to_kind(self.kind) };
        let mut parts: Vec<&str> = name.split('.').collect();
        let last = parts.pop().unwrap_or(name);
        let mut p = vs.root();
        for part in parts {
            p = p.sub(part);
        }
        Ok(p.add(last, t, false))
    }

    /// The shape of the tensor `name`, if the checkpoint has it.
    pub(crate) fn shape_of(&self, name: &str) -> Option<Vec<i64>> {
        self.tensors.get(name).map(Tensor::size)
    }

    /// Adds `delta` (a LoRA update, [`super::adapter`]) to the tensor `name`, as peft's
    /// `merge_and_unload` does: the sum is computed in fp32 and stored in the tensor's own dtype,
    /// as a new tensor (the mapped file is not written).
    pub(crate) fn merge_lora(&mut self, name: &str, delta: &Tensor) -> Result<()> {
        let w = self.existing(name)?;
        if w.size() != delta.size() {
            let (expected, found) = (w.size(), delta.size());
            return Err(Error::Shape { path: self.path.clone(), tensor: name.into(), expected, found });
        }
        let sum = w
            .f_to_kind(Kind::Float)
            .and_then(|w32| w32.f_add(&delta.f_to_kind(Kind::Float)?))
            .and_then(|s| s.f_to_kind(w.kind()))
            .map_err(|e| Error::torch(format!("merging a LoRA update into `{name}`"), e))?;
        self.tensors.insert(name.to_string(), sum);
        Ok(())
    }

    /// Replaces the tensor `name` with `t` cast to its dtype (a module an adapter saved whole).
    pub(crate) fn replace(&mut self, name: &str, t: &Tensor) -> Result<()> {
        let w = self.existing(name)?;
        if w.size() != t.size() {
            let (expected, found) = (w.size(), t.size());
            return Err(Error::Shape { path: self.path.clone(), tensor: name.into(), expected, found });
        }
        let t = t.f_to_kind(w.kind()).map_err(|e| Error::torch(format!("replacing `{name}`"), e))?;
        self.tensors.insert(name.to_string(), t);
        Ok(())
    }

    /// The tensor `name`, which must exist.
    fn existing(&self, name: &str) -> Result<&Tensor> {
        self.tensors.get(name).ok_or_else(|| Error::invalid(&self.path, format!("tensor `{name}` is missing")))
    }

    /// Names left untaken, sorted (for a note).
    pub(crate) fn leftover(&self) -> Vec<String> {
        self.tensors.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, file: &str, tensors: &[(&str, Tensor)]) {
        let named: Vec<(String, Tensor)> = tensors.iter().map(|(n, t)| (n.to_string(), t.shallow_clone())).collect();
        crate::model::weights::write_file(&dir.join(file), &named).unwrap();
    }

    #[test]
    fn weights_are_views_of_the_mapping_on_the_cpu_and_cast_as_used() {
        let dir = tempfile::tempdir().unwrap();
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).view([2, 3]);
        write(
            dir.path(),
            "model.safetensors",
            &[("m.a.weight", a.shallow_clone()), ("m.b", a.to_kind(Kind::BFloat16))],
        );
        let mut w = Weights::open(dir.path(), Kind::Float, Device::Cpu).unwrap();
        let vs = VarStore::new(Device::Cpu);
        let t = w.take(&vs, "m.a.weight", &[2, 3]).unwrap();
        let (start, len) = (w.maps[0].as_ptr() as usize, w.maps[0].len());
        let at = t.data_ptr() as usize;
        assert!(at >= start && at < start + len, "an fp32 tensor taken in fp32 is not copied");
        assert!(t.equal(&a));
        let b = w.take(&vs, "m.b", &[2, 3]).unwrap();
        assert_eq!(b.kind(), Kind::BFloat16, "kept as the file has it");
        let at = b.data_ptr() as usize;
        assert!(at >= start && at < start + len, "a bf16 tensor on the CPU is not copied");
        assert!(as_compute(&b, Kind::Float).equal(&a), "bf16 holds these integers exactly");
        // Registered under the HF names.
        let mut names: Vec<String> = vs.variables().into_keys().collect();
        names.sort();
        assert_eq!(names, vec!["m.a.weight", "m.b"]);
        assert!(w.leftover().is_empty());
    }

    #[test]
    fn shards_are_read_through_the_index_and_errors_name_the_tensor() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "s-1.safetensors",
            &[("word_embeddings.weight", Tensor::zeros([4, 2], (Kind::Float, Device::Cpu)))],
        );
        write(dir.path(), "s-2.safetensors", &[("lm_head.weight", Tensor::ones([4, 2], (Kind::Half, Device::Cpu)))]);
        std::fs::write(
            dir.path().join("model.safetensors.index.json"),
            r#"{"weight_map": {"word_embeddings.weight": "s-1.safetensors", "lm_head.weight": "s-2.safetensors"}}"#,
        )
        .unwrap();
        let mut w = Weights::open(dir.path(), Kind::Float, Device::Cpu).unwrap();
        // A bare BLOOM state dict gets its `transformer.` prefix; lm_head keeps its name.
        w.add_prefix_if_bare("transformer.", "word_embeddings.weight");
        assert_eq!(w.leftover(), vec!["lm_head.weight", "transformer.word_embeddings.weight"]);
        let vs = VarStore::new(Device::Cpu);
        let err = w.take(&vs, "transformer.word_embeddings.weight", &[5, 2]).unwrap_err().to_string();
        assert!(
            err.ends_with("tensor `transformer.word_embeddings.weight` has shape [4, 2], expected [5, 2]"),
            "{err}"
        );
        let err = w.take(&vs, "transformer.ln_f.weight", &[2]).unwrap_err().to_string();
        assert!(err.contains("tensor `transformer.ln_f.weight` is missing"), "{err}");
        assert_eq!(w.take(&vs, "lm_head.weight", &[4, 2]).unwrap().kind(), Kind::Half, "fp16 kept on the CPU");
        let err = Weights::open(&dir.path().join("nowhere"), Kind::Float, Device::Cpu).err().unwrap().to_string();
        assert!(err.contains("model.safetensors: file not found"), "{err}");
    }
}
