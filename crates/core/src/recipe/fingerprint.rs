//! What a checkpoint records of its recipe, whatever the recipe's kind: the sections whose change
//! makes a resumed run a different run, as JSON values, compared key by key on resume.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a checkpoint records of its recipe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Fingerprint {
    /// Each section as a JSON value, compared key by key.
    Values(BTreeMap<String, serde_json::Value>),
    /// Pretraining checkpoints of earlier versions: each section's `Debug` text.
    Legacy(Vec<(String, String)>),
}

impl Fingerprint {
    /// The fingerprint of named sections, each serialized to JSON.
    pub fn of(sections: &[(&str, serde_json::Value)]) -> Fingerprint {
        Fingerprint::Values(sections.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    /// The keys (dotted) in which `new` differs from this recorded fingerprint, each with its
    /// old and new value; a legacy fingerprint cannot be compared key by key and gives `None`.
    pub fn differences_to(&self, new: &Fingerprint) -> Option<Vec<String>> {
        match (self, new) {
            (Fingerprint::Values(old), Fingerprint::Values(new)) => Some(differences(old, new)),
            _ => None,
        }
    }
}

/// The keys (dotted, e.g. `optimizer.lr`) in which `new` differs from `old`, each with both
/// values. The global batch cut otherwise (another world size needs another batch size or
/// accumulation) continues the same run: only the product of `optimizer.batch_size` and
/// `optimizer.grad_accumulation` is compared.
pub fn differences(
    old: &BTreeMap<String, serde_json::Value>,
    new: &BTreeMap<String, serde_json::Value>,
) -> Vec<String> {
    let (mut old_keys, mut new_keys) = (BTreeMap::new(), BTreeMap::new());
    for (section, v) in old {
        flatten(section, v, &mut old_keys);
    }
    for (section, v) in new {
        flatten(section, v, &mut new_keys);
    }
    for keys in [&mut old_keys, &mut new_keys] {
        let batch = keys.remove("optimizer.batch_size").and_then(|v| v.as_u64());
        let accumulation = keys.remove("optimizer.grad_accumulation").and_then(|v| v.as_u64());
        if let (Some(b), Some(a)) = (batch, accumulation) {
            keys.insert("optimizer.sequences_per_update".into(), serde_json::json!(b * a));
        }
    }
    let keys: std::collections::BTreeSet<&String> = old_keys.keys().chain(new_keys.keys()).collect();
    let shown = |v: Option<&serde_json::Value>| v.map_or("(absent)".to_string(), |v| v.to_string());
    keys.into_iter()
        .filter(|k| old_keys.get(*k) != new_keys.get(*k))
        .map(|k| format!("{k} ({} -> {})", shown(old_keys.get(k)), shown(new_keys.get(k))))
        .collect()
}

/// Every leaf of `value` under its dotted key (`data.sources[0].weight`).
fn flatten(prefix: &str, value: &serde_json::Value, out: &mut BTreeMap<String, serde_json::Value>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                flatten(&format!("{prefix}.{k}"), v, out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), v, out);
            }
        }
        leaf => {
            out.insert(prefix.to_string(), leaf.clone());
        }
    }
}
