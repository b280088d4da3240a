//! When a completion ends, checked after each new token in this order: an EOS id (the model's
//! `eos_token_id`s, a list allowed; the token is kept as the completion's last and left out of its
//! text), a stop string in the completion's text (the text cut before the first one), or
//! `max_new_tokens` tokens.
use indolm_torch::error::Result;

/// Why a completion ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It generated an end-of-sequence id.
    Eos,
    /// It reached `max_new_tokens`.
    Length,
    /// Its text holds a stop string.
    StopString,
}

impl StopReason {
    /// Its name in completion records: `eos`, `length` or `stop_string`.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Eos => "eos",
            StopReason::Length => "length",
            StopReason::StopString => "stop_string",
        }
    }
}

/// A completion's end: why, and where its text is cut (the start of a stop string, in bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stop {
    /// Why.
    pub reason: StopReason,
    /// The length its text keeps (a stop string's start), if cut.
    pub cut: Option<usize>,
}

/// The rules that end a completion.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stopping<'a> {
    /// End-of-sequence ids.
    pub eos: &'a [i64],
    /// Texts that end a completion (empty ones ignored).
    pub stop_strings: &'a [String],
    /// New tokens at most.
    pub max_new_tokens: usize,
}

impl Stopping<'_> {
    /// Whether the completion whose new tokens so far are `ids` ends with its last one, and how;
    /// `text` gives its text, asked for only when there are stop strings and the last token is no
    /// EOS.
    pub(crate) fn after(&self, ids: &[i64], text: impl FnOnce() -> Result<String>) -> Result<Option<Stop>> {
        let Some(last) = ids.last() else { return Ok(None) };
        if self.eos.contains(last) {
            return Ok(Some(Stop { reason: StopReason::Eos, cut: None }));
        }
        if self.stop_strings.iter().any(|s| !s.is_empty()) {
            if let Some(at) = find_stop_string(&text()?, self.stop_strings) {
                return Ok(Some(Stop { reason: StopReason::StopString, cut: Some(at) }));
            }
        }
        if ids.len() >= self.max_new_tokens {
            return Ok(Some(Stop { reason: StopReason::Length, cut: None }));
        }
        Ok(None)
    }
}

/// Where the first of `stop_strings` in `text` starts (bytes): the earliest start of any of them,
/// empty ones ignored.
pub(crate) fn find_stop_string(text: &str, stop_strings: &[String]) -> Option<usize> {
    stop_strings.iter().filter(|s| !s.is_empty()).filter_map(|s| text.find(s.as_str())).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eos_comes_first_then_stop_strings_then_length() {
        let stops = vec!["##".to_string(), "b".to_string()];
        let rules = Stopping { eos: &[2, 9], stop_strings: &stops, max_new_tokens: 3 };
        let text = |t: &'static str| move || -> Result<String> { Ok(t.to_string()) };
        assert_eq!(rules.after(&[5, 9], text("a b")).unwrap().map(|s| s.reason), Some(StopReason::Eos));
        let stop = rules.after(&[5, 6], text("xx ## b")).unwrap().unwrap();
        assert_eq!((stop.reason, stop.cut), (StopReason::StopString, Some(3)));
        assert_eq!(rules.after(&[5, 6], text("xx")).unwrap(), None);
        assert_eq!(rules.after(&[5, 6, 7], text("xx")).unwrap().map(|s| s.reason), Some(StopReason::Length));
        assert_eq!(find_stop_string("abc", &[String::new()]), None);
        assert_eq!(StopReason::StopString.name(), "stop_string");
        assert_eq!(serde_json::to_string(&StopReason::StopString).unwrap(), "\"stop_string\"");
    }
}
