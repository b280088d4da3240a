//! BertAbs and BertExtAbs: the decoder, generator and label-smoothed loss against an
//! independent reference (transformers' BertModel for the encoder, torch's own
//! TransformerDecoder for PreSumm's pre-norm decoder, PreSumm's LabelSmoothingLoss written with
//! `F.kl_div`); save/load; real learning on a fixture whose summary is recoverable from the
//! article (ROUGE before and after); BertExtAbs starting from a trained BertExt; bad recipes.
use crate::common::*;
use indolm_tasks::summarization::abs::{label_smoothed_loss, AbsConfig, BertAbs, DecodeState};
use indolm_torch::model::weights::write_file;
use indolm_torch::model::Precision;
use std::path::Path;
use tch::{Device, Kind, Tensor};

fn ours_loss(loss: &Tensor) -> f64 {
    loss.double_value(&[])
}

pub(crate) fn ud_sentences(max_words: usize) -> Vec<String> {
    let ud: String = ["id_csui-ud-train.conllu", "id_gsd-ud-dev.conllu", "id_gsd-ud-test.conllu"]
        .iter()
        .map(|f| std::fs::read_to_string(test_data().join("ud-indonesian").join(f)).unwrap())
        .collect();
    ud.lines()
        .filter_map(|l| l.strip_prefix("# text = "))
        .filter(|s| s.split_whitespace().count() <= max_words)
        .map(|s| s.to_lowercase())
        .collect()
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn decoder_and_loss_match_torch_and_presumm() {
    let init = copy_dir(reference_model(), "abs-init");
    tch::manual_seed(3);
    let config = AbsConfig { layers: 2, heads: 4, ff: 80, ..AbsConfig::default() };
    let (model, notes) = BertAbs::load(&init, config, Device::Cpu).unwrap();
    assert!(notes.iter().any(|n| n.to_string().contains("no decoder")), "{notes:?}");
    assert!(notes.iter().any(|n| n.to_string().contains("[unused0]")), "this vocabulary has no [unused*]: {notes:?}");
    // Move every decoder parameter off its initial value (LayerNorm 1/0, zero biases).
    tch::no_grad(|| {
        for (name, mut t) in model.vs.variables() {
            if !name.starts_with("bert.") {
                let _ = t.g_add_(&(t.randn_like() * 0.05));
            }
        }
    });
    let s = ud_sentences(14);
    let articles: Vec<Vec<Vec<String>>> = vec![
        s[0..5].iter().map(|x| words(x)).collect(),
        s[5..7].iter().map(|x| words(x)).collect(),
        s[7..10].iter().map(|x| words(x)).collect(),
    ];
    let summaries: Vec<Vec<Vec<String>>> = vec![
        vec![words(&s[20]), words(&s[21])],
        vec![words(&s[22])],
        vec![words(&s[23]), words(&s[24]), words(&s[25])],
    ];
    let refs: Vec<&[Vec<String>]> = articles.iter().map(Vec::as_slice).collect();
    let batch = model.encode(&refs).unwrap();
    assert_eq!(batch.input_ids.size()[1], 64, "the first article is cut at the model's 64 positions");
    let targets = model.encode_targets(&summaries.iter().map(Vec::as_slice).collect::<Vec<_>>()).unwrap();
    let log_probs = tch::no_grad(|| model.target_log_probs(&batch, &targets, false));
    let (loss, tokens) = tch::no_grad(|| model.loss(&batch, &targets, false));

    let dir = scratch("abs-parity");
    let saved = dir.join("model");
    model.save(&saved).unwrap();
    let reference_file = dir.join("ref.safetensors");
    let pad = Tensor::from_slice(&[model.tokenizer.special.pad]);
    let named = [
        ("input_ids", &batch.input_ids),
        ("segments", &batch.segments),
        ("attention", &batch.attention),
        ("targets", &targets),
        ("log_probs", &log_probs),
        ("loss", &loss.view([1])),
        ("pad", &pad),
    ];
    write_file(&reference_file, &named.iter().map(|(n, t)| (n.to_string(), t.shallow_clone())).collect::<Vec<_>>())
        .unwrap();
    let out: serde_json::Value = serde_json::from_str(
        reference(&["presumm-decoder", saved.to_str().unwrap(), reference_file.to_str().unwrap()]).trim(),
    )
    .unwrap();
    println!("reference: {out}");
    let max_diff = out["max_abs_log_prob"].as_f64().unwrap();
    let (theirs, ours) = (out["loss"].as_f64().unwrap(), out["ours"].as_f64().unwrap());
    println!(
        "log-prob max abs difference {max_diff:.2e}; loss ours {ours:.6} reference {theirs:.6} over {tokens} tokens"
    );
    assert_eq!(out["tokens"].as_i64().unwrap(), tokens);
    assert!(max_diff < 1e-4, "decoder log-probabilities differ by {max_diff}");
    assert!((ours - theirs).abs() / theirs.abs() < 1e-5, "loss {ours} vs {theirs}");

    // The saved directory loads back complete, with the same outputs.
    let (reloaded, notes) = BertAbs::load(&saved, model.abs.clone(), Device::Cpu).unwrap();
    assert!(!notes.iter().any(|n| n.to_string().contains("initialised")), "{notes:?}");
    let again = tch::no_grad(|| reloaded.target_log_probs(&batch, &targets, false));
    assert!(again.allclose(&log_probs, 0.0, 1e-6, false));

    // bf16 matrix products (CUDA's precision, run here on CPU to check every cast): fp32
    // log-probabilities close to fp32's, and decoding runs with bf16 caches.
    let (mut half, _) = BertAbs::load(&saved, model.abs.clone(), Device::Cpu).unwrap();
    half.set_precision(Precision::Bf16);
    let low = tch::no_grad(|| half.target_log_probs(&batch, &targets, false));
    assert_eq!(low.kind(), Kind::Float);
    let rel = ((&low - &log_probs).abs().mean(Kind::Float) / log_probs.abs().mean(Kind::Float)).double_value(&[]);
    let (half_loss, _) = tch::no_grad(|| half.loss(&batch, &targets, false));
    let loss_rel = ((half_loss.double_value(&[]) - ours_loss(&loss)) / ours_loss(&loss)).abs();
    println!("bf16 against fp32: log-probabilities mean relative difference {rel:.2e}, loss {loss_rel:.2e}");
    assert!(rel < 2e-2 && loss_rel < 2e-2, "{rel} {loss_rel}");
    assert!(!half.generate(refs[0], &half.beam_config()).unwrap().is_empty());

    // Incremental decoding (each layer's self-attention cache, hypotheses reordered between
    // steps) gives the teacher-forced log-probabilities: two hypotheses of the first article
    // following the first and the third summary, swapping rows every step.
    let two = model.encode(&[refs[0], refs[0]]).unwrap();
    let pair = model.encode_targets(&[summaries[0].as_slice(), summaries[2].as_slice()]).unwrap();
    let forced = tch::no_grad(|| model.target_log_probs(&two, &pair, false));
    let rows: Vec<Vec<i64>> = (0..2).map(|r| Vec::<i64>::try_from(pair.get(r)).unwrap()).collect();
    let steps = rows.iter().map(|r| r.iter().position(|&t| t == model.markers.eos).unwrap()).min().unwrap();
    let mut state = DecodeState::new(&model, &refs[..1]).unwrap();
    let mut worst: f64 = 0.0;
    // Each step's input: hypothesis 0's and hypothesis 1's i-th target token.
    for (i, (&a, &b)) in rows[0].iter().zip(&rows[1]).take(steps).enumerate() {
        // Step i: row 0 holds hypothesis i % 2, whose previous row was the other one.
        let order = if i % 2 == 0 { [0usize, 1] } else { [1, 0] };
        let parents = if i == 0 { [0i64, 0] } else { [1, 0] };
        let tokens = [a, b];
        let step = state.step(&parents, &order.map(|h| tokens[h]));
        for (row, &h) in order.iter().enumerate() {
            worst =
                worst.max((step.get(row as i64) - forced.get(h as i64).get(i as i64)).abs().max().double_value(&[]));
        }
    }
    println!("incremental decoding against teacher forcing over {steps} steps: max difference {worst:.2e}");
    assert!(worst < 1e-4, "{worst}");

    // Without smoothing the loss is the gold tokens' negative log-likelihood.
    let lp = Tensor::from_slice(&[0.7f32, 0.2, 0.1]).log().view([1, 3]);
    let gold = Tensor::from_slice(&[1i64]);
    assert!((label_smoothed_loss(&lp, &gold, 0.0, 0).double_value(&[]) + 0.2f64.ln()).abs() < 1e-6);
    // With smoothing 0.1 over V - 2 = 1 entry: KL(p || q) with p = (0, 0.9, 0.1).
    let kl = 0.9 * (0.9f64 / 0.2).ln() + 0.1 * (0.1f64 / 0.1).ln();
    assert!((label_smoothed_loss(&lp, &gold, 0.1, 0).double_value(&[]) - kl).abs() < 1e-6);
}

pub(crate) fn copy_split(root: &Path, from: &str, to: &str) {
    std::fs::create_dir_all(root.join(to)).unwrap();
    for e in std::fs::read_dir(root.join(from)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), root.join(to).join(e.file_name())).unwrap();
    }
}

/// Liputan6-layout articles of three UD sentences drawn from `pool` (seeded), whose summary is
/// the first sentence.
pub(crate) fn write_split(root: &Path, split: &str, pool: &[String], count: usize, seed: u64) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = root.join(split);
    std::fs::create_dir_all(&dir).unwrap();
    for a in 0..count {
        let article: Vec<Vec<String>> = (0..3).map(|_| words(&pool[rng.random_range(0..pool.len())])).collect();
        let summary = article[..1].to_vec();
        let json = serde_json::json!({"id": format!("{split}-{a}"), "url": "", "clean_article": article, "clean_summary": summary});
        std::fs::write(dir.join(format!("{a:04}.json")), json.to_string()).unwrap();
    }
}

/// A random-init tiny BERT with a WordPiece vocabulary trained on the sentences.
pub(crate) fn tiny_bert(dir: &Path, sentences: &[String]) {
    use indolm_torch::data::tokenizer_train::{train_wordpiece, TrainOptions};
    use indolm_torch::model::model_dir::{save_model_dir, save_model_files};
    use indolm_torch::model::{BertConfig, BertForMaskedLM};
    let tok =
        train_wordpiece(sentences, &TrainOptions { vocab_size: 2000, min_frequency: 2, lowercase: true }).unwrap();
    let config = BertConfig::new(tok.vocab_size() as i64, 64, 2, 2, 256);
    tch::manual_seed(5);
    let vs = tch::nn::VarStore::new(Device::Cpu);
    let _ = BertForMaskedLM::new(&vs.root(), &config, false);
    save_model_dir(dir, true, &[], |d| save_model_files(d, &config, &vs, &tok)).unwrap();
}

/// A summarization recipe; `optimizer` holds `[optimizer]` keys and `eval_every` / `eval_articles`,
/// which go to `[eval]`; PreSumm's Adam and Noam schedule, a checkpoint every 100 updates.
pub(crate) fn recipe(path: &Path, work: &Path, name: &str, task: &str, init: &Path, optimizer: &str, abs: &str) {
    let (mut opt, mut eval) = (String::new(), String::new());
    for line in optimizer.lines() {
        match line.split_once(" = ") {
            Some(("eval_every", v)) => eval.push_str(&format!("every = {v}\n")),
            Some(("eval_articles", v)) => eval.push_str(&format!("articles = {v}\n")),
            _ => opt.push_str(&format!("{line}\n")),
        }
    }
    let text = format!(
        "kind = \"summarize\"\nname = \"{name}\"\noutput_dir = \"{}\"\ntask = \"{task}\"\ninit = \"{}\"\n[data]\nroot = \"{}\"\n[optimizer]\nschedule = \"noam\"\neps = 1e-9\nweight_decay = 0.0\ngrad_clip = 0.0\n{opt}[eval]\n{eval}[checkpoint]\nevery = 100\n[logging]\ntensorboard = \"{}\"\n[abs]\n{abs}\n[ext]\nlayers = 1\nheads = 2\nff = 64\nmin_sentences = 2\nmin_words = 8\n",
        work.join("ck").display(),
        init.display(),
        work.join("liputan6").display(),
        work.join("runs").display(),
    );
    std::fs::write(path, text).unwrap();
}

#[test]
fn bertabs_learns_to_write_the_lead_and_bertextabs_starts_from_bertext() {
    let work = scratch("bertabs");
    let sentences = ud_sentences(12);
    let data = work.join("liputan6");
    // Overfitting a few articles: each has its own summary, so the decoder must read the
    // encoder to know which one to write.
    let pool = &sentences[..48];
    write_split(&data, "train", pool, 16, 1);
    for split in ["dev", "test"] {
        copy_split(&data, "train", split);
    }
    let init = work.join("init");
    tiny_bert(&init, &sentences);

    let abs =
        "layers = 2\nheads = 4\nff = 128\ndropout = 0.1\nbeam = 3\nmin_length = 3\nmax_length = 30\nmin_sentences = 1";
    let optimizer = |steps: u64| {
        format!("lr = 0.05\nwarmup_steps = 200\nlr_dec = 0.05\nwarmup_dec = 200\nmax_steps = {steps}\nbatch_size = 8\neval_every = {}\neval_articles = 12", steps / 6)
    };
    let abs_recipe = work.join("abs.toml");
    recipe(&abs_recipe, &work, "abs", "abs", &init, &optimizer(300), abs);
    let (stdout, _) = indolm_ok(&["finetune", "summarize", abs_recipe.to_str().unwrap()]);
    println!("{stdout}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("ck/abs/results.json")).unwrap()).unwrap();
    let before = results["dev_before"]["rouge1"].as_f64().unwrap();
    let after = results["dev_best"]["rouge1"].as_f64().unwrap();
    println!("BertAbs dev ROUGE-1 before training {before:.2}, after {after:.2}");
    assert!(
        before < 10.0 && after > 90.0,
        "BertAbs did not learn to write each article's summary: {before} -> {after}"
    );
    let test = &results["test"][0][1];
    let row =
        |name: &str| test.as_array().unwrap().iter().find(|r| r["system"] == name).unwrap()["rouge1"].as_f64().unwrap();
    assert!(row("BertAbs") > 90.0, "{test}");
    let candidates = std::fs::read_to_string(work.join("ck/abs/test.candidate")).unwrap();
    assert_eq!(candidates.lines().count(), 16);
    // The written predictions score the same through `eval rouge`.
    let ck = work.join("ck/abs");
    let (table, _) = indolm_ok(&[
        "eval",
        "rouge",
        "--pred",
        ck.join("test.candidate").to_str().unwrap(),
        "--ref",
        ck.join("test.gold").to_str().unwrap(),
    ]);
    assert!(table.contains(&format!("| 16 | {:.2} |", row("BertAbs"))), "{table}");

    // The saved model summarizes a plain-text article (here a training one, so the output is known).
    let article: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("train/0000.json")).unwrap()).unwrap();
    let sentences: Vec<String> = article["clean_article"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect::<Vec<_>>().join(" "))
        .collect();
    let text_file = work.join("article.txt");
    std::fs::write(&text_file, sentences.iter().map(|s| format!("{s}.")).collect::<Vec<_>>().join(" ")).unwrap();
    let (summary, _) = indolm_ok(&[
        "summarize",
        "--model",
        work.join("ck/abs/best").to_str().unwrap(),
        "--file",
        text_file.to_str().unwrap(),
    ]);
    println!("summary of train/0000: {summary}");
    assert!(!summary.trim().is_empty());
    // An article longer than the model's positions is summarized with a note on what was cut.
    let long_file = work.join("long.txt");
    let long: Vec<String> = (0..60).map(|i| format!("{} {i}.", sentences[i % sentences.len()])).collect();
    std::fs::write(&long_file, long.join(" ")).unwrap();
    let (_, notes) = indolm_ok(&[
        "summarize",
        "--model",
        work.join("ck/abs/best").to_str().unwrap(),
        "--file",
        long_file.to_str().unwrap(),
    ]);
    assert!(
        notes.contains("note: article 1:") && notes.contains(" sentences; the model reads the first 512 tokens"),
        "{notes}"
    );
    assert!(notes.contains("and the rest is cut"), "{notes}");

    batched_decoding_equals_one_article_at_a_time(&work.join("ck/abs/best"), &data);

    // BertExtAbs: refused from a plain BERT, started from a trained BertExt with its encoder.
    let extabs_recipe = work.join("extabs.toml");
    recipe(&extabs_recipe, &work, "extabs", "extabs", &init, &optimizer(200), abs);
    let err = indolm_fails(&["finetune", "summarize", extabs_recipe.to_str().unwrap()]);
    assert!(err.contains("starts from a fine-tuned BertExt"), "{err}");
    let ext_recipe = work.join("ext.toml");
    recipe(
        &ext_recipe,
        &work,
        "ext",
        "ext",
        &init,
        "lr = 0.002\nwarmup_steps = 20\nmax_steps = 40\nbatch_size = 8\neval_every = 20",
        abs,
    );
    indolm_ok(&["finetune", "summarize", ext_recipe.to_str().unwrap()]);
    let ext_best = work.join("ck/ext/best");
    let (from_ext, notes) =
        BertAbs::load(&ext_best, AbsConfig { layers: 2, heads: 4, ff: 128, ..AbsConfig::default() }, Device::Cpu)
            .unwrap();
    assert!(
        notes.iter().any(|n| n.to_string().contains("its encoder is used")),
        "the BertExt layers are left out: {notes:?}"
    );
    let ext_weights = indolm_torch::model::model_dir::read_model_files(&ext_best).unwrap().tensors;
    let init_weights = indolm_torch::model::model_dir::read_model_files(&init).unwrap().tensors;
    let mut fine_tuned = 0;
    for (name, var) in from_ext.vs.variables().into_iter().filter(|(n, _)| n.starts_with("bert.")) {
        assert!(var.equal(&ext_weights[&name]), "{name} is not BertExt's");
        fine_tuned += usize::from(!var.equal(&init_weights[&name]));
    }
    assert!(fine_tuned > 10, "BertExt's encoder should differ from the initial BERT");
    let words_of = |name: &str| from_ext.vs.variables()[name].shallow_clone();
    assert!(words_of("decoder.embeddings.weight").equal(&words_of("bert.embeddings.word_embeddings.weight")));
    recipe(&extabs_recipe, &work, "extabs", "extabs", &ext_best, &optimizer(300), abs);
    let (stdout, _) = indolm_ok(&["finetune", "summarize", extabs_recipe.to_str().unwrap()]);
    println!("{stdout}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("ck/extabs/results.json")).unwrap()).unwrap();
    assert_eq!(results["system"], "BertExtAbs");
    let after = results["dev_best"]["rouge1"].as_f64().unwrap();
    println!("BertExtAbs dev ROUGE-1 after training {after:.2}");
    assert!(after > 90.0, "{results}");
    // Its config.json keeps the BertExt settings it started from; `summarize` still generates.
    let extabs_best = work.join("ck/extabs/best");
    let (summary, _) =
        indolm_ok(&["summarize", "--model", extabs_best.to_str().unwrap(), "--file", text_file.to_str().unwrap()]);
    assert!(!summary.trim().is_empty());

    // A decoder recipe without the decoder's learning rate is refused.
    let bad = work.join("bad.toml");
    recipe(
        &bad,
        &work,
        "bad",
        "abs",
        &init,
        "lr = 0.02\nwarmup_steps = 20\nmax_steps = 40\nbatch_size = 8\neval_every = 20",
        abs,
    );
    let err = indolm_fails(&["finetune", "summarize", bad.to_str().unwrap()]);
    assert!(err.contains("lr_dec"), "{err}");

    // bf16 on CPU is refused with pretraining's message, before anything is trained.
    let text = std::fs::read_to_string(&abs_recipe).unwrap();
    std::fs::write(&bad, format!("precision = \"bf16\"\n{text}")).unwrap();
    let err = indolm_fails(&["--device", "cpu", "finetune", "summarize", bad.to_str().unwrap()]);
    assert!(err.contains("precision") && err.contains("bf16 needs a CUDA device; use \"auto\""), "{err}");
}

/// Batched beam search gives every article the summary it gets alone: the sample corpus' test
/// split (9 sentences, about 140 words) with the training articles (3 short sentences), so of
/// very different lengths and finishing at different steps, in one batch, in batches of 3, and
/// through `summarize`.
fn batched_decoding_equals_one_article_at_a_time(model_dir: &Path, data: &Path) {
    use indolm_tasks::summarization::data::load_split;
    use indolm_tasks::summarization::inference::Summarizer;
    let Summarizer::Abs(model) = Summarizer::load_trained(model_dir, Device::Cpu).unwrap() else { panic!("a BertAbs") };
    let sample = load_split(&root().join("corpora/liputan6-sample"), "test").unwrap();
    let train = load_split(data, "train").unwrap();
    let articles: Vec<&[Vec<String>]> = sample.iter().chain(&train).map(|a| a.article.as_slice()).collect();
    let words: Vec<usize> = articles.iter().map(|a| a.iter().map(Vec::len).sum()).collect();
    assert!(words.iter().max().unwrap() >= &(3 * words.iter().min().unwrap()), "{words:?}");
    let beam = model.beam_config();
    let alone: Vec<Vec<Vec<String>>> = articles.iter().map(|a| model.generate(a, &beam).unwrap()).collect();
    let together = model.generate_batch(&articles, &beam).unwrap();
    for (i, (a, b)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(a, b, "article {i}: batched decoding differs from decoding it alone");
    }
    for chunk in articles.chunks(3).zip(alone.chunks(3)) {
        assert_eq!(&model.generate_batch(chunk.0, &beam).unwrap(), chunk.1);
    }
    let lengths: Vec<usize> = alone.iter().map(|s| s.iter().map(Vec::len).sum()).collect();
    println!("{} articles: summaries of {:?} words, identical batched and alone", articles.len(), lengths);
    // The command line, one summary a line, in the folder's order, whatever the batch size.
    let folder = root().join("corpora/liputan6-sample/test");
    let by = |batch: &str| {
        indolm_ok(&[
            "summarize",
            "--model",
            model_dir.to_str().unwrap(),
            "--liputan6",
            folder.to_str().unwrap(),
            "--batch-size",
            batch,
        ])
        .0
    };
    let (one, four) = (by("1"), by("4"));
    assert_eq!(one, four);
    let expected: Vec<String> =
        alone[..sample.len()].iter().map(|s| indolm_tasks::summarization::data::join(s)).collect();
    assert_eq!(one.lines().collect::<Vec<_>>(), expected.iter().map(String::as_str).collect::<Vec<_>>());
}
