//! A masked LM through the scoring interface: sentences by PLL (every token, CrowS' shared
//! tokens, or PLL-word-l2r) or with nothing masked (AUL and AULA from the same forward passes);
//! continuations by the PLL of their tokens, each masked in turn after the context; next tokens
//! at one `[MASK]` after the context. A scorer with a share ([`PllScorer::shared`]) scores its
//! share of the batches on each rank, combined exactly.
use super::{require_prefixes, Context, Continuation, ContinuationScore, LmScorer, ScoredLm, SentenceRule};
use crate::aul::UnmaskedScorer;
use crate::pll::{crows_inputs, PllScorer, ScoringInput, SentenceScore};
use indolm_torch::device::to_device_queued;
use indolm_torch::error::{Error, Result};
use indolm_torch::hooks::{takes, Share};
use tch::{Device, Kind, Tensor};

impl LmScorer for PllScorer<'_> {
    fn lm(&self) -> ScoredLm<'_> {
        ScoredLm::Masked { model: self.model, tokenizer: self.tokenizer }
    }

    fn sentence_scores(&self, sentences: &[&str], rules: &[SentenceRule]) -> Result<Vec<Vec<SentenceScore>>> {
        if rules.contains(&SentenceRule::SharedTokens) && sentences.len() % 2 == 1 {
            return Err(Error::data(
                "PLL scoring",
                format!("CrowS' shared-token rule scores sentences two by two; {} is odd", sentences.len()),
            ));
        }
        // AUL and AULA: one forward pass per sentence for both, if either is asked for.
        let unmasked_rules = [SentenceRule::AllUnmasked, SentenceRule::AllUnmaskedAttention];
        let without_masks = if rules.iter().any(|r| unmasked_rules.contains(r)) {
            let unmasked = UnmaskedScorer {
                token_budget: self.token_budget,
                share: self.share,
                ..UnmaskedScorer::new(self.model, self.tokenizer, self.device)
            };
            let inputs = sentences.iter().map(|s| unmasked.input(s)).collect::<Result<Vec<_>>>()?;
            unmasked.score_shared(&inputs)?
        } else {
            Vec::new()
        };
        let mut out = Vec::with_capacity(rules.len());
        for rule in rules {
            out.push(match rule {
                SentenceRule::AllUnmasked => without_masks.iter().map(|s| s.aul.clone()).collect(),
                SentenceRule::AllUnmaskedAttention => without_masks.iter().map(|s| s.aula.clone()).collect(),
                SentenceRule::EveryToken | SentenceRule::WordL2r | SentenceRule::SharedTokens => {
                    let mut inputs: Vec<ScoringInput> = Vec::with_capacity(sentences.len());
                    match rule {
                        SentenceRule::SharedTokens => {
                            for two in sentences.chunks(2) {
                                let (a, b) = crows_inputs(self.tokenizer, two[0], two[1])?;
                                inputs.extend([a, b]);
                            }
                        }
                        SentenceRule::WordL2r => {
                            for s in sentences {
                                inputs.push(self.word_l2r_input(s)?);
                            }
                        }
                        _ => {
                            for s in sentences {
                                inputs.push(self.full_input(s)?);
                            }
                        }
                    }
                    self.score_shared(&inputs)?
                }
            });
        }
        Ok(out)
    }

    /// [`NEXT_TOKEN_BATCH`] contexts a forward pass, each followed by `[MASK]` and `[SEP]`,
    /// shared among the ranks of the scorer's share.
    fn next_token_log_probs(&self, contexts: &[Context], candidates: &[Vec<i64>]) -> Result<Vec<Vec<f64>>> {
        require_prefixes(contexts)?;
        let special = &self.tokenizer.special;
        let prompts: Vec<(Vec<i64>, usize)> = contexts
            .iter()
            .map(|c| (c.prefix.iter().copied().chain([special.mask, special.sep]).collect(), c.prefix.len()))
            .collect();
        // Each context's candidates at `offsets[i]..` of one table of values.
        let offsets: Vec<usize> = candidates
            .iter()
            .scan(0, |next, c| {
                let at = *next;
                *next += c.len();
                Some(at)
            })
            .collect();
        let mut values = vec![0.0; candidates.iter().map(Vec::len).sum()];
        for (b, batch) in prompts.chunks(NEXT_TOKEN_BATCH).enumerate() {
            if !takes(self.share, batch.len()) {
                continue;
            }
            let log_probs = self.log_probs_at_mask(batch);
            for r in 0..batch.len() {
                let i = b * NEXT_TOKEN_BATCH + r;
                for (k, &id) in candidates[i].iter().enumerate() {
                    values[offsets[i] + k] = log_probs.double_value(&[r as i64, id]);
                }
            }
        }
        if let Some(share) = self.share {
            Share::combine(share, &mut values, "the next-token scores")?;
        }
        Ok(offsets.iter().zip(candidates).map(|(&at, c)| values[at..at + c.len()].to_vec()).collect())
    }

    /// Each continuation's PLL: the context, the continuation, `[SEP]`, the continuation's
    /// tokens masked in turn.
    fn continuation_scores(
        &self,
        contexts: &[Context],
        continuations: &[Continuation],
    ) -> Result<Vec<ContinuationScore>> {
        require_prefixes(contexts)?;
        let inputs: Vec<ScoringInput> = continuations
            .iter()
            .map(|c| {
                let prefix = &contexts[c.context].prefix;
                let ids = prefix.iter().chain(&c.ids).copied().chain([self.tokenizer.special.sep]).collect();
                ScoringInput::one_at_a_time(ids, (prefix.len()..prefix.len() + c.ids.len()).collect())
            })
            .collect();
        Ok(self
            .score_shared(&inputs)?
            .into_iter()
            .map(|s| ContinuationScore { log_prob: s.pll, tokens: s.tokens })
            .collect())
    }
}

/// Contexts a forward pass when reading next tokens.
const NEXT_TOKEN_BATCH: usize = 16;

impl PllScorer<'_> {
    /// The log-probabilities over the vocabulary at the `[MASK]` of each prompt (its ids and
    /// where the `[MASK]` is), in one padded batch: `[prompts, vocab]`, double precision, on
    /// the CPU.
    fn log_probs_at_mask(&self, prompts: &[(Vec<i64>, usize)]) -> Tensor {
        let (model, device, pad) = (self.model, self.device, self.tokenizer.special.pad);
        let rows: Vec<&[i64]> = prompts.iter().map(|(ids, _)| ids.as_slice()).collect();
        let positions: Vec<usize> = prompts.iter().map(|&(_, start)| start).collect();
        let width = rows.iter().map(|r| r.len()).max().unwrap_or(0);
        let flat: Vec<i64> =
            rows.iter().flat_map(|r| r.iter().copied().chain(std::iter::repeat_n(pad, width - r.len()))).collect();
        let mask: Vec<i64> = rows
            .iter()
            .flat_map(|r| std::iter::repeat_n(1i64, r.len()).chain(std::iter::repeat_n(0, width - r.len())))
            .collect();
        let flat_pos: Vec<i64> = positions.iter().enumerate().map(|(r, &p)| (r * width + p) as i64).collect();
        let shape = [rows.len() as i64, width as i64];
        tch::no_grad(|| {
            let ids = to_device_queued(&flat, &shape, device);
            let m = to_device_queued(&mask, &shape, device);
            let hidden = model.bert.forward(&ids, None, Some(&m), false);
            model
                .logits_at(&hidden, &to_device_queued(&flat_pos, &[flat_pos.len() as i64], device))
                .log_softmax(-1, Kind::Double)
                .to_device(Device::Cpu)
        })
    }
}
