//! PyTorch's own weight files (`pytorch_model.bin`, as `torch.save` writes a state dict), read
//! without executing anything. Both of torch's layouts: the zip archive of torch ≥ 1.6
//! (`<archive>/data.pkl` and one raw file per storage, `<archive>/data/<key>`) and the legacy
//! stream (a magic number, a version and the system's sizes as pickles, the state dict's pickle,
//! the list of storage keys, then each storage's element count and bytes).
//!
//! The pickle is read by a small stack machine that knows the opcodes of pickle protocols 0 to 4
//! and builds only data: numbers, strings, tuples, lists, dicts, and tensors from storages.
//! A pickle may name Python callables (`GLOBAL`); only those a state dict needs are accepted —
//! `collections.OrderedDict`, torch's tensor and parameter rebuilders, `_codecs.encode` (how
//! protocol 2 writes bytes) and the storage types — and none of them is run: each is
//! interpreted here. Any other global (`posix.system`, `builtins.eval`, a model class) is refused
//! with one line naming it, before anything else of the file is read. Tensors are checked against
//! their storage (dtype, offset, sizes, strides) before a view of it is made.
//!
//! Everything in the file is hostile until bounded, and each bound is one line naming what broke
//! it: a zip entry's declared size is checked against the file's length (all entries together
//! too: overlapping entries cannot multiply it) and its cap before anything is allocated, and
//! exactly that many bytes are read; compressed entries are refused (torch stores its entries;
//! the `zip` crate can inflate only because tch turns its features on); a pickle is read to at
//! most [`MAX_PICKLE_BYTES`] and [`MAX_PICKLE_OPS`] opcodes, its containers nest at most [`MAX_NESTING`] deep and are dropped
//! without recursion (self-references included), and a dict's keys are found through an index
//! (no quadratic time); every count, size, stride and offset product is computed with checked
//! arithmetic before libtorch sees it; and the tensors made may hold at most
//! [`MAX_COPIES_OF_FILE`] times the file's bytes.
use crate::error::{Error, IoContext, Result};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io::{Read, Seek};
use std::path::Path;
use std::rc::Rc;
use tch::{Kind, Tensor};

/// The most bytes a pickle may have (the zip layout's `data.pkl`, each pickle of the legacy
/// stream): a state dict's pickle takes about 200 bytes a tensor, so this is some 300,000
/// tensors.
pub(crate) const MAX_PICKLE_BYTES: usize = 64 << 20;

/// The most opcodes a pickle may run (a state dict's takes about 33 a tensor). Each makes at
/// most one value, so this bounds the machine's memory (some 100 bytes a value, beside the
/// pickle's own strings) and time.
pub(crate) const MAX_PICKLE_OPS: usize = 4_000_000;

/// How deep a pickle's tuples, lists and dicts may nest (a state dict nests 3 or 4 levels: the
/// dict, a tensor's arguments, their sizes; `_metadata` a dict of dicts).
pub(crate) const MAX_NESTING: usize = 100;

/// The most dimensions a tensor may have.
pub(crate) const MAX_DIMS: usize = 64;

/// The tensors read from a file may hold at most this many times its bytes together (tied
/// weights are several views of one storage; more is a file made to multiply memory).
pub(crate) const MAX_COPIES_OF_FILE: u64 = 8;

/// The callables a state dict's pickle may name.
const ALLOWED_CALLABLES: [&str; 6] = [
    "collections.OrderedDict",
    "torch._utils._rebuild_tensor_v2",
    "torch._utils._rebuild_tensor",
    "torch._utils._rebuild_parameter",
    "torch._utils._rebuild_parameter_with_state",
    "_codecs.encode",
];

/// The storage types (named in a storage's persistent id, never called) and their dtypes.
fn storage_kind(global: &str) -> Option<Kind> {
    Some(match global {
        "torch.FloatStorage" => Kind::Float,
        "torch.DoubleStorage" => Kind::Double,
        "torch.HalfStorage" => Kind::Half,
        "torch.BFloat16Storage" => Kind::BFloat16,
        "torch.LongStorage" => Kind::Int64,
        "torch.IntStorage" => Kind::Int,
        "torch.ShortStorage" => Kind::Int16,
        "torch.CharStorage" => Kind::Int8,
        "torch.ByteStorage" => Kind::Uint8,
        "torch.BoolStorage" => Kind::Bool,
        _ => return None,
    })
}

/// A storage a tensor views: its key (the file in the archive, or the legacy stream's key), its
/// dtype and its number of elements.
#[derive(Debug, Clone, PartialEq)]
struct StorageRef {
    key: Rc<str>,
    kind: Kind,
    numel: i64,
}

/// A tensor as the pickle describes it: a view of a storage.
#[derive(Debug, Clone, PartialEq)]
struct TensorRef {
    storage: StorageRef,
    offset: i64,
    size: Vec<i64>,
    stride: Vec<i64>,
}

/// A tuple's or list's items, shared, with how deep they nest (1 for a flat one).
struct Seq {
    depth: Cell<usize>,
    items: RefCell<Vec<Value>>,
}

/// A dict's items in insertion order, with an index of its string and int keys (the keys a
/// state dict has; other keys are never equal to one another, as [`DictKey`] says), and how deep
/// it nests.
struct Map {
    depth: Cell<usize>,
    items: RefCell<Vec<(Value, Value)>>,
    index: RefCell<HashMap<DictKey, usize>>,
}

/// A dict key that compares by value (strings and ints, as Python compares them).
#[derive(PartialEq, Eq, Hash)]
enum DictKey {
    Str(Rc<str>),
    Int(i64),
}

impl DictKey {
    fn of(v: &Value) -> Option<DictKey> {
        match v {
            Value::Str(s) => Some(DictKey::Str(s.clone())),
            Value::Int(n) => Some(DictKey::Int(*n)),
            _ => None,
        }
    }
}

/// A value of the pickle machine. Every clone is shallow (a memo reference repeated a million
/// times costs a pointer each): containers are shared (a memoized container filled later is the
/// same object wherever it is referred to, as in Python), and so are strings and bytes.
/// Containers are owned by the machine's arena ([`Unpickler`]), which takes them apart when it
/// ends, so dropping a value never recurses.
#[derive(Clone)]
enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// Read so that a pickle holding one parses; no state dict uses its value.
    #[allow(dead_code)]
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    Tuple(Rc<Seq>),
    List(Rc<Seq>),
    Dict(Rc<Map>),
    /// An accepted global, by `module.name`.
    Global(Rc<str>),
    Storage(Rc<StorageRef>),
    Tensor(Rc<TensorRef>),
    /// The stack's mark (`MARK`).
    Mark,
}

impl Value {
    fn describe(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "a bool",
            Value::Int(_) => "an int",
            Value::Float(_) => "a float",
            Value::Str(_) => "a string",
            Value::Bytes(_) => "bytes",
            Value::Tuple(_) => "a tuple",
            Value::List(_) => "a list",
            Value::Dict(_) => "a dict",
            Value::Global(_) => "a global",
            Value::Storage(_) => "a storage",
            Value::Tensor(_) => "a tensor",
            Value::Mark => "a mark",
        }
    }

    /// How deep the value's containers nest, as far as the machine has tracked it (0 for a
    /// scalar): exact for pickles as Python writes them, which fill a container before putting
    /// it in another.
    fn depth(&self) -> usize {
        match self {
            Value::Tuple(s) | Value::List(s) => s.depth.get(),
            Value::Dict(m) => m.depth.get(),
            _ => 0,
        }
    }
}

/// One level only (a container by its length): a value may contain itself.
impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(n) => write!(f, "{n}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) if s.len() <= 64 => write!(f, "{s:?}"),
            Value::Tuple(s) | Value::List(s) => write!(f, "{} of {} items", self.describe(), s.items.borrow().len()),
            Value::Dict(m) => write!(f, "a dict of {} items", m.items.borrow().len()),
            Value::Global(g) => write!(f, "`{g}`"),
            other => write!(f, "{}", other.describe()),
        }
    }
}

/// Reads a `torch.save`d state dict (zip or legacy layout) into named tensors on the CPU, in
/// their saved dtypes.
pub(crate) fn read_file(path: &Path) -> Result<BTreeMap<String, Tensor>> {
    let mut file = std::fs::File::open(path).with_path(path)?;
    let len = file.metadata().with_path(path)?.len();
    let mut magic = [0u8; 4];
    let is_zip = file.read(&mut magic).with_path(path)? == 4 && magic == *b"PK\x03\x04";
    if is_zip {
        file.rewind().with_path(path)?;
        read_zip(std::io::BufReader::new(file), len, path)
    } else {
        drop(file);
        read_legacy(&std::fs::read(path).with_path(path)?, path)
    }
}

/// [`read_file`] of a file's bytes already in memory; `path` only names it in errors.
pub fn read_bytes(bytes: &[u8], path: &Path) -> Result<BTreeMap<String, Tensor>> {
    if bytes.starts_with(b"PK\x03\x04") {
        read_zip(std::io::Cursor::new(bytes), bytes.len() as u64, path)
    } else {
        read_legacy(bytes, path)
    }
}

/// The zip layout: `<archive>/data.pkl`, and each storage in `<archive>/data/<key>`.
fn read_zip<R: Read + Seek>(reader: R, file_len: u64, path: &Path) -> Result<BTreeMap<String, Tensor>> {
    let zip =
        zip::ZipArchive::new(reader).map_err(|e| Error::invalid(path, format!("not a readable zip archive ({e})")))?;
    let pickle_name = zip
        .file_names()
        .find(|n| n.ends_with("/data.pkl") && n.matches('/').count() == 1)
        .map(str::to_string)
        .ok_or_else(|| Error::invalid(path, "a zip archive without <archive>/data.pkl: not a torch.save file"))?;
    let prefix = pickle_name.trim_end_matches("data.pkl").to_string();
    let mut entries = Entries { zip, path, file_len, left: file_len };
    let order_name = format!("{prefix}byteorder");
    if entries.zip.file_names().any(|n| n == order_name) {
        let order = entries.read(&order_name, 16, false)?;
        let text = String::from_utf8_lossy(&order);
        if text.trim() != "little" {
            return Err(Error::unsupported("reading pytorch_model.bin", format!("byte order {:?}", text.trim())));
        }
    }
    let pickle = entries.read(&pickle_name, MAX_PICKLE_BYTES as u64, false)?;
    let (tensors, _) = unpickle(&pickle, false, path, "pickle", |v| state_dict(v, path))?;
    let mut storages: HashMap<Rc<str>, Tensor> = HashMap::new();
    let mut out = BTreeMap::new();
    let mut out_bytes = 0u64;
    for (name, t) in tensors {
        let storage = &t.storage;
        if !storages.contains_key(&storage.key) {
            let key = &storage.key;
            indolm_core::files::plain_file_name(key)
                .map_err(|why| Error::invalid(path, format!("tensor `{name}`: storage key {key:?} {why}")))?;
            let len = storage_bytes(storage, &name, path)?;
            let bytes = entries.read(&format!("{prefix}data/{key}"), len, true)?;
            storages.insert(key.clone(), storage_tensor(&bytes, storage, path)?);
        }
        let tensor = view(&storages[&storage.key], &t, &name, path, (file_len, &mut out_bytes))?;
        out.insert(name, tensor);
    }
    Ok(out)
}

/// A zip archive's entries, read within the file's bytes: `left` is what the entries read so far
/// leave of the file's length (stored entries cannot together hold more than the file).
struct Entries<'a, R> {
    zip: zip::ZipArchive<R>,
    path: &'a Path,
    file_len: u64,
    left: u64,
}

impl<R: Read + Seek> Entries<'_, R> {
    /// One stored (uncompressed, as torch writes them) entry, of at most `cap` bytes (exactly
    /// `cap` when `exact`), its declared size checked before anything is allocated and exactly
    /// that many bytes read.
    fn read(&mut self, name: &str, cap: u64, exact: bool) -> Result<Vec<u8>> {
        let path = self.path;
        let bad = |why: String| Error::invalid(path, format!("zip entry `{name}`: {why}"));
        let mut entry = self
            .zip
            .by_name(name)
            .map_err(|e| Error::invalid(path, format!("the archive has no readable `{name}` ({e})")))?;
        if entry.compression() != zip::CompressionMethod::Stored {
            return Err(bad(format!(
                "compressed ({}); torch.save stores its entries uncompressed, and indolm reads only stored ones",
                entry.compression()
            )));
        }
        let size = entry.size();
        if entry.compressed_size() != size {
            return Err(bad(format!(
                "stored, yet declares {} bytes held for {size} bytes of content",
                entry.compressed_size()
            )));
        }
        if size > self.left {
            return Err(bad(format!(
                "declares {size} bytes, more than the file's {} bytes can hold beside the entries already read",
                self.file_len
            )));
        }
        if (exact && size != cap) || size > cap {
            let expected = if exact { "" } else { "at most " };
            return Err(bad(format!("declares {size} bytes, expected {expected}{cap}")));
        }
        self.left -= size;
        let mut bytes = Vec::with_capacity(size as usize);
        (&mut entry).take(size).read_to_end(&mut bytes).map_err(|e| bad(format!("reading it: {e}")))?;
        if bytes.len() as u64 != size {
            return Err(bad(format!("holds {} bytes, though its directory declares {size}", bytes.len())));
        }
        // One read past the end, where the zip reader checks the entry's CRC.
        match entry.read(&mut [0u8; 1]) {
            Ok(0) => Ok(bytes),
            Ok(_) => Err(bad(format!("holds more than the {size} bytes its directory declares"))),
            Err(e) => Err(bad(format!("reading it: {e}"))),
        }
    }
}

/// The bytes a storage holds (its element count times its dtype's size), checked.
fn storage_bytes(storage: &StorageRef, tensor: &str, path: &Path) -> Result<u64> {
    u64::try_from(storage.numel).ok().and_then(|n| n.checked_mul(storage.kind.elt_size_in_bytes() as u64)).ok_or_else(
        || {
            Error::invalid(
                path,
                format!(
                    "tensor `{tensor}`: storage `{}` of {} elements of {:?} is more bytes than a file holds",
                    storage.key, storage.numel, storage.kind
                ),
            )
        },
    )
}

/// The legacy layout: pickles of the magic number, the format's version and the system's sizes,
/// the state dict, the sorted storage keys; then for each key its element count (int64) and
/// bytes.
fn read_legacy(data: &[u8], path: &Path) -> Result<BTreeMap<String, Tensor>> {
    let mut at = 0usize;
    let not_torch = || {
        Error::invalid(path, "neither a zip archive nor torch's legacy format (no magic number): not a torch.save file")
    };
    let is_magic = pickle_at(data, &mut at, path, "the magic number", |v| {
        // torch's MAGIC_NUMBER, 0x1950a86a20f9469cfc6c: an 80-bit long, kept as its bytes.
        Ok(matches!(v, Value::Bytes(b) if b[..] == 0x1950a86a20f9469cfc6c_u128.to_le_bytes()[..10]))
    })
    .map_err(|_| not_torch())?;
    if !is_magic {
        return Err(not_torch());
    }
    pickle_at(data, &mut at, path, "the format version", |v| match v {
        Value::Int(1001) => Ok(()),
        other => Err(Error::unsupported("reading pytorch_model.bin", format!("legacy format version {other:?}"))),
    })?;
    pickle_at(data, &mut at, path, "the system information", |v| {
        if let Value::Dict(map) = v {
            for (k, v) in map.items.borrow().iter() {
                if matches!(k, Value::Str(s) if &**s == "little_endian") && matches!(v, Value::Bool(false)) {
                    return Err(Error::unsupported("reading pytorch_model.bin", "a big-endian file"));
                }
            }
        }
        Ok(())
    })?;
    let tensors = pickle_at(data, &mut at, path, "the state dict", |v| state_dict(v, path))?;
    let keys = pickle_at(data, &mut at, path, "the storage keys", |v| match v {
        Value::List(items) => items
            .items
            .borrow()
            .iter()
            .map(|k| match k {
                Value::Str(s) => Ok(s.to_string()),
                other => Err(Error::invalid(path, format!("a storage key is {}", other.describe()))),
            })
            .collect::<Result<Vec<String>>>(),
        other => Err(Error::invalid(path, format!("the storage keys are {}", other.describe()))),
    })?;
    let kinds: HashMap<&str, (&str, &StorageRef)> =
        tensors.iter().map(|(name, t)| (&*t.storage.key, (name.as_str(), &t.storage))).collect();
    let mut storages: HashMap<Rc<str>, Tensor> = HashMap::new();
    for key in keys {
        let left = data.len() - at;
        let header = data
            .get(at..at + 8)
            .ok_or_else(|| Error::invalid(path, format!("cut short before storage `{key}` ({left} bytes left)")))?;
        let numel = i64::from_le_bytes(header.try_into().expect("8 bytes"));
        at += 8;
        let Some((tensor, storage)) = kinds.get(key.as_str()) else {
            return Err(Error::invalid(path, format!("storage `{key}` is stored but no tensor uses it")));
        };
        if numel != storage.numel {
            return Err(Error::invalid(
                path,
                format!("storage `{key}` holds {numel} elements, though its tensors' pickle says {}", storage.numel),
            ));
        }
        let len = storage_bytes(storage, tensor, path)?;
        let bytes = usize::try_from(len).ok().and_then(|len| data.get(at..at.checked_add(len)?)).ok_or_else(|| {
            Error::invalid(path, format!("storage `{key}`: cut short ({numel} elements, {} bytes left)", left - 8))
        })?;
        at += bytes.len();
        storages.insert(storage.key.clone(), storage_tensor(bytes, storage, path)?);
    }
    let mut out = BTreeMap::new();
    let mut out_bytes = 0u64;
    for (name, t) in &tensors {
        let storage = storages
            .get(&t.storage.key)
            .ok_or_else(|| Error::invalid(path, format!("tensor `{name}`: storage `{}` is missing", t.storage.key)))?;
        out.insert(name.clone(), view(storage, t, name, path, (data.len() as u64, &mut out_bytes))?);
    }
    Ok(out)
}

/// The pickle at `data[*at..]` (read to at most [`MAX_PICKLE_BYTES`]), taken by `read`; `at`
/// moves past it.
fn pickle_at<T>(
    data: &[u8],
    at: &mut usize,
    path: &Path,
    what: &str,
    read: impl FnOnce(&Value) -> Result<T>,
) -> Result<T> {
    let end = data.len().min(*at + MAX_PICKLE_BYTES);
    let (out, used) = unpickle(&data[*at..end], end < data.len(), path, what, read)?;
    *at += used;
    Ok(out)
}

/// Runs one pickle and hands its value to `read`, which takes what it needs from it (the
/// containers are taken apart once the machine ends); also the bytes the pickle took. `capped`:
/// `data` was cut at [`MAX_PICKLE_BYTES`].
fn unpickle<T>(
    data: &[u8],
    capped: bool,
    path: &Path,
    what: &str,
    read: impl FnOnce(&Value) -> Result<T>,
) -> Result<(T, usize)> {
    let mut machine = Unpickler::new(data, capped, path, what);
    let root = machine.load()?;
    let out = read(&root)?;
    Ok((out, machine.pos))
}

/// The top-level object as a state dict: names to tensors.
fn state_dict(root: &Value, path: &Path) -> Result<BTreeMap<String, TensorRef>> {
    let Value::Dict(map) = root else {
        return Err(Error::invalid(path, format!("holds {}, not a state dict", root.describe())));
    };
    let mut out = BTreeMap::new();
    for (k, v) in map.items.borrow().iter() {
        let Value::Str(name) = k else {
            return Err(Error::invalid(path, format!("a state dict key is {}", k.describe())));
        };
        match v {
            Value::Tensor(t) => {
                out.insert(name.to_string(), (**t).clone());
            }
            other => {
                return Err(Error::invalid(
                    path,
                    format!(
                        "`{name}` is {}, not a tensor: not a state dict (a whole checkpoint of a training script?)",
                        other.describe()
                    ),
                ))
            }
        }
    }
    Ok(out)
}

/// A storage's bytes as a flat tensor of its dtype.
fn storage_tensor(bytes: &[u8], storage: &StorageRef, path: &Path) -> Result<Tensor> {
    let expected = storage_bytes(storage, &storage.key, path)?;
    if bytes.len() as u64 != expected {
        return Err(Error::invalid(
            path,
            format!(
                "storage `{}` holds {} bytes, expected {expected} ({} elements of {:?})",
                storage.key,
                bytes.len(),
                storage.numel,
                storage.kind
            ),
        ));
    }
    Tensor::f_from_data_size(bytes, &[storage.numel], storage.kind)
        .map_err(|e| Error::torch(format!("storage `{}`", storage.key), e))
}

/// The tensor `t` describes, as a contiguous copy of its view of `storage`, once its bounds are
/// checked (in checked arithmetic): its storage's dtype, its dimensions, no negative size,
/// stride or offset, no element past the storage's end, no more elements than the storage holds
/// (a view that repeats them), and the tensors read so far (`out`: the file's length, and their
/// bytes) within [`MAX_COPIES_OF_FILE`] times the file.
fn view(storage: &Tensor, t: &TensorRef, name: &str, path: &Path, out: (u64, &mut u64)) -> Result<Tensor> {
    let bad = |why: String| Error::invalid(path, format!("tensor `{name}`: {why}"));
    let (kind, numel) = (storage.kind(), storage.numel() as i64);
    if t.storage.kind != kind {
        return Err(bad(format!(
            "views storage `{}` as {:?}, which another tensor views as {kind:?}",
            t.storage.key, t.storage.kind
        )));
    }
    let shape = || format!("sizes {:?}, strides {:?} and offset {}", t.size, t.stride, t.offset);
    if t.size.len() != t.stride.len() || t.size.iter().chain(&t.stride).any(|&s| s < 0) || t.offset < 0 {
        return Err(bad(format!("{} do not describe a tensor", shape())));
    }
    if t.size.len() > MAX_DIMS {
        return Err(bad(format!("{} dimensions, more than the {MAX_DIMS} a tensor may have", t.size.len())));
    }
    let elements = contiguous_extent(&t.size)
        .map(|_| t.size.iter().product::<i64>())
        .ok_or_else(|| bad(format!(
                "sizes {:?} are more elements than a 64-bit count holds (each 0 counted as 1, as libtorch's strides count it)",
                t.size
            )))?;
    if elements > 0 {
        let last = t
            .size
            .iter()
            .zip(&t.stride)
            .try_fold(t.offset, |at, (&s, &st)| (s - 1).checked_mul(st)?.checked_add(at))
            .ok_or_else(|| bad(format!("{} reach past any 64-bit element index", shape())))?;
        if last >= numel {
            return Err(bad(format!("{} reach element {last} of a storage of {numel}", shape())));
        }
    }
    if elements > numel {
        return Err(bad(format!(
            "{} make {elements} elements of a storage of {numel} (a view that repeats its storage's elements)",
            shape()
        )));
    }
    let (file_len, out_bytes) = out;
    *out_bytes += elements as u64 * kind.elt_size_in_bytes() as u64;
    if *out_bytes > MAX_COPIES_OF_FILE.saturating_mul(file_len) {
        return Err(bad(format!(
            "the tensors up to this one hold {} bytes, more than {MAX_COPIES_OF_FILE} times the file's {file_len}",
            *out_bytes
        )));
    }
    storage
        .f_as_strided(&t.size, &t.stride, Some(t.offset))
        .and_then(|v| v.f_contiguous())
        .map_err(|e| Error::torch(format!("tensor `{name}`"), e))
}

/// The product of `sizes` with each 0 taken as 1, if it fits an i64: the elements and every
/// stride of a contiguous tensor of these sizes then fit too (libtorch computes the strides so,
/// even for a tensor without elements).
pub(crate) fn contiguous_extent(sizes: &[i64]) -> Option<i64> {
    sizes.iter().try_fold(1i64, |n, &s| if s < 0 { None } else { n.checked_mul(s.max(1)) })
}

/// The pickle machine over one pickle's bytes. Every tuple, list and dict it makes is kept in its
/// arena (`seqs`, `maps`) until it ends, when their items are taken out of each: a container's
/// last reference is then always the arena's, so no drop recurses however deep the values nest,
/// and containers that hold themselves (through the memo) are freed too.
struct Unpickler<'a> {
    data: &'a [u8],
    /// `data` was cut at [`MAX_PICKLE_BYTES`].
    capped: bool,
    pos: usize,
    /// The opcodes run so far.
    ops: usize,
    path: &'a Path,
    /// What the pickle is, for errors (`pickle`, `the state dict`...).
    what: &'a str,
    stack: Vec<Value>,
    memo: HashMap<u64, Value>,
    seqs: Vec<Rc<Seq>>,
    maps: Vec<Rc<Map>>,
}

impl Drop for Unpickler<'_> {
    fn drop(&mut self) {
        for seq in &self.seqs {
            drop(std::mem::take(&mut *seq.items.borrow_mut()));
        }
        for map in &self.maps {
            drop(std::mem::take(&mut *map.items.borrow_mut()));
            map.index.borrow_mut().clear();
        }
    }
}

impl<'a> Unpickler<'a> {
    fn new(data: &'a [u8], capped: bool, path: &'a Path, what: &'a str) -> Self {
        Unpickler {
            data,
            capped,
            pos: 0,
            ops: 0,
            path,
            what,
            stack: Vec::new(),
            memo: HashMap::new(),
            seqs: Vec::new(),
            maps: Vec::new(),
        }
    }

    fn error(&self, why: impl std::fmt::Display) -> Error {
        Error::invalid(self.path, format!("{} byte {}: {why}", self.what, self.pos))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| self.cut_short())?;
        let bytes = &self.data[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn cut_short(&self) -> Error {
        match self.capped {
            true => self.error(format!("longer than {MAX_PICKLE_BYTES} bytes, the most a pickle is read to")),
            false => self.error("cut short"),
        }
    }

    /// A new tuple or list of `items`, nesting one deeper than the deepest of them.
    fn seq(&mut self, items: Vec<Value>) -> Result<Rc<Seq>> {
        let depth = self.nested(0, items.iter().map(Value::depth).max().unwrap_or(0))?;
        let seq = Rc::new(Seq { depth: Cell::new(depth), items: RefCell::new(items) });
        self.seqs.push(seq.clone());
        Ok(seq)
    }

    fn list(&mut self, items: Vec<Value>) -> Result<Value> {
        Ok(Value::List(self.seq(items)?))
    }

    fn tuple(&mut self, items: Vec<Value>) -> Result<Value> {
        Ok(Value::Tuple(self.seq(items)?))
    }

    fn dict(&mut self) -> Value {
        let map = Rc::new(Map { depth: Cell::new(1), items: RefCell::default(), index: RefCell::default() });
        self.maps.push(map.clone());
        Value::Dict(map)
    }

    /// The depth of a container of depth `depth` once it holds a value of depth `inner`,
    /// refused past [`MAX_NESTING`].
    fn nested(&self, depth: usize, inner: usize) -> Result<usize> {
        let depth = depth.max(inner + 1);
        if depth > MAX_NESTING {
            return Err(self.error(format!(
                "tuples, lists and dicts nested deeper than {MAX_NESTING} levels (a state dict nests 3 or 4)"
            )));
        }
        Ok(depth)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")))
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    /// A text line (protocol 0 arguments), without its newline.
    fn line(&mut self) -> Result<&'a str> {
        let rest = &self.data[self.pos..];
        let end = rest.iter().position(|&b| b == b'\n').ok_or_else(|| self.error("a line without its end"))?;
        let line = std::str::from_utf8(&rest[..end]).map_err(|_| self.error("a line that is not UTF-8"))?;
        self.pos += end + 1;
        Ok(line)
    }

    fn string(&mut self, n: usize) -> Result<Value> {
        let bytes = self.take(n)?;
        let text = std::str::from_utf8(bytes).map_err(|_| self.error("a string that is not UTF-8"))?;
        Ok(Value::Str(text.into()))
    }

    fn pop(&mut self) -> Result<Value> {
        self.stack.pop().ok_or_else(|| self.error("the stack is empty"))
    }

    fn top(&mut self) -> Result<&mut Value> {
        let pos = self.pos;
        self.stack.last_mut().ok_or_else(|| Error::invalid(self.path, format!("pickle byte {pos}: the stack is empty")))
    }

    /// The values above the topmost mark, which is removed.
    fn pop_mark(&mut self) -> Result<Vec<Value>> {
        let mark = self.stack.iter().rposition(|v| matches!(v, Value::Mark)).ok_or_else(|| self.error("no mark"))?;
        let items = self.stack.split_off(mark + 1);
        self.stack.pop();
        Ok(items)
    }

    fn memo_get(&self, key: u64) -> Result<Value> {
        self.memo.get(&key).cloned().ok_or_else(|| self.error(format!("memo {key} is unset")))
    }

    fn memo_put(&mut self, key: u64) -> Result<()> {
        let v = self.stack.last().cloned().ok_or_else(|| self.error("nothing to memoize"))?;
        self.memo.insert(key, v);
        Ok(())
    }

    /// A global, by module and name: a callable or storage type a state dict needs, or refused.
    fn global(&self, module: &str, name: &str) -> Result<Value> {
        let full = format!("{module}.{name}");
        if ALLOWED_CALLABLES.contains(&full.as_str()) || storage_kind(&full).is_some() {
            Ok(Value::Global(full.into()))
        } else {
            Err(Error::invalid(
                self.path,
                format!(
                    "refused: its pickle names the Python global `{full}`, which a state dict of tensors never needs (indolm runs nothing from a pickle; if the file is trusted, convert it with transformers to safetensors)"
                ),
            ))
        }
    }

    fn set_items(&mut self, items: Vec<Value>) -> Result<()> {
        if !items.len().is_multiple_of(2) {
            return Err(self.error("an odd number of dict items"));
        }
        let map = match self.top()? {
            Value::Dict(map) => map.clone(),
            other => {
                let what = other.describe();
                return Err(self.error(format!("setting items of {what}")));
            }
        };
        let inner = items.iter().map(Value::depth).max().unwrap_or(0);
        map.depth.set(self.nested(map.depth.get(), inner)?);
        let (mut dict, mut index) = (map.items.borrow_mut(), map.index.borrow_mut());
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            match DictKey::of(&k) {
                Some(key) => match index.get(&key) {
                    Some(&slot) => dict[slot].1 = v,
                    None => {
                        index.insert(key, dict.len());
                        dict.push((k, v));
                    }
                },
                None => dict.push((k, v)),
            }
        }
        Ok(())
    }

    fn append(&mut self, items: Vec<Value>) -> Result<()> {
        let list = match self.top()? {
            Value::List(list) => list.clone(),
            other => {
                let what = other.describe();
                return Err(self.error(format!("appending to {what}")));
            }
        };
        let inner = items.iter().map(Value::depth).max().unwrap_or(0);
        list.depth.set(self.nested(list.depth.get(), inner)?);
        list.items.borrow_mut().extend(items);
        Ok(())
    }

    /// Runs the pickle to its `STOP`; the value it built.
    fn load(&mut self) -> Result<Value> {
        loop {
            let op = self.u8()?;
            self.ops += 1;
            if self.ops > MAX_PICKLE_OPS {
                return Err(self.error(format!("more than {MAX_PICKLE_OPS} opcodes, the most a pickle may run")));
            }
            match op {
                b'\x80' => {
                    let protocol = self.u8()?;
                    if protocol > 5 {
                        return Err(self.error(format!("pickle protocol {protocol}")));
                    }
                }
                b'\x95' => {
                    self.u64()?; // FRAME: a length hint
                }
                b'.' => return self.pop(),
                b'(' => self.stack.push(Value::Mark),
                b'N' => self.stack.push(Value::None),
                b'\x88' => self.stack.push(Value::Bool(true)),
                b'\x89' => self.stack.push(Value::Bool(false)),
                b'J' => {
                    let v = self.u32()? as i32;
                    self.stack.push(Value::Int(v as i64));
                }
                b'K' => {
                    let v = self.u8()?;
                    self.stack.push(Value::Int(v as i64));
                }
                b'M' => {
                    let v = self.u16()?;
                    self.stack.push(Value::Int(v as i64));
                }
                b'\x8a' | b'\x8b' => {
                    let n = if op == b'\x8a' { self.u8()? as usize } else { self.u32()? as usize };
                    let bytes = self.take(n)?;
                    self.stack.push(long(bytes).ok_or_else(|| self.error("an integer beyond 64 bits"))?);
                }
                b'I' => {
                    let line = self.line()?;
                    let v = match line {
                        "00" => Value::Bool(false),
                        "01" => Value::Bool(true),
                        _ => Value::Int(line.parse().map_err(|_| self.error(format!("INT {line:?}")))?),
                    };
                    self.stack.push(v);
                }
                b'L' => {
                    let line = self.line()?.trim_end_matches('L');
                    self.stack.push(Value::Int(line.parse().map_err(|_| self.error(format!("LONG {line:?}")))?));
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.take(8)?.try_into().expect("8 bytes"));
                    self.stack.push(Value::Float(v));
                }
                b'F' => {
                    let line = self.line()?;
                    self.stack.push(Value::Float(line.parse().map_err(|_| self.error(format!("FLOAT {line:?}")))?));
                }
                b'X' => {
                    let n = self.u32()? as usize;
                    let v = self.string(n)?;
                    self.stack.push(v);
                }
                b'\x8c' => {
                    let n = self.u8()? as usize;
                    let v = self.string(n)?;
                    self.stack.push(v);
                }
                b'\x8d' => {
                    let n = self.u64()? as usize;
                    let v = self.string(n)?;
                    self.stack.push(v);
                }
                b'V' => {
                    let line = self.line()?;
                    self.stack.push(Value::Str(line.into()));
                }
                // Python 2 strings, in old legacy files: text when they are UTF-8.
                b'T' | b'U' => {
                    let n = if op == b'T' { self.u32()? as usize } else { self.u8()? as usize };
                    let bytes = self.take(n)?;
                    self.stack.push(match std::str::from_utf8(bytes) {
                        Ok(s) => Value::Str(s.into()),
                        Err(_) => Value::Bytes(bytes.into()),
                    });
                }
                b'S' => {
                    let line = self.line()?;
                    let quoted = line.trim();
                    let inner = quoted
                        .strip_prefix('\'')
                        .and_then(|s| s.strip_suffix('\''))
                        .or_else(|| quoted.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
                        .ok_or_else(|| self.error(format!("STRING {line:?}")))?;
                    self.stack.push(Value::Str(inner.into()));
                }
                b'B' | b'C' | b'\x8e' => {
                    let n = match op {
                        b'B' => self.u32()? as usize,
                        b'C' => self.u8()? as usize,
                        _ => self.u64()? as usize,
                    };
                    let bytes = self.take(n)?;
                    self.stack.push(Value::Bytes(bytes.into()));
                }
                b')' => {
                    let v = self.tuple(Vec::new())?;
                    self.stack.push(v);
                }
                b't' => {
                    let items = self.pop_mark()?;
                    let v = self.tuple(items)?;
                    self.stack.push(v);
                }
                b'\x85' | b'\x86' | b'\x87' => {
                    let n = (op - b'\x84') as usize;
                    if self.stack.len() < n {
                        return Err(self.error("a tuple of more items than the stack holds"));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    let v = self.tuple(items)?;
                    self.stack.push(v);
                }
                b']' => {
                    let v = self.list(Vec::new())?;
                    self.stack.push(v);
                }
                b'l' => {
                    let items = self.pop_mark()?;
                    let v = self.list(items)?;
                    self.stack.push(v);
                }
                b'}' => {
                    let v = self.dict();
                    self.stack.push(v);
                }
                b'd' => {
                    let items = self.pop_mark()?;
                    let v = self.dict();
                    self.stack.push(v);
                    self.set_items(items)?;
                }
                b'a' => {
                    let v = self.pop()?;
                    self.append(vec![v])?;
                }
                b'e' => {
                    let items = self.pop_mark()?;
                    self.append(items)?;
                }
                b's' => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.set_items(vec![k, v])?;
                }
                b'u' => {
                    let items = self.pop_mark()?;
                    self.set_items(items)?;
                }
                b'q' => {
                    let key = self.u8()? as u64;
                    self.memo_put(key)?;
                }
                b'r' => {
                    let key = self.u32()? as u64;
                    self.memo_put(key)?;
                }
                b'p' => {
                    let line = self.line()?;
                    let key = line.parse().map_err(|_| self.error(format!("PUT {line:?}")))?;
                    self.memo_put(key)?;
                }
                b'\x94' => {
                    let key = self.memo.len() as u64;
                    self.memo_put(key)?;
                }
                b'h' => {
                    let key = self.u8()? as u64;
                    let v = self.memo_get(key)?;
                    self.stack.push(v);
                }
                b'j' => {
                    let key = self.u32()? as u64;
                    let v = self.memo_get(key)?;
                    self.stack.push(v);
                }
                b'g' => {
                    let line = self.line()?;
                    let key = line.parse().map_err(|_| self.error(format!("GET {line:?}")))?;
                    let v = self.memo_get(key)?;
                    self.stack.push(v);
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    let v = self.global(module, name)?;
                    self.stack.push(v);
                }
                b'\x93' => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    let (Value::Str(module), Value::Str(name)) = (module, name) else {
                        return Err(self.error("STACK_GLOBAL without two strings"));
                    };
                    let v = self.global(&module, &name)?;
                    self.stack.push(v);
                }
                b'Q' => {
                    let pid = self.pop()?;
                    let v = self.persistent(pid)?;
                    self.stack.push(v);
                }
                b'P' => {
                    let line = self.line()?;
                    return Err(self.error(format!("a text persistent id {line:?}")));
                }
                b'R' => {
                    let args = self.pop()?;
                    let callable = self.pop()?;
                    let v = self.reduce(callable, args)?;
                    self.stack.push(v);
                }
                b'b' => {
                    // BUILD: an object's state. An OrderedDict's (`_metadata`) and a rebuilt
                    // tensor's carry nothing the weights need.
                    let _state = self.pop()?;
                    match self.top()? {
                        Value::Dict(_) | Value::Tensor(_) => {}
                        other => {
                            let what = other.describe();
                            return Err(self.error(format!("setting the state of {what}")));
                        }
                    }
                }
                other => return Err(self.error(format!("opcode 0x{other:02x}, which a state dict does not use"))),
            }
        }
    }

    /// A persistent id: torch's storages, `('storage', type, key, location, numel[, view])`.
    fn persistent(&self, pid: Value) -> Result<Value> {
        let Value::Tuple(items) = pid else { return Err(self.error("a persistent id that is not a tuple")) };
        let items = items.items.borrow();
        match items.as_slice() {
            [Value::Str(tag), Value::Global(kind), key, _location, Value::Int(numel), ..] if &**tag == "storage" => {
                let kind = storage_kind(kind).ok_or_else(|| self.error(format!("storage type `{kind}`")))?;
                let key: Rc<str> = match key {
                    Value::Str(k) => k.clone(),
                    Value::Int(k) => k.to_string().into(),
                    other => return Err(self.error(format!("a storage key that is {}", other.describe()))),
                };
                if *numel < 0 {
                    return Err(self.error(format!("storage `{key}` of {numel} elements")));
                }
                Ok(Value::Storage(Rc::new(StorageRef { key, kind, numel: *numel })))
            }
            _ => Err(self.error("a persistent id that is not one of torch's storages")),
        }
    }

    /// A call of an accepted callable, interpreted here.
    fn reduce(&mut self, callable: Value, args: Value) -> Result<Value> {
        let Value::Global(name) = callable else {
            return Err(self.error(format!("calling {}", callable.describe())));
        };
        let Value::Tuple(args) = args else { return Err(self.error(format!("`{name}` called without a tuple"))) };
        let args = args.items.borrow();
        if &*name == "collections.OrderedDict" && args.is_empty() {
            return Ok(self.dict());
        }
        let ints = |v: &Value| -> Result<Vec<i64>> {
            let Value::Tuple(items) = v else {
                return Err(self.error(format!("sizes or strides that are {}", v.describe())));
            };
            let items = items.items.borrow();
            if items.len() > MAX_DIMS {
                return Err(self.error(format!("a tensor of {} dimensions, more than {MAX_DIMS}", items.len())));
            }
            items
                .iter()
                .map(|i| match i {
                    Value::Int(n) => Ok(*n),
                    other => Err(self.error(format!("a size or stride that is {}", other.describe()))),
                })
                .collect()
        };
        match (&*name, args.as_slice()) {
            (
                "torch._utils._rebuild_tensor_v2" | "torch._utils._rebuild_tensor",
                [Value::Storage(storage), Value::Int(offset), size, stride, ..],
            ) => Ok(Value::Tensor(Rc::new(TensorRef {
                storage: (**storage).clone(),
                offset: *offset,
                size: ints(size)?,
                stride: ints(stride)?,
            }))),
            (
                "torch._utils._rebuild_parameter" | "torch._utils._rebuild_parameter_with_state",
                [t @ Value::Tensor(_), ..],
            ) => Ok(t.clone()),
            ("_codecs.encode", [Value::Str(text), Value::Str(encoding)]) if &**encoding == "latin1" => {
                Ok(Value::Bytes(text.chars().map(|c| c as u32 as u8).collect()))
            }
            _ => Err(self.error(format!("`{name}` called with arguments a state dict does not use"))),
        }
    }
}

/// A little-endian two's-complement integer (LONG1/LONG4), if it fits 64 bits.
fn long(bytes: &[u8]) -> Option<Value> {
    if bytes.is_empty() {
        return Some(Value::Int(0));
    }
    if bytes.len() > 8 {
        // Torch's legacy magic number is 80 bits: kept as its bytes.
        return Some(Value::Bytes(bytes.into()));
    }
    let negative = bytes[bytes.len() - 1] & 0x80 != 0;
    let mut buf = if negative { [0xffu8; 8] } else { [0u8; 8] };
    buf[..bytes.len()].copy_from_slice(bytes);
    Some(Value::Int(i64::from_le_bytes(buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python's `repr` of what the pickle builds (recursive: for the small values of these tests).
    fn repr(v: &Value) -> String {
        let join = |items: &[Value]| items.iter().map(repr).collect::<Vec<_>>().join(", ");
        match v {
            Value::None => "None".into(),
            Value::Bool(b) => if *b { "True" } else { "False" }.into(),
            Value::Int(n) => n.to_string(),
            Value::Float(x) => format!("{x:?}"),
            Value::Str(s) => format!("'{s}'"),
            Value::Bytes(b) => format!("b'{}'", String::from_utf8_lossy(b)),
            Value::Tuple(s) if s.items.borrow().len() == 1 => format!("({},)", join(&s.items.borrow())),
            Value::Tuple(s) => format!("({})", join(&s.items.borrow())),
            Value::List(s) => format!("[{}]", join(&s.items.borrow())),
            Value::Dict(m) => {
                let items = m.items.borrow();
                let items: Vec<String> = items.iter().map(|(k, v)| format!("{}: {}", repr(k), repr(v))).collect();
                format!("{{{}}}", items.join(", "))
            }
            other => format!("{other:?}"),
        }
    }

    fn run(pickle: &[u8]) -> Result<String> {
        unpickle(pickle, false, Path::new("test.bin"), "pickle", |v| Ok(repr(v))).map(|(s, _)| s)
    }

    #[test]
    fn a_global_outside_a_state_dict_is_refused_by_name() {
        // pickle.dumps of a reduce to os.system, protocol 2: c posix\nsystem\n (X...) R
        let evil = b"\x80\x02cposix\nsystem\nq\x00X\x05\x00\x00\x00touchq\x01\x85q\x02Rq\x03.";
        let err = run(evil).unwrap_err().to_string();
        assert!(err.contains("`posix.system`") && err.contains("refused"), "{err}");
        let err = run(b"\x80\x02cbuiltins\neval\n.").unwrap_err().to_string();
        assert!(err.contains("`builtins.eval`"), "{err}");
    }

    #[test]
    fn data_opcodes_build_what_python_builds() {
        // pickle.dumps({"a": [1, -2, 300, 70000, 2**40], "b": (1.5, True, None), "c": b"x"}, 2),
        // and Python's repr of it.
        let bytes = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01J\xfe\xff\xff\xffM,\x01Jp\x11\x01\x00\x8a\x06\x00\x00\x00\x00\x00\x01eX\x01\x00\x00\x00bq\x03G?\xf8\x00\x00\x00\x00\x00\x00\x88N\x87q\x04X\x01\x00\x00\x00cq\x05c_codecs\nencode\nq\x06X\x01\x00\x00\x00xq\x07X\x06\x00\x00\x00latin1q\x08\x86q\tRq\nu.";
        assert_eq!(run(bytes).unwrap(), "{'a': [1, -2, 300, 70000, 1099511627776], 'b': (1.5, True, None), 'c': b'x'}");
        // A key set again keeps its first place and takes the last value, as in Python:
        // pickle.dumps({"k": 2, "j": 3}) after {"k": 1} via SETITEMS of k, j, k.
        assert_eq!(
            run(b"}(X\x01\x00\x00\x00kK\x01X\x01\x00\x00\x00jK\x03X\x01\x00\x00\x00kK\x02u.").unwrap(),
            "{'k': 2, 'j': 3}"
        );
    }

    #[test]
    fn nesting_past_the_limit_is_refused_and_self_references_end() {
        // [[[...]]] nested a million deep, as pickle.dumps writes it (EMPTY_LIST each, then the
        // APPENDs): refused at the limit, in one line, before the pickle's end.
        let deep = [&b"\x80\x02"[..], &[b']'; 1_000_000], &[b'a'; 999_999], b"."].concat();
        let err = run(&deep).unwrap_err().to_string();
        assert!(err.contains(&format!("nested deeper than {MAX_NESTING} levels")) && !err.contains('\n'), "{err}");
        // MAX_NESTING levels are fine.
        let ok = [&[b']'; MAX_NESTING][..], &[b'a'; MAX_NESTING - 1], b"."].concat();
        assert!(run(&ok).unwrap().starts_with("[[[["));
        // A tuple nested by TUPLE1 alone (one byte a level, the stack one deep).
        let tuples = [&b"N"[..], &[b'\x85'; 200_000], b"."].concat();
        assert!(run(&tuples).unwrap_err().to_string().contains("nested deeper"));
        // A list appended to itself through the memo (l = []; l.append(l)): the depth it is given
        // grows by one an append, so appending it to itself forever is refused too.
        let selfish = [&b"]q\x00"[..], &b"h\x00a".repeat(5), b"."].concat();
        let holds_itself = |v: &Value| match v {
            Value::List(l) => Ok(l.items.borrow().iter().all(|i| matches!(i, Value::List(x) if Rc::ptr_eq(x, l)))),
            _ => Ok(false),
        };
        assert!(unpickle(&selfish, false, Path::new("t"), "pickle", holds_itself).unwrap().0);
        let endless = [&b"]q\x00"[..], &b"h\x00a".repeat(1000), b"."].concat();
        assert!(run(&endless).unwrap_err().to_string().contains("nested deeper"));
    }

    #[test]
    fn a_pickle_runs_at_most_its_opcodes() {
        let nones = [&vec![b'N'; MAX_PICKLE_OPS - 1][..], b"."].concat();
        assert_eq!(run(&nones).unwrap(), "None");
        let more = [&vec![b'N'; MAX_PICKLE_OPS][..], b"."].concat();
        let err = run(&more).unwrap_err().to_string();
        assert!(err.contains(&format!("more than {MAX_PICKLE_OPS} opcodes")), "{err}");
    }

    #[test]
    fn values_nested_past_the_limit_by_filling_held_containers_are_dropped_without_recursion() {
        // The depth tracked is a container's when it is put into another; a dict filled after that
        // goes deeper unseen: here d0 holds d1, then d1 gets d2, d2 gets d3... each level
        // `( j<n> X'k' } r<n+1> s t b`: a mark, the memoized dict, a key, a new memoized dict set
        // into it, the three packed into a tuple that BUILD takes as d0's state. 300,000 levels
        // would overflow any thread's stack if dropping recursed.
        let mut p = b"}r\x00\x00\x00\x00".to_vec();
        let levels = 300_000u32;
        for n in 0..levels {
            p.push(b'(');
            p.push(b'j');
            p.extend_from_slice(&n.to_le_bytes());
            p.extend_from_slice(b"X\x01\x00\x00\x00k}r");
            p.extend_from_slice(&(n + 1).to_le_bytes());
            p.extend_from_slice(b"stb");
        }
        p.push(b'.');
        let (depth, _) = unpickle(&p, false, Path::new("t"), "pickle", |v| {
            // The chain is really that deep (walked without recursion).
            let mut depth = 0;
            let Value::Dict(mut map) = v.clone() else { panic!("not a dict") };
            loop {
                let next = match map.items.borrow().first() {
                    Some((_, Value::Dict(next))) => next.clone(),
                    _ => break,
                };
                depth += 1;
                map = next;
            }
            Ok(depth)
        })
        .unwrap();
        assert_eq!(depth, levels);
    }

    fn view_of(t: &TensorRef) -> Result<Tensor> {
        let flat = Tensor::from_slice(&[0f32, 1., 2., 3., 4., 5.]);
        view(&flat, t, "w", Path::new("x.bin"), (1000, &mut 0))
    }

    #[test]
    fn a_view_past_its_storage_is_refused() {
        let storage = StorageRef { key: "0".into(), kind: Kind::Float, numel: 6 };
        let ok = TensorRef { storage: storage.clone(), offset: 2, size: vec![2, 2], stride: vec![2, 1] };
        let t = view_of(&ok).unwrap();
        assert_eq!(Vec::<f32>::try_from(t.flatten(0, -1)).unwrap(), vec![2., 3., 4., 5.]);
        let past = TensorRef { offset: 3, ..ok.clone() };
        let err = view_of(&past).unwrap_err().to_string();
        assert!(err.contains("reach element 6 of a storage of 6"), "{err}");
        // Sizes and strides whose products overflow an i64 (2^62 × 4 wrapped to -4): refused in one line
        // naming the tensor, not wrapped round into a small index for libtorch.
        for (size, stride, why) in [
            (vec![1 << 62], vec![4], "reach past any 64-bit element index"),
            (vec![1 << 62, 4], vec![4, 1], "more elements than a 64-bit count"),
            (vec![1 << 62, 1 << 62], vec![0, 0], "more elements than a 64-bit count"),
            // No element, yet contiguous strides of 2^64 (libtorch: "Stride calculation overflowed").
            (vec![0, 1 << 62, 4], vec![1, 1, 1], "more elements than a 64-bit count"),
            (vec![1 << 40], vec![0], "a view that repeats its storage's elements"),
            (vec![-1], vec![1], "do not describe a tensor"),
            (vec![2], vec![-1], "do not describe a tensor"),
        ] {
            let t = TensorRef { size, stride, ..ok.clone() };
            let err = view_of(&t).unwrap_err().to_string();
            assert!(err.contains("tensor `w`") && err.contains(why) && !err.contains('\n'), "{err}");
        }
        let err = view_of(&TensorRef { storage: StorageRef { kind: Kind::Half, ..storage }, ..ok }).unwrap_err();
        assert!(err.to_string().contains("views storage `0` as Half"), "{err}");
    }
}
