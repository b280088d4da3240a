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
use crate::error::{Error, IoContext, Result};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;
use std::rc::Rc;
use tch::{Kind, Tensor};

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
    key: String,
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

/// A value of the pickle machine. Lists and dicts are shared (a memoized container filled later
/// is the same object wherever it is referred to), as in Python.
#[derive(Debug, Clone)]
enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// Read so that a pickle holding one parses; no state dict uses its value.
    #[allow(dead_code)]
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Tuple(Vec<Value>),
    List(Rc<RefCell<Vec<Value>>>),
    Dict(Rc<RefCell<Vec<(Value, Value)>>>),
    /// An accepted global, by `module.name`.
    Global(String),
    Storage(StorageRef),
    Tensor(TensorRef),
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
}

/// Reads a `torch.save`d state dict (zip or legacy layout) into named tensors on the CPU, in
/// their saved dtypes.
pub fn read_file(path: &Path) -> Result<BTreeMap<String, Tensor>> {
    let mut file = std::fs::File::open(path).with_path(path)?;
    let mut magic = [0u8; 4];
    let is_zip = file.read(&mut magic).with_path(path)? == 4 && magic == *b"PK\x03\x04";
    drop(file);
    if is_zip {
        read_zip(path)
    } else {
        read_legacy(path)
    }
}

/// The zip layout: `<archive>/data.pkl`, and each storage in `<archive>/data/<key>`.
fn read_zip(path: &Path) -> Result<BTreeMap<String, Tensor>> {
    let file = std::fs::File::open(path).with_path(path)?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file))
        .map_err(|e| Error::invalid(path, format!("not a readable zip archive ({e})")))?;
    let pickle_name = zip
        .file_names()
        .find(|n| n.ends_with("/data.pkl") && n.matches('/').count() == 1)
        .map(str::to_string)
        .ok_or_else(|| Error::invalid(path, "a zip archive without <archive>/data.pkl: not a torch.save file"))?;
    let prefix = pickle_name.trim_end_matches("data.pkl").to_string();
    if let Ok(mut order) = zip.by_name(&format!("{prefix}byteorder")) {
        let mut text = String::new();
        let _ = order.read_to_string(&mut text);
        if text.trim() != "little" {
            return Err(Error::unsupported("reading pytorch_model.bin", format!("byte order {:?}", text.trim())));
        }
    }
    let pickle = read_entry(&mut zip, &pickle_name, path)?;
    let root = Unpickler::new(&pickle, path).load()?;
    let tensors = state_dict(root, path)?;
    let mut storages: HashMap<String, Tensor> = HashMap::new();
    let mut out = BTreeMap::new();
    for (name, t) in tensors {
        if !storages.contains_key(&t.storage.key) {
            let key = &t.storage.key;
            crate::files::plain_file_name(key)
                .map_err(|why| Error::invalid(path, format!("tensor `{name}`: storage key {key:?} {why}")))?;
            let bytes = read_entry(&mut zip, &format!("{prefix}data/{key}"), path)?;
            storages.insert(key.clone(), storage_tensor(&bytes, &t.storage, path)?);
        }
        out.insert(name.clone(), view(&storages[&t.storage.key], &t, &name, path)?);
    }
    Ok(out)
}

/// One stored (uncompressed, as torch writes them) entry of the archive.
fn read_entry(
    zip: &mut zip::ZipArchive<std::io::BufReader<std::fs::File>>,
    name: &str,
    path: &Path,
) -> Result<Vec<u8>> {
    let mut entry =
        zip.by_name(name).map_err(|e| Error::invalid(path, format!("the archive has no readable `{name}` ({e})")))?;
    let mut bytes = Vec::with_capacity(entry.size() as usize);
    entry.read_to_end(&mut bytes).map_err(|e| Error::invalid(path, format!("reading `{name}`: {e}")))?;
    Ok(bytes)
}

/// The legacy layout: pickles of the magic number, the format's version and the system's sizes,
/// the state dict, the sorted storage keys; then for each key its element count (int64) and
/// bytes.
fn read_legacy(path: &Path) -> Result<BTreeMap<String, Tensor>> {
    let data = std::fs::read(path).with_path(path)?;
    let mut at = 0usize;
    let not_torch = || {
        Error::invalid(path, "neither a zip archive nor torch's legacy format (no magic number): not a torch.save file")
    };
    let mut next = |what: &str| -> Result<Value> {
        let mut u = Unpickler::new(&data[at..], path);
        let v = u.load().map_err(|e| Error::invalid(path, format!("{what}: {e}")))?;
        at += u.pos;
        Ok(v)
    };
    let magic = next("the magic number").map_err(|_| not_torch())?;
    // torch's MAGIC_NUMBER, 0x1950a86a20f9469cfc6c: an 80-bit long, kept as its bytes.
    let is_magic = matches!(&magic, Value::Bytes(b) if b[..] == 0x1950a86a20f9469cfc6c_u128.to_le_bytes()[..10]);
    if !is_magic {
        return Err(not_torch());
    }
    match next("the format version")? {
        Value::Int(1001) => {}
        other => {
            return Err(Error::unsupported("reading pytorch_model.bin", format!("legacy format version {other:?}")))
        }
    }
    let sys_info = next("the system information")?;
    if let Value::Dict(items) = &sys_info {
        for (k, v) in items.borrow().iter() {
            if matches!(k, Value::Str(s) if s == "little_endian") && matches!(v, Value::Bool(false)) {
                return Err(Error::unsupported("reading pytorch_model.bin", "a big-endian file"));
            }
        }
    }
    let tensors = state_dict(next("the state dict")?, path)?;
    let keys = match next("the storage keys")? {
        Value::List(items) => items
            .borrow()
            .iter()
            .map(|k| match k {
                Value::Str(s) => Ok(s.clone()),
                other => Err(Error::invalid(path, format!("a storage key is {}", other.describe()))),
            })
            .collect::<Result<Vec<String>>>()?,
        other => return Err(Error::invalid(path, format!("the storage keys are {}", other.describe()))),
    };
    let kinds: HashMap<&str, &StorageRef> = tensors.values().map(|t| (t.storage.key.as_str(), &t.storage)).collect();
    let mut storages: HashMap<String, Tensor> = HashMap::new();
    for key in keys {
        let header = data.get(at..at + 8).ok_or_else(|| Error::invalid(path, "cut short before a storage"))?;
        let numel = i64::from_le_bytes(header.try_into().expect("8 bytes"));
        at += 8;
        let Some(storage) = kinds.get(key.as_str()) else {
            return Err(Error::invalid(path, format!("storage `{key}` is stored but no tensor uses it")));
        };
        let len = usize::try_from(numel).ok().and_then(|n| n.checked_mul(storage.kind.elt_size_in_bytes()));
        let bytes = len
            .and_then(|len| data.get(at..at.checked_add(len)?))
            .ok_or_else(|| Error::invalid(path, format!("storage `{key}`: cut short ({numel} elements)")))?;
        at += bytes.len();
        let storage = StorageRef { numel, ..(*storage).clone() };
        storages.insert(key, storage_tensor(bytes, &storage, path)?);
    }
    let mut out = BTreeMap::new();
    for (name, t) in tensors {
        let storage = storages
            .get(&t.storage.key)
            .ok_or_else(|| Error::invalid(path, format!("tensor `{name}`: storage `{}` is missing", t.storage.key)))?;
        out.insert(name.clone(), view(storage, &t, &name, path)?);
    }
    Ok(out)
}

/// The top-level object as a state dict: names to tensors.
fn state_dict(root: Value, path: &Path) -> Result<BTreeMap<String, TensorRef>> {
    let Value::Dict(items) = root else {
        return Err(Error::invalid(path, format!("holds {}, not a state dict", root.describe())));
    };
    let mut out = BTreeMap::new();
    for (k, v) in items.borrow().iter() {
        let Value::Str(name) = k else {
            return Err(Error::invalid(path, format!("a state dict key is {}", k.describe())));
        };
        match v {
            Value::Tensor(t) => {
                out.insert(name.clone(), t.clone());
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
    let expected = storage.numel as usize * storage.kind.elt_size_in_bytes();
    if bytes.len() != expected {
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
/// checked.
fn view(storage: &Tensor, t: &TensorRef, name: &str, path: &Path) -> Result<Tensor> {
    let bad = |why: String| Error::invalid(path, format!("tensor `{name}`: {why}"));
    if t.size.len() != t.stride.len() || t.size.iter().any(|&s| s < 0) || t.stride.iter().any(|&s| s < 0) {
        return Err(bad(format!("sizes {:?} and strides {:?} do not describe a tensor", t.size, t.stride)));
    }
    if t.offset < 0 {
        return Err(bad(format!("storage offset {}", t.offset)));
    }
    if !t.size.contains(&0) {
        let last = t.size.iter().zip(&t.stride).map(|(s, st)| (s - 1) * st).sum::<i64>() + t.offset;
        if last >= t.storage.numel {
            return Err(bad(format!(
                "sizes {:?}, strides {:?} and offset {} reach element {last} of a storage of {}",
                t.size, t.stride, t.offset, t.storage.numel
            )));
        }
    }
    storage
        .f_as_strided(&t.size, &t.stride, Some(t.offset))
        .and_then(|v| v.f_contiguous())
        .map_err(|e| Error::torch(format!("tensor `{name}`"), e))
}

/// The pickle machine over one pickle's bytes.
struct Unpickler<'a> {
    data: &'a [u8],
    pos: usize,
    path: &'a Path,
    stack: Vec<Value>,
    memo: HashMap<u64, Value>,
}

impl<'a> Unpickler<'a> {
    fn new(data: &'a [u8], path: &'a Path) -> Self {
        Unpickler { data, pos: 0, path, stack: Vec::new(), memo: HashMap::new() }
    }

    fn error(&self, why: impl std::fmt::Display) -> Error {
        Error::invalid(self.path, format!("pickle byte {}: {why}", self.pos))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| self.error("cut short"))?;
        let bytes = &self.data[self.pos..end];
        self.pos = end;
        Ok(bytes)
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
        Ok(Value::Str(text.to_string()))
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
            Ok(Value::Global(full))
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
        match self.top()? {
            Value::Dict(dict) => {
                let mut dict = dict.borrow_mut();
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    match dict.iter_mut().find(|(existing, _)| same_key(existing, &k)) {
                        Some(slot) => slot.1 = v,
                        None => dict.push((k, v)),
                    }
                }
                Ok(())
            }
            other => {
                let what = other.describe();
                Err(self.error(format!("setting items of {what}")))
            }
        }
    }

    fn append(&mut self, items: Vec<Value>) -> Result<()> {
        match self.top()? {
            Value::List(list) => {
                list.borrow_mut().extend(items);
                Ok(())
            }
            other => {
                let what = other.describe();
                Err(self.error(format!("appending to {what}")))
            }
        }
    }

    /// Runs the pickle to its `STOP`; the value it built.
    fn load(&mut self) -> Result<Value> {
        loop {
            let op = self.u8()?;
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
                    self.stack.push(Value::Str(line.to_string()));
                }
                // Python 2 strings, in old legacy files: text when they are UTF-8.
                b'T' | b'U' => {
                    let n = if op == b'T' { self.u32()? as usize } else { self.u8()? as usize };
                    let bytes = self.take(n)?;
                    self.stack.push(match std::str::from_utf8(bytes) {
                        Ok(s) => Value::Str(s.to_string()),
                        Err(_) => Value::Bytes(bytes.to_vec()),
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
                    self.stack.push(Value::Str(inner.to_string()));
                }
                b'B' | b'C' | b'\x8e' => {
                    let n = match op {
                        b'B' => self.u32()? as usize,
                        b'C' => self.u8()? as usize,
                        _ => self.u64()? as usize,
                    };
                    let bytes = self.take(n)?.to_vec();
                    self.stack.push(Value::Bytes(bytes));
                }
                b')' => self.stack.push(Value::Tuple(Vec::new())),
                b't' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Value::Tuple(items));
                }
                b'\x85' | b'\x86' | b'\x87' => {
                    let n = (op - b'\x84') as usize;
                    if self.stack.len() < n {
                        return Err(self.error("a tuple of more items than the stack holds"));
                    }
                    let items = self.stack.split_off(self.stack.len() - n);
                    self.stack.push(Value::Tuple(items));
                }
                b']' => self.stack.push(Value::List(Rc::new(RefCell::new(Vec::new())))),
                b'l' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Value::List(Rc::new(RefCell::new(items))));
                }
                b'}' => self.stack.push(Value::Dict(Rc::new(RefCell::new(Vec::new())))),
                b'd' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Value::Dict(Rc::new(RefCell::new(Vec::new()))));
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
        match items.as_slice() {
            [Value::Str(tag), Value::Global(kind), key, _location, Value::Int(numel), ..] if tag == "storage" => {
                let kind = storage_kind(kind).ok_or_else(|| self.error(format!("storage type `{kind}`")))?;
                let key = match key {
                    Value::Str(k) => k.clone(),
                    Value::Int(k) => k.to_string(),
                    other => return Err(self.error(format!("a storage key that is {}", other.describe()))),
                };
                if *numel < 0 {
                    return Err(self.error(format!("storage `{key}` of {numel} elements")));
                }
                Ok(Value::Storage(StorageRef { key, kind, numel: *numel }))
            }
            _ => Err(self.error("a persistent id that is not one of torch's storages")),
        }
    }

    /// A call of an accepted callable, interpreted here.
    fn reduce(&self, callable: Value, args: Value) -> Result<Value> {
        let Value::Global(name) = callable else {
            return Err(self.error(format!("calling {}", callable.describe())));
        };
        let Value::Tuple(args) = args else { return Err(self.error(format!("`{name}` called without a tuple"))) };
        let ints = |v: &Value| -> Result<Vec<i64>> {
            match v {
                Value::Tuple(items) => items
                    .iter()
                    .map(|i| match i {
                        Value::Int(n) => Ok(*n),
                        other => Err(self.error(format!("a size or stride that is {}", other.describe()))),
                    })
                    .collect(),
                other => Err(self.error(format!("sizes or strides that are {}", other.describe()))),
            }
        };
        match (name.as_str(), args.as_slice()) {
            ("collections.OrderedDict", []) => Ok(Value::Dict(Rc::new(RefCell::new(Vec::new())))),
            (
                "torch._utils._rebuild_tensor_v2" | "torch._utils._rebuild_tensor",
                [Value::Storage(storage), Value::Int(offset), size, stride, ..],
            ) => Ok(Value::Tensor(TensorRef {
                storage: storage.clone(),
                offset: *offset,
                size: ints(size)?,
                stride: ints(stride)?,
            })),
            (
                "torch._utils._rebuild_parameter" | "torch._utils._rebuild_parameter_with_state",
                [t @ Value::Tensor(_), ..],
            ) => Ok(t.clone()),
            ("_codecs.encode", [Value::Str(text), Value::Str(encoding)]) if encoding == "latin1" => {
                Ok(Value::Bytes(text.chars().map(|c| c as u32 as u8).collect()))
            }
            _ => Err(self.error(format!("`{name}` called with arguments a state dict does not use"))),
        }
    }
}

/// Whether two dict keys are the same key (strings and ints, as Python compares them).
fn same_key(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        _ => false,
    }
}

/// A little-endian two's-complement integer (LONG1/LONG4), if it fits 64 bits.
fn long(bytes: &[u8]) -> Option<Value> {
    if bytes.is_empty() {
        return Some(Value::Int(0));
    }
    if bytes.len() > 8 {
        // Torch's legacy magic number is 80 bits: kept as its bytes.
        return Some(Value::Bytes(bytes.to_vec()));
    }
    let negative = bytes[bytes.len() - 1] & 0x80 != 0;
    let mut buf = if negative { [0xffu8; 8] } else { [0u8; 8] };
    buf[..bytes.len()].copy_from_slice(bytes);
    Some(Value::Int(i64::from_le_bytes(buf)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pickle: &[u8]) -> Result<Value> {
        Unpickler::new(pickle, Path::new("test.bin")).load()
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
        // pickle.dumps({"a": [1, -2, 300, 70000, 2**40], "b": (1.5, True, None), "c": b"x"}, 2)
        let bytes = b"\x80\x02}q\x00(X\x01\x00\x00\x00aq\x01]q\x02(K\x01J\xfe\xff\xff\xffM,\x01Jp\x11\x01\x00\x8a\x06\x00\x00\x00\x00\x00\x01eX\x01\x00\x00\x00bq\x03G?\xf8\x00\x00\x00\x00\x00\x00\x88N\x87q\x04X\x01\x00\x00\x00cq\x05c_codecs\nencode\nq\x06X\x01\x00\x00\x00xq\x07X\x06\x00\x00\x00latin1q\x08\x86q\tRq\nu.";
        let Value::Dict(d) = run(bytes).unwrap() else { panic!("not a dict") };
        let d = d.borrow();
        assert_eq!(d.len(), 3);
        let Value::List(a) = &d[0].1 else { panic!() };
        let a: Vec<i64> = a.borrow().iter().map(|v| if let Value::Int(n) = v { *n } else { panic!() }).collect();
        assert_eq!(a, vec![1, -2, 300, 70000, 1 << 40]);
        assert!(
            matches!(&d[1].1, Value::Tuple(t) if matches!(t[..], [Value::Float(f), Value::Bool(true), Value::None] if f == 1.5))
        );
        assert!(matches!(&d[2].1, Value::Bytes(b) if b == b"x"));
    }

    #[test]
    fn a_view_past_its_storage_is_refused() {
        let storage = StorageRef { key: "0".into(), kind: Kind::Float, numel: 6 };
        let flat = Tensor::from_slice(&[0f32, 1., 2., 3., 4., 5.]);
        let ok = TensorRef { storage: storage.clone(), offset: 2, size: vec![2, 2], stride: vec![2, 1] };
        let t = view(&flat, &ok, "w", Path::new("x.bin")).unwrap();
        assert_eq!(Vec::<f32>::try_from(t.flatten(0, -1)).unwrap(), vec![2., 3., 4., 5.]);
        let past = TensorRef { offset: 3, ..ok };
        let err = view(&flat, &past, "w", Path::new("x.bin")).unwrap_err().to_string();
        assert!(err.contains("reach element 6 of a storage of 6"), "{err}");
    }
}
