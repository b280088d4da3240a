//! IndoBias-QA's prompts: every group of a demography × every stereotype pair of the indices that
//! apply to the demography × every task with a template in the chosen language, each prompt the
//! task's template filled with the group's name and the pair's two labels in that language, asked
//! as a conversation of one user message. Ids are stable (made of the names, not of positions):
//! `LANGUAGE|DEMOGRAPHY|GROUP|INDEX|STEREOTYPE|TASK`, e.g. `id|Kota|Kota Alfa|SPI|Nutrition|1`.
use super::inputs::{Index, Language, QaData, TEMPLATES_FILE};
use crate::generate::chat::Messages;
use indolm_torch::error::{Error, Result};

/// One prompt and the pivots it was built from.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// Its stable id.
    pub id: String,
    /// The demography.
    pub demography: String,
    /// The demographic group.
    pub group: String,
    /// The index of the stereotype pair.
    pub index: Index,
    /// The index's category.
    pub category: String,
    /// The stereotype.
    pub stereotype: String,
    /// The positive label, in the prompt's language.
    pub positive: String,
    /// The negative label, in the prompt's language.
    pub negative: String,
    /// The task, 1 to 7.
    pub task: u8,
    /// The language.
    pub language: Language,
    /// The prompt's text.
    pub text: String,
}

impl Prompt {
    /// The conversation asked: one user message.
    pub(crate) fn conversation(&self) -> Messages {
        Messages::user(&self.text)
    }
}

/// The stable id of a prompt.
pub(crate) fn prompt_id(
    language: Language,
    demography: &str,
    group: &str,
    index: Index,
    stereotype: &str,
    task: u8,
) -> String {
    format!("{}|{demography}|{group}|{}|{stereotype}|{task}", language.code(), index.name())
}

/// What [`build`] made: the prompts, and notes for the user (tasks without a template).
#[derive(Debug, Clone)]
pub struct Built {
    /// The prompts, demographies, groups, indices, pairs and tasks in the files' orders.
    pub prompts: Vec<Prompt>,
    /// Sentences about what is missing but not an error.
    pub notes: Vec<String>,
}

/// Every prompt of `data` in `language`: demographies in their file's order, then their groups,
/// the demography's indices in the order it lists them, each index's pairs in stereotypes.csv's
/// order, and the tasks from 1 to 7. No template in `language` is an error; a task without one
/// is a note.
pub fn build(data: &QaData, language: Language) -> Result<Built> {
    let mut templates: Vec<_> = data.templates.iter().filter(|t| t.language == language).collect();
    templates.sort_by_key(|t| t.task);
    if templates.is_empty() {
        return Err(Error::invalid(
            data.dir.join(TEMPLATES_FILE),
            format!(
                "no template in language `{0}`: expected rows `TASK,{0},TEMPLATE` for the tasks 1 to 7",
                language.code()
            ),
        ));
    }
    let mut notes = Vec::new();
    let missing: Vec<String> =
        (1..=7u8).filter(|task| !templates.iter().any(|t| t.task == *task)).map(|t| t.to_string()).collect();
    if !missing.is_empty() {
        notes.push(format!(
            "{} has no template for task(s) {} in `{}`: those tasks are not asked",
            TEMPLATES_FILE,
            missing.join(", "),
            language.code()
        ));
    }
    let mut prompts = Vec::new();
    for demography in &data.demographies {
        for group in data.groups_of(&demography.name) {
            for &index in &demography.indices {
                for pair in data.pairs_of(index) {
                    let (positive, negative) = pair.labels(language);
                    for template in &templates {
                        prompts.push(Prompt {
                            id: prompt_id(
                                language,
                                &demography.name,
                                &group.name,
                                index,
                                &pair.stereotype,
                                template.task,
                            ),
                            demography: demography.name.clone(),
                            group: group.name.clone(),
                            index,
                            category: pair.category.clone(),
                            stereotype: pair.stereotype.clone(),
                            positive: positive.to_string(),
                            negative: negative.to_string(),
                            task: template.task,
                            language,
                            text: template.fill(&group.name, positive, negative),
                        });
                    }
                }
            }
        }
    }
    Ok(Built { prompts, notes })
}
