//! The bf16 branches, executed on the CPU (libtorch has CPU bf16 kernels): without this they
//! would first run on a GPU, where a dtype error is a lost job. Each result is compared with fp32
//! on the same model and input, within a stated tolerance for bf16's 8-bit significand: a
//! pretraining run (through the test-only `INDOLM_TEST_BF16_ON_CPU`), pseudo-log-likelihoods,
//! a BertExt and a BertAbs training step, and batched beam decoding.
use crate::common::*;
use indolm_eval::pll::PllScorer;
use indolm_tasks::summarization::abs::{AbsConfig, BertAbs};
use indolm_tasks::summarization::ext::{label_tensor, BertExt, ExtConfig};
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::model::model_dir::load_masked_lm;
use indolm_torch::model::Precision;
use tch::{Device, Kind, Tensor};

/// Relative difference of two tensors: mean |a − b| over mean |b|.
fn relative(a: &Tensor, b: &Tensor) -> f64 {
    ((a - b).abs().mean(Kind::Float) / b.abs().mean(Kind::Float)).double_value(&[])
}

/// The first sentences of the Liputan6 sample's articles, as words.
fn articles(n: usize) -> Vec<Vec<Vec<String>>> {
    let split =
        indolm_tasks::summarization::data::load_split(&root().join("corpora/liputan6-sample"), "train").unwrap();
    split.into_iter().take(n).map(|a| a.article.into_iter().take(4).collect()).collect()
}

#[test]
fn pll_in_bf16_is_close_to_fp32() {
    let loaded = load_masked_lm(reference_model(), Device::Cpu).unwrap();
    let tokenizer = TextTokenizer::from_path(reference_model()).unwrap();
    let mut half = load_masked_lm(reference_model(), Device::Cpu).unwrap();
    half.model.set_precision(Precision::Bf16);
    let sentences =
        ["Petani menanam padi di sawah.", "Warga kota itu bekerja setiap hari di pasar.", "Hujan turun sejak pagi."];
    let score = |model| {
        let scorer = PllScorer::new(model, &tokenizer, Device::Cpu);
        let inputs: Vec<_> = sentences.iter().map(|s| scorer.full_input(s).unwrap()).collect();
        scorer.score(&inputs).into_iter().map(|s| s.pll).collect::<Vec<f64>>()
    };
    let (full, bf16) = (score(&loaded.model), score(&half.model));
    let worst = full.iter().zip(&bf16).map(|(a, b)| ((a - b) / a).abs()).fold(0.0, f64::max);
    println!("PLL fp32 {full:?}\nPLL bf16 {bf16:?}\nlargest relative difference {worst:.2e}");
    // Close, and not equal: the bf16 branches did run.
    assert!(worst < 2e-2 && worst > 0.0, "{worst}");
}

#[test]
fn bertext_and_bertabs_train_in_bf16() {
    let articles = articles(3);
    let refs: Vec<&[Vec<String>]> = articles.iter().map(Vec::as_slice).collect();

    // BertExt: the loss and its backward in bf16, against fp32.
    let config = ExtConfig { layers: 1, heads: 2, ff: 64, ..ExtConfig::default() };
    tch::manual_seed(5);
    let (ext, _) = BertExt::load(reference_model(), config.clone(), Device::Cpu).unwrap();
    let saved = scratch("bf16-ext").join("model");
    ext.save(&saved).unwrap();
    let (mut half, _) = BertExt::load(&saved, config, Device::Cpu).unwrap();
    half.set_precision(Precision::Bf16);
    let oracles: Vec<Vec<usize>> = articles.iter().map(|_| vec![0, 2]).collect();
    let losses: Vec<Tensor> = [&ext, &half]
        .iter()
        .map(|m| {
            let batch = m.encode(&refs).unwrap();
            let loss = m.loss(&batch, &label_tensor(&oracles, &batch), false);
            loss.backward();
            loss
        })
        .collect();
    let rel = relative(&losses[1], &losses[0]);
    println!(
        "BertExt loss fp32 {:.5} bf16 {:.5} (relative {rel:.1e})",
        losses[0].double_value(&[]),
        losses[1].double_value(&[])
    );
    assert!(rel < 2e-2 && rel > 0.0, "{rel}");
    let grads = half.vs.variables();
    let with_grad = grads.values().filter(|t| t.grad().defined()).count();
    let finite = grads.values().filter(|t| t.grad().defined()).all(|t| t.grad().isfinite().all().int64_value(&[]) == 1);
    assert!(with_grad > 0 && finite, "bf16 BertExt gradients: {with_grad} defined, all finite: {finite}");

    // BertAbs: teacher-forced log-probabilities and the loss's backward in bf16, then batched
    // beam decoding in bf16 (the search's thresholds on bf16 scores).
    let config = AbsConfig { layers: 2, heads: 4, ff: 80, max_length: 12, min_length: 3, ..AbsConfig::default() };
    tch::manual_seed(4);
    let (abs, _) = BertAbs::load(reference_model(), config.clone(), Device::Cpu).unwrap();
    let saved = scratch("bf16-abs").join("model");
    abs.save(&saved).unwrap();
    let (mut half, _) = BertAbs::load(&saved, config, Device::Cpu).unwrap();
    half.set_precision(Precision::Bf16);
    let summaries: Vec<Vec<Vec<String>>> = articles.iter().map(|a| vec![a[0].clone()]).collect();
    let summary_refs: Vec<&[Vec<String>]> = summaries.iter().map(Vec::as_slice).collect();
    let log_probs = |m: &BertAbs| {
        let batch = m.encode(&refs).unwrap();
        let targets = m.encode_targets(&summary_refs).unwrap();
        tch::no_grad(|| m.target_log_probs(&batch, &targets, false))
    };
    let rel = relative(&log_probs(&half), &log_probs(&abs));
    println!("BertAbs log-probabilities bf16 against fp32: mean relative difference {rel:.2e}");
    assert!(rel < 3e-2 && rel > 0.0, "{rel}");
    let batch = half.encode(&refs).unwrap();
    let targets = half.encode_targets(&summary_refs).unwrap();
    let (loss, tokens) = half.loss(&batch, &targets, true);
    loss.backward();
    assert!(loss.double_value(&[]).is_finite() && tokens > 0);
    let one_by_one: Vec<_> = refs.iter().map(|a| half.generate(a, &half.beam_config()).unwrap()).collect();
    let batched = half.generate_batch(&refs, &half.beam_config()).unwrap();
    assert_eq!(batched.len(), refs.len());
    let same = one_by_one.iter().zip(&batched).filter(|(a, b)| a == b).count();
    println!("batched bf16 decoding: {same} of {} summaries as decoded one at a time", refs.len());
}
