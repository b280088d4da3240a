//! BertExt learns to pick the summary sentences when they are recoverable from a signal in
//! the article (here their place: the first and the last of six sentences, which Lead-N cannot
//! reproduce), ROUGE before and after; each test split is scored with the weights best on its own
//! dev split, across a stop and a resume, with BERTScore in the results; the saved model is used
//! by `indolm summarize`; and the selection rule (trigram blocking, minimum sentences and words).
use crate::common::*;
use indolm_core::schedule::noam;
use indolm_tasks::summarization::ext::select;
use indolm_torch::data::tokenizer_train::{train_wordpiece, TrainOptions};
use indolm_torch::model::model_dir::{save_model_dir, save_model_files};
use indolm_torch::model::{BertConfig, BertForMaskedLM};
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

/// `count` articles of six sentences from `start` on, whose summary is the sentences `picks`.
fn write_split(root: &Path, split: &str, sentences: &[String], start: usize, count: usize, picks: [usize; 2]) {
    let dir = root.join(split);
    std::fs::create_dir_all(&dir).unwrap();
    for a in 0..count {
        let base = start + a * 6;
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
    write_split(&data, "train", &sentences, 0, 90, [0, 5]);
    write_split(&data, "dev", &sentences, 720, 25, [0, 5]);
    write_split(&data, "test", &sentences, 870, 25, [0, 5]);
    // A second dev and test pair, as the release's xtreme/ folders, whose summaries are other
    // sentences than those training teaches: its best weights are another step's, likely.
    write_split(&data, "xtreme/dev", &sentences, 1020, 12, [1, 2]);
    write_split(&data, "xtreme/test", &sentences, 1092, 12, [1, 2]);

    let tok =
        train_wordpiece(&sentences[..1000], &TrainOptions { vocab_size: 3000, min_frequency: 2, lowercase: true })
            .unwrap();
    let config = BertConfig::new(tok.vocab_size() as i64, 64, 2, 2, 256);
    tch::manual_seed(5);
    let vs = tch::nn::VarStore::new(Device::Cpu);
    let _ = BertForMaskedLM::new(&vs.root(), &config, false);
    let init = work.join("init");
    save_model_dir(&init, true, &[], |d| save_model_files(d, &config, &vs, &tok)).unwrap();

    // Each test split selected on its own dev split; BERTScore with the tiny reference BERT.
    let write_recipe = |path: &Path, select_on: &str, bertscore_layer: &str| {
        std::fs::write(
            path,
            format!(
                "kind = \"summarize\"\nname = \"ext\"\noutput_dir = \"{}\"\ntask = \"ext\"\ninit = \"{}\"\n[data]\nroot = \"{}\"\ntest_splits = [\"test\", \"xtreme/test\"]\nselect_on = {select_on}\n[optimizer]\nschedule = \"noam\"\neps = 1e-9\nweight_decay = 0.0\ngrad_clip = 0.0\nlr = 0.02\nwarmup_steps = 50\nmax_steps = 150\nbatch_size = 8\n[eval]\nevery = 50\nbertscore_model = \"{}\"\n{bertscore_layer}[checkpoint]\nevery = 150\n[logging]\ntensorboard = \"{}\"\n[ext]\nlayers = 2\nheads = 2\nff = 128\nmin_sentences = 2\nmin_words = 10\n",
                work.join("ck").display(),
                init.display(),
                data.display(),
                reference_model().display(),
                work.join("runs").display()
            ),
        )
        .unwrap()
    };
    let recipe = work.join("ext.toml");
    let (select_on, layer) = ("[\"dev\", \"xtreme/dev\"]", "bertscore_layer = 2\n");
    // Refused before anything is trained, naming the recipe and the key: a dev split the data
    // folder lacks, a dev split short, a BERTScore model bert-score has no default layer for.
    write_recipe(&recipe, "[\"dev\", \"xtreme/dve\"]", layer);
    let err = indolm_fails(&["finetune", "summarize", recipe.to_str().unwrap()]);
    assert!(err.contains("ext.toml") && err.contains("`data.select_on`") && err.contains("`xtreme/dve`"), "{err}");
    write_recipe(&recipe, "[\"dev\"]", layer);
    let err = indolm_fails(&["finetune", "summarize", recipe.to_str().unwrap()]);
    assert!(err.contains("`data.select_on`") && err.contains("1 dev split(s) for 2 test split(s)"), "{err}");
    write_recipe(&recipe, select_on, "");
    let err = indolm_fails(&["finetune", "summarize", recipe.to_str().unwrap()]);
    assert!(err.contains("ext.toml") && err.contains("`eval.bertscore_layer`"), "{err}");
    assert!(!work.join("ck/ext").exists(), "a refused recipe left a run folder");

    // Stopped after step 100 (the evaluations of steps 0, 50 and 100 done), then resumed.
    write_recipe(&recipe, select_on, layer);
    let (stdout, _) = indolm_ok(&["finetune", "summarize", recipe.to_str().unwrap(), "--stop-after", "100"]);
    println!("{stdout}");
    assert!(stdout.contains("step 100: xtreme/dev ROUGE-1/2/L") && stdout.contains("stopped before the end"));
    let run = work.join("ck/ext");
    assert!(run.join("best-xtreme_dev/best.json").exists() && !run.join("results.json").exists());
    let (resumed, _) = indolm_ok(&["finetune", "summarize", recipe.to_str().unwrap(), "--resume", "auto"]);
    println!("{resumed}");
    assert!(resumed.contains("resumed from") && !resumed.contains("step 50: xtreme/dev"), "{resumed}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("results.json")).unwrap()).unwrap();
    selection_per_test_split(&run, &data, &results);
    bertscore_equals_eval_bertscore(&run, &results);

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

/// Each test split was scored with the weights best on its dev split, as the run's dev log
/// (`results.json`'s `dev`, every evaluation of both dev splits, before the stop and after the
/// resume) says: the step recorded per test split is the first with its dev split's highest
/// score, its weights' folder says the same step, `results.md` says which, and the xtreme/test
/// summaries are what `indolm summarize` writes with `best-xtreme_dev/`.
fn selection_per_test_split(run: &Path, data: &Path, results: &serde_json::Value) {
    let selection = results["selection"].as_array().unwrap();
    assert_eq!(selection.len(), 2, "{results}");
    let markdown = std::fs::read_to_string(run.join("results.md")).unwrap();
    for (chosen, (test, dev, folder)) in
        selection.iter().zip([("test", "dev", "best"), ("xtreme/test", "xtreme/dev", "best-xtreme_dev")])
    {
        assert_eq!((chosen["test_split"].as_str(), chosen["dev_split"].as_str()), (Some(test), Some(dev)));
        assert_eq!(chosen["weights"], folder);
        let log = results["dev"].as_array().unwrap().iter().find(|l| l["split"] == dev).unwrap();
        let evaluations = log["evaluations"].as_array().unwrap();
        let steps: Vec<u64> = evaluations.iter().map(|e| e["step"].as_u64().unwrap()).collect();
        assert_eq!(steps, [0, 50, 100, 150], "{dev}: every evaluation, across the resume");
        let (mut best_step, mut best_score) = (0, f64::NEG_INFINITY);
        for e in evaluations {
            let figure = |key: &str| e["row"][key].as_f64().unwrap();
            let score = e["score"].as_f64().unwrap();
            let mean = (figure("rouge1") + figure("rouge2") + figure("rouge_l")) / 3.0;
            assert!((score - mean).abs() < 1e-9, "{dev} step {}: score {score}, mean ROUGE {mean}", e["step"]);
            if score > best_score {
                (best_step, best_score) = (e["step"].as_u64().unwrap(), score);
            }
        }
        println!("{test}: selected on {dev}, step {best_step} (mean ROUGE {best_score:.2}) of {steps:?}");
        assert_eq!(chosen["step"].as_u64(), Some(best_step), "{test}: {chosen}");
        assert!((chosen["dev_score"].as_f64().unwrap() - best_score).abs() < 1e-9, "{test}: {chosen}");
        let kept: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join(folder).join("best.json")).unwrap()).unwrap();
        assert_eq!(kept["step"].as_u64(), Some(best_step), "{folder}/best.json");
        let line = format!("{test}: the weights of step {best_step}, the best on {dev} (");
        assert!(markdown.contains(&line), "{markdown}");
    }
    let (summaries, _) = indolm_ok(&[
        "summarize",
        "--model",
        run.join("best-xtreme_dev").to_str().unwrap(),
        "--liputan6",
        data.join("xtreme/test").to_str().unwrap(),
    ]);
    let candidates = std::fs::read_to_string(run.join("xtreme_test.candidate")).unwrap();
    let written: Vec<String> = candidates.lines().map(|l| l.replace("<q>", " ")).collect();
    assert_eq!(summaries.lines().collect::<Vec<_>>(), written, "xtreme/test was not scored with best-xtreme_dev/");
}

/// Every test row has BERTScore, and the model's row is `indolm eval bertscore` on the written
/// `<split>.candidate` and `<split>.gold` files with `<q>` read as a space.
fn bertscore_equals_eval_bertscore(run: &Path, results: &serde_json::Value) {
    assert_eq!(results["bertscore"]["layer"], 2, "{}", results["bertscore"]);
    let dir = scratch("bertext-bertscore");
    for test in results["test"].as_array().unwrap() {
        let (split, rows) = (test[0].as_str().unwrap(), test[1].as_array().unwrap());
        assert!(rows.iter().all(|r| r["bertscore"]["f1"].is_f64()), "{split}: a row without BERTScore");
        let stem = split.replace('/', "_");
        // The written file with `<q>` as a space, as a path argument.
        let spaced = |ext: &str| {
            let text = std::fs::read_to_string(run.join(format!("{stem}.{ext}"))).unwrap();
            let path = dir.join(format!("{stem}.{ext}.txt"));
            std::fs::write(&path, text.replace("<q>", " ")).unwrap();
            path.to_str().unwrap().to_string()
        };
        let (pred, gold) = (spaced("candidate"), spaced("gold"));
        let json = dir.join(format!("{stem}.json"));
        indolm_ok(&[
            "eval",
            "bertscore",
            "--model",
            reference_model().to_str().unwrap(),
            "--layer",
            "2",
            "--pred",
            &pred,
            "--ref",
            &gold,
            "--json",
            json.to_str().unwrap(),
        ]);
        let measured: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let ours = rows.iter().find(|r| r["system"] == "BertExt").unwrap();
        for key in ["precision", "recall", "f1"] {
            let (a, b) = (ours["bertscore"][key].as_f64().unwrap(), 100.0 * measured["mean"][key].as_f64().unwrap());
            assert!((a - b).abs() < 1e-9, "{split} BERTScore {key}: results {a}, eval bertscore {b}");
        }
        let f1 = ours["bertscore"]["f1"].as_f64().unwrap();
        println!("{split}: BertExt BERTScore F1 {f1:.2}, as eval bertscore gives it");
    }
    let markdown = std::fs::read_to_string(run.join("results.md")).unwrap();
    assert!(markdown.contains("| ROUGE-L | BS |") && markdown.contains("BS: BERTScore F1 ×100"), "{markdown}");
}

/// BertExt scores articles batched by length under a token budget: every article's sentence
/// scores and selection are what it gets alone.
#[test]
fn batched_extractive_scoring_equals_one_article_at_a_time() {
    use indolm_tasks::summarization::data::load_split;
    use indolm_tasks::summarization::ext::{BertExt, ExtConfig};
    use indolm_tasks::summarization::inference::Summarizer;
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
