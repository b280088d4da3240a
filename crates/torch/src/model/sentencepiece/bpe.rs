//! SentencePiece's BPE segmentation (`bpe_model.cc`, `Model::SampleEncode` without dropout): the
//! normalized text split into characters (a user-defined symbol is one frozen symbol), then,
//! repeatedly, the adjacent pair whose concatenation is a piece with the highest score is merged
//! (ties: the leftmost), and a merged piece of the unused type is split back into the two symbols
//! it was last recorded as made of.
use super::proto::PieceType;
use super::vocab::Vocab;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

/// A symbol: a byte range of the normalized text, linked to its neighbours.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
    freeze: bool,
}

/// A candidate merge of symbols `left` and `right` into a piece of `size` bytes and `score`.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    /// Higher score first, then the smaller left index (the proto's scores are finite).
    fn cmp(&self, other: &Self) -> Ordering {
        self.score.partial_cmp(&other.score).unwrap_or(Ordering::Equal).then_with(|| other.left.cmp(&self.left))
    }
}

/// The pieces of `normalized` with their ids (`PieceToId` of each: unknown characters get the
/// unknown id), in order.
pub(crate) fn encode<'t>(vocab: &Vocab, normalized: &'t str) -> Vec<(&'t str, u32)> {
    let text = normalized.as_bytes();
    let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
    let mut at = 0;
    while at < text.len() {
        let (len, freeze) = vocab.prefix_match(&text[at..]);
        let index = symbols.len();
        symbols.push(Symbol {
            start: at,
            len,
            prev: index.checked_sub(1),
            next: (at + len < text.len()).then_some(index + 1),
            freeze,
        });
        at += len;
    }
    let mut agenda = BinaryHeap::new();
    // The pieces an unused piece was made of, keyed by its text (the last pair recorded wins).
    let mut rev_merge: HashMap<&'t str, (&'t str, &'t str)> = HashMap::new();
    let piece = |s: &Symbol| &normalized[s.start..s.start + s.len];
    let mut add =
        |symbols: &[Symbol], left: Option<usize>, right: Option<usize>, agenda: &mut BinaryHeap<Candidate>| {
            let (Some(left), Some(right)) = (left, right) else { return };
            let (l, r) = (&symbols[left], &symbols[right]);
            if l.freeze || r.freeze {
                return;
            }
            let merged = &normalized[l.start..l.start + l.len + r.len];
            let Some(id) = vocab.formable(merged) else { return };
            agenda.push(Candidate { score: vocab.pieces[id as usize].score, left, right, size: merged.len() });
            if vocab.kind(id) == PieceType::Unused {
                rev_merge.insert(merged, (piece(l), piece(r)));
            }
        };
    for i in 1..symbols.len() {
        add(&symbols, Some(i - 1), Some(i), &mut agenda);
    }
    while let Some(top) = agenda.pop() {
        let (l, r) = (symbols[top.left], symbols[top.right]);
        // Stale: one side was merged away or grew since the candidate was recorded.
        if l.len == 0 || r.len == 0 || l.len + r.len != top.size {
            continue;
        }
        symbols[top.left].len += r.len;
        symbols[top.left].next = r.next;
        if let Some(next) = r.next {
            symbols[next].prev = Some(top.left);
        }
        symbols[top.right].len = 0;
        let prev = symbols[top.left].prev;
        add(&symbols, prev, Some(top.left), &mut agenda);
        let next = symbols[top.left].next;
        add(&symbols, Some(top.left), next, &mut agenda);
    }
    let mut out = Vec::new();
    let mut index = (!symbols.is_empty()).then_some(0);
    while let Some(i) = index {
        resegment(vocab, &rev_merge, piece(&symbols[i]), &mut out);
        index = symbols[i].next;
    }
    out
}

/// Appends `w`, split back into what it was merged from while it is an unused piece.
fn resegment<'t>(
    vocab: &Vocab,
    rev_merge: &HashMap<&'t str, (&'t str, &'t str)>,
    w: &'t str,
    out: &mut Vec<(&'t str, u32)>,
) {
    let id = vocab.piece_to_id(w);
    match (vocab.kind(id) == PieceType::Unused).then(|| rev_merge.get(w)).flatten() {
        // Both halves are shorter than `w`, so this ends.
        Some(&(left, right)) => {
            resegment(vocab, rev_merge, left, out);
            resegment(vocab, rev_merge, right, out);
        }
        None => out.push((w, id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sentencepiece::proto::Piece;
    use std::path::Path;

    fn vocab(pieces: &[(&str, f32, PieceType)]) -> Vocab {
        let pieces = pieces.iter().map(|&(p, score, kind)| Piece { piece: p.into(), score, kind }).collect();
        Vocab::new(Path::new("m.model"), pieces, false).unwrap()
    }

    fn pieces<'a>(v: &Vocab, text: &'a str) -> Vec<&'a str> {
        encode(v, text).into_iter().map(|(p, _)| p).collect()
    }

    #[test]
    fn the_highest_scoring_pair_merges_first_and_ties_go_left() {
        use PieceType::*;
        let v = vocab(&[
            ("<unk>", 0.0, Unknown),
            ("a", -1.0, Normal),
            ("b", -1.0, Normal),
            ("c", -1.0, Normal),
            ("bc", -2.0, Normal),
            ("ab", -3.0, Normal),
            ("abc", -4.0, Normal),
        ]);
        // bc outscores ab; then a+bc.
        assert_eq!(pieces(&v, "abc"), vec!["abc"]);
        assert_eq!(pieces(&v, "abab"), vec!["ab", "ab"]);
        assert_eq!(pieces(&v, "aab"), vec!["a", "ab"]);
        // Equal scores: the leftmost pair first.
        let tie = vocab(&[("<unk>", 0.0, Unknown), ("a", 0.0, Normal), ("aa", -1.0, Normal)]);
        assert_eq!(pieces(&tie, "aaa"), vec!["aa", "a"]);
        // Unknown characters keep the unknown id.
        assert_eq!(encode(&v, "axb"), vec![("a", 1), ("x", 0), ("b", 2)]);
        assert_eq!(encode(&v, ""), vec![]);
    }

    #[test]
    fn unused_pieces_split_back_and_user_defined_symbols_stay_whole() {
        use PieceType::*;
        let v = vocab(&[
            ("<unk>", 0.0, Unknown),
            ("a", -1.0, Normal),
            ("b", -1.0, Normal),
            ("ab", -2.0, Unused),
            ("ba", -3.0, Normal),
            ("[x]", 0.0, UserDefined),
        ]);
        // ab would merge first but is unused: it is emitted as a, b.
        assert_eq!(pieces(&v, "ab"), vec!["a", "b"]);
        assert_eq!(pieces(&v, "a[x]b"), vec!["a", "[x]", "b"]);
        assert_eq!(encode(&v, "[x]").first().map(|p| p.1), Some(5));
    }
}
