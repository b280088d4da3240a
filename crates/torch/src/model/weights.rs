//! safetensors files: read any HF-style weight file (single or sharded, fp32/fp16/bf16) into
//! named tch tensors, and write named tensors atomically with `{"format": "pt"}` metadata.
use crate::error::{Error, IoContext, Result};
use indolm_core::files::Staging;
use safetensors::{Dtype, SafeTensors, View};
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use tch::{Device, Kind, Tensor};

/// The tch kind of a safetensors dtype (none for dtypes tch lacks).
pub fn kind_of(dtype: Dtype) -> Option<Kind> {
    Some(match dtype {
        Dtype::F32 => Kind::Float,
        Dtype::F16 => Kind::Half,
        Dtype::BF16 => Kind::BFloat16,
        Dtype::F64 => Kind::Double,
        Dtype::I64 => Kind::Int64,
        Dtype::I32 => Kind::Int,
        Dtype::I16 => Kind::Int16,
        Dtype::I8 => Kind::Int8,
        Dtype::U8 => Kind::Uint8,
        Dtype::BOOL => Kind::Bool,
        _ => return None,
    })
}

fn dtype_of(kind: Kind) -> Option<Dtype> {
    Some(match kind {
        Kind::Float => Dtype::F32,
        Kind::Half => Dtype::F16,
        Kind::BFloat16 => Dtype::BF16,
        Kind::Double => Dtype::F64,
        Kind::Int64 => Dtype::I64,
        Kind::Int => Dtype::I32,
        Kind::Int16 => Dtype::I16,
        Kind::Int8 => Dtype::I8,
        Kind::Uint8 => Dtype::U8,
        Kind::Bool => Dtype::BOOL,
        _ => return None,
    })
}

/// Reads every tensor of one safetensors file (memory-mapped) onto the CPU, in the file's dtype.
pub fn read_file(path: &Path) -> Result<BTreeMap<String, Tensor>> {
    let file = std::fs::File::open(path).with_path(path)?;
    // SAFETY: the file is opened read-only and not modified while mapped.
    let mmap = unsafe { memmap2::Mmap::map(&file) }.with_path(path)?;
    let st = SafeTensors::deserialize(&mmap)
        .map_err(|e| Error::invalid(path, format!("not a valid safetensors file: {e}")))?;
    let mut out = BTreeMap::new();
    for (name, view) in st.tensors() {
        let kind = kind_of(view.dtype())
            .ok_or_else(|| Error::invalid(path, format!("tensor `{name}` has unsupported dtype {:?}", view.dtype())))?;
        let shape = checked_shape(&name, view.shape(), path)?;
        let tensor = Tensor::f_from_data_size(view.data(), &shape, kind)
            .map_err(|e| Error::invalid(path, format!("tensor `{name}`: {e}")))?;
        out.insert(name, tensor);
    }
    Ok(out)
}

/// A safetensors tensor's shape as libtorch's sizes, checked: safetensors checks the bytes
/// against the shape, but a shape with a 0 holds no bytes whatever its other sizes, so each must
/// fit an i64 and their product (each 0 counted as 1: the contiguous strides) too, in at most
/// [`MAX_DIMS`](crate::model::torch_file::MAX_DIMS) dimensions.
pub(crate) fn checked_shape(name: &str, shape: &[usize], path: &Path) -> Result<Vec<i64>> {
    let sizes: Vec<i64> = shape.iter().filter_map(|&d| i64::try_from(d).ok()).collect();
    if sizes.len() != shape.len()
        || sizes.len() > crate::model::torch_file::MAX_DIMS
        || crate::model::torch_file::contiguous_extent(&sizes).is_none()
    {
        return Err(Error::invalid(
            path,
            format!("tensor `{name}`: shape {shape:?} is beyond a 64-bit element count (or 64 dimensions)"),
        ));
    }
    Ok(sizes)
}

/// The shard files a `model.safetensors.index.json` names (its `weight_map`'s values), each
/// once, in name order, beside the index. Each must be a plain file name: a value with a folder,
/// `..` or an absolute path is refused, so an index never makes indolm read outside the model's
/// folder (a shard that is itself a symlink, as in HF's cache, is read as usual).
pub(crate) fn shard_files(index: &Path) -> Result<Vec<PathBuf>> {
    let text = indolm_core::files::read_to_string(index)?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| Error::json(index, &e))?;
    let map = json
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| Error::field(index, "weight_map", "missing or not an object"))?;
    let mut shards: Vec<&str> = Vec::with_capacity(map.len());
    for (tensor, value) in map {
        let name = value.as_str().ok_or_else(|| {
            Error::field(index, format!("weight_map.{tensor}"), format!("expected a file name, found {value}"))
        })?;
        indolm_core::files::plain_file_name(name).map_err(|why| {
            Error::field(
                index,
                format!("weight_map.{tensor}"),
                format!("{name:?} {why}: a shard must be a file beside the index"),
            )
        })?;
        shards.push(name);
    }
    shards.sort_unstable();
    shards.dedup();
    let dir = index.parent().unwrap_or(Path::new("."));
    Ok(shards.into_iter().map(|s| dir.join(s)).collect())
}

/// The weight files a model directory may hold, in the order they are looked for: safetensors
/// (one file, or shards named by an index), then PyTorch's `pytorch_model.bin` (one file or
/// shards), read without executing its pickle ([`crate::model::torch_file`]).
pub(crate) const WEIGHT_LAYOUTS: [&str; 4] =
    ["model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json"];

/// The weight file (or shard index) of a model directory, in [`WEIGHT_LAYOUTS`]' order.
pub(crate) fn find_weights(dir: &Path) -> Result<PathBuf> {
    WEIGHT_LAYOUTS.iter().map(|f| dir.join(f)).find(|p| p.exists()).ok_or_else(|| Error::MissingFile {
        path: dir.join(WEIGHT_LAYOUTS[0]),
        hint: "expected model.safetensors, pytorch_model.bin, or a shard index of either".into(),
    })
}

/// Reads every tensor of one weight file, safetensors or PyTorch's, onto the CPU.
pub(crate) fn read_any(path: &Path) -> Result<BTreeMap<String, Tensor>> {
    if path.extension().is_some_and(|e| e == "bin") {
        crate::model::torch_file::read_file(path)
    } else {
        read_file(path)
    }
}

/// A model directory's weights ([`find_weights`]): the file or shard index found, and the files
/// that hold the tensors (the file itself, or the index's shards).
pub(crate) fn weight_files(dir: &Path) -> Result<(PathBuf, Vec<PathBuf>)> {
    let path = find_weights(dir)?;
    let files = match path.extension().is_some_and(|e| e == "json") {
        true => shard_files(&path)?,
        false => vec![path.clone()],
    };
    Ok((path, files))
}

/// Reads a model's weights from a directory ([`weight_files`]): the file (or index) read, and
/// the tensors.
pub fn read_model_weights(dir: &Path) -> Result<(PathBuf, BTreeMap<String, Tensor>)> {
    let (path, files) = weight_files(dir)?;
    let mut out = BTreeMap::new();
    for file in files {
        out.extend(read_any(&file)?);
    }
    Ok((path, out))
}

/// One tensor prepared for writing: CPU, contiguous, raw bytes.
struct RawTensor {
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

impl View for &RawTensor {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&self.bytes)
    }
    fn data_len(&self) -> usize {
        self.bytes.len()
    }
}

fn raw(name: &str, t: &Tensor) -> Result<RawTensor> {
    let t = t.to_device(Device::Cpu).contiguous();
    let dtype = dtype_of(t.kind()).ok_or_else(|| {
        Error::unsupported("writing safetensors", format!("tensor `{name}` has unsupported kind {:?}", t.kind()))
    })?;
    let numel = t.numel();
    let mut bytes = vec![0u8; numel * t.kind().elt_size_in_bytes()];
    t.f_copy_data_u8(&mut bytes, numel).map_err(|e| Error::torch(format!("reading tensor `{name}`"), e))?;
    Ok(RawTensor { dtype, shape: t.size().iter().map(|&d| d as usize).collect(), bytes })
}

/// Writes named tensors to `path` (temporary file, fsync, rename) with `format = pt` metadata,
/// which transformers expects.
pub fn write_file(path: &Path, tensors: &[(String, Tensor)]) -> Result<()> {
    let raws: Vec<(String, RawTensor)> =
        tensors.iter().map(|(n, t)| Ok((n.clone(), raw(n, t)?))).collect::<Result<_>>()?;
    let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
    let staging = Staging::new(path);
    let tmp = staging.path();
    safetensors::serialize_to_file(raws.iter().map(|(n, r)| (n.as_str(), r)), Some(metadata), tmp)
        .map_err(|e| Error::invalid(tmp, format!("writing safetensors: {e}")))?;
    std::fs::File::open(tmp).and_then(|f| f.sync_all()).with_path(tmp)?;
    staging.commit()
}
