//! PreSumm's input encoding of an article for a BERT encoder: every sentence wrapped in
//! `[CLS] … [SEP]`, segment ids alternating per sentence, cut at the model's positions (a
//! sentence that does not fit is truncated and the rest dropped), and where each sentence's
//! `[CLS]` sits; and of a reference summary as BertAbs's target (`bos s1 split s2 … eos`).
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::device::{staged, upload};
use indolm_torch::error::Result;
use indolm_torch::model::bert::Packing;
use indolm_torch::model::{BertModel, LoadNote};
use tch::{Device, Tensor};

/// Model inputs of a batch of articles.
pub struct ArticleBatch {
    /// Token ids [articles, tokens], padded with `[PAD]`.
    pub input_ids: Tensor,
    /// Segment ids [articles, tokens]: 0 and 1 alternating by sentence, 0 at padding.
    pub segments: Tensor,
    /// 1 for real tokens, 0 for padding [articles, tokens].
    pub attention: Tensor,
    /// Flat positions of each sentence's `[CLS]` ([articles, max sentences], padded with 0).
    pub cls_positions: Tensor,
    /// 1 for a real sentence, 0 for padding [articles, max sentences].
    pub sentence_mask: Tensor,
    /// Sentences that fit, per article.
    pub sentences: Vec<usize>,
    /// Flat positions and columns of the real tokens, and each article's length (see
    /// [`Packing`]): the encoder skips the padding.
    pub real: (Tensor, Tensor, Vec<i64>),
}

impl ArticleBatch {
    /// The batch on `device`, each tensor's copy asked for as non-blocking (queued from the
    /// pinned memory [`staged_batch_of`] uses on CUDA; no copy on the CPU).
    pub fn upload(&self, device: Device) -> ArticleBatch {
        ArticleBatch {
            input_ids: upload(&self.input_ids, device),
            segments: upload(&self.segments, device),
            attention: upload(&self.attention, device),
            cls_positions: upload(&self.cls_positions, device),
            sentence_mask: upload(&self.sentence_mask, device),
            sentences: self.sentences.clone(),
            real: (upload(&self.real.0, device), upload(&self.real.1, device), self.real.2.clone()),
        }
    }

    /// The encoder's last hidden states [articles, tokens, hidden] for this batch, computed on
    /// its real tokens only.
    pub fn encode(&self, bert: &BertModel, train: bool) -> Tensor {
        let packing = Packing {
            indices: self.real.0.shallow_clone(),
            columns: self.real.1.shallow_clone(),
            lengths: self.real.2.clone(),
        };
        bert.forward_packed(&self.input_ids, Some(&self.segments), &self.attention, &packing, train)
    }
}

/// One article encoded: ids, segment ids and each sentence's `[CLS]` position.
pub(crate) struct EncodedArticle {
    ids: Vec<i64>,
    segments: Vec<i64>,
    cls: Vec<usize>,
}

impl EncodedArticle {
    /// The sentences that fit (each with its `[CLS]`).
    pub fn sentences(&self) -> usize {
        self.cls.len()
    }

    /// An article from its ids and its sentences' `[CLS]` positions (the first at 0, increasing):
    /// the segment ids alternate from one `[CLS]` to the next, as [`encode_article`] gives them.
    pub(crate) fn from_ids_and_cls(ids: Vec<i64>, cls: Vec<usize>) -> Self {
        let mut segments = vec![0i64; ids.len()];
        for (sentence, &start) in cls.iter().enumerate() {
            let end = cls.get(sentence + 1).copied().unwrap_or(ids.len()).min(ids.len());
            segments[start.min(end)..end].fill((sentence % 2) as i64);
        }
        EncodedArticle { ids, segments, cls }
    }

    /// Its token ids.
    pub(crate) fn ids(&self) -> &[i64] {
        &self.ids
    }

    /// Where each sentence's `[CLS]` sits.
    pub(crate) fn cls(&self) -> &[usize] {
        &self.cls
    }

    /// Its length in tokens.
    pub(crate) fn len(&self) -> usize {
        self.ids.len()
    }
}

/// Encodes one article (sentences of words) for an encoder of `max_len` positions.
pub(crate) fn encode_article(t: &TextTokenizer, max_len: usize, article: &[Vec<String>]) -> Result<EncodedArticle> {
    let (mut ids, mut segments, mut cls) = (Vec::new(), Vec::new(), Vec::new());
    for (i, sentence) in article.iter().enumerate() {
        let pieces: Vec<i64> = t.encode_plain(&sentence.join(" "))?.into_iter().map(i64::from).collect();
        let room = max_len.saturating_sub(ids.len() + 2);
        if room == 0 {
            break;
        }
        let fits = pieces.len() <= room;
        cls.push(ids.len());
        ids.push(t.special.cls);
        ids.extend(&pieces[..room.min(pieces.len())]);
        ids.push(t.special.sep);
        segments.resize(ids.len(), (i % 2) as i64);
        if !fits {
            break;
        }
    }
    Ok(EncodedArticle { ids, segments, cls })
}

/// Encodes `articles` (sentences of words) for an encoder of `max_len` positions.
pub(crate) fn encode_articles(
    tokenizer: &TextTokenizer,
    max_len: usize,
    articles: &[&[Vec<String>]],
    device: Device,
) -> Result<ArticleBatch> {
    let encoded: Vec<EncodedArticle> =
        articles.iter().map(|a| encode_article(tokenizer, max_len, a)).collect::<Result<_>>()?;
    Ok(batch_of(tokenizer.special.pad, &encoded.iter().collect::<Vec<_>>(), device))
}

/// The padded model inputs of articles already encoded (`pad`: the `[PAD]` id).
pub(crate) fn batch_of(pad_id: i64, encoded: &[&EncodedArticle], device: Device) -> ArticleBatch {
    staged_batch_of(pad_id, encoded, Device::Cpu).upload(device)
}

/// The batch of `encoded` on the host, ready for [`ArticleBatch::upload`] to `device`: in pinned
/// memory when `device` is CUDA (batches built on the loader's thread).
pub(crate) fn staged_batch_of(pad_id: i64, encoded: &[&EncodedArticle], device: Device) -> ArticleBatch {
    let rows: Vec<(&Vec<i64>, &Vec<i64>)> = encoded.iter().map(|e| (&e.ids, &e.segments)).collect();
    let cls: Vec<&Vec<usize>> = encoded.iter().map(|e| &e.cls).collect();
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(1).max(1);
    let n_sent = cls.iter().map(|c| c.len()).max().unwrap_or(1).max(1);
    let (mut ids, mut segs, mut att, mut flat, mut smask) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (r, ((row_ids, row_segs), positions)) in rows.iter().zip(&cls).enumerate() {
        let pad = width - row_ids.len();
        ids.extend(row_ids.iter().copied().chain(std::iter::repeat_n(pad_id, pad)));
        segs.extend(row_segs.iter().copied().chain(std::iter::repeat_n(0, pad)));
        att.extend(std::iter::repeat_n(1i64, row_ids.len()).chain(std::iter::repeat_n(0, pad)));
        for k in 0..n_sent {
            flat.push((r * width + positions.get(k).copied().unwrap_or(0)) as i64);
            smask.push((k < positions.len()) as i64);
        }
    }
    let (b, w, n) = (rows.len() as i64, width as i64, n_sent as i64);
    let lengths: Vec<usize> = rows.iter().map(|r| r.0.len()).collect();
    let (indices, columns) = Packing::host_of_lengths(&lengths, width);
    let real_n = indices.len() as i64;
    ArticleBatch {
        input_ids: staged(&ids, &[b, w], device),
        segments: staged(&segs, &[b, w], device),
        attention: staged(&att, &[b, w], device),
        cls_positions: staged(&flat, &[b, n], device),
        sentence_mask: staged(&smask, &[b, n], device),
        sentences: cls.iter().map(|c| c.len()).collect(),
        real: (
            staged(&indices, &[real_n], device),
            staged(&columns, &[real_n], device),
            lengths.iter().map(|&l| l as i64).collect(),
        ),
    }
}

/// The target markers' ids.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetMarkers {
    /// Starts every target (`[unused0]`, else `[CLS]`).
    pub bos: i64,
    /// Ends every target (`[unused1]`, else `[SEP]`).
    pub eos: i64,
    /// Separates summary sentences (`[unused2]`, else `[MASK]`).
    pub split: i64,
}

impl TargetMarkers {
    /// PreSumm's `[unused0]`/`[unused1]`/`[unused2]`, else `[CLS]`/`[SEP]`/`[MASK]` with a note.
    pub fn of(tokenizer: &TextTokenizer) -> (Self, Option<LoadNote>) {
        let id = |t: &str| tokenizer.token_to_id(t).map(i64::from);
        match (id("[unused0]"), id("[unused1]"), id("[unused2]")) {
            (Some(bos), Some(eos), Some(split)) => (TargetMarkers { bos, eos, split }, None),
            _ => {
                let s = &tokenizer.special;
                (TargetMarkers { bos: s.cls, eos: s.sep, split: s.mask }, Some(LoadNote::SubstituteTargetMarkers))
            }
        }
    }
}

/// A reference summary as BertAbs's whole target, `bos s1 split s2 … eos`, before any cut.
pub(crate) fn encode_target(t: &TextTokenizer, markers: TargetMarkers, summary: &[Vec<String>]) -> Result<Vec<i64>> {
    let mut ids = vec![markers.bos];
    for (i, sentence) in summary.iter().enumerate() {
        if i > 0 {
            ids.push(markers.split);
        }
        ids.extend(t.encode_plain(&sentence.join(" "))?.into_iter().map(i64::from));
    }
    ids.push(markers.eos);
    Ok(ids)
}

/// Whole targets (from [`encode_target`]) cut to `max_tokens` as PreSumm cuts them (the last kept
/// token becomes `eos`) and padded with `pad_id` [targets, longest].
pub(crate) fn targets_of(targets: &[&[i64]], max_tokens: usize, eos: i64, pad_id: i64, device: Device) -> Tensor {
    let max = max_tokens.max(2);
    let rows: Vec<Vec<i64>> = targets
        .iter()
        .map(|whole| {
            let body = &whole[..whole.len().saturating_sub(1)];
            let mut row = body[..body.len().min(max - 1)].to_vec();
            row.push(eos);
            row
        })
        .collect();
    let width = rows.iter().map(Vec::len).max().unwrap_or(2);
    let flat: Vec<i64> =
        rows.iter().flat_map(|r| r.iter().copied().chain(std::iter::repeat_n(pad_id, width - r.len()))).collect();
    Tensor::from_slice(&flat).view([rows.len() as i64, width as i64]).to_device(device)
}

#[cfg(test)]
mod tests {
    use super::*;
    use indolm_torch::data::tokenizer::test_tokenizer;

    fn sents(sentences: &[&str]) -> Vec<Vec<String>> {
        sentences.iter().map(|s| s.split_whitespace().map(String::from).collect()).collect()
    }

    fn rows(t: &Tensor) -> Vec<Vec<i64>> {
        Vec::<Vec<i64>>::try_from(t).unwrap()
    }

    #[test]
    fn sentences_are_wrapped_segmented_alternately_and_padded() {
        // ids: [PAD] 0, [CLS] 2, [SEP] 3, a 5, b 6, c 7, d 8.
        let t = test_tokenizer(&["a", "b", "c", "d"]);
        let (first, second) = (sents(&["a b", "c", "d a"]), sents(&["d"]));
        let batch = encode_articles(&t, 512, &[&first, &second], Device::Cpu).unwrap();
        assert_eq!(
            rows(&batch.input_ids),
            vec![vec![2, 5, 6, 3, 2, 7, 3, 2, 8, 5, 3], vec![2, 8, 3, 0, 0, 0, 0, 0, 0, 0, 0]]
        );
        assert_eq!(rows(&batch.segments), vec![vec![0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0], vec![0; 11]]);
        assert_eq!(rows(&batch.attention), vec![vec![1; 11], [vec![1; 3], vec![0; 8]].concat()]);
        // Flat positions into [articles × tokens]: the second article's row starts at 11; its
        // missing sentences point at its first token and are masked out.
        assert_eq!(rows(&batch.cls_positions), vec![vec![0, 4, 7], vec![11, 11, 11]]);
        assert_eq!(rows(&batch.sentence_mask), vec![vec![1, 1, 1], vec![1, 0, 0]]);
        assert_eq!(batch.sentences, vec![3, 1]);
    }

    #[test]
    fn an_article_rebuilt_from_ids_and_cls_positions_has_the_same_segments() {
        let t = test_tokenizer(&["a", "b", "c", "d"]);
        for (article, max_len) in [(sents(&["a b", "c", "d a", "b"]), 512), (sents(&["a b", "c", "d a", "b"]), 10)] {
            let encoded = encode_article(&t, max_len, &article).unwrap();
            let rebuilt = EncodedArticle::from_ids_and_cls(encoded.ids().to_vec(), encoded.cls().to_vec());
            assert_eq!(rebuilt.segments, encoded.segments);
            assert_eq!(rebuilt.cls, encoded.cls);
        }
    }

    #[test]
    fn a_sentence_that_does_not_fit_is_cut_and_ends_the_article() {
        let t = test_tokenizer(&["a", "b", "c", "d"]);
        let article = sents(&["a b", "c", "d a", "b"]);
        // 10 positions: "[CLS] a b [SEP] [CLS] c [SEP]" leaves 3, so "d a" keeps only "d".
        let batch = encode_articles(&t, 10, &[&article], Device::Cpu).unwrap();
        assert_eq!(rows(&batch.input_ids), vec![vec![2, 5, 6, 3, 2, 7, 3, 2, 8, 3]]);
        assert_eq!(batch.sentences, vec![3]);
        // 9 positions: no room for another [CLS] … [SEP] after the second sentence.
        let batch = encode_articles(&t, 9, &[&article], Device::Cpu).unwrap();
        assert_eq!(rows(&batch.input_ids), vec![vec![2, 5, 6, 3, 2, 7, 3]]);
        assert_eq!(batch.sentences, vec![2]);
    }
}
