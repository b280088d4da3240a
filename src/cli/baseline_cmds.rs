//! `indolm baseline …`: the papers' non-neural baselines, trained and scored on the CPU without a
//! model: NusaX Table 3's naive Bayes, SVM and logistic regression over word features, with the
//! authors' grids, beside the paper's figures, and their cross-lingual matrix as a heatmap; and
//! NusaX Tables 4 and 6's Copy and word-substitution rows, scored with SacreBLEU and chrF.
use clap::{Args, Subcommand};
use indolm_core::files::{write_atomic, write_json};
use indolm_core::outln;
use indolm_tasks::report::heatmap::{write_heatmaps, Heatmap};
use indolm_tasks::sentiment::baselines::{self, FeatureBy, Model, SelectBy, Settings, PAPER_LANGUAGES};
use indolm_tasks::translation::baselines as mt_baselines;
use indolm_tasks::translation::data::Table;
use indolm_tasks::translation::paper::System;
use indolm_torch::error::{Error, IoContext, Result};
use std::path::PathBuf;

/// `indolm baseline`'s subcommands, one per paper.
#[derive(Subcommand, Debug)]
pub enum BaselineCommand {
    /// NusaX Table 3's classical rows: naive Bayes, SVM and logistic regression per language over
    /// word counts and TF-IDF (the authors' NLTK tokens and scikit-learn vectorizers), each grid
    /// searched as the authors did (fit on train, selected on validation, refit on both), printed
    /// beside the paper's figures.
    Nusax(NusaxArgs),
    /// NusaX Tables 4 (x → ind) and 6 (ind → x)'s rows that need no model: Copy (the source
    /// sentence as its translation) and word substitution with the NusaX lexicon, scored with
    /// SacreBLEU (and chrF) as the sacrebleu package computes them, beside the paper's figures.
    NusaxMt(NusaxMtArgs),
}

/// `indolm baseline nusax-mt`'s options.
#[derive(Args, Debug)]
pub struct NusaxMtArgs {
    /// The NusaX folder: `<DIR>/mt/<split>.csv` and `<DIR>/lexicon/<language>.csv`.
    #[arg(long, default_value = "corpora/downloads/nusax")]
    data: PathBuf,
    /// The split to translate and score. The paper's Copy rows are sacrebleu's figures on
    /// `train` (docs/translation.md shows why); `test` is the split its models are scored on.
    #[arg(long, default_value = "test", value_parser = ["train", "valid", "test"])]
    split: String,
    /// The tables (default: x-ind,ind-x).
    #[arg(long, value_enum, num_args = 1.., value_delimiter = ',')]
    tables: Vec<Table>,
    /// The systems (default: copy,word-substitution).
    #[arg(long, value_enum, num_args = 1.., value_delimiter = ',')]
    systems: Vec<System>,
    /// Write the results (nusax_mt_baselines.json: every direction's BLEU, its detail line and
    /// chrF; nusax_mt_baselines.md: the tables) and each system's translations
    /// (`hypotheses/<system>/<direction>.txt`, one sentence a line) into this folder.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// `indolm baseline nusax`'s options.
#[derive(Args, Debug)]
pub struct NusaxArgs {
    /// The NusaX sentiment folder: `<DIR>/<language>/{train,valid,test}.csv`.
    #[arg(long, default_value = "corpora/downloads/nusax/sentiment")]
    data: PathBuf,
    /// The languages (folder names, comma-separated), in table order (default: Table 3's twelve,
    /// in its order).
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    languages: Vec<String>,
    /// The models (default: nb,svm,lr).
    #[arg(long, value_enum, num_args = 1.., value_delimiter = ',')]
    models: Vec<Model>,
    /// The validation score that selects a grid point: `accuracy` (GridSearchCV's default, the
    /// authors' code) or `macro-f1`.
    #[arg(long, value_enum, default_value = "accuracy")]
    select_by: SelectBy,
    /// How each model's feature kind (BoW or TF-IDF) is chosen: `dev`, the better validation
    /// score (the paper's stated protocol), or `test`, the better test macro-F1 (how the paper's
    /// figures come out).
    #[arg(long, value_enum, default_value = "dev")]
    feature_by: FeatureBy,
    /// Also test each language's selected models on every language's test split and print the
    /// cross-lingual matrices (rows trained on, columns tested on).
    #[arg(long)]
    cross_lingual: bool,
    /// Draw the cross-lingual matrices as a heatmap, one panel per model, to this .png (or .svg)
    /// file; implies --cross-lingual.
    #[arg(long)]
    png: Option<PathBuf>,
    /// Write the results (nusax_baselines.json: every language's selected feature kind,
    /// hyper-parameters, validation and test scores per model; nusax_baselines.md: the tables)
    /// into this folder.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs a `baseline` subcommand.
pub fn run(command: BaselineCommand) -> Result<()> {
    match command {
        BaselineCommand::Nusax(args) => nusax(&args),
        BaselineCommand::NusaxMt(args) => nusax_mt(&args),
    }
}

/// The results file `--out` holds.
const JSON: &str = "nusax_baselines.json";
/// The tables file `--out` holds.
const MARKDOWN: &str = "nusax_baselines.md";
/// The heatmap's title.
const HEATMAP_TITLE: &str = "NusaX cross-lingual test macro-F1 (×100); rows: trained on, columns: tested on";

/// `indolm baseline nusax`: checks the arguments and outputs, runs every language, prints the
/// tables and writes what was asked.
fn nusax(args: &NusaxArgs) -> Result<()> {
    let languages: Vec<String> = if args.languages.is_empty() {
        PAPER_LANGUAGES.iter().map(|(l, _)| l.to_string()).collect()
    } else {
        args.languages.clone()
    };
    for (i, l) in languages.iter().enumerate() {
        if languages[..i].contains(l) {
            return Err(Error::argument("--languages", format!("`{l}` is named twice")));
        }
    }
    let models = distinct(if args.models.is_empty() { &Model::ALL[..] } else { &args.models[..] });
    if let Some(png) = &args.png {
        let ext = png.extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default();
        if ext != "png" && ext != "svg" {
            return Err(Error::argument("--png", format!("{}: expected a .png or .svg file name", png.display())));
        }
    }
    if let Some(dir) = &args.out {
        if dir.exists() && !dir.is_dir() {
            return Err(Error::invalid(dir, "--out names a folder to write into; this is a file"));
        }
    }
    use indolm_core::outputs::Output;
    let files: Vec<PathBuf> = args.out.iter().flat_map(|d| [d.join(JSON), d.join(MARKDOWN)]).collect();
    let outputs: Vec<Output> = args
        .out
        .iter()
        .map(|d| Output::folder("--out", d))
        .chain(files.iter().map(|f| Output::file("--out", f)))
        .chain(args.png.iter().map(|p| Output::file("--png", p)))
        .collect();
    super::check_outputs(&outputs, &[args.data.as_path()])?;

    let settings = Settings::authors(&models, args.select_by, args.feature_by);
    let cross_lingual = args.cross_lingual || args.png.is_some();
    let mut progress = |o: &baselines::LanguageOutcome| {
        let chosen: Vec<String> = o
            .models
            .iter()
            .map(|m| format!("{} {:.1} ({} {})", m.model.name(), 100.0 * m.test_macro_f1, m.feature.name(), m.params))
            .collect();
        eprintln!("{}: {}", o.language, chosen.join(", "));
    };
    let results = baselines::run(&args.data, &languages, &settings, cross_lingual, &mut progress)?;
    let markdown = results.markdown();
    outln!("{markdown}");
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_path(dir)?;
        write_json(&dir.join(JSON), &results)?;
        write_atomic(&dir.join(MARKDOWN), markdown.as_bytes())?;
        outln!("wrote {} and {}", dir.join(JSON).display(), dir.join(MARKDOWN).display());
    }
    if let Some(png) = &args.png {
        let panels: Vec<Heatmap> = results.cross_lingual.iter().flatten().map(Heatmap::from_cross_lingual).collect();
        write_heatmaps(&panels, HEATMAP_TITLE, png, "--png")?;
        outln!("wrote {}", png.display());
    }
    Ok(())
}

/// The results file of `baseline nusax-mt --out`.
const MT_JSON: &str = "nusax_mt_baselines.json";
/// The tables file of `baseline nusax-mt --out`.
const MT_MARKDOWN: &str = "nusax_mt_baselines.md";
/// The translations folder of `baseline nusax-mt --out`.
const MT_HYPOTHESES: &str = "hypotheses";

/// `indolm baseline nusax-mt`: checks the arguments and outputs, translates and scores every
/// direction, prints the tables and writes what was asked.
fn nusax_mt(args: &NusaxMtArgs) -> Result<()> {
    let tables = distinct(if args.tables.is_empty() { &Table::ALL[..] } else { &args.tables[..] });
    let systems = distinct(if args.systems.is_empty() { &mt_baselines::SYSTEMS[..] } else { &args.systems[..] });
    if let Some(bad) = systems.iter().find(|s| !mt_baselines::SYSTEMS.contains(s)) {
        return Err(Error::argument(
            "--systems",
            format!("{} needs a trained model; this command runs copy and word-substitution", bad.name()),
        ));
    }
    use indolm_core::outputs::Output;
    let files: Vec<PathBuf> = args.out.iter().flat_map(|d| [d.join(MT_JSON), d.join(MT_MARKDOWN)]).collect();
    let hypotheses = args.out.as_ref().map(|d| d.join(MT_HYPOTHESES));
    let outputs: Vec<Output> = args
        .out
        .iter()
        .chain(&hypotheses)
        .map(|d| Output::folder("--out", d))
        .chain(files.iter().map(|f| Output::file("--out", f)))
        .collect();
    super::check_outputs(&outputs, &[args.data.as_path()])?;
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_path(dir)?;
    }
    let report = mt_baselines::run(&args.data, &args.split, &tables, &systems, hypotheses.as_deref(), |row| {
        eprintln!("{} {}: average BLEU {:.2}", row.table.title(), row.system.label(), row.average_bleu)
    })?;
    let markdown = mt_baselines::markdown(&report);
    outln!("{markdown}");
    if let Some(dir) = &args.out {
        write_json(&dir.join(MT_JSON), &report)?;
        write_atomic(&dir.join(MT_MARKDOWN), markdown.as_bytes())?;
        outln!(
            "wrote {}, {} and {}",
            dir.join(MT_JSON).display(),
            dir.join(MT_MARKDOWN).display(),
            dir.join(MT_HYPOTHESES).display()
        );
    }
    Ok(())
}

/// `items` without repeats, in first-seen order.
fn distinct<T: Copy + PartialEq>(items: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for &item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}
