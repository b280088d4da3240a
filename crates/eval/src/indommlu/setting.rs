//! What an IndoMMLU evaluation is asked ([`Setting`]: the mode, the kind of model, the shots)
//! and the refusals of what a kind of model cannot be asked, shared by the scoring and the
//! report.
use super::questions::IndommluData;
use crate::IndommluMode;
use indolm_torch::error::{Error, Result};
use std::path::Path;

/// How an evaluation answered its questions, recorded in its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// How the options were scored.
    pub mode: IndommluMode,
    /// Whether the model is a causal LM (else a masked LM).
    pub causal: bool,
    /// Solved questions in each prompt (causal LMs; 0 for zero-shot).
    pub shots: usize,
}

impl Setting {
    /// A masked LM, zero-shot, scored with `mode`.
    pub fn masked(mode: IndommluMode) -> Self {
        Setting { mode, causal: false, shots: 0 }
    }

    /// Refuses what the model cannot do: a mode of the other kind of model ([`mode_misfit`]),
    /// shots for a masked LM, or shots from `data`, a CSV without the `is_for_fewshot` column.
    pub(crate) fn check(&self, data: &IndommluData, path: &Path) -> Result<()> {
        match (self.causal, self.mode) {
            (true, IndommluMode::OptionPll) | (false, IndommluMode::FullAnswer) => Err(mode_misfit(self.causal)),
            (false, _) if self.shots > 0 => Err(shots_misfit()),
            (true, _) if self.shots > 0 && !data.has_fewshot_column => Err(Error::invalid(
                path,
                "no is_for_fewshot column: few-shot prompts take their solved questions from the rows marked 1",
            )),
            _ => Ok(()),
        }
    }
}

/// The refusal of demonstrations for a masked LM, which is scored zero-shot.
pub fn shots_misfit() -> Error {
    Error::argument("--shots", "few-shot prompts are for causal LMs; a masked LM is scored zero-shot")
}

/// The refusal of a mode the kind of model cannot be scored with: `full-answer` for a masked
/// LM, `option-pll` for a causal one.
pub fn mode_misfit(causal: bool) -> Error {
    let message = if causal {
        "option-pll masks tokens, which a causal LM cannot score; use letter or full-answer"
    } else {
        "full-answer scores a causal LM's answer text; a masked LM takes option-pll or letter"
    };
    Error::Argument { flag: "--mode".into(), message: message.into() }
}
