//! A sentence pair as mBART trains on it, the rows IndoNLG's data loader builds for IndoBART and
//! mBART-50 (`GenerationDataLoader._bart_collate_fn` and `_baseline_mbart_collate_fn`, which
//! agree): the encoder reads `<sentence></s><source language>`, the labels are
//! `<sentence></s><target language>`, and the decoder reads the labels shifted right with the
//! target language first (`<target language><sentence></s>`, what mBART's `shift_tokens_right`
//! makes of the labels); generation starts from the target language token
//! (`decoder_start_token_id`). Each side is cut to `max_len` tokens, the two special tokens
//! included, by dropping the sentence's last tokens.

/// One sentence pair's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    /// The encoder's row.
    pub source: Vec<i64>,
    /// The labels (the decoder's row is their shift, see [`shift_tokens_right`](indolm_torch::model::seq2seq::mbart::shift_tokens_right)).
    pub labels: Vec<i64>,
}

/// The special tokens and the length limit of one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MbartFormat {
    /// `</s>`.
    pub eos: i64,
    /// The token marking the source language.
    pub source_lang: i64,
    /// The token marking the target language.
    pub target_lang: i64,
    /// The longest row, special tokens included (at least 3).
    pub max_len: usize,
}

impl MbartFormat {
    /// The sentence's tokens cut to leave room for the two special tokens.
    fn cut<'a>(&self, tokens: &'a [i64]) -> &'a [i64] {
        &tokens[..tokens.len().min(self.max_len.saturating_sub(2))]
    }

    /// The encoder's row of a source sentence's tokens: `<sentence></s><source language>`.
    pub fn source(&self, tokens: &[i64]) -> Vec<i64> {
        [self.cut(tokens), &[self.eos, self.source_lang]].concat()
    }

    /// The labels of a target sentence's tokens: `<sentence></s><target language>`.
    pub fn labels(&self, tokens: &[i64]) -> Vec<i64> {
        [self.cut(tokens), &[self.eos, self.target_lang]].concat()
    }

    /// The rows of a pair of sentences' tokens.
    pub fn pair(&self, source: &[i64], target: &[i64]) -> Pair {
        Pair { source: self.source(source), labels: self.labels(target) }
    }

    /// The decoder's first token when generating.
    pub fn decoder_start(&self) -> i64 {
        self.target_lang
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indolm_torch::model::seq2seq::mbart::shift_tokens_right;
    use tch::Tensor;

    const FORMAT: MbartFormat = MbartFormat { eos: 2, source_lang: 90, target_lang: 91, max_len: 6 };

    #[test]
    fn rows_are_indonlg_collate_rows() {
        // IndoNLG's collate for a batch of (input [5, 6, 7], label [8, 9]) and (input [5], label
        // [8, 9, 10, 11, 12]) with max_seq_len 6: enc [5 6 7 2 90 pad] / [5 2 90 pad pad pad],
        // labels [8 9 2 91 -100 -100] / [8 9 10 11 2 91], dec [91 8 9 2 pad pad] / [91 8 9 10 11 2].
        assert_eq!(FORMAT.source(&[5, 6, 7]), vec![5, 6, 7, 2, 90]);
        assert_eq!(FORMAT.source(&[5]), vec![5, 2, 90]);
        assert_eq!(FORMAT.labels(&[8, 9]), vec![8, 9, 2, 91]);
        assert_eq!(FORMAT.labels(&[8, 9, 10, 11, 12]), vec![8, 9, 10, 11, 2, 91], "cut to max_len");
        // The decoder's row is IndoNLG's at every position with a label; where the label is -100,
        // `shift_tokens_right` may leave a token IndoNLG pads (the first row's 91 at position 4),
        // which the causal decoder lets reach only positions whose loss is ignored.
        let labels = Tensor::from_slice(&[8i64, 9, 2, 91, -100, -100, 8, 9, 10, 11, 2, 91]).view([2, 6]);
        let decoder = shift_tokens_right(&labels, 1);
        let indonlg = Tensor::from_slice(&[91i64, 8, 9, 2, 1, 1, 91, 8, 9, 10, 11, 2]).view([2, 6]);
        let counted = labels.ne(-100);
        assert!(decoder.masked_select(&counted).equal(&indonlg.masked_select(&counted)), "{decoder}");
        assert_eq!(FORMAT.decoder_start(), 91);
    }
}
