//! Where IndoBias-QA's answers come from and are kept. Generated answers are appended to
//! `<out>/answers.jsonl` a chunk at a time as they come (`{"id", "prompt", "answer", "tokens",
//! "stop"}` a line, fsynced), beside `<out>/answers_settings.json`: the generation settings, their
//! fingerprint, and what answered. Running the same command again skips the prompts already
//! answered; other settings, another backend, or a prompt whose text changed since its answer are
//! errors unless `--overwrite` starts over. An interrupted append leaves at most a partial last
//! line, which the next run drops. Answers generated elsewhere are read from a JSON Lines file of
//! `{"id", "answer"}` instead ([`read_answer_file`]).
use super::prompts::Prompt;
use super::{ANSWERS_FILE, SETTINGS_FILE};
use crate::generate::backend::{ChatBackend, Reply};
use indolm_torch::error::{Error, IoContext, Result};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Conversations sent to the backend at a time; their answers are appended together.
pub(crate) const CHUNK: usize = 128;

/// How answers are generated (what the fingerprint covers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationSettings {
    /// The prompts' language (`id` or `en`).
    pub language: String,
    /// New tokens at most an answer.
    pub max_new_tokens: usize,
    /// 0: greedy; above 0: sampled at this temperature.
    pub temperature: f64,
    /// Seed of sampling.
    pub seed: u64,
    /// The chat template variables, `KEY=VALUE` as given.
    pub template_kwargs: Vec<String>,
}

impl GenerationSettings {
    /// The SHA-256 of the settings as JSON, in hex.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let json = serde_json::to_string(self).expect("settings serialize to JSON");
        Sha256::digest(json.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The settings that differ from `other`'s, as `name: theirs → ours`.
    fn differences(&self, other: &GenerationSettings) -> Vec<String> {
        let (ours, theirs) = (serde_json::json!(self), serde_json::json!(other));
        let (Some(ours), Some(theirs)) = (ours.as_object(), theirs.as_object()) else { return Vec::new() };
        ours.iter()
            .filter(|(name, value)| theirs.get(*name) != Some(*value))
            .map(|(name, value)| format!("{name}: {} → {value}", theirs.get(name).cloned().unwrap_or_default()))
            .collect()
    }
}

/// `answers_settings.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SettingsFile {
    /// [`GenerationSettings::fingerprint`] of `settings`.
    fingerprint: String,
    /// The settings the answers were generated with.
    settings: GenerationSettings,
    /// What answered ([`ChatBackend::describe`]), once something has.
    backend: Option<String>,
}

/// One generated answer, a line of `answers.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StoredAnswer {
    /// The prompt's id.
    pub id: String,
    /// The prompt's text, as asked.
    pub prompt: String,
    /// The reply.
    pub answer: String,
    /// Its tokens, where the backend says.
    pub tokens: Option<usize>,
    /// Why it ended (`eos`, `length`, `stop_string`).
    pub stop: String,
}

/// The answers of an output folder, open for appending.
pub(crate) struct AnswerStore {
    /// `<out>/answers.jsonl`.
    path: PathBuf,
    /// `<out>/answers_settings.json`.
    settings_path: PathBuf,
    /// What the folder's settings file says.
    recorded: SettingsFile,
    /// The answers, by id.
    answers: HashMap<String, StoredAnswer>,
    /// A sentence when a partial last line was dropped.
    pub notes: Vec<String>,
}

impl AnswerStore {
    /// The answers of `out` generated with `settings`: none yet when the folder has none (or with
    /// `overwrite`, which removes them first); an error when they were generated with other
    /// settings, or when answers.jsonl has no settings file beside it.
    pub fn open(out: &Path, settings: GenerationSettings, overwrite: bool) -> Result<AnswerStore> {
        let (path, settings_path) = (out.join(ANSWERS_FILE), out.join(SETTINGS_FILE));
        if overwrite {
            for file in [&path, &settings_path] {
                if file.exists() {
                    std::fs::remove_file(file).with_path(file)?;
                }
            }
        }
        let recorded = if settings_path.exists() {
            let text = indolm_core::files::read_to_string(&settings_path)?;
            let recorded: SettingsFile = serde_json::from_str(&text).map_err(|e| Error::json(&settings_path, &e))?;
            if recorded.fingerprint != settings.fingerprint() {
                return Err(Error::invalid(
                    out,
                    format!(
                        "holds answers generated with other settings (fingerprint {} in {SETTINGS_FILE}, this \
                         run's {}; {}): pass --overwrite to start over, or choose another --out",
                        &recorded.fingerprint[..recorded.fingerprint.len().min(12)],
                        &settings.fingerprint()[..12],
                        settings.differences(&recorded.settings).join(", ")
                    ),
                ));
            }
            recorded
        } else if path.exists() {
            return Err(Error::invalid(
                &path,
                format!(
                    "has no {SETTINGS_FILE} beside it, so how its answers were generated is unknown: pass --overwrite \
                     to start over, or choose another --out"
                ),
            ));
        } else {
            let recorded = SettingsFile { fingerprint: settings.fingerprint(), settings, backend: None };
            indolm_core::files::write_json(&settings_path, &recorded)?;
            recorded
        };
        let mut store = AnswerStore { path, settings_path, recorded, answers: HashMap::new(), notes: Vec::new() };
        store.read()?;
        Ok(store)
    }

    /// Reads answers.jsonl, dropping a partial last line (an interrupted append).
    fn read(&mut self) -> Result<()> {
        if !self.path.exists() {
            return Ok(());
        }
        let text = indolm_core::files::read_to_string(&self.path)?;
        let complete = text.rfind('\n').map_or(0, |i| i + 1);
        if complete < text.len() {
            let file = std::fs::OpenOptions::new().write(true).open(&self.path).with_path(&self.path)?;
            file.set_len(complete as u64).with_path(&self.path)?;
            file.sync_all().with_path(&self.path)?;
            self.notes.push(format!(
                "{}: dropped a partial last line (an interrupted write); its prompt is asked again",
                self.path.display()
            ));
        }
        for (i, line) in text[..complete].lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let answer: StoredAnswer = serde_json::from_str(line)
                .map_err(|e| Error::invalid(&self.path, format!("line {}: not an answer record: {e}", i + 1)))?;
            if self.answers.contains_key(&answer.id) {
                return Err(Error::invalid(&self.path, format!("line {}: a second answer to `{}`", i + 1, answer.id)));
            }
            self.answers.insert(answer.id.clone(), answer);
        }
        Ok(())
    }

    /// What answered the answers already here, if any did.
    pub fn backend(&self) -> Option<&str> {
        self.recorded.backend.as_deref()
    }

    /// The prompts not answered yet; an error when an answer here was given to another prompt text
    /// under the same id (the inputs changed).
    pub(crate) fn pending<'a>(&self, prompts: &'a [Prompt]) -> Result<Vec<&'a Prompt>> {
        let mut pending = Vec::new();
        for prompt in prompts {
            match self.answers.get(&prompt.id) {
                None => pending.push(prompt),
                Some(stored) if stored.prompt == prompt.text => {}
                Some(_) => {
                    return Err(Error::invalid(
                        &self.path,
                        format!(
                            "the answer to `{}` was generated for another prompt text (the inputs changed since): \
                             pass --overwrite to start over, or choose another --out",
                            prompt.id
                        ),
                    ))
                }
            }
        }
        Ok(pending)
    }

    /// Records `describe` as what answers from now on; an error when the answers here came from
    /// something else.
    pub(crate) fn check_backend(&mut self, describe: &str) -> Result<()> {
        match &self.recorded.backend {
            Some(previous) if previous != describe => Err(Error::invalid(
                &self.path,
                format!(
                    "holds answers from {previous}, and this run's would come from {describe}: pass --overwrite to \
                     start over, or choose another --out"
                ),
            )),
            Some(_) => Ok(()),
            None => {
                self.recorded.backend = Some(describe.to_string());
                indolm_core::files::write_json(&self.settings_path, &self.recorded)
            }
        }
    }

    /// Appends the replies to `prompts` (one each, in order), fsynced.
    pub(crate) fn append(&mut self, prompts: &[&Prompt], replies: &[Reply]) -> Result<()> {
        if prompts.len() != replies.len() {
            return Err(Error::data(
                "chat backend",
                format!("{} replies to {} conversations", replies.len(), prompts.len()),
            ));
        }
        let mut text = String::new();
        let mut added = Vec::with_capacity(prompts.len());
        for (prompt, reply) in prompts.iter().zip(replies) {
            let answer = StoredAnswer {
                id: prompt.id.clone(),
                prompt: prompt.text.clone(),
                answer: reply.text.clone(),
                tokens: reply.tokens,
                stop: reply.stop.clone(),
            };
            text.push_str(&serde_json::to_string(&answer).expect("answers serialize to JSON"));
            text.push('\n');
            added.push(answer);
        }
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path).with_path(&self.path)?;
        file.write_all(text.as_bytes()).with_path(&self.path)?;
        file.sync_data().with_path(&self.path)?;
        for answer in added {
            self.answers.insert(answer.id.clone(), answer);
        }
        Ok(())
    }

    /// The answer to each of `prompts`, in order; an error naming the first prompt without one.
    pub(crate) fn answers_to(&self, prompts: &[Prompt]) -> Result<Vec<String>> {
        prompts
            .iter()
            .map(|p| {
                self.answers
                    .get(&p.id)
                    .map(|a| a.answer.clone())
                    .ok_or_else(|| Error::invalid(&self.path, format!("no answer to `{}` after generating", p.id)))
            })
            .collect()
    }
}

/// Asks `backend` the `pending` prompts, [`CHUNK`] at a time, appending each chunk's answers to
/// `store` as they come; `progress` is told how many more are answered.
pub(crate) fn generate_missing(
    backend: &mut dyn ChatBackend,
    pending: &[&Prompt],
    store: &mut AnswerStore,
    progress: &mut dyn FnMut(usize),
) -> Result<()> {
    for chunk in pending.chunks(CHUNK) {
        let conversations: Vec<_> = chunk.iter().map(|p| p.conversation()).collect();
        let replies = backend.chat(&conversations, progress)?;
        store.append(chunk, &replies)?;
    }
    Ok(())
}

/// A line of an answers file.
#[derive(Deserialize)]
struct AnswerLine {
    /// The prompt's id.
    id: String,
    /// The answer (null: empty).
    answer: Option<String>,
}

/// The answers of a JSON Lines file generated elsewhere (`{"id", "answer"}` a line, other fields
/// ignored, so an `answers.jsonl` of indolm's is one), for `prompts`, in order. An id no prompt of
/// `known` has, an id given twice, and a prompt of `prompts` without an answer are errors naming
/// the line or the id.
pub(crate) fn read_answer_file(path: &Path, known: &HashSet<&str>, prompts: &[Prompt]) -> Result<Vec<String>> {
    let text = indolm_core::files::read_to_string(path)?;
    let mut answers: HashMap<String, String> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed: AnswerLine = serde_json::from_str(line).map_err(|e| {
            Error::invalid(path, format!("line {}: expected {{\"id\": ..., \"answer\": ...}}: {e}", i + 1))
        })?;
        if !known.contains(parsed.id.as_str()) {
            return Err(Error::invalid(
                path,
                format!(
                    "line {}: no prompt has the id {} (ids are LANGUAGE|DEMOGRAPHY|GROUP|INDEX|STEREOTYPE|TASK, from \
                     the --data folder and --language)",
                    i + 1,
                    indolm_core::files::quoted(&parsed.id)
                ),
            ));
        }
        if answers.insert(parsed.id.clone(), parsed.answer.unwrap_or_default()).is_some() {
            return Err(Error::invalid(path, format!("line {}: a second answer to `{}`", i + 1, parsed.id)));
        }
    }
    let missing: Vec<&str> = prompts.iter().filter(|p| !answers.contains_key(&p.id)).map(|p| p.id.as_str()).collect();
    if let Some(first) = missing.first() {
        return Err(Error::invalid(
            path,
            format!(
                "no answer to {} of the {} prompts (the first: `{first}`): answers generated elsewhere cover every \
                 prompt (--limit N scores the first N)",
                missing.len(),
                prompts.len()
            ),
        ));
    }
    Ok(prompts.iter().map(|p| answers.remove(&p.id).unwrap_or_default()).collect())
}
