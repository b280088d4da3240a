//! NusaX sentiment fine-tuning: macro-F1 against scikit-learn, real learning from a random
//! init on Indonesian NusaX, determinism, the saved model in transformers, predict, bad input.
use crate::common::*;
use indolm_metrics::metrics::macro_f1;
use indolm_tasks::sentiment::load_split;
use indolm_torch::data::tokenizer_train::{train_wordpiece, TrainOptions};
use indolm_torch::model::model_dir::{save_model_dir, save_model_files};
use indolm_torch::model::{BertConfig, BertForMaskedLM, Precision};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tch::Device;

#[test]
fn macro_f1_equals_scikit_learn() {
    let mut cases = Vec::new();
    let mut state = 12345u64;
    let mut next = |n: usize| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 33) as usize % n
    };
    for len in [1, 5, 40, 400] {
        let gold: Vec<usize> = (0..len).map(|_| next(3)).collect();
        let pred: Vec<usize> = (0..len).map(|_| next(3)).collect();
        cases.push((gold, pred));
    }
    cases.push((vec![0, 0, 1, 1], vec![0, 0, 0, 0])); // a class never predicted
    cases.push((vec![0, 0, 0], vec![0, 2, 0])); // a predicted class absent from gold
    let json: Vec<serde_json::Value> = cases.iter().map(|(g, p)| serde_json::json!({"gold": g, "pred": p})).collect();
    let dir = scratch("f1");
    std::fs::write(dir.join("cases.json"), serde_json::to_string(&json).unwrap()).unwrap();
    let sk: Vec<f64> =
        serde_json::from_str(reference(&["f1", dir.join("cases.json").to_str().unwrap()]).trim()).unwrap();
    for ((g, p), expected) in cases.iter().zip(sk) {
        let ours = macro_f1(g, p, 3);
        assert!((ours - expected).abs() < 1e-12, "{g:?} {p:?}: {ours} vs sklearn {expected}");
    }
}

pub(crate) fn nusax() -> PathBuf {
    test_data().join("nusax/sentiment")
}

/// A randomly initialised small BERT with a WordPiece trained on the Indonesian NusaX
/// training text (no pretraining at all).
pub(crate) fn random_init() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let texts: Vec<String> =
            load_split(&nusax(), "indonesian", "train").unwrap().into_iter().map(|e| e.text).collect();
        let tok =
            train_wordpiece(&texts, &TrainOptions { vocab_size: 4000, min_frequency: 2, lowercase: true }).unwrap();
        let mut config = BertConfig::new(tok.vocab_size() as i64, 64, 2, 2, 256);
        config.max_position_embeddings = 128;
        tch::manual_seed(1);
        let vs = tch::nn::VarStore::new(Device::Cpu);
        let _ = BertForMaskedLM::new(&vs.root(), &config, false);
        let dir = scratch("sentiment-init").join("model");
        save_model_dir(&dir, true, &[], |d| save_model_files(d, &config, &vs, &tok)).unwrap();
        dir
    })
}

pub(crate) fn write_recipe(dir: &Path, name: &str, epochs: usize, extra: &str) -> PathBuf {
    let text = format!(
        "kind = \"sentiment\"\nname = \"{name}\"\nseed = 3407\noutput_dir = \"{out}\"\ninit = \"{init}\"\n[data]\nroot = \"{root}\"\nlanguages = [\"indonesian\"]\nsetting = \"monolingual\"\nmax_len = 64\n[optimizer]\nlr = 1e-3\nbatch_size = 32\nmax_epochs = {epochs}\nschedule = \"constant\"\neps = 1e-8\nweight_decay = 0.0\ngrad_clip = 10.0\n[eval]\npatience = 3\n[checkpoint]\nevery = 50\n[logging]\ntensorboard = \"{runs}\"\nevery = 5\n{extra}",
        out = dir.join("ck").display(),
        runs = dir.join("runs").display(),
        init = random_init().display(),
        root = nusax().display()
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn learns_indonesian_sentiment_from_random_init_and_transformers_loads_the_model() {
    let dir = scratch("sentiment-learn");
    let recipe = write_recipe(&dir, "learn", 12, "");
    let (stdout, _) = indolm_ok(&["finetune", "sentiment", recipe.to_str().unwrap()]);
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ck/learn/results.json")).unwrap()).unwrap();
    let f1 = results["runs"][0]["test"]["indonesian"]["macro_f1"].as_f64().unwrap();
    // Majority class (negative, 153 of 400 test rows) for every row: macro-F1 = (2*153/553)/3.
    let majority = (2.0 * 153.0 / 553.0) / 3.0;
    println!("Indonesian NusaX test macro-F1 {f1:.4} from a random-init L2 H64 model (majority baseline {majority:.4}; the NusaX paper: IndoBERT-base 78.5 average)\n{stdout}");
    assert!(f1 > 2.0 * majority, "test macro-F1 {f1} is not far above the majority baseline {majority}");
    assert!(std::fs::read_to_string(dir.join("ck/learn/results.md")).unwrap().contains("| Monolingual |"));

    // The set's folder is its selected model's directory: transformers' BertForSequenceClassification
    // gives indolm's probabilities.
    let model = dir.join("ck/learn/indonesian");
    let texts = [
        "Makanannya enak sekali dan pelayanannya ramah.",
        "Saya kecewa, pesanan datang terlambat.",
        "Toko buka pukul delapan pagi.",
    ];
    std::fs::write(dir.join("texts.txt"), texts.join("\n")).unwrap();
    reference(&[
        "classify",
        model.to_str().unwrap(),
        dir.join("texts.txt").to_str().unwrap(),
        dir.join("hf.json").to_str().unwrap(),
    ]);
    let hf: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("hf.json")).unwrap()).unwrap();
    assert_eq!(hf["id2label"]["0"], "negative");
    let (stdout, _) = indolm_ok(&[
        "predict",
        "sentiment",
        "--model",
        model.to_str().unwrap(),
        "--file",
        dir.join("texts.txt").to_str().unwrap(),
    ]);
    for (line, probs) in stdout.lines().zip(hf["probs"].as_array().unwrap()) {
        let ours: Vec<f64> = line
            .split('\t')
            .nth(1)
            .unwrap()
            .split_whitespace()
            .skip(1)
            .step_by(2)
            .map(|v| v.parse().unwrap())
            .collect();
        for (o, t) in ours.iter().zip(probs.as_array().unwrap()) {
            assert!((o - t.as_f64().unwrap()).abs() < 1e-3, "{line} vs {probs}");
        }
    }

    // Input that holds no text is refused, and text that is not UTF-8 is named by line and byte.
    let m = model.to_str().unwrap();
    for (name, bytes) in [("empty.txt", &b""[..]), ("blank.txt", &b"\n   \n\t\n"[..])] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let err = indolm_fails(&["predict", "sentiment", "--model", m, "--file", path.to_str().unwrap()]);
        assert!(err.contains(name) && err.contains("no text to classify"), "{err}");
    }
    let err = indolm_fails(&["predict", "sentiment", "--model", m, "--text", "bagus", "--text", " "]);
    assert!(err.contains("--text") && err.contains("text 2 is empty"), "{err}");
    let latin1 = dir.join("latin1.txt");
    std::fs::write(&latin1, b"bagus sekali\nmakanannya \xe9nak\n").unwrap();
    let err = indolm_fails(&["predict", "sentiment", "--model", m, "--file", latin1.to_str().unwrap()]);
    assert!(err.contains("latin1.txt") && err.contains("not UTF-8 text: line 2, byte 12"), "{err}");
}

#[test]
fn the_same_seed_gives_the_same_model() {
    let dir = scratch("sentiment-determinism");
    let run = |name: &str, seed: u64| {
        let recipe = write_recipe(&dir, name, 2, "");
        let text = std::fs::read_to_string(&recipe).unwrap().replace("seed = 3407", &format!("seed = {seed}"));
        std::fs::write(&recipe, text).unwrap();
        indolm_ok(&["--threads", "2", "finetune", "sentiment", recipe.to_str().unwrap()]);
        let results = std::fs::read_to_string(dir.join(format!("ck/{name}/results.json"))).unwrap();
        let weights = std::fs::read(dir.join(format!("ck/{name}/indonesian/model.safetensors"))).unwrap();
        (results, weights)
    };
    let (a, b, c) = (run("a", 7), run("b", 7), run("c", 8));
    assert_eq!(a.0, b.0, "the same seed gave different scores");
    assert!(a.1 == b.1, "the same seed gave different weights");
    assert!(a.1 != c.1, "another seed gave the same model");
}

#[test]
fn bad_nusax_input_is_named() {
    let dir = scratch("sentiment-bad");
    let root = dir.join("data");
    let lang = root.join("indonesian");
    std::fs::create_dir_all(&lang).unwrap();
    std::fs::write(lang.join("train.csv"), "id,text,label\n1,bagus,positive\n2,jelek,sangat negatif\n").unwrap();
    let err = load_split(&root, "indonesian", "train").unwrap_err().to_string();
    assert!(
        err.contains("train.csv") && err.contains("row 3") && err.contains("unknown label \"sangat negatif\""),
        "{err}"
    );
    std::fs::write(lang.join("valid.csv"), "id,kalimat,label\n1,bagus,positive\n").unwrap();
    let err = load_split(&root, "indonesian", "valid").unwrap_err().to_string();
    assert!(err.contains("valid.csv") && err.contains("`text`") && err.contains("kalimat"), "{err}");
    std::fs::write(lang.join("test.csv"), "id,text,label\n1,,positive\n").unwrap();
    let err = load_split(&root, "indonesian", "test").unwrap_err().to_string();
    assert!(err.contains("row 2: empty text"), "{err}");
    let err = load_split(&root, "klingon", "train").unwrap_err().to_string();
    assert!(err.contains("klingon") && err.contains("found: indonesian"), "{err}");
    // Through the command line: the missing language is found before any training.
    let recipe = write_recipe(&dir, "bad", 1, "").to_str().unwrap().to_string();
    std::fs::write(
        &recipe,
        std::fs::read_to_string(&recipe).unwrap().replace("[\"indonesian\"]", "[\"indonesian\", \"klingon\"]"),
    )
    .unwrap();
    let err = indolm_fails(&["finetune", "sentiment", &recipe]);
    assert!(err.contains("klingon"), "{err}");
    let err = indolm_fails(&["predict", "sentiment", "--model", random_init().to_str().unwrap(), "--text", "bagus"]);
    assert!(err.contains("id2label") || err.contains("not a fine-tuned classifier"), "{err}");
}

#[test]
fn cross_lingual_leave_one_out_and_grid_settings() {
    let dir = scratch("sentiment-settings");
    let recipe = write_recipe(&dir, "xl", 1, "[grid]\nlr = [1e-3, 1e-4]\nbatch_size = [64]\n");
    let text = std::fs::read_to_string(&recipe).unwrap().replace("[\"indonesian\"]", "[\"indonesian\", \"javanese\"]");
    std::fs::write(&recipe, text.replace("monolingual", "cross-lingual")).unwrap();
    indolm_ok(&["finetune", "sentiment", recipe.to_str().unwrap()]);
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ck/xl/results.json")).unwrap()).unwrap();
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        assert_eq!(r["test"].as_object().unwrap().len(), 2, "each model is tested on every language");
        assert!([1e-3, 1e-4].contains(&r["lr"].as_f64().unwrap()));
    }
    let md = std::fs::read_to_string(dir.join("ck/xl/results.md")).unwrap();
    assert!(
        md.contains("| train \\ test | ind | jav | avg |") && md.contains("| ind |") && md.contains("| jav |"),
        "{md}"
    );
    // Fig. 2 of the run: its matrix as a heatmap, from the run folder or its results.json.
    let png = dir.join("xl.png");
    let (stdout, _) = indolm_ok(&[
        "report",
        "sentiment-heatmap",
        dir.join("ck/xl").to_str().unwrap(),
        "--out",
        png.to_str().unwrap(),
    ]);
    assert!(stdout.contains("1 cross-lingual matrix ->"), "{stdout}");
    assert_eq!(&std::fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");

    let lolo = dir.join("lolo.toml");
    std::fs::write(
        &lolo,
        std::fs::read_to_string(&recipe)
            .unwrap()
            .replace("cross-lingual", "leave-one-out")
            .replace("name = \"xl\"", "name = \"lolo\"")
            .replace("lr = [1e-3, 1e-4]", "lr = [1e-3]"),
    )
    .unwrap();
    indolm_ok(&["finetune", "sentiment", lolo.to_str().unwrap()]);
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("ck/lolo/results.json")).unwrap()).unwrap();
    let names: Vec<&str> =
        results["runs"].as_array().unwrap().iter().map(|r| r["trained_on"].as_str().unwrap()).collect();
    assert_eq!(names, vec!["all-but-indonesian", "all-but-javanese"]);
    assert!(
        results["runs"][0]["test"].get("indonesian").is_some() && results["runs"][0]["test"].get("javanese").is_none()
    );
}

#[test]
fn shipped_finetune_recipes_parse() {
    let paper =
        indolm_tasks::sentiment::SentimentRecipe::load(&root().join("recipes/finetune/nusax-sentiment.toml")).unwrap();
    assert_eq!(paper.languages().len(), 12);
    let grid = paper.grid.unwrap();
    assert_eq!((grid.lr.len(), grid.batch_size.len()), (5, 4));
    assert_eq!(
        (paper.optimizer.max_epochs, paper.eval.patience, paper.optimizer.grad_clip, paper.optimizer.eps),
        (Some(100), 3, 10.0, 1e-8)
    );
    indolm_tasks::sentiment::SentimentRecipe::load(&root().join("recipes/finetune/nusax-sentiment-tiny.toml")).unwrap();
}

/// Predictions are batched by length under a token budget; each text's probabilities are what
/// it gets alone (padding masked), in the input's order.
#[test]
fn batched_predictions_equal_one_text_at_a_time() {
    use indolm_tasks::classifier::SequenceClassifier;
    let labels: Vec<String> = ["negative", "neutral", "positive"].iter().map(|s| s.to_string()).collect();
    let (model, _) = SequenceClassifier::load(random_init(), &labels, Device::Cpu).unwrap();
    let texts: Vec<String> =
        load_split(&nusax(), "indonesian", "test").unwrap().into_iter().take(60).map(|e| e.text).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let lengths: Vec<usize> = refs.iter().map(|t| model.tokenizer.encode_plain(t).unwrap().len()).collect();
    assert!(lengths.iter().max().unwrap() > &(3 * lengths.iter().min().unwrap()), "{lengths:?}");
    let together = model.predict(&refs, 128).unwrap();
    let mut worst: f64 = 0.0;
    for (text, batched) in refs.iter().zip(&together) {
        let alone = &model.predict(&[text], 128).unwrap()[0];
        for (a, b) in alone.iter().zip(batched) {
            worst = worst.max((a - b).abs());
        }
    }
    println!(
        "{} texts of {}-{} tokens: max |batched − alone| probability {worst:.1e}",
        refs.len(),
        lengths.iter().min().unwrap(),
        lengths.iter().max().unwrap()
    );
    assert!(worst < 1e-5, "{worst}");

    // bf16 matrix products (CUDA's precision, run here on CPU to check the casts).
    let (mut half, _) = SequenceClassifier::load(random_init(), &labels, Device::Cpu).unwrap();
    half.set_precision(Precision::Bf16);
    let low = half.predict(&refs, 128).unwrap();
    let diff = low.iter().flatten().zip(together.iter().flatten()).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    println!("bf16 against fp32: max probability difference {diff:.1e}");
    assert!(diff < 2e-2, "{diff}");
}

/// `precision = "bf16"` in a fine-tuning recipe on CPU is refused as in pretraining.
#[test]
fn bf16_fine_tuning_on_cpu_is_refused() {
    let dir = scratch("sentiment-bf16");
    let recipe = write_recipe(&dir, "half", 1, "");
    let text = std::fs::read_to_string(&recipe).unwrap();
    std::fs::write(&recipe, format!("precision = \"bf16\"\n{text}")).unwrap();
    let err = indolm_fails(&["--device", "cpu", "finetune", "sentiment", recipe.to_str().unwrap()]);
    assert!(err.contains("precision") && err.contains("bf16 needs a CUDA device; use \"auto\""), "{err}");
}
