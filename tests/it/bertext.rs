//! BertExt learns to pick the summary sentences when they are recoverable from a signal in
//! the article (here their place: the first and the last of six sentences, which Lead-N cannot
//! reproduce), ROUGE before and after; the saved model is used by `indolm summarize`; and the
//! selection rule (trigram blocking, minimum sentences and words).
use crate::common::*;
use indolm::data::tokenizer_train::{train_wordpiece, TrainOptions};
use indolm::model::model_dir::{save_model_dir, save_model_files};
use indolm::model::{BertConfig, BertForMaskedLM};
use indolm::optim::noam;
use indolm::tasks::summarization::ext::select;
use std::path::Path;
use tch::Device;

fn toks(sentences: &[&str]) -> Vec<Vec<String>> {
    sentences.iter().map(|s| s.split_whitespace().map(String::from).collect()).collect()
}

#[test]
fn selection_blocks_trigrams_and_meets_the_minimums() {
    let article = toks(&["a b c d e f g h", "a b c x", "p q r s", "t u v w x y z", "m n"]);
    // Scores favour 1 (shares "a b c" with 0), then 0, 2, 3.
    let scores = [0.8, 0.9, 0.7, 0.6, 0.1];
    // Take 1 (4 words); 0 shares a trigram with it: skipped; 2 (8 words, 2 sentences); 3 (15 words).
    assert_eq!(select(&article, &scores, 2, 15), vec![1, 2, 3]);
    assert_eq!(select(&article, &scores, 2, 5), vec![1, 2]);
    assert_eq!(select(&article, &scores, 1, 1), vec![1]);
    // Noam: rises as step / warmup^1.5 until warmup, then decays as step^-0.5.
    assert!((noam(2e-3, 100, 25) - 2e-3 * 25.0 / 1000.0).abs() < 1e-15);
    assert!((noam(2e-3, 100, 400) - 2e-3 / 20.0).abs() < 1e-15);
}

fn write_split(root: &Path, split: &str, sentences: &[String], start: usize, count: usize) {
    let dir = root.join(split);
    std::fs::create_dir_all(&dir).unwrap();
    for a in 0..count {
        let base = start + a * 6;
        let picks = [0, 5];
        let mut article: Vec<Vec<String>> = Vec::new();
        let mut summary: Vec<Vec<String>> = Vec::new();
        for k in 0..6 {
            let words: Vec<String> = sentences[base + k].split_whitespace().map(String::from).collect();
            if picks.contains(&k) {
                summary.push(words.clone());
            }
            article.push(words);
        }
        let json = serde_json::json!({"id": format!("{split}-{a}"), "url": "", "clean_article": article, "clean_summary": summary});
        std::fs::write(dir.join(format!("{a:04}.json")), json.to_string()).unwrap();
    }
}

#[test]
fn bertext_learns_a_recoverable_signal() {
    let work = scratch("bertext");
    let ud: String = ["id_csui-ud-train.conllu", "id_gsd-ud-dev.conllu", "id_gsd-ud-test.conllu"]
        .iter()
        .map(|f| std::fs::read_to_string(test_data().join("ud-indonesian").join(f)).unwrap())
        .collect();
    let sentences: Vec<String> = ud
        .lines()
        .filter_map(|l| l.strip_prefix("# text = "))
        .filter(|s| s.split_whitespace().count() <= 30)
        .map(|s| s.to_lowercase())
        .collect();
    let data = work.join("liputan6");
    write_split(&data, "train", &sentences, 0, 90);
    write_split(&data, "dev", &sentences, 720, 25);
    write_split(&data, "test", &sentences, 870, 25);

    let tok =
        train_wordpiece(&sentences[..1000], &TrainOptions { vocab_size: 3000, min_frequency: 2, lowercase: true })
            .unwrap();
    let config = BertConfig::new(tok.vocab_size() as i64, 64, 2, 2, 256);
    tch::manual_seed(5);
    let vs = tch::nn::VarStore::new(Device::Cpu);
    let _ = BertForMaskedLM::new(&vs.root(), &config, false);
    let init = work.join("init");
    save_model_dir(&init, true, &[], |d| save_model_files(d, &config, &vs, &tok)).unwrap();

    let recipe = work.join("ext.toml");
    std::fs::write(
        &recipe,
        format!(
            "kind = \"summarize\"\nname = \"ext\"\noutput_dir = \"{}\"\ntask = \"ext\"\ninit = \"{}\"\n[data]\nroot = \"{}\"\n[optimizer]\nschedule = \"noam\"\neps = 1e-9\nweight_decay = 0.0\ngrad_clip = 0.0\nlr = 0.02\nwarmup_steps = 50\nmax_steps = 150\nbatch_size = 8\n[eval]\nevery = 50\n[checkpoint]\nevery = 150\n[logging]\ntensorboard = \"{}\"\n[ext]\nlayers = 2\nheads = 2\nff = 128\nmin_sentences = 2\nmin_words = 10\n",
            work.join("ck").display(),
            init.display(),
            data.display(),
            work.join("runs").display()
        ),
    )
    .unwrap();
    let (stdout, _) = indolm_ok(&["finetune", "summarize", recipe.to_str().unwrap()]);
    println!("{stdout}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("ck/ext/results.json")).unwrap()).unwrap();
    let before = results["dev_before"]["rouge1"].as_f64().unwrap();
    let after = results["dev_best"]["rouge1"].as_f64().unwrap();
    println!("dev ROUGE-1 before training {before:.2}, after {after:.2}");
    assert!(after > before + 15.0, "BertExt did not learn the signal: {before} -> {after}");
    let test = &results["test"][0][1];
    let row =
        |name: &str| test.as_array().unwrap().iter().find(|r| r["system"] == name).unwrap()["rouge1"].as_f64().unwrap();
    assert!(row("BertExt") > row("Lead-2"), "{test}");

    // The saved model summarizes a plain-text article.
    let article = work.join("article.txt");
    std::fs::write(&article, "Hari ini hujan turun di kota. Warga tetap bekerja seperti biasa. Pasar tetap ramai oleh pembeli. Jalan raya tidak banjir sama sekali.").unwrap();
    let (summary, _) = indolm_ok(&[
        "summarize",
        "--model",
        work.join("ck/ext/best").to_str().unwrap(),
        "--file",
        article.to_str().unwrap(),
    ]);
    println!("{summary}");
    assert!(!summary.trim().is_empty());
    let err = indolm_fails(&["summarize", "--model", init.to_str().unwrap(), "--file", article.to_str().unwrap()]);
    assert!(err.contains("indolm_ext") || err.contains("not a trained BertExt"), "{err}");
}

/// BertExt scores articles batched by length under a token budget: every article's sentence
/// scores and selection are what it gets alone.
#[test]
fn batched_extractive_scoring_equals_one_article_at_a_time() {
    use indolm::tasks::summarization::data::load_split;
    use indolm::tasks::summarization::ext::{BertExt, ExtConfig};
    use indolm::tasks::summarization::inference::Summarizer;
    let (model, _) = BertExt::load(
        reference_model(),
        ExtConfig { layers: 1, heads: 2, ff: 64, ..ExtConfig::default() },
        Device::Cpu,
    )
    .unwrap();
    let mut articles: Vec<Vec<Vec<String>>> = Vec::new();
    for split in ["train", "dev", "test"] {
        articles
            .extend(load_split(&root().join("corpora/liputan6-sample"), split).unwrap().into_iter().map(|a| a.article));
    }
    // Shorter articles too: the first two or three sentences of some.
    articles.extend(articles.clone().into_iter().take(10).enumerate().map(|(i, a)| a[..2 + i % 2].to_vec()));
    let refs: Vec<&[Vec<String>]> = articles.iter().map(Vec::as_slice).collect();
    let mut worst: f64 = 0.0;
    for article in &refs {
        let alone = tch::no_grad(|| model.scores(&model.encode(&[article]).unwrap(), false));
        let with_others = {
            let batch = model.encode(&[article, refs[0], refs[refs.len() - 1]]).unwrap();
            tch::no_grad(|| model.scores(&batch, false)).get(0)
        };
        let n = alone.size()[1];
        worst = worst.max(f64::try_from((alone.get(0) - with_others.narrow(0, 0, n)).abs().max()).unwrap());
    }
    println!("{} articles: max |batched − alone| sentence score {worst:.1e}", refs.len());
    assert!(worst < 1e-5, "{worst}");
    let summarizer = Summarizer::Ext(model);
    let together = summarizer.summarize(&refs, 8).unwrap();
    let alone: Vec<Vec<Vec<String>>> = refs.iter().map(|a| summarizer.summarize(&[a], 1).unwrap().remove(0)).collect();
    assert_eq!(together, alone);
}
