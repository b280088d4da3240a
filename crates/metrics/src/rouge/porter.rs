//! ROUGE-1.5.5.pl's `-m` stemming, ported rule for rule: a token of more than three characters
//! is looked up in the WordNet 2.0 exception lists (`MorphStem`: an inflected form listed there
//! becomes its base form, e.g. `data` → `datum`, and also the Indonesian `lain` → `lie`), and
//! otherwise goes through the script's Porter stemmer (`stem`: Martin Porter's Perl
//! implementation, with Chin-Yew Lin's 2004 change to step 4). The script's regular expressions
//! are matched as written: its character classes (`[aeiou]`, `[aeiouy]`, …) are byte classes and
//! its measure patterns (`mgr0`, `meq1`, `mgr1`, `_v`) are matched by following every way the
//! pattern's pieces can split the word, which is what the regex engine's backtracking finds.
//! Tokens reach it lowercased, from a-z and 0-9 only; the stems equal the script's on 94,793
//! words (the UD Indonesian vocabulary and English words with every suffix the rules know;
//! `tests/it/rouge.rs` checks a list against the script itself).
use std::collections::HashMap;
use std::sync::OnceLock;

/// `form base` lines of the exception lists (see the file's header: source, order, licence).
const EXCEPTIONS: &str = include_str!("wordnet_exceptions.txt");

/// The exception lists as a map from inflected form to base form.
fn exceptions() -> &'static HashMap<&'static str, &'static str> {
    static TABLE: OnceLock<HashMap<&'static str, &'static str>> = OnceLock::new();
    TABLE.get_or_init(|| {
        EXCEPTIONS
            .lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                Some((fields.next()?, fields.next()?))
            })
            .collect()
    })
}

/// The token the script counts for `token` under `-m`: unchanged up to three characters, else
/// its exception-list base form if it has one, else its Porter stem (`createNGram` and
/// `tokenizeText_LCS` with `MorphStem`).
pub fn script_stem(token: &str) -> String {
    if token.len() <= 3 {
        return token.to_string();
    }
    match exceptions().get(token) {
        Some(base) => base.to_string(),
        None => porter(token),
    }
}

/// A piece of the script's patterns: `$C`, `$V`, `(${C})?`, `(${V})?`, `$v` and the last class
/// of its consonant-vowel-consonant test, `[^aeiouwxy]`.
#[derive(Clone, Copy)]
enum Piece {
    /// `[^aeiou][^aeiouy]*`: a consonant sequence.
    C,
    /// `[aeiouy][aeiou]*`: a vowel sequence.
    V,
    /// `(${C})?`.
    OptC,
    /// `(${V})?`.
    OptV,
    /// `[aeiouy]`: one vowel.
    Vowel,
    /// `[^aeiouwxy]`.
    NotWxy,
}

/// `[^aeiou]`.
fn consonant_start(b: u8) -> bool {
    !matches!(b, b'a' | b'e' | b'i' | b'o' | b'u')
}

/// `[^aeiouy]`.
fn consonant_more(b: u8) -> bool {
    !matches!(b, b'a' | b'e' | b'i' | b'o' | b'u' | b'y')
}

/// `[aeiouy]`.
fn vowel_start(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u' | b'y')
}

/// `[aeiou]`.
fn vowel_more(b: u8) -> bool {
    matches!(b, b'a' | b'e' | b'i' | b'o' | b'u')
}

/// The positions of `w` where a match of `pieces` anchored at its start can end.
fn ends(w: &[u8], pieces: &[Piece]) -> Vec<bool> {
    let n = w.len();
    let mut reach = vec![false; n + 1];
    reach[0] = true;
    for &piece in pieces {
        let mut next = match piece {
            Piece::OptC | Piece::OptV => reach.clone(),
            _ => vec![false; n + 1],
        };
        for i in (0..n).filter(|&i| reach[i]) {
            let run = |first: fn(u8) -> bool, more: fn(u8) -> bool, next: &mut Vec<bool>| {
                if first(w[i]) {
                    let mut j = i + 1;
                    next[j] = true;
                    while j < n && more(w[j]) {
                        j += 1;
                        next[j] = true;
                    }
                }
            };
            match piece {
                Piece::C | Piece::OptC => run(consonant_start, consonant_more, &mut next),
                Piece::V | Piece::OptV => run(vowel_start, vowel_more, &mut next),
                Piece::Vowel => next[i + 1] |= vowel_start(w[i]),
                Piece::NotWxy => next[i + 1] |= !matches!(w[i], b'a' | b'e' | b'i' | b'o' | b'u' | b'w' | b'x' | b'y'),
            }
        }
        reach = next;
    }
    reach
}

/// `$mgr0 = ^(${C})?${V}${C}`: measure > 0.
fn mgr0(w: &[u8]) -> bool {
    ends(w, &[Piece::OptC, Piece::V, Piece::C]).contains(&true)
}

/// `$meq1 = ^(${C})?${V}${C}(${V})?$`: measure 1.
fn meq1(w: &[u8]) -> bool {
    ends(w, &[Piece::OptC, Piece::V, Piece::C, Piece::OptV])[w.len()]
}

/// `$mgr1 = ^(${C})?${V}${C}${V}${C}`: measure > 1.
fn mgr1(w: &[u8]) -> bool {
    ends(w, &[Piece::OptC, Piece::V, Piece::C, Piece::V, Piece::C]).contains(&true)
}

/// `$_v = ^(${C})?${v}`: a vowel in the stem.
fn has_vowel(w: &[u8]) -> bool {
    ends(w, &[Piece::OptC, Piece::Vowel]).contains(&true)
}

/// `^${C}${v}[^aeiouwxy]$`: consonant sequence, vowel, a last consonant other than w, x, y.
fn cvc(w: &[u8]) -> bool {
    ends(w, &[Piece::C, Piece::Vowel, Piece::NotWxy])[w.len()]
}

/// The longest of `suffixes` that `w` ends with (the leftmost match of the alternation `(a|b|…)$`).
fn longest_suffix<'a>(w: &[u8], suffixes: &[&'a str]) -> Option<&'a str> {
    suffixes.iter().copied().filter(|s| w.ends_with(s.as_bytes())).max_by_key(|s| s.len())
}

/// Step 2's suffixes and their replacements (`%step2list`).
const STEP2: [(&str, &str); 21] = [
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
];

/// Step 3's suffixes and their replacements (`%step3list`).
const STEP3: [(&str, &str); 7] =
    [("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"), ("ful", ""), ("ness", "")];

/// Step 4's first list (with `ement`, without `ment` and `ent`: Lin's change).
const STEP4: [&str; 16] =
    ["al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ou", "ism", "ate", "iti", "ous", "ive", "ize"];

/// Replaces the longest suffix of `table` that `w` ends with by its replacement when the stem
/// before it has measure > 0 (steps 2 and 3).
fn replace_suffix(w: &mut Vec<u8>, table: &[(&str, &str)]) {
    let suffixes: Vec<&str> = table.iter().map(|(s, _)| *s).collect();
    if let Some(suffix) = longest_suffix(w, &suffixes) {
        let stem = w.len() - suffix.len();
        if mgr0(&w[..stem]) {
            let replacement = table.iter().find(|(s, _)| *s == suffix).map_or("", |(_, r)| r);
            w.truncate(stem);
            w.extend_from_slice(replacement.as_bytes());
        }
    }
}

/// Drops the last `n` bytes of `w` when what is left has measure > 1 (step 4).
fn drop_if_mgr1(w: &mut Vec<u8>, n: usize) {
    if mgr1(&w[..w.len() - n]) {
        w.truncate(w.len() - n);
    }
}

/// The script's `stem` (its Porter stemmer) of a lowercase word.
pub(crate) fn porter(word: &str) -> String {
    let mut w = word.as_bytes().to_vec();
    if w.len() < 3 {
        return word.to_string();
    }
    // An initial y is written Y so that no pattern takes it for a vowel.
    let initial_y = w[0] == b'y';
    if initial_y {
        w[0] = b'Y';
    }
    // Step 1a: (ss|i)es → ss|i; [^s]s → drop the s.
    if w.ends_with(b"sses") || w.ends_with(b"ies") {
        w.truncate(w.len() - 2);
    } else if w.len() >= 2 && w.ends_with(b"s") && w[w.len() - 2] != b's' {
        w.pop();
    }
    // Step 1b: eed → ee when measure > 0; else ed|ing dropped after a vowel, then at|bl|iz gets
    // its e back, a doubled consonant (not l, s, z) loses one, a short cvc word gains an e.
    if w.ends_with(b"eed") {
        if mgr0(&w[..w.len() - 3]) {
            w.pop();
        }
    } else if let Some(suffix) = longest_suffix(&w, &["ed", "ing"]) {
        let stem = w.len() - suffix.len();
        if has_vowel(&w[..stem]) {
            w.truncate(stem);
            let n = w.len();
            if longest_suffix(&w, &["at", "bl", "iz"]).is_some() {
                w.push(b'e');
            } else if n >= 2
                && w[n - 1] == w[n - 2]
                && !matches!(w[n - 1], b'a' | b'e' | b'i' | b'o' | b'u' | b'y' | b'l' | b's' | b'z')
            {
                w.pop();
            } else if cvc(&w) {
                w.push(b'e');
            }
        }
    }
    // Step 1c: y → i after a vowel.
    if w.ends_with(b"y") && has_vowel(&w[..w.len() - 1]) {
        let last = w.len() - 1;
        w[last] = b'i';
    }
    // Steps 2 and 3.
    replace_suffix(&mut w, &STEP2);
    replace_suffix(&mut w, &STEP3);
    // Step 4, as the script runs it: the list, then ment, then ent or else (s|t)ion, each on
    // what the one before left.
    if let Some(suffix) = longest_suffix(&w, &STEP4) {
        drop_if_mgr1(&mut w, suffix.len());
    }
    if w.ends_with(b"ment") {
        drop_if_mgr1(&mut w, 4);
    }
    // `ent`, or else `(s|t)ion` losing its `ion`: three bytes either way.
    if w.ends_with(b"ent") || w.ends_with(b"sion") || w.ends_with(b"tion") {
        drop_if_mgr1(&mut w, 3);
    }
    // Step 5: a final e goes when measure > 1, or measure 1 and not cvc; ll → l when measure > 1.
    if w.ends_with(b"e") {
        let stem = &w[..w.len() - 1];
        if mgr1(stem) || (meq1(stem) && !cvc(stem)) {
            w.pop();
        }
    }
    if w.ends_with(b"ll") && mgr1(&w) {
        w.pop();
    }
    if initial_y {
        w[0] = b'y';
    }
    String::from_utf8(w).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each `(word, stem)` is what ROUGE-1.5.5.pl -m gives (its -v trace, perl 5.36).
    fn check(cases: &[(&str, &str)]) {
        for &(word, stem) in cases {
            assert_eq!(script_stem(word), stem, "{word}");
        }
    }

    #[test]
    fn short_tokens_are_kept_and_exceptions_come_first() {
        // Up to three characters nothing is stemmed (the script's length test).
        check(&[("ies", "ies"), ("sky", "sky"), ("was", "was"), ("bus", "bus")]);
        // WordNet exceptions, not Porter: English and Indonesian words alike.
        check(&[("data", "datum"), ("media", "medium"), ("lain", "lie"), ("said", "say"), ("went", "go")]);
        check(&[("bled", "bleed"), ("children", "child"), ("best", "well"), ("offer", "offer"), ("testes", "testes")]);
        // Digits are consonants; a digit-only token passes through.
        check(&[("2006", "2006"), ("1990s", "1990"), ("covid19", "covid19")]);
    }

    #[test]
    fn step_1a_plurals() {
        check(&[("caresses", "caress"), ("ponies", "poni"), ("caress", "caress"), ("cats", "cat")]);
        check(&[("bukus", "buku"), ("kasus", "kasu"), ("hukumnyass", "hukumnyass")]);
    }

    #[test]
    fn step_1b_ed_ing_and_eed() {
        check(&[("feed", "feed"), ("agreed", "agre"), ("plastered", "plaster"), ("succeed", "succe")]);
        check(&[("motoring", "motor"), ("sing", "sing"), ("conflated", "conflat"), ("troubled", "troubl")]);
        check(&[("sized", "size"), ("hopping", "hop"), ("tanned", "tan"), ("falling", "fall")]);
        check(&[("hissing", "hiss"), ("fizzed", "fizz"), ("failing", "fail"), ("filing", "file")]);
    }

    #[test]
    fn step_1c_y() {
        check(&[("happy", "happi"), ("yyyy", "yyyi"), ("yellow", "yellow"), ("hanya", "hanya")]);
    }

    #[test]
    fn step_2_suffixes() {
        check(&[("relational", "relat"), ("conditional", "condit"), ("rational", "ration"), ("valenci", "valenc")]);
        check(&[("digitizer", "digit"), ("conformabli", "conform"), ("radicalli", "radic"), ("vileli", "vile")]);
        check(&[
            ("generalization", "gener"),
            ("operator", "oper"),
            ("hopefulness", "hope"),
            ("sensibiliti", "sensibl"),
        ]);
    }

    #[test]
    fn step_3_suffixes() {
        check(&[("triplicate", "triplic"), ("formative", "form"), ("formalize", "formal"), ("electrical", "electr")]);
        check(&[("hopeful", "hope"), ("goodness", "good")]);
    }

    #[test]
    fn step_4_suffixes_with_lins_change() {
        check(&[("revival", "reviv"), ("allowance", "allow"), ("inference", "infer"), ("airliner", "airlin")]);
        check(&[
            ("adjustable", "adjust"),
            ("replacement", "replac"),
            ("adjustment", "adjust"),
            ("dependent", "depend"),
        ]);
        check(&[("adoption", "adopt"), ("homologou", "homolog"), ("communism", "commun"), ("effective", "effect")]);
        check(&[("pemerintahan", "pemerintahan"), ("pengembangan", "pengembangan"), ("pembangunan", "pembangunan")]);
    }

    #[test]
    fn step_5_e_and_ll() {
        check(&[("probate", "probat"), ("rate", "rate"), ("cease", "ceas"), ("controll", "control"), ("roll", "roll")]);
        check(&[("kabupaten", "kabupaten"), ("presiden", "presiden"), ("menteri", "menteri"), ("polisi", "polisi")]);
    }
}
