//! NusaX machine translation (the NusaX paper's Tables 4–6): the parallel corpus and its
//! translation directions (`data`), the bilingual lexicon and the word-substitution translator
//! built from it (`lexicon`), the paper's figures (`paper`), and the baselines that need no
//! model, Copy and word substitution, scored with SacreBLEU and chrF in the tables' layout
//! (`baselines`).
pub mod baselines;
pub mod data;
pub mod lexicon;
pub mod paper;
