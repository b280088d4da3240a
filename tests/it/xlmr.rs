//! XLM-RoBERTa encoders against transformers: a tiny random `XLMRobertaForMaskedLM` with a
//! SentencePiece Unigram `tokenizer.json` (XLM-R's special tokens), built by
//! `hf_reference.py make-xlmr`. Token ids equal AutoTokenizer's, logits on a padded batch and
//! PLL per sentence equal transformers', `eval bias` decides pairs as transformers' scores do,
//! a model without an MLM head (multilingual-E5's shape) is refused for scoring unless
//! `--allow-random-head`, and a sentiment fine-tune saves what
//! `AutoModelForSequenceClassification` loads with the same logits.
use crate::common::*;
use indolm_eval::pll::PllScorer;
use indolm_torch::data::tokenizer::TextTokenizer;
use indolm_torch::model::model_dir::load_masked_lm;
use indolm_torch::model::weights;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tch::{Device, Kind};

/// The tiny XLM-R directory (with its MLM head), built once per run.
fn xlmr_model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("xlmr-model");
        reference(&["make-xlmr", dir.to_str().unwrap(), "1"]);
        dir
    })
}

/// The same shape without `lm_head.*` (an `XLMRobertaModel`, as multilingual-E5 ships).
fn headless_model() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("xlmr-headless");
        reference(&["make-xlmr", dir.to_str().unwrap(), "0"]);
        dir
    })
}

/// UD Indonesian and Javanese NusaX sentences that fit the model's positions.
fn sentences(n: usize) -> Vec<String> {
    let tok = TextTokenizer::from_dir(xlmr_model()).unwrap();
    let ud = std::fs::read_to_string(test_data().join("ud-indonesian/id_gsd-ud-test.conllu")).unwrap();
    let mut out: Vec<String> = ud
        .lines()
        .filter_map(|l| l.strip_prefix("# text = "))
        .map(String::from)
        .filter(|s| tok.encode(s).unwrap().len() <= 40)
        .take(n)
        .collect();
    out.push("Ibu kota Indonesia adalah Jakarta.".into());
    out
}

#[test]
fn xlmr_tokenizer_ids_equal_autotokenizer() {
    let dir = xlmr_model();
    let work = scratch("xlmr-tokenize");
    let out = work.join("ids.json");
    reference(&["tokenize-auto", dir.to_str().unwrap(), out.to_str().unwrap()]);
    let expected: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let tok = TextTokenizer::from_dir(dir).unwrap();
    let ids = |t: &str| tok.encode(t).unwrap().into_iter().map(u64::from).collect::<Vec<_>>();
    let to_ids = |v: &serde_json::Value| v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect::<Vec<_>>();
    let texts = expected["texts"].as_array().unwrap();
    let mut differ = 0;
    for (text, want) in texts.iter().zip(expected["ids"].as_array().unwrap()) {
        if ids(text.as_str().unwrap()) != to_ids(want) {
            differ += 1;
        }
    }
    println!("{} sentences tokenized, {differ} differ from AutoTokenizer", texts.len());
    assert_eq!(differ, 0);
    // XLM-R's special tokens, found through the directory's files and the post-processor.
    let names = ["<pad>", "<unk>", "<s>", "</s>", "<mask>"].map(|t| tok.token_to_id(t).unwrap() as i64);
    let s = tok.special;
    assert_eq!([s.pad, s.unk, s.cls, s.sep, s.mask], names);
    assert_eq!(tok.special_names.mask(), "<mask>");
    // tokenizer.json alone (no special_tokens_map.json): the template's <s>/</s>, XLM-R's names.
    let alone = TextTokenizer::from_tokenizer_json(&dir.join("tokenizer.json")).unwrap();
    assert_eq!((alone.special, &alone.special_names), (tok.special, &tok.special_names));
    // `[MASK]` in user text is the model's mask token.
    assert_eq!(ids(&tok.with_model_mask("saya [MASK] nasi")), to_ids(&expected["mask"]));
}

#[test]
fn xlmr_logits_match_transformers_on_a_padded_batch() {
    let dir = xlmr_model();
    let reference = weights::read_file(&dir.join("reference.safetensors")).unwrap();
    let loaded = load_masked_lm(dir, Device::Cpu).unwrap();
    assert!(
        loaded.notes.is_empty(),
        "unexpected notes: {:?}",
        loaded.notes.iter().map(|n| n.to_string()).collect::<Vec<_>>()
    );
    assert!(loaded.config.is_roberta());
    let (ids, mask) = (&reference["input_ids"], &reference["attention_mask"]);
    assert!(mask.eq(0).any().int64_value(&[]) == 1, "the batch is padded");
    let logits = tch::no_grad(|| loaded.model.logits(ids, None, Some(mask)));
    let real = mask.unsqueeze(-1).to_kind(Kind::Bool);
    let (a, b) = (logits.masked_select(&real), reference["logits"].masked_select(&real));
    let diff = (&a - &b).abs().max().double_value(&[]);
    let rel = diff / b.abs().max().double_value(&[]);
    println!("max |indolm - transformers| logits at real tokens {diff:.2e} ({rel:.2e} of the largest logit)");
    assert!(diff < 1e-4);
    // Packed (the real tokens only) equals padded.
    let lengths: Vec<usize> = Vec::<i64>::try_from(mask.sum_dim_intlist(1, false, Kind::Int64))
        .unwrap()
        .into_iter()
        .map(|l| l as usize)
        .collect();
    let packing = indolm_torch::model::bert::Packing::of_lengths(&lengths, ids.size()[1] as usize, Device::Cpu);
    let packed = tch::no_grad(|| {
        let hidden = loaded.model.bert.forward_packed(ids, None, mask, &packing, false);
        let padded = loaded.model.bert.forward(ids, None, Some(mask), false);
        (hidden - padded).masked_select(&real).abs().max().double_value(&[])
    });
    assert!(packed < 1e-4, "packed vs padded hidden states differ by {packed}");
}

/// The reference's per-sentence scores (`hf_reference.py COMMAND DIR SENTENCES OUT`).
fn reference_scores(command: &str, dir: &Path, work: &Path, sentences: &[String]) -> Vec<serde_json::Value> {
    std::fs::write(work.join("s.txt"), sentences.join("\n")).unwrap();
    reference(&[
        command,
        dir.to_str().unwrap(),
        work.join("s.txt").to_str().unwrap(),
        work.join("ref.json").to_str().unwrap(),
    ]);
    serde_json::from_str(&std::fs::read_to_string(work.join("ref.json")).unwrap()).unwrap()
}

#[test]
fn xlmr_pll_matches_transformers_per_token_loop() {
    let dir = xlmr_model();
    let work = scratch("xlmr-pll");
    let sentences = sentences(8);
    let expected = reference_scores("pll", dir, &work, &sentences);
    let loaded = load_masked_lm(dir, Device::Cpu).unwrap();
    let mut scorer = PllScorer::new(&loaded.model, &loaded.tokenizer, Device::Cpu);
    scorer.token_budget = 512; // several padded batches of mixed lengths
    let inputs: Vec<_> = sentences.iter().map(|s| scorer.full_input(s).unwrap()).collect();
    let scores = scorer.score(&inputs);
    let mut worst: f64 = 0.0;
    for (s, e) in scores.iter().zip(&expected) {
        assert_eq!(s.tokens as u64, e["tokens"].as_u64().unwrap());
        worst = worst.max((s.pll - e["pll"].as_f64().unwrap()).abs() / e["pll"].as_f64().unwrap().abs());
    }
    println!("{} sentences: max relative PLL difference {worst:.2e}", scores.len());
    assert!(worst <= 1e-4);
    // PLL-word-l2r: words as SentencePiece's Metaspace splits them (transformers' word_ids()).
    let expected = reference_scores("pll-word-l2r", dir, &work, &sentences);
    let inputs: Vec<_> = sentences.iter().map(|s| scorer.word_l2r_input(s).unwrap()).collect();
    let multi_piece = inputs.iter().flat_map(|i| &i.also_masked).filter(|m| !m.is_empty()).count();
    assert!(multi_piece > 10, "words of several pieces: {multi_piece}");
    let mut worst: f64 = 0.0;
    for (s, e) in scorer.score(&inputs).iter().zip(&expected) {
        assert_eq!(s.correct as u64, e["correct"].as_u64().unwrap(), "rank-1 hits");
        worst = worst.max((s.pll - e["pll"].as_f64().unwrap()).abs() / e["pll"].as_f64().unwrap().abs());
    }
    println!("PLL-word-l2r ({multi_piece} pieces masked with later ones): max relative difference {worst:.2e}");
    assert!(worst <= 1e-4);
}

/// `eval bias` on the fixture pairs, under PPPL and AUL in one pass, into `out`.
fn eval_bias(model: &Path, out: &Path, extra: &[&str]) -> (String, String) {
    let pairs = root().join("tests/fixtures/indobias");
    let mut args = vec!["--threads", "1", "eval", "bias", "--model", model.to_str().unwrap(), "--pairs"];
    args.push(pairs.to_str().unwrap());
    args.extend(["--languages", "indonesian", "javanese", "--metric", "pppl", "aul", "--out", out.to_str().unwrap()]);
    args.extend(extra);
    indolm_ok(&args)
}

#[test]
fn xlmr_eval_bias_decides_pairs_as_transformers_scores_do() {
    use indolm_eval::bias::records::read_evaluation;
    let dir = xlmr_model();
    let work = scratch("xlmr-bias");
    let out = work.join("out");
    let (stdout, _) = eval_bias(dir, &out, &[]);
    assert!(!stdout.contains("Warning"), "{stdout}");
    let (pppl, records) = read_evaluation(&out).unwrap();
    let (aul, aul_records) = read_evaluation(&out.join("bias-aul")).unwrap();
    assert!(pppl.warning.is_none() && records.len() == 80, "{} pairs", records.len());
    // transformers' scores of every sentence: PLL one mask a pass, and AUL.
    let sentences: Vec<String> = records.iter().flat_map(|r| [r.protrope.clone(), r.antitrope.clone()]).collect();
    let plls = reference_scores("pll", dir, &work, &sentences);
    let auls = reference_scores("aul", dir, &work, &sentences);
    let mean = |v: &serde_json::Value, key: &str, per_token: bool| {
        v[key].as_f64().unwrap() / if per_token { v["tokens"].as_f64().unwrap() } else { 1.0 }
    };
    let (mut differ, mut worst) = (0, 0.0f64);
    let mut wins = std::collections::BTreeMap::<String, (usize, usize, usize, usize)>::new();
    for (i, (r, a)) in records.iter().zip(&aul_records).enumerate() {
        let (pro, anti) = (&plls[2 * i], &plls[2 * i + 1]);
        worst = worst.max((r.pro_pll - pro["pll"].as_f64().unwrap()).abs() / pro["pll"].as_f64().unwrap().abs());
        // PPPL: the stereotype wins when its mean PLL per token is strictly higher.
        let pppl_win = mean(pro, "pll", true) > mean(anti, "pll", true);
        let aul_win = mean(&auls[2 * i], "aul", false) > mean(&auls[2 * i + 1], "aul", false);
        differ += usize::from(pppl_win != r.is_win()) + usize::from(aul_win != a.is_win());
        let w = wins.entry(r.language.clone()).or_default();
        *w = (w.0 + usize::from(pppl_win), w.1 + usize::from(aul_win), w.2 + 1, w.3);
    }
    assert_eq!(differ, 0, "pairs decided otherwise than transformers' scores decide them");
    for (report, pick) in [(&pppl, 0), (&aul, 1)] {
        for l in &report.languages {
            let w = wins[&l.language];
            let expected = 100.0 * if pick == 0 { w.0 } else { w.1 } as f64 / w.2 as f64;
            println!(
                "{} {}: win rate {:.1} (transformers' scores give {expected:.1})",
                report.metric, l.language, l.overall.win_rate
            );
            assert!((l.overall.win_rate - expected).abs() < 1e-9);
        }
    }
    println!("max relative PLL difference over {} sentences {worst:.2e}", sentences.len());
    assert!(worst <= 1e-4);
}

#[test]
fn xlmr_without_mlm_head_is_refused_for_scoring_unless_allowed() {
    let dir = headless_model();
    let loaded = load_masked_lm(dir, Device::Cpu).unwrap();
    assert!(loaded.notes.iter().any(|n| n.initialises(indolm_torch::model::Component::MlmHead)));
    let text = scratch("xlmr-headless-text").join("s.txt");
    std::fs::write(&text, "Ibu kota Indonesia adalah Jakarta.\n").unwrap();
    let pll = ["--threads", "1", "eval", "pll", "--model", dir.to_str().unwrap(), "--text", text.to_str().unwrap()];
    let err = indolm_fails(&pll);
    assert!(err.contains("no trained MLM head") && err.contains("--allow-random-head"), "{err}");
    let pairs = root().join("tests/fixtures/indobias");
    let err = indolm_fails(&["eval", "bias", "--model", dir.to_str().unwrap(), "--pairs", pairs.to_str().unwrap()]);
    assert!(err.contains("no trained MLM head"), "{err}");
    // Allowed: every output says the head is random.
    let (stdout, stderr) = indolm_ok(&[&pll[..], &["--allow-random-head"]].concat());
    assert!(stdout.contains("initialised randomly") && stderr.contains("warning:"), "{stdout}");
    let (stdout, _) = indolm_ok(&[&pll[..], &["--allow-random-head", "--json"]].concat());
    let line: serde_json::Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    assert!(line["warning"].as_str().unwrap().contains("initialised randomly"));
    let out = scratch("xlmr-headless-bias");
    let (stdout, _) = eval_bias(dir, &out, &["--allow-random-head"]);
    assert!(stdout.starts_with("**Warning:**"), "{stdout}");
    for at in [out.clone(), out.join("bias-aul")] {
        let (report, _) = indolm_eval::bias::records::read_evaluation(&at).unwrap();
        assert!(report.warning.as_deref().unwrap().contains("initialised randomly"));
        assert!(report.summary_line().contains("warning: the MLM head was initialised randomly"));
        let csv = std::fs::read_to_string(at.join("bias_pairs.csv")).unwrap();
        assert!(csv.starts_with("# warning: the MLM head was initialised randomly"), "{}", &csv[..80]);
    }
}

#[test]
fn xlmr_sentiment_finetune_saves_what_transformers_loads_with_the_same_outputs() {
    use indolm_tasks::classifier::SequenceClassifier;
    let dir = scratch("xlmr-sentiment");
    let recipe = dir.join("xlmr.toml");
    let text = format!(
        "kind = \"sentiment\"\nname = \"xlmr\"\nseed = 3407\noutput_dir = \"{out}\"\ninit = \"{init}\"\n[data]\nroot = \"{root}\"\nlanguages = [\"indonesian\"]\nsetting = \"monolingual\"\nmax_len = 64\n[optimizer]\nlr = 1e-3\nbatch_size = 64\nmax_epochs = 1\nschedule = \"constant\"\neps = 1e-8\nweight_decay = 0.0\ngrad_clip = 10.0\n[eval]\npatience = 3\n[checkpoint]\nevery = 50\n[logging]\ntensorboard = \"{runs}\"\nevery = 5\n",
        out = dir.join("ck").display(),
        runs = dir.join("runs").display(),
        init = xlmr_model().display(),
        root = test_data().join("nusax/sentiment").display()
    );
    std::fs::write(&recipe, text).unwrap();
    let (stdout, _) = indolm_ok(&["--threads", "1", "finetune", "sentiment", recipe.to_str().unwrap()]);
    assert!(stdout.contains("no classifier in the checkpoint"), "{stdout}");
    let model = dir.join("ck/xlmr/indonesian");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["model_type"], "xlm-roberta");
    assert_eq!(config["architectures"][0], "XLMRobertaForSequenceClassification");
    let names = weights::read_file(&model.join("model.safetensors")).unwrap().into_keys().collect::<Vec<_>>();
    assert!(names.iter().all(|n| n.starts_with("roberta.") || n.starts_with("classifier.")), "{names:?}");
    assert!(names.contains(&"classifier.out_proj.weight".to_string()) && !names.iter().any(|n| n.contains("pooler")));
    // Texts of different lengths: transformers pads them into one batch.
    let texts = [
        "Makanannya enak sekali dan pelayanannya ramah.",
        "Saya kecewa, pesanan datang terlambat dan makanannya dingin.",
        "Toko buka pukul delapan pagi.",
    ];
    std::fs::write(dir.join("texts.txt"), texts.join("\n")).unwrap();
    let out = dir.join("hf.json");
    reference(&["classify", model.to_str().unwrap(), dir.join("texts.txt").to_str().unwrap(), out.to_str().unwrap()]);
    let hf: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(hf["id2label"]["0"], "negative");
    let labels: Vec<String> = (0..3).map(|i| hf["id2label"][i.to_string()].as_str().unwrap().to_string()).collect();
    let (classifier, notes) = SequenceClassifier::load(&model, &labels, Device::Cpu).unwrap();
    assert!(notes.is_empty(), "{:?}", notes.iter().map(|n| n.to_string()).collect::<Vec<_>>());
    let ours = classifier.predict(&texts, 128).unwrap();
    let mut worst: f64 = 0.0;
    for (o, t) in ours.iter().zip(hf["probs"].as_array().unwrap()) {
        for (a, b) in o.iter().zip(t.as_array().unwrap()) {
            worst = worst.max((a - b.as_f64().unwrap()).abs());
        }
    }
    println!("fine-tuned XLM-R in transformers: max |probability difference| {worst:.2e}");
    assert!(worst < 1e-5);
}

#[test]
fn xlmr_fill_mask_takes_bert_mask_notation_and_summarizers_are_refused() {
    let dir = xlmr_model();
    let text = "Ibu kota Indonesia adalah [MASK].";
    let (stdout, _) =
        indolm_ok(&["--threads", "1", "fill-mask", "--model", dir.to_str().unwrap(), "--text", text, "--top-k", "3"]);
    // `[MASK]` became `<mask>`: one masked position, its three predictions.
    let tok = TextTokenizer::from_dir(dir).unwrap();
    let ids = tok.encode(&tok.with_model_mask(text)).unwrap();
    let at = ids.iter().position(|&i| i64::from(i) == tok.special.mask).unwrap();
    assert!(stdout.starts_with(&format!("[MASK] at position {at}:")), "{stdout}");
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    // PreSumm's alternating segment ids need two token types; XLM-R has one.
    use indolm_tasks::summarization::{abs::BertAbs, ext::BertExt};
    let err = BertExt::load(dir, Default::default(), Device::Cpu).err().unwrap().to_string();
    assert!(err.contains("type_vocab_size") && err.contains("BertExt"), "{err}");
    let err = BertAbs::load(dir, Default::default(), Device::Cpu).err().unwrap().to_string();
    assert!(err.contains("type_vocab_size") && err.contains("BertAbs"), "{err}");
}
