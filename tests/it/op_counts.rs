//! Host waits outside pretraining, counted with libtorch's own operator hook (`--op-counts`,
//! `indolm_torch::device::op_counts`): the update of every fine-tuning task — sentiment, BertExt and
//! BertAbs (its label-smoothed loss masked, no `nonzero`) — makes the host wait 0 times, and
//! BertAbs's beam search waits once a decoding step (one read of every row's best candidates),
//! by its own tally and by the operator hook's, the encoding of the articles counted apart.
use crate::bertabs::{copy_split, recipe, tiny_bert, ud_sentences, write_split};
use crate::common::*;
use indolm_tasks::summarization::abs::DecodeState;
use indolm_tasks::summarization::beam::{decoding_reads, BeamConfig};
use indolm_tasks::summarization::data::load_split;
use indolm_tasks::summarization::inference::Summarizer;
use indolm_torch::device::op_counts::OpCounter;
use std::path::Path;
use tch::Device;

/// The `host syncs per update: N` of each engine in `--op-counts` output (one a trained unit),
/// with the table's first line, so that a missing count is not read as none.
fn syncs(stdout: &str) -> Vec<u64> {
    assert!(stdout.contains("ATen operations of the update of step "), "no counted update:\n{stdout}");
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("host syncs per update: "))
        .map(|n| n.trim().parse().unwrap_or_else(|_| panic!("a count: {n:?}")))
        .collect()
}

/// `finetune <kind> RECIPE --op-counts`: the counts of its updates.
fn counted(kind: &str, recipe: &Path) -> Vec<u64> {
    let (stdout, _) = indolm_ok(&["--threads", "2", "finetune", kind, recipe.to_str().unwrap(), "--op-counts"]);
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("ATen operations"))
        .take_while(|l| !l.starts_with("host syncs"))
        .filter(|l| l.contains("<- the host waits"))
        .collect();
    println!("finetune {kind} {}: waits {table:?}", recipe.file_stem().unwrap().to_string_lossy());
    syncs(&stdout)
}

#[test]
fn fine_tuning_updates_never_make_the_host_wait_and_beam_search_reads_once_a_step() {
    // Sentiment: one epoch of NusaX Indonesian (16 updates of 32; step 3 neither logs nor
    // evaluates), dropout on.
    let work = scratch("op-counts-finetune");
    let sentiment = crate::sentiment::write_recipe(&work, "sentiment", 1, "");
    assert_eq!(counted("sentiment", &sentiment), vec![0]);

    // BertExt and BertAbs on tiny Liputan6-layout data: 6 updates of 4 articles, evaluated at
    // steps 0 and 6 only, a checkpoint at the end; dropout on.
    let sentences = ud_sentences(12);
    let data = work.join("liputan6");
    write_split(&data, "train", &sentences[..48], 16, 1);
    for split in ["dev", "test"] {
        copy_split(&data, "train", split);
    }
    let init = work.join("init");
    tiny_bert(&init, &sentences);
    let abs =
        "layers = 1\nheads = 2\nff = 64\ndropout = 0.1\nbeam = 2\nmin_length = 2\nmax_length = 10\nmin_sentences = 1";
    let run = "max_steps = 6\nbatch_size = 4\neval_every = 6\neval_articles = 2";
    let ext_recipe = work.join("ext.toml");
    recipe(&ext_recipe, &work, "ext", "ext", &init, &format!("lr = 0.002\nwarmup_steps = 20\n{run}"), abs);
    assert_eq!(counted("summarize", &ext_recipe), vec![0]);
    let abs_recipe = work.join("abs.toml");
    let abs_optimizer = format!("lr = 0.05\nwarmup_steps = 30\nlr_dec = 0.05\nwarmup_dec = 30\n{run}");
    recipe(&abs_recipe, &work, "abs", "abs", &init, &abs_optimizer, abs);
    assert_eq!(counted("summarize", &abs_recipe), vec![0]);

    // Beam search with the trained BertAbs over six articles at once.
    let Summarizer::Abs(model) = Summarizer::load_trained(&work.join("ck/abs/best"), Device::Cpu).unwrap() else {
        panic!("a BertAbs")
    };
    let articles = load_split(&data, "dev").unwrap();
    let refs: Vec<&[Vec<String>]> = articles.iter().take(6).map(|a| a.article.as_slice()).collect();
    // The articles' encoding (before the first step) waits on its own: counted apart.
    let setup = OpCounter::start().unwrap();
    drop(DecodeState::new(&model, &refs).unwrap());
    let setup = setup.stop().unwrap().host_syncs();
    // Without trigram blocking no search widens, so every step is one read (barring exact ties
    // at a row's k-th best, which the tally would show).
    let plain = BeamConfig { block_trigrams: false, ..model.beam_config() };
    for (name, beam) in [("without trigram blocking", plain), ("with the model's settings", model.beam_config())] {
        let before = decoding_reads();
        let counter = OpCounter::start().unwrap();
        let summaries = model.generate_batch(&refs, &beam).unwrap();
        let counts = counter.stop().unwrap();
        let after = decoding_reads();
        let (steps, reads) = (after.steps - before.steps, after.reads - before.reads);
        let waits = counts.host_syncs() - setup;
        println!(
            "beam search {name}: {} articles, {steps} steps, {reads} reads by its tally, {waits} host waits by the \
             operator hook besides the encoding's {setup}",
            summaries.len()
        );
        assert!(steps > 0 && summaries.len() == refs.len());
        // The tally and the hook agree: every read the search makes is a wait, and nothing else
        // in a step waits (the decoder's inputs go to the device queued).
        assert_eq!(waits, reads, "{}", counts.table("beam search"));
        if !beam.block_trigrams {
            assert_eq!(reads, steps, "one read a step");
        }
    }
}
