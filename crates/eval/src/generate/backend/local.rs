//! A causal LM loaded here as a [`ChatBackend`]: each conversation rendered with the model
//! folder's chat template (as transformers' `apply_chat_template(..., add_generation_prompt=True)`),
//! tokenized without added special tokens, and generated in batches under the device's token
//! budget; the model's `generation_config.json` gives the EOS ids.
use super::{ChatBackend, ChatSettings, Reply};
use crate::generate::chat::{self, ChatTemplate, Messages, TemplateKwargs};
use crate::generate::{generate, GenerationDefaults, Sampling, Settings};
use indolm_torch::error::{Error, Result};
use indolm_torch::model::decoder::{load_causal_lm, CausalLm};
use std::path::{Path, PathBuf};
use tch::Device;

/// A local causal LM with its chat template.
pub struct LocalChat {
    /// The model folder given.
    dir: PathBuf,
    /// The model.
    lm: CausalLm,
    /// Its chat template.
    template: ChatTemplate,
    /// How to generate.
    settings: Settings,
    /// Template variables.
    kwargs: TemplateKwargs,
}

impl LocalChat {
    /// The model in `dir` (or a LoRA adapter folder) on `device`, generating as `settings` say; an
    /// error when the folder has no chat template or the settings cannot be used.
    pub fn open(dir: &Path, device: Device, settings: &ChatSettings) -> Result<Self> {
        let template = ChatTemplate::for_model(dir)?;
        let lm = load_causal_lm(dir, device)?;
        let base = lm.config.path.parent().unwrap_or(Path::new("."));
        let defaults = GenerationDefaults::read(&[dir, base], &lm.config.path)?;
        let sampling = (settings.temperature > 0.0).then_some(Sampling {
            temperature: settings.temperature,
            top_k: 0,
            top_p: settings.top_p.unwrap_or(1.0),
            seed: settings.seed,
        });
        let pad = defaults.pad.or(defaults.eos.first().copied()).filter(|p| (0..lm.config.vocab_size).contains(p));
        let generation = Settings {
            max_new_tokens: settings.max_new_tokens,
            sampling,
            eos: defaults.eos.clone(),
            stop_strings: settings.stop_strings.clone(),
            pad: pad.unwrap_or(0),
            token_budget: indolm_torch::data::batching::token_budget(lm.device),
            batch_size: usize::MAX,
        };
        generation.check(&lm)?;
        Ok(LocalChat {
            dir: dir.to_path_buf(),
            lm,
            template,
            settings: generation,
            kwargs: settings.template_kwargs.clone(),
        })
    }
}

impl ChatBackend for LocalChat {
    fn describe(&self) -> String {
        format!("local model {}", self.dir.display())
    }

    fn chat(&mut self, conversations: &[Messages], progress: &mut dyn FnMut(usize)) -> Result<Vec<Reply>> {
        let mut prompts = Vec::with_capacity(conversations.len());
        for (i, messages) in conversations.iter().enumerate() {
            let rendered = self.template.render(messages, &self.kwargs)?;
            let ids = chat::encode(&self.lm.tokenizer, &rendered)?;
            if ids.is_empty() {
                return Err(Error::data("chat", format!("conversation {} renders to no tokens", i + 1)));
            }
            prompts.push(ids);
        }
        let completions = generate(&self.lm, &prompts, &self.settings, progress)?;
        Ok(completions
            .into_iter()
            .map(|c| Reply { tokens: Some(c.tokens()), stop: c.stop.name().to_string(), text: c.text })
            .collect())
    }
}
