//! What loading a model directory did that its user should know, as values: a component the
//! checkpoint lacks (initialised randomly), tensors left unused, a substitution. Callers decide
//! on the variant (is the model untrained? is the classifier missing?) and show its text.
use std::fmt;

/// A part of a model a checkpoint may lack; loading then starts it from random initialisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    /// `cls.predictions.*`, the masked-LM head.
    MlmHead,
    /// `bert.pooler.*`, the pooled `[CLS]` vector of sequence classification.
    Pooler,
    /// `classifier.*`, a sequence classifier's output layer.
    Classifier,
    /// `ext_layer.*`, BertExt's inter-sentence transformer and sentence scorer.
    SentenceScorer,
    /// `decoder.*`, BertAbs's transformer decoder.
    Decoder,
    /// `generator.*`, BertAbs's output bias (it comes with the decoder, so it has no note).
    Generator,
}

impl Component {
    /// The prefix of its tensors' names.
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            Component::MlmHead => "cls.predictions.",
            Component::Pooler => "bert.pooler.",
            Component::Classifier => "classifier.",
            Component::SentenceScorer => "ext_layer.",
            Component::Decoder => "decoder.",
            Component::Generator => "generator.",
        }
    }

    /// What its absence means, or `None` when it needs no note of its own.
    fn when_missing(self) -> Option<&'static str> {
        Some(match self {
            Component::MlmHead => "no MLM head in the checkpoint: initialised randomly, so masked-token predictions are meaningless until it is trained (an encoder-only or sentence-embedding checkpoint?)",
            Component::Pooler => "no pooler in the checkpoint (an MLM-only model): initialised randomly and trained with the classifier",
            Component::Classifier => "no classifier in the checkpoint: initialised randomly (to be fine-tuned)",
            Component::SentenceScorer => "no extractive layers in the checkpoint: initialised randomly (to be trained)",
            Component::Decoder => "no decoder in the checkpoint: initialised (word embeddings copied from the encoder's), to be trained",
            Component::Generator => return None,
        })
    }
}

/// Something loading did that the user should know.
#[derive(Debug, Clone, PartialEq)]
pub enum LoadNote {
    /// `component` was not in the checkpoint and starts from random initialisation; `tensors`
    /// are its missing tensors, sorted.
    Initialised {
        /// The missing part.
        component: Component,
        /// Its tensors' names.
        tensors: Vec<String>,
    },
    /// Tensors of parts this model does not have (HF's next-sentence head, another head).
    IgnoredUnused {
        /// Their names.
        tensors: Vec<String>,
    },
    /// Tensors indolm does not recognise.
    IgnoredUnexpected {
        /// Their names.
        tensors: Vec<String>,
    },
    /// A BertExt directory starting a BertAbs: its encoder is used, its sentence scorer is not.
    SentenceScorerUnused {
        /// How many `ext_layer` tensors were left out.
        tensors: usize,
    },
    /// The tokenizer has fewer tokens than the embedding has rows: legal (padded embeddings),
    /// but also what a cut-short `vocab.txt` looks like.
    SmallVocabulary {
        /// The tokenizer file.
        tokenizer: std::path::PathBuf,
        /// Its tokens.
        tokens: i64,
        /// The embedding's rows (`vocab_size`).
        rows: i64,
    },
    /// The vocabulary lacks PreSumm's `[unused0..2]`: summaries are marked with `[CLS]`, `[SEP]`
    /// and `[MASK]` instead.
    SubstituteTargetMarkers,
}

impl LoadNote {
    /// The note for the missing tensors of `component`, if it has one.
    pub(crate) fn initialised(component: Component, tensors: Vec<String>) -> Option<Self> {
        component.when_missing().map(|_| LoadNote::Initialised { component, tensors })
    }

    /// Whether part of the model was initialised randomly (the model is not fully trained).
    pub fn leaves_untrained(&self) -> bool {
        matches!(self, LoadNote::Initialised { .. })
    }

    /// Whether `component` was initialised randomly.
    pub fn initialises(&self, component: Component) -> bool {
        matches!(self, LoadNote::Initialised { component: c, .. } if *c == component)
    }
}

impl fmt::Display for LoadNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadNote::Initialised { component, tensors } => {
                let shown = tensors[..tensors.len().min(4)].join(", ");
                let more = if tensors.len() > 4 { format!(", … {} tensors in all", tensors.len()) } else { String::new() };
                write!(f, "{} [{shown}{more}]", component.when_missing().unwrap_or_default())
            }
            LoadNote::IgnoredUnused { tensors } => write!(
                f,
                "ignored {} tensor(s) this model does not use, e.g. {}",
                tensors.len(),
                tensors[..tensors.len().min(4)].join(", ")
            ),
            LoadNote::IgnoredUnexpected { tensors } => write!(
                f,
                "ignored {} unexpected tensor(s), e.g. {}",
                tensors.len(),
                tensors[..tensors.len().min(6)].join(", ")
            ),
            LoadNote::SentenceScorerUnused { tensors } => {
                write!(f, "a BertExt: its encoder is used, its {tensors} ext_layer tensors (sentence scorer) are not")
            }
            LoadNote::SmallVocabulary { tokenizer, tokens, rows } => write!(
                f,
                "{} has {tokens} tokens but the model's embedding has {rows} rows (vocab_size): rows {tokens}..{rows} are never used; if the file was cut short, copy it again",
                tokenizer.display()
            ),
            LoadNote::SubstituteTargetMarkers => f.write_str(
                "the vocabulary has no [unused0]/[unused1]/[unused2]: summaries are marked with [CLS] (begin), [SEP] (end) and [MASK] (between sentences)",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialised_notes_name_at_most_four_tensors() {
        let names = |n: usize| (0..n).map(|i| format!("decoder.t{i}")).collect::<Vec<_>>();
        let few = LoadNote::initialised(Component::Decoder, names(2)).unwrap();
        assert!(few.to_string().ends_with("[decoder.t0, decoder.t1]"), "{few}");
        let many = LoadNote::initialised(Component::Decoder, names(9)).unwrap().to_string();
        assert!(many.ends_with("[decoder.t0, decoder.t1, decoder.t2, decoder.t3, … 9 tensors in all]"), "{many}");
        assert!(LoadNote::initialised(Component::Generator, names(1)).is_none());
    }

    #[test]
    fn only_initialised_components_leave_a_model_untrained() {
        let pooler = LoadNote::initialised(Component::Pooler, vec!["bert.pooler.dense.weight".into()]).unwrap();
        assert!(pooler.leaves_untrained() && pooler.initialises(Component::Pooler));
        assert!(!pooler.initialises(Component::Classifier));
        assert!(!LoadNote::SubstituteTargetMarkers.leaves_untrained());
        assert!(!LoadNote::IgnoredUnused { tensors: vec!["cls.seq_relationship.bias".into()] }.leaves_untrained());
    }
}
