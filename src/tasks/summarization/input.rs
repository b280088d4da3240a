//! PreSumm's input encoding of an article for a BERT encoder: every sentence wrapped in
//! `[CLS] … [SEP]`, segment ids alternating per sentence, cut at the model's positions (a
//! sentence that does not fit is truncated and the rest dropped), and where each sentence's
//! `[CLS]` sits.
use crate::data::tokenizer::TextTokenizer;
use crate::error::Result;
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
}

/// One article's ids, segment ids and `[CLS]` positions, cut at `max_len` positions.
fn encode_one(t: &TextTokenizer, max_len: usize, article: &[Vec<String>]) -> Result<(Vec<i64>, Vec<i64>, Vec<usize>)> {
    let (mut ids, mut segs, mut positions) = (Vec::new(), Vec::new(), Vec::new());
    for (i, sentence) in article.iter().enumerate() {
        let pieces: Vec<i64> = t.encode_plain(&sentence.join(" "))?.into_iter().map(i64::from).collect();
        let room = max_len.saturating_sub(ids.len() + 2);
        if room == 0 {
            break;
        }
        let fits = pieces.len() <= room;
        positions.push(ids.len());
        ids.push(t.special.cls);
        ids.extend(&pieces[..room.min(pieces.len())]);
        ids.push(t.special.sep);
        segs.resize(ids.len(), (i % 2) as i64);
        if !fits {
            break;
        }
    }
    Ok((ids, segs, positions))
}

/// The encoded length (tokens) of each article, for batching by length.
pub fn encoded_lengths(tokenizer: &TextTokenizer, max_len: usize, articles: &[&[Vec<String>]]) -> Result<Vec<usize>> {
    articles.iter().map(|a| Ok(encode_one(tokenizer, max_len, a)?.0.len())).collect()
}

/// Encodes `articles` (sentences of words) for an encoder of `max_len` positions.
pub fn encode_articles(
    tokenizer: &TextTokenizer,
    max_len: usize,
    articles: &[&[Vec<String>]],
    device: Device,
) -> Result<ArticleBatch> {
    let t = tokenizer;
    let mut rows = Vec::new();
    let mut cls = Vec::new();
    for article in articles {
        let (ids, segs, positions) = encode_one(t, max_len, article)?;
        rows.push((ids, segs));
        cls.push(positions);
    }
    let width = rows.iter().map(|r| r.0.len()).max().unwrap_or(1).max(1);
    let n_sent = cls.iter().map(Vec::len).max().unwrap_or(1).max(1);
    let (mut ids, mut segs, mut att, mut flat, mut smask) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (r, ((row_ids, row_segs), positions)) in rows.iter().zip(&cls).enumerate() {
        let pad = width - row_ids.len();
        ids.extend(row_ids.iter().copied().chain(std::iter::repeat_n(t.special.pad, pad)));
        segs.extend(row_segs.iter().copied().chain(std::iter::repeat_n(0, pad)));
        att.extend(std::iter::repeat_n(1i64, row_ids.len()).chain(std::iter::repeat_n(0, pad)));
        for k in 0..n_sent {
            flat.push((r * width + positions.get(k).copied().unwrap_or(0)) as i64);
            smask.push((k < positions.len()) as i64);
        }
    }
    let (b, w) = (rows.len() as i64, width as i64);
    Ok(ArticleBatch {
        input_ids: Tensor::from_slice(&ids).view([b, w]).to_device(device),
        segments: Tensor::from_slice(&segs).view([b, w]).to_device(device),
        attention: Tensor::from_slice(&att).view([b, w]).to_device(device),
        cls_positions: Tensor::from_slice(&flat).view([b, n_sent as i64]).to_device(device),
        sentence_mask: Tensor::from_slice(&smask).view([b, n_sent as i64]).to_device(device),
        sentences: cls.iter().map(Vec::len).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::tokenizer::test_tokenizer;

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
