//! Beam search (for BertAbs): trigram blocking, the minimum length, and the length penalty's
//! effect on which hypothesis wins.
use indolm_tasks::summarization::beam::{beam_search, length_penalty, repeats_trigram, words, BeamConfig};

const EOS: i64 = 2;
const BOS: i64 = 1;

fn piece(t: i64) -> String {
    ["<pad>", "<bos>", "<eos>", "a", "b", "c", "##d", "x"][t as usize].to_string()
}

fn config(min: usize, max: usize, alpha: f64, block: bool) -> BeamConfig {
    BeamConfig {
        beam: 3,
        min_length: min,
        max_length: max,
        alpha,
        block_trigrams: block,
        bos: BOS,
        eos: EOS,
        ..BeamConfig::default()
    }
}

/// A "model" that wants to loop "a b c a b c ..." and would end right away if allowed.
fn looping(seqs: &[Vec<i64>]) -> Vec<Vec<f64>> {
    seqs.iter()
        .map(|s| {
            let last = *s.last().unwrap();
            let next = match last {
                3 => 4,
                4 => 5,
                _ => 3,
            };
            (0..8)
                .map(|t| {
                    if t == EOS {
                        -0.1
                    } else if t == next {
                        -0.5
                    } else if t == 7 {
                        -3.0
                    } else {
                        -6.0
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn trigram_blocking_drops_repeated_word_trigrams() {
    let with = beam_search(&config(8, 10, 0.0, true), |s: &[Vec<i64>], _: &[usize]| looping(s), piece);
    let without = beam_search(&config(8, 10, 0.0, false), |s: &[Vec<i64>], _: &[usize]| looping(s), piece);
    let text = |h: &[i64]| words(&h.iter().map(|&t| piece(t)).collect::<Vec<_>>());
    let best_without = text(&without[0].tokens);
    assert!(
        best_without.windows(3).count() > best_without.windows(3).collect::<std::collections::HashSet<_>>().len(),
        "the unblocked search repeats: {best_without:?}"
    );
    for h in &with {
        let w = text(&h.tokens);
        let trigrams: Vec<_> = w.windows(3).collect();
        let unique: std::collections::HashSet<_> = trigrams.iter().collect();
        assert_eq!(trigrams.len(), unique.len(), "blocked search repeated a trigram: {w:?}");
    }
    // Word pieces are joined before trigrams are compared.
    assert_eq!(words(&["a".into(), "##d".into(), "b".into()]), vec!["ad".to_string(), "b".to_string()]);
    assert!(repeats_trigram(&["a", "b", "c", "x", "a", "b", "c"].map(String::from)));
    assert!(!repeats_trigram(&["a", "b", "c", "a", "b", "x"].map(String::from)));
}

#[test]
fn end_of_sequence_waits_for_the_minimum_length() {
    for min in [0, 3, 7] {
        let best = &beam_search(&config(min, 20, 0.0, false), |s: &[Vec<i64>], _: &[usize]| looping(s), piece)[0];
        assert!(best.tokens.len() >= min, "min {min}: {:?}", best.tokens);
        assert_eq!(best.tokens.len(), min, "EOS is the likeliest token, so it ends as soon as allowed");
    }
}

#[test]
fn the_length_penalty_decides_between_short_and_long() {
    assert!((length_penalty(1, 0.6) - 1.0).abs() < 1e-12);
    assert!((length_penalty(7, 1.0) - 2.0).abs() < 1e-12);
    // Short: "x" then EOS costs -0.9 + -2.0 = -2.9 over 2 tokens; long: "a" x 9 then EOS, -0.3
    // each, -3.0 over 10 tokens. Raw log-probability (alpha 0) prefers the short one; alpha 1
    // divides by (5+2)/6 = 1.17 vs (5+10)/6 = 2.5 and prefers the long one.
    let model = |seqs: &[Vec<i64>]| -> Vec<Vec<f64>> {
        seqs.iter()
            .map(|s| {
                let n = s.len() - 1;
                let after_x = s.last() == Some(&7);
                (0..8)
                    .map(|t| match t {
                        EOS if after_x => -2.0,
                        EOS if n == 9 => -0.3,
                        EOS => -50.0,
                        7 if n == 0 => -0.9,
                        3 if !after_x && n < 9 => -0.3,
                        _ => -50.0,
                    })
                    .collect()
            })
            .collect()
    };
    let short = beam_search(&config(0, 12, 0.0, false), |s: &[Vec<i64>], _: &[usize]| model(s), piece);
    assert_eq!(short[0].tokens, vec![7]);
    let long = beam_search(&config(0, 12, 1.0, false), |s: &[Vec<i64>], _: &[usize]| model(s), piece);
    assert_eq!(long[0].tokens, vec![3; 9], "{long:?}");
    assert!((long[0].score - (-3.0 / 2.5)).abs() < 1e-9);
}

#[test]
fn end_of_sequence_waits_for_the_minimum_sentences_and_words() {
    // Vocabulary: 0 pad, 1 bos, 2 eos, 3 "a", 4 "b", 5 "c", 6 "##d", 7 "x", 8 sentence marker.
    let piece9 = |t: i64| ["<pad>", "<bos>", "<eos>", "a", "b", "c", "##d", "x", "<q>"][t as usize].to_string();
    // After two words the model wants to end; a sentence marker is its second choice; "c ##d" is
    // one word in two pieces.
    let model = |seqs: &[Vec<i64>]| -> Vec<Vec<f64>> {
        seqs.iter()
            .map(|s| {
                let since_marker = s.iter().rev().take_while(|&&t| t != 8 && t != BOS).count();
                (0..9)
                    .map(|t| match t {
                        EOS if since_marker >= 2 => -0.1,
                        8 if since_marker >= 2 => -1.0,
                        5 if since_marker < 2 && s.last() != Some(&5) => -0.2,
                        6 if s.last() == Some(&5) => -0.1,
                        _ => -8.0,
                    })
                    .collect()
            })
            .collect()
    };
    let config = |min_sentences: usize, min_words: usize| BeamConfig {
        beam: 2,
        min_length: min_words,
        max_length: 30,
        alpha: 0.0,
        block_trigrams: false,
        bos: BOS,
        eos: EOS,
        sentence_split: Some(8),
        min_sentences,
    };
    let sentences = |tokens: &[i64]| tokens.split(|&t| t == 8).filter(|s| !s.is_empty()).count();
    let words_in =
        |tokens: &[i64]| words(&tokens.iter().filter(|&&t| t != 8).map(|&t| piece9(t)).collect::<Vec<_>>()).len();
    let one = &beam_search(&config(1, 0), |s: &[Vec<i64>], _: &[usize]| model(s), piece9)[0];
    assert_eq!((sentences(&one.tokens), words_in(&one.tokens)), (1, 1), "{:?}", one.tokens);
    let two = &beam_search(&config(2, 0), |s: &[Vec<i64>], _: &[usize]| model(s), piece9)[0];
    assert_eq!(sentences(&two.tokens), 2, "{:?}", two.tokens);
    let three = &beam_search(&config(3, 0), |s: &[Vec<i64>], _: &[usize]| model(s), piece9)[0];
    assert_eq!(sentences(&three.tokens), 3, "{:?}", three.tokens);
    // Words count pieces joined: "c ##d" is one word, and the markers are not words.
    let long = &beam_search(&config(1, 4), |s: &[Vec<i64>], _: &[usize]| model(s), piece9)[0];
    assert!(words_in(&long.tokens) >= 4, "{:?}", long.tokens);
    assert_eq!(words(&["c".into(), "##d".into()]).len(), 1);
}
