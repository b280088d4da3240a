//! The one reader of JSON configuration files (a model's `config.json`, `generation_config.json`):
//! a file's object deserialised into a serde-derived struct, every error naming the file and the
//! field (dotted for nested ones, `rope_scaling.factor`) with what was expected and what was found,
//! as [`Error::field`] prints it. The field types here ([`PositiveInt`], [`TokenIds`], [`Flag`], ...)
//! say in their messages what they accept; rules serde cannot express (a minimum that depends on
//! another field, a choice between two layouts) stay small explicit checks in each reader.
//!
//! It imports only `error` and `files`, and nothing of libtorch.
use crate::error::{Error, IoContext, Result};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::path::Path;

/// The most bytes a JSON config file is read to: model and generation configs are a few KB, and
/// a file from outside is refused before it is read whole (serde_json bounds its nesting at 128).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The JSON in `path`, which must parse (its line and column named otherwise) and hold at most
/// [`MAX_CONFIG_BYTES`].
pub(crate) fn read_value(path: &Path) -> Result<Value> {
    let size = std::fs::metadata(path).with_path(path)?.len();
    if size > MAX_CONFIG_BYTES {
        return Err(Error::invalid(
            path,
            format!("{size} bytes, more than the {MAX_CONFIG_BYTES} a JSON config file is read to"),
        ));
    }
    let text = crate::files::read_to_string(path)?;
    serde_json::from_str(&text).map_err(|e| Error::json(path, &e))
}

/// The JSON object in `path` (anything else is refused as not an object).
pub fn read_object(path: &Path) -> Result<Value> {
    let v = read_value(path)?;
    if !v.is_object() {
        return Err(Error::invalid(path, "expected a JSON object"));
    }
    Ok(v)
}

/// `path`'s object deserialised into `T`.
pub fn read<T: DeserializeOwned>(path: &Path) -> Result<T> {
    from_value(path, &read_object(path)?)
}

/// `value` (read from `path`) deserialised into `T`; an error names the field that failed.
pub fn from_value<T: DeserializeOwned>(path: &Path, value: &Value) -> Result<T> {
    from_value_at(path, "", value)
}

/// `value`, the field `at` of `path` (dotted; empty for the whole file), deserialised into `T`;
/// an error names the field under `at` that failed (`rope_parameters.full_attention.factor`).
pub fn from_value_at<T: DeserializeOwned>(path: &Path, at: &str, value: &Value) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let message = e.inner().to_string();
        // serde's own message for a required field: name the field itself, not its parent.
        let (inner, message) = match message.strip_prefix("missing field `").and_then(|m| m.strip_suffix('`')) {
            Some(missing) => (join(&inner, missing), "missing".to_string()),
            None => (inner, message),
        };
        match join(at, &inner) {
            field if field.is_empty() => Error::invalid(path, message),
            field => Error::field(path, field, message),
        }
    })
}

/// `parent.child` without empty parts (serde_path_to_error writes the root as `.`).
fn join(parent: &str, child: &str) -> String {
    let parts: Vec<&str> = [parent, child].into_iter().filter(|p| !p.is_empty() && *p != ".").collect();
    parts.join(".")
}

/// For a field of type `Option<Option<T>>` with `#[serde(default, deserialize_with =
/// "json_fields::present")]`: `None` when absent, `Some(None)` when `null`, `Some(Some(v))` when
/// set, for the configs where an explicit `null` means something else than a missing field.
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// The JSON value `d` holds, turned into `T` by `accept`, or the error "expected {expected}, found
/// {value}".
fn checked<'de, D: Deserializer<'de>, T>(
    d: D,
    expected: &str,
    accept: impl FnOnce(&Value) -> Option<T>,
) -> Result<T, D::Error> {
    let v = Value::deserialize(d)?;
    accept(&v).ok_or_else(|| D::Error::custom(format!("expected {expected}, found {v}")))
}

/// Declares a field type that holds what `accept` makes of a JSON value and refuses anything else
/// with "expected {expected}, found {value}".
macro_rules! field_type {
    ($(#[$doc:meta])* $name:ident($inner:ty), $expected:expr, $accept:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name(pub $inner);

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                checked(d, $expected, $accept).map($name)
            }
        }
    };
}

field_type!(
    /// An integer greater than zero (a size, a count of heads or layers).
    PositiveInt(i64),
    "a positive integer",
    |v| v.as_i64().filter(|&n| n > 0)
);

/// An integer of at least `MIN`.
#[derive(Debug, Clone, PartialEq)]
pub struct AtLeastInt<const MIN: i64>(pub i64);

impl<'de, const MIN: i64> Deserialize<'de> for AtLeastInt<MIN> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        checked(d, &format!("an integer of at least {MIN}"), |v| v.as_i64().filter(|&n| n >= MIN)).map(AtLeastInt)
    }
}

field_type!(
    /// A non-negative integer (a count of tokens).
    Count(usize),
    "a non-negative integer",
    |v| v.as_u64().map(|n| n as usize)
);

field_type!(
    /// A token id: a non-negative integer.
    TokenId(i64),
    "a token id",
    |v| v.as_i64().filter(|&n| n >= 0)
);

field_type!(
    /// Token ids: one, or a list of them.
    TokenIds(Vec<i64>),
    "a token id or a list of them",
    |v| match v {
        Value::Array(items) => items.iter().map(Value::as_i64).collect(),
        _ => v.as_i64().map(|id| vec![id]),
    }
);

field_type!(
    /// A number (an integer is one too).
    Number(f64),
    "a number",
    Value::as_f64
);

field_type!(
    /// A number of at least zero (an epsilon).
    NonNegativeNumber(f64),
    "a non-negative number",
    |v| v.as_f64().filter(|x| *x >= 0.0)
);

field_type!(
    /// `true` or `false`.
    Flag(bool),
    "true or false",
    Value::as_bool
);

field_type!(
    /// A string.
    Text(String),
    "a string",
    |v| v.as_str().map(String::from)
);

field_type!(
    /// Strings: one, or a list of them.
    Strings(Vec<String>),
    "a string or a list of strings",
    |v| match v {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(items) => items.iter().map(|x| x.as_str().map(String::from)).collect(),
        _ => None,
    }
);

// The scalar field types are copied like the values they hold.
impl Copy for PositiveInt {}
impl<const MIN: i64> Copy for AtLeastInt<MIN> {}
impl Copy for Count {}
impl Copy for TokenId {}
impl Copy for Number {}
impl Copy for NonNegativeNumber {}
impl Copy for Flag {}

/// A field read only when it has the expected type, ignored (`None`) otherwise: for the fields
/// transformers itself reads leniently (a token id given as a list is its first; a non-string
/// activation name is none).
#[derive(Debug, Clone, PartialEq)]
pub struct Lenient<T>(pub Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(Lenient(T::deserialize(v).ok()))
    }
}

/// A token id read leniently: an integer, or the first of a list of them; anything else is none.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FirstTokenId(pub Option<i64>);

impl<'de> Deserialize<'de> for FirstTokenId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(FirstTokenId(match &v {
            Value::Array(a) => a.first().and_then(Value::as_i64),
            v => v.as_i64(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_config_larger_than_the_bound_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(MAX_CONFIG_BYTES + 1).unwrap();
        let err = read_object(&path).unwrap_err().to_string();
        assert!(err.contains("config.json") && err.contains("more than the 16777216"), "{err}");
    }

    #[derive(Debug, Deserialize)]
    struct Scaling {
        factor: Option<Number>,
    }

    #[derive(Debug, Deserialize)]
    struct Config {
        hidden_size: Option<PositiveInt>,
        buckets: Option<AtLeastInt<4>>,
        eos_token_id: Option<TokenIds>,
        rope_scaling: Option<Scaling>,
        #[serde(default, deserialize_with = "present")]
        pad_token_id: Option<Option<TokenId>>,
        #[serde(default)]
        bos_token_id: FirstTokenId,
        #[serde(default)]
        act: Lenient<String>,
    }

    fn read(v: Value) -> Result<Config> {
        from_value(Path::new("config.json"), &v)
    }

    #[test]
    fn errors_name_the_file_the_field_and_expected_vs_found() {
        let err = read(json!({"hidden_size": 0})).unwrap_err().to_string();
        assert_eq!(err, "config.json: field `hidden_size`: expected a positive integer, found 0");
        let err = read(json!({"buckets": 3})).unwrap_err().to_string();
        assert_eq!(err, "config.json: field `buckets`: expected an integer of at least 4, found 3");
        let err = read(json!({"eos_token_id": [1, "x"]})).unwrap_err().to_string();
        assert_eq!(err, "config.json: field `eos_token_id`: expected a token id or a list of them, found [1,\"x\"]");
        let err = read(json!({"rope_scaling": {"factor": "big"}})).unwrap_err().to_string();
        assert_eq!(err, "config.json: field `rope_scaling.factor`: expected a number, found \"big\"");
        let err =
            from_value_at::<Scaling>(Path::new("c.json"), "rope_parameters.full_attention", &json!({"factor": []}))
                .unwrap_err()
                .to_string();
        assert_eq!(err, "c.json: field `rope_parameters.full_attention.factor`: expected a number, found []");
    }

    #[test]
    fn null_is_absent_unless_asked_and_lenient_fields_ignore_other_types() {
        let c = read(json!({"hidden_size": null, "eos_token_id": 2, "bos_token_id": [5, 6], "act": 3})).unwrap();
        assert_eq!((c.hidden_size, c.eos_token_id), (None, Some(TokenIds(vec![2]))));
        assert_eq!((c.pad_token_id, c.bos_token_id, c.act), (None, FirstTokenId(Some(5)), Lenient(None)));
        assert_eq!(read(json!({"pad_token_id": null})).unwrap().pad_token_id, Some(None));
        assert_eq!(read(json!({"pad_token_id": 1})).unwrap().pad_token_id, Some(Some(TokenId(1))));
        assert!(read(json!({"rope_scaling": null})).unwrap().rope_scaling.is_none());
        let c = read(json!({"buckets": 4, "rope_scaling": {"factor": 2}})).unwrap();
        assert_eq!((c.buckets, c.rope_scaling.and_then(|s| s.factor)), (Some(AtLeastInt(4)), Some(Number(2.0))));
    }

    #[test]
    fn files_that_are_not_objects_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::write(&path, "[1]").unwrap();
        assert!(read_object(&path).unwrap_err().to_string().ends_with("expected a JSON object"));
        std::fs::write(&path, "{\"hidden_size\": 2,}").unwrap();
        assert!(super::read::<Config>(&path).unwrap_err().to_string().contains("invalid JSON"));
    }
}
