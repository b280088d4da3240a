//! The text a completion adds after its prompt. A tokenizer's decoder treats the start of a text
//! apart (SentencePiece's drops the space before the first word), so a completion decoded alone
//! can lose the space that joins it to its prompt. It is decoded after the prompt's last tokens
//! instead, and their own text taken off the front: transformers'
//! `decode(prompt + new)[len(decode(prompt)):]`, with the prompt's last few tokens for the whole
//! prompt, so that a step costs the same whatever the prompt's length.
use indolm_torch::error::Result;
use indolm_torch::model::decoder::CausalTokenizer;

/// Prompt tokens decoded before a completion.
const CONTEXT: usize = 8;

/// The texts of one prompt's completion as it grows.
pub struct CompletionText<'a> {
    tokenizer: &'a CausalTokenizer,
    /// The prompt's last tokens.
    context: Vec<i64>,
    /// Their text.
    context_text: String,
}

impl<'a> CompletionText<'a> {
    /// For completions of `prompt` (token ids).
    pub fn new(tokenizer: &'a CausalTokenizer, prompt: &[i64]) -> Result<Self> {
        let context = prompt[prompt.len().saturating_sub(CONTEXT)..].to_vec();
        let context_text = tokenizer.decode(&context)?;
        Ok(CompletionText { tokenizer, context, context_text })
    }

    /// The text of the new tokens `ids` after the prompt's (special tokens skipped); decoded
    /// alone when the prompt's text is not a prefix of the two decoded together.
    pub fn text(&self, ids: &[i64]) -> Result<String> {
        let mut all = self.context.clone();
        all.extend_from_slice(ids);
        let whole = self.tokenizer.decode(&all)?;
        match whole.strip_prefix(self.context_text.as_str()) {
            Some(rest) => Ok(rest.to_string()),
            None => self.tokenizer.decode(ids),
        }
    }
}
