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
