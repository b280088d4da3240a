//! Where chat replies come from, behind one interface ([`ChatBackend`]): a causal LM loaded here
//! ([`local::LocalChat`]: its chat template, then [`crate::generate::generate`]) or a model served
//! elsewhere behind an OpenAI-compatible API ([`openai::OpenAiChat`]: vLLM, llama.cpp's server,
//! OpenAI; retried, rate-limited, cached). Callers that need answers to conversations (the
//! IndoBias-QA track) take any backend, so a local checkpoint and a served model are measured the
//! same way.
pub mod local;
pub mod openai;

use super::chat::{Messages, TemplateKwargs};
use indolm_torch::error::Result;

/// How replies are generated, whatever answers.
#[derive(Debug, Clone)]
pub struct ChatSettings {
    /// New tokens at most a reply.
    pub max_new_tokens: usize,
    /// 0: greedy (the paper's setting); above 0: sampled at this temperature.
    pub temperature: f64,
    /// Seed of sampling (each request its own stream of it).
    pub seed: u64,
    /// When sampling: the probability mass of the most likely tokens kept (nucleus sampling);
    /// `None`: all of them here, the server's default for a served model (not sent).
    pub top_p: Option<f64>,
    /// Texts that end a reply (cut before the first one found).
    pub stop_strings: Vec<String>,
    /// Variables for a local chat template (`enable_thinking`, ...).
    pub template_kwargs: TemplateKwargs,
}

/// One reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The assistant's text.
    pub text: String,
    /// The tokens it took, where the backend says.
    pub tokens: Option<usize>,
    /// Why it ended: `eos`, `length` or `stop_string` (a server's `finish_reason` mapped to these:
    /// `stop` → `eos`, `length` → `length`).
    pub stop: String,
}

/// Something that answers conversations.
pub trait ChatBackend {
    /// What answers, for logs and reports ("local model DIR", "MODEL at URL").
    fn describe(&self) -> String;
    /// The replies to `conversations`, in their order; `progress` is told how many more are done
    /// each time some finish.
    fn chat(&mut self, conversations: &[Messages], progress: &mut dyn FnMut(usize)) -> Result<Vec<Reply>>;
}
