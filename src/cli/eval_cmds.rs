//! `indolm eval …`: pseudo-log-likelihoods (log-likelihoods for causal LMs), bias win rates (one
//! model, causal LMs included, or every checkpoint of a run), ROUGE, BLEU and chrF, BERTScore, the Liputan6
//! extractive baselines and IndoMMLU.
use clap::{Args, Subcommand};
use indolm_core::files::write_json;
use indolm_core::outputs::Output;
use indolm_core::{out, outln};
use indolm_eval::bias::models::{evaluate_model, evaluate_run, BiasRequest};
use indolm_eval::bias::records::{metric_dir, RECORDS_FILE, REPORT_FILE};
use indolm_eval::bias::{Bootstrap, Evaluation};
use indolm_eval::pairs::load_pairs;
use indolm_eval::scorer::LoadedLm;
use indolm_eval::sentences::{score_lines, CausalLines, LineMetric, ScoredLines};
use indolm_eval::BiasMetric;
use indolm_torch::error::{Error, IoContext, Result};
use std::path::{Path, PathBuf};
use tch::Device;

#[derive(Subcommand, Debug)]
pub enum EvalCommand {
    /// Pseudo-log-likelihood of each sentence of a file (one per line): PLL, scored tokens, PPPL;
    /// for a causal LM directory (Llama, Mistral, Qwen2/3, Gemma 2/3, OLMo 2/3, BLOOM) its
    /// log-likelihood, tokens, mean and perplexity.
    Pll {
        #[arg(long)]
        model: PathBuf,
        /// One sentence a line (with --metric crows: two tab-separated sentences a line).
        #[arg(long)]
        text: PathBuf,
        /// `pll`: every token; `crows`: only the tokens the two sentences of a line share;
        /// `pll-word-l2r`: every token, the later pieces of its word masked too; `aul`/`aula`:
        /// nothing masked (the table's pll is then the (attention-weighted) sum, pppl exp of
        /// minus its mean).
        #[arg(long, value_enum, default_value = "pll")]
        metric: LineMetric,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
        /// Score a model whose checkpoint has no MLM head (initialised randomly; refused
        /// otherwise): every output then carries a warning.
        #[arg(long)]
        allow_random_head: bool,
    },
    /// Stereotype win rates on IndoBias-Pairs (or CrowS-Pairs) per language, domain and subdomain.
    Bias(BiasArgs),
    /// IndoBias-QA: prompts from demographic groups × stereotype pairs × seven tasks answered by a
    /// chat model (or read from a file), each mapped to a label by its first mention; stereotype
    /// polarity per task, group and demography, with SP_σ.
    BiasQa(super::bias_qa_cmds::BiasQaArgs),
    /// ROUGE-1/2/L of predicted summaries against references with 95% bootstrap intervals: the
    /// official ROUGE-1.5.5 as the Liputan6 paper ran it (-c 95 -m -r 1000 -n 2 -a), or rouge-score.
    Rouge {
        /// One predicted summary a line, sentences separated by `<q>` (PreSumm's files, and the
        /// `<split>.candidate` files of `finetune summarize`).
        #[arg(long)]
        pred: PathBuf,
        /// One reference summary a line, aligned with --pred.
        #[arg(long = "ref")]
        reference: PathBuf,
        /// `official`: ROUGE-1.5.5.pl's figures (PreSumm's pyrouge input, Porter stemming with
        /// WordNet exceptions, summary-level ROUGE-L; pairs with an empty reference left out);
        /// `rouge-score`: Google's package without stemming (`<q>` read as a space).
        #[arg(long, value_enum, default_value = "official")]
        rouge: indolm_metrics::rouge::Scorer,
        /// Bootstrap seed: resample i draws with perl's rand after srand(seed × resamples + i);
        /// 0 is the script's own srand(i), with which every official figure is the script's.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Bootstrap resamples (the script's -r).
        #[arg(long, default_value_t = indolm_metrics::rouge::DEFAULT_RESAMPLES)]
        resamples: usize,
        /// Also write the figures as JSON (every pair's too) to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Corpus BLEU and chrF of translations against one or more references, as the sacrebleu
    /// package (2.6.0) computes them by default (13a tokens, exponential smoothing; chrF2), with
    /// its printouts and signatures.
    Bleu {
        /// One translation a line.
        #[arg(long)]
        pred: PathBuf,
        /// One reference a line, aligned with --pred; several files (`--ref a b`) are several
        /// references of each sentence.
        #[arg(long = "ref", required = true, num_args = 1..)]
        references: Vec<PathBuf>,
        /// Lowercase hypotheses and references first (sacrebleu's `-lc`).
        #[arg(long)]
        lowercase: bool,
        /// BLEU's tokenizer: `13a` (mteval-v13a.pl's, sacrebleu's default) or `none`.
        #[arg(long, value_enum, default_value = "13a")]
        tokenize: indolm_metrics::bleu::Tokenize,
        /// BLEU's smoothing of a zero n-gram precision (sacrebleu's `--smooth-method`).
        #[arg(long, value_enum, default_value = "exp")]
        smooth: indolm_metrics::bleu::Smoothing,
        /// chrF's word n-gram order: 0 is chrF (sacrebleu's default), 2 is chrF++.
        #[arg(long, default_value_t = 0)]
        chrf_word_order: usize,
        /// Also write both scores (counts, precisions, lengths, signatures) as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// BERTScore precision, recall and F1 (as bert-score computes them) of predicted summaries
    /// against references, from a BERT or XLM-R model's hidden states at one layer.
    Bertscore(BertscoreArgs),
    /// Lead-1/2/3 and Oracle ROUGE on a Liputan6 split (the extractive baselines of the paper's Table 4),
    /// with BERTScore given a scorer model.
    SummarizationBaselines {
        /// The Liputan6 folder holding the split folders.
        #[arg(long)]
        data: PathBuf,
        /// Split folders to evaluate (e.g. test, or the Xtreme test folder).
        #[arg(long, num_args = 1.., default_value = "test")]
        split: Vec<String>,
        /// Also BERTScore P/R/F1 of every row with this BERT or XLM-R folder (the paper's:
        /// bert-base-multilingual-cased), the F1 ×100 as the BS column; `<q>` read as a space.
        #[arg(long)]
        bertscore_model: Option<PathBuf>,
        /// The layer BERTScore compares (default: bert-score's for the model, 9 for
        /// bert-base-multilingual-cased).
        #[arg(long, requires = "bertscore_model")]
        bertscore_layer: Option<usize>,
    },
    /// IndoMMLU accuracy per subject, level and area, with the random baseline and the
    /// calibration of the confidence; masked LMs zero-shot, causal LMs zero- or few-shot.
    Indommlu {
        #[arg(long)]
        model: PathBuf,
        /// The IndoMMLU CSV (`indolm download indommlu`).
        #[arg(long)]
        data: PathBuf,
        /// Masked LMs: `option-pll` (default) or `letter`; causal LMs: `letter` (default, the
        /// paper's reported setting) or `full-answer`.
        #[arg(long, value_enum)]
        mode: Option<indolm_eval::IndommluMode>,
        /// Causal LMs: solved questions (rows marked is_for_fewshot of the same subject and
        /// level) before each question.
        #[arg(long, default_value_t = 0)]
        shots: usize,
        /// Which rows are scored: `held-out` leaves out the rows marked is_for_fewshot (the
        /// demonstrations few-shot prompts show: 14,906 questions); `all` scores every row, as
        /// the paper's zero-shot tables do (14,981; zero-shot only).
        #[arg(long, value_enum, default_value = "held-out")]
        questions: indolm_eval::indommlu::QuestionSet,
        /// Write the results as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write indommlu.json and the per-question records indommlu_questions.csv (each
        /// option's score, the prediction, the key) into this folder.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace the IndoMMLU evaluation already in --out (refused without it).
        #[arg(long, requires = "out")]
        overwrite: bool,
    },
}

/// `indolm eval bertscore`: the model, its layer, the summaries and the options.
#[derive(Args, Debug)]
pub struct BertscoreArgs {
    /// A BERT or XLM-R model directory (the paper's: bert-base-multilingual-cased).
    #[arg(long)]
    pub model: PathBuf,
    /// Use the hidden states after this many encoder layers (0: the embeddings); default:
    /// bert-score's for the model, when it knows it (9 for bert-base-multilingual-cased).
    #[arg(long)]
    pub layer: Option<usize>,
    /// One predicted summary a line.
    #[arg(long)]
    pub pred: PathBuf,
    /// One reference summary a line, aligned with --pred.
    #[arg(long = "ref")]
    pub reference: PathBuf,
    /// Weight tokens by their idf, computed on the references (bert-score's idf=True).
    #[arg(long)]
    pub idf: bool,
    /// Rescale the scores by row --layer of a bert-score rescale_baseline file (CSV:
    /// LAYER,P,R,F).
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Write the settings, the means and every pair's scores as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// `indolm eval bias`: one model, or every checkpoint of a run after the fact.
#[derive(Args, Debug)]
pub struct BiasArgs {
    /// A model directory.
    #[arg(long, required_unless_present = "run", conflicts_with = "run")]
    pub model: Option<PathBuf>,
    /// Evaluate every checkpoint (with weights) of a run directory after the fact.
    #[arg(long)]
    pub run: Option<PathBuf>,
    /// The IndoBias `pair/` folder (or its parent, or a file), or the CrowS-Pairs CSV.
    #[arg(long)]
    pub pairs: PathBuf,
    /// Restrict to these languages (codes or names; `id jv` or `id,jv`); one the pairs do not
    /// hold is refused before the model is loaded.
    #[arg(long, num_args = 1.., value_delimiter = ',')]
    pub languages: Vec<String>,
    /// `pppl` (IndoBias/RuBia), `crows` (CrowS-Pairs metric.py), `aul`, `aula` (Kaneko &
    /// Bollegala) or `pppl-word-l2r` (Kauf & Ivanova); default: pppl, crows for CrowS-Pairs.
    /// Several: scored in one pass, the first written as the main evaluation, each other under
    /// `bias-<metric>/` beside it.
    #[arg(long, value_enum, num_args = 1..)]
    pub metric: Vec<indolm_eval::BiasMetric>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// With --model: write bias.json and the per-pair records bias_pairs.csv into this folder
    /// (what `report bias-diff` compares).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed of the bootstrap behind the score-gap intervals.
    #[arg(long, default_value_t = indolm_core::seeds::DEFAULT_SEED)]
    pub seed: u64,
    /// Bootstrap resamples per interval.
    #[arg(long, default_value_t = indolm_eval::settings::DEFAULT_BOOTSTRAP_RESAMPLES)]
    pub resamples: usize,
    /// With --run: TensorBoard folder for the curves, one run per language under it (default
    /// runs/<run>/eval).
    #[arg(long)]
    pub logdir: Option<PathBuf>,
    /// Replace the bias evaluation already there (with --out: the folder's; with --run: the
    /// checkpoints', the training hook's included), all of it, `bias-<metric>/` folders too;
    /// without it, an existing evaluation is refused.
    #[arg(long)]
    pub overwrite: bool,
    /// Score a model whose checkpoint has no MLM head (initialised randomly; refused
    /// otherwise): bias.json, the tables, the summary and bias_pairs.csv then carry a warning.
    #[arg(long)]
    pub allow_random_head: bool,
}

/// `eval pll`: PLL, scored tokens and pseudo-perplexity of each line, as a table or JSON lines
/// (a causal LM's log-likelihood, tokens, mean and perplexity for a decoder directory, with the
/// convention in every JSON line).
fn pll(
    model: &Path,
    text: &Path,
    metric: LineMetric,
    json: bool,
    allow_random_head: bool,
    device: Device,
) -> Result<()> {
    let lm = LoadedLm::load(model, device)?;
    match score_lines(&lm, model, text, metric, allow_random_head, device)? {
        ScoredLines::Masked(m) => print_scores(&m.labels, &m.scores, json, m.warning.as_deref()),
        ScoredLines::Causal(c) => print_causal(&c, json),
    }
}

/// A causal LM's scores as a table or JSON lines.
fn print_causal(scored: &CausalLines, json: bool) -> Result<()> {
    let c = &scored.convention;
    if !json {
        outln!("| log-likelihood | tokens | mean | perplexity | rank-1 | sentence |\n|---:|---:|---:|---:|---:|---|");
    }
    for (line, s) in scored.sentences.iter().zip(&scored.scores) {
        if json {
            outln!(
                "{}",
                serde_json::json!({"sentence": line, "log_likelihood": s.sum, "tokens": s.tokens(), "mean": s.mean(),
                    "perplexity": s.perplexity(), "correct": s.correct, "prefix_token_id": c.prefix_token_id,
                    "prefix_token": c.prefix_token, "prefix_is": c.prefix_is, "score": c.score})
            );
        } else {
            outln!(
                "| {:.4} | {} | {:.4} | {:.2} | {} | {} |",
                s.sum,
                s.tokens(),
                s.mean(),
                s.perplexity(),
                s.correct,
                line
            );
        }
    }
    Ok(())
}

/// The scores as a table (after the warning, if any), or as JSON lines (each with it).
fn print_scores(
    labels: &[(usize, String)],
    scores: &[indolm_eval::pll::SentenceScore],
    json: bool,
    warning: Option<&str>,
) -> Result<()> {
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    if !json {
        if let Some(w) = warning {
            outln!("**Warning:** {w}\n");
        }
        outln!("| pll | tokens | pppl | rank-1 | sentence |\n|---:|---:|---:|---:|---|");
    }
    for ((_, label), s) in labels.iter().zip(scores) {
        if json {
            let mut line = serde_json::json!({"sentence": label, "pll": s.pll, "tokens": s.tokens, "pppl": s.pppl(), "correct": s.correct});
            if let Some(w) = warning {
                line["warning"] = w.into();
            }
            outln!("{line}");
        } else {
            outln!("| {:.4} | {} | {:.2} | {} | {} |", s.pll, s.tokens, s.pppl(), s.correct, label);
        }
    }
    Ok(())
}

/// `eval bias`: the win-rate tables of one model (Markdown; `bias.json` and `bias_pairs.csv` on
/// request), or `bias.json`, `bias_pairs.csv` and TensorBoard curves for every checkpoint of a run.
fn bias(args: &BiasArgs, device: Device) -> Result<()> {
    let inputs: Vec<&Path> =
        [args.model.as_deref(), args.run.as_deref(), Some(args.pairs.as_path())].into_iter().flatten().collect();
    let outputs: Vec<Output> = [
        args.json.as_deref().map(|j| Output::file("--json", j)),
        args.out.as_deref().map(|o| Output::folder("--out", o)),
    ]
    .into_iter()
    .flatten()
    .collect();
    super::check_outputs(&outputs, &inputs)?;
    let (pairs, format) = load_pairs(&args.pairs)?;
    pairs.check_languages(&args.languages).map_err(|why| Error::argument("--languages", why))?;
    let mut metrics: Vec<BiasMetric> = Vec::new();
    for &m in &args.metric {
        if !metrics.contains(&m) {
            metrics.push(m);
        }
    }
    if metrics.is_empty() {
        metrics.push(format.default_metric());
    }
    if args.resamples == 0 {
        return Err(Error::argument("--resamples", "must be > 0"));
    }
    let request = BiasRequest {
        pairs: &pairs,
        metrics: &metrics,
        languages: &args.languages,
        bootstrap: Bootstrap { seed: args.seed, resamples: args.resamples },
        allow_random_head: args.allow_random_head,
        device,
    };
    if let Some(model) = &args.model {
        if let Some(dir) = &args.out {
            indolm_eval::bias::records::refuse_to_replace(dir, args.overwrite)?;
        }
        let evaluations = evaluate_model(model, &request, None)?;
        for (i, evaluation) in evaluations.iter().enumerate() {
            out!("{}{}", if i == 0 { "" } else { "\n" }, evaluation.report.markdown());
        }
        if let Some(out) = &args.json {
            match evaluations.as_slice() {
                [one] => write_json(out, &one.report)?,
                many => write_json(out, &many.iter().map(|e| &e.report).collect::<Vec<_>>())?,
            }
        }
        if let Some(dir) = &args.out {
            std::fs::create_dir_all(dir).with_path(dir)?;
            Evaluation::write_all(&evaluations, dir)?;
            for (i, e) in evaluations.iter().enumerate() {
                let at = if i == 0 { dir.clone() } else { metric_dir(dir, e.report.metric) };
                outln!("\nwrote {} and {}", at.join(REPORT_FILE).display(), at.join(RECORDS_FILE).display());
            }
        }
        return Ok(());
    }
    let run = args.run.as_deref().expect("clap requires --model or --run");
    if args.out.is_some() {
        return Err(Error::argument("--out", "with --run, each checkpoint's files go into its own folder"));
    }
    let run_name = run.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let logdir = args.logdir.clone().unwrap_or_else(|| PathBuf::from("runs").join(&run_name).join("eval"));
    let reports = evaluate_run(run, &request, &logdir, args.overwrite, &mut |step, evaluation| {
        outln!("step {step} ({}): {}", evaluation.report.metric, evaluation.report.summary_line());
    })?;
    for report in &reports[reports.len() - metrics.len()..] {
        outln!("\nlast checkpoint:\n{}", report.markdown());
    }
    outln!("curves in {} (one TensorBoard run per language: bias-<lang>)", logdir.display());
    if let Some(out) = &args.json {
        write_json(out, &reports)?;
    }
    Ok(())
}

/// What `eval indommlu` was asked.
struct IndommluArgs<'a> {
    model: &'a Path,
    data: &'a Path,
    mode: Option<indolm_eval::IndommluMode>,
    shots: usize,
    questions: indolm_eval::indommlu::QuestionSet,
    overwrite: bool,
}

/// `eval indommlu`: a masked LM zero-shot, or a causal LM zero- or few-shot
/// ([`indolm_eval::indommlu::evaluate_model`]): the report on stdout, in --json, and with the
/// records in --out.
fn indommlu(args: IndommluArgs, json: Option<&Path>, out_dir: Option<&Path>, device: Device) -> Result<()> {
    use indolm_eval::indommlu::{evaluate_model, refuse_to_replace, write_evaluation, ModelRequest, QuestionSet};
    if args.questions == QuestionSet::All && args.shots > 0 {
        return Err(Error::argument(
            "--questions",
            "`all` scores the is_for_fewshot rows too, which few-shot prompts show as demonstrations: only with --shots 0",
        ));
    }
    let outputs: Vec<Output> = [json.map(|j| Output::file("--json", j)), out_dir.map(|o| Output::folder("--out", o))]
        .into_iter()
        .flatten()
        .collect();
    super::check_outputs(&outputs, &[args.model, args.data])?;
    if let Some(dir) = out_dir {
        refuse_to_replace(dir, args.overwrite)?;
    }
    let request = ModelRequest { mode: args.mode, shots: args.shots, questions: args.questions };
    let evaluated = evaluate_model(args.model, args.data, request, device)?;
    out!("{}", evaluated.report.markdown());
    if let Some(out) = json {
        write_json(out, &evaluated.report)?;
    }
    if let Some(dir) = out_dir {
        std::fs::create_dir_all(dir).with_path(dir)?;
        write_evaluation(dir, &evaluated.report, &evaluated.records)?;
        eprintln!(
            "wrote {} and {}",
            dir.join(indolm_eval::indommlu::REPORT_FILE).display(),
            dir.join(indolm_eval::indommlu::RECORDS_FILE).display()
        );
    }
    Ok(())
}

/// What `eval rouge` was asked.
struct RougeArgs<'a> {
    /// The predicted summaries, one a line.
    pred: &'a Path,
    /// The references, aligned with them.
    reference: &'a Path,
    /// Which ROUGE, and its resampling.
    options: indolm_metrics::rouge::RougeOptions,
    /// Where to write the report as JSON.
    json: Option<&'a Path>,
}

/// `eval rouge`: ROUGE-1/2/L of aligned prediction and reference lines with their intervals, as
/// a table (F1 ×100, then every figure as the script prints it), and as JSON on request.
fn rouge(args: RougeArgs) -> Result<()> {
    let RougeArgs { pred, reference, options, json } = args;
    options.check()?;
    super::check_outputs(&json.map(|j| Output::file("--json", j)).into_iter().collect::<Vec<_>>(), &[pred, reference])?;
    let report = indolm_metrics::rouge::evaluate_paths(pred, reference, &options)?;
    if report.scored < report.pairs {
        eprintln!(
            "note: {} of {} pairs have an empty reference and are left out, as PreSumm leaves them out",
            report.pairs - report.scored,
            report.pairs
        );
    }
    out!("{}", report.markdown());
    if let Some(path) = json {
        write_json(path, &report)?;
    }
    Ok(())
}

/// `eval bleu`: corpus BLEU and chrF of the translations in `pred` against the reference files,
/// printed as sacrebleu prints them with their signatures, and as JSON on request.
fn bleu_command(
    pred: &Path,
    references: &[PathBuf],
    bleu: &indolm_metrics::bleu::BleuOptions,
    chrf: &indolm_metrics::chrf::ChrfOptions,
    json: Option<&Path>,
) -> Result<()> {
    bleu.check()?;
    chrf.check()?;
    let inputs: Vec<&Path> = std::iter::once(pred).chain(references.iter().map(PathBuf::as_path)).collect();
    super::check_outputs(&json.map(|j| Output::file("--json", j)).into_iter().collect::<Vec<_>>(), &inputs)?;
    let (hypotheses, streams) = indolm_metrics::translations::read_streams(pred, references)?;
    let b = indolm_metrics::bleu::corpus_bleu(&hypotheses, &streams, bleu)?;
    let c = indolm_metrics::chrf::corpus_chrf(&hypotheses, &streams, chrf)?;
    outln!(
        "{b}
  signature: {}
{c}
  signature: {}",
        b.signature(),
        c.signature()
    );
    if let Some(path) = json {
        let report = serde_json::json!({
            "sentences": hypotheses.len(),
            "bleu": { "score": b.score, "printed": b.to_string(), "signature": b.signature(), "detail": b },
            "chrf": { "score": c.score, "printed": c.to_string(), "signature": c.signature(), "detail": c },
        });
        write_json(path, &report)?;
    }
    Ok(())
}

/// `eval bertscore`: mean BERTScore P, R and F1 (×100) of aligned prediction and reference
/// lines, with every pair's scores (fractions, as bert-score gives them) in --json.
fn bertscore(args: &BertscoreArgs, device: Device) -> Result<()> {
    use indolm_eval::bertscore::{mean, Scorer};
    let inputs = [args.model.as_path(), args.pred.as_path(), args.reference.as_path()];
    super::check_outputs(
        &args.json.as_deref().map(|j| Output::file("--json", j)).into_iter().collect::<Vec<_>>(),
        &inputs,
    )?;
    let pairs = indolm_metrics::summaries::read_aligned(&args.pred, &args.reference)?;
    let mut scorer = Scorer::new(&args.model, args.layer, device)?.with_idf(args.idf);
    if let Some(baseline) = &args.baseline {
        scorer = scorer.with_baseline(baseline)?;
    }
    for note in scorer.notes() {
        eprintln!("note: {note}");
    }
    let empty = pairs.iter().filter(|(c, r)| c.trim().is_empty() || r.trim().is_empty()).count();
    if empty > 0 {
        eprintln!("note: {empty} pair(s) with an empty prediction or reference: scored 0, as bert-score does");
    }
    let scores = scorer.score_files(&args.pred, &args.reference, &pairs)?;
    let undefined = scores.iter().filter(|s| s.precision.is_nan() || s.recall.is_nan()).count();
    if undefined > 0 {
        eprintln!(
            "note: {undefined} pair(s) whose every token is in every reference weigh nothing with --idf: their P or R is NaN, as in bert-score"
        );
    }
    let (m, s) = (mean(&scores), scorer.settings());
    outln!(
        "| pairs | layer | idf | rescaled | BERTScore P | BERTScore R | BERTScore F1 |\n|---:|---:|---|---|---:|---:|---:|\n| {} | {} | {} | {} | {:.2} | {:.2} | {:.2} |",
        scores.len(),
        s.layer,
        if s.idf { "yes" } else { "no" },
        if s.baseline.is_some() { "yes" } else { "no" },
        100.0 * m.precision,
        100.0 * m.recall,
        100.0 * m.f1
    );
    if let Some(out) = &args.json {
        write_json(out, &serde_json::json!({"settings": s, "pairs": scores.len(), "mean": m, "scores": scores}))?;
    }
    Ok(())
}

/// Runs an `eval` subcommand; `device` parses `--device` for the ones that load a model.
pub fn run(command: EvalCommand, device: &dyn Fn() -> Result<Device>) -> Result<()> {
    match command {
        EvalCommand::Pll { model, text, metric, json, allow_random_head } => {
            pll(&model, &text, metric, json, allow_random_head, device()?)
        }
        EvalCommand::Bias(args) => bias(&args, device()?),
        EvalCommand::BiasQa(args) => super::bias_qa_cmds::run(&args, device),
        EvalCommand::Rouge { pred, reference, rouge: scorer, seed, resamples, json } => {
            let options = indolm_metrics::rouge::RougeOptions { scorer, seed, resamples, ..Default::default() };
            rouge(RougeArgs { pred: &pred, reference: &reference, options, json: json.as_deref() })
        }
        EvalCommand::Bleu { pred, references, lowercase, tokenize, smooth, chrf_word_order, json } => {
            let bleu =
                indolm_metrics::bleu::BleuOptions { lowercase, tokenize, smoothing: smooth, ..Default::default() };
            let chrf =
                indolm_metrics::chrf::ChrfOptions { lowercase, word_order: chrf_word_order, ..Default::default() };
            bleu_command(&pred, &references, &bleu, &chrf, json.as_deref())
        }
        EvalCommand::Bertscore(args) => bertscore(&args, device()?),
        EvalCommand::SummarizationBaselines { data, split, bertscore_model, bertscore_layer } => {
            let scorer = match &bertscore_model {
                Some(model) => Some(bertscore_scorer(model, bertscore_layer, device()?)?),
                None => None,
            };
            summarization_baselines(&data, &split, scorer.as_ref())
        }
        EvalCommand::Indommlu { model, data, mode, shots, questions, json, out, overwrite } => indommlu(
            IndommluArgs { model: &model, data: &data, mode, shots, questions, overwrite },
            json.as_deref(),
            out.as_deref(),
            device()?,
        ),
    }
}

/// Lead-1/2/3 and Oracle ROUGE of each split, with BERTScore when `bertscore` is given.
fn summarization_baselines(
    data: &Path,
    splits: &[String],
    bertscore: Option<&indolm_eval::bertscore::Scorer>,
) -> Result<()> {
    use indolm_tasks::summarization::{baselines_scored, data::load_split, markdown};
    for split in splits {
        let articles = load_split(data, split)?;
        let rows = baselines_scored(&articles, bertscore)?;
        outln!("{}", markdown(&format!("{split} ({} articles)", articles.len()), &rows));
    }
    Ok(())
}

/// `--bertscore-model` loaded for `eval summarization-baselines`, its notes on stderr; a bad
/// layer is named by this command's flag.
fn bertscore_scorer(model: &Path, layer: Option<usize>, device: Device) -> Result<indolm_eval::bertscore::Scorer> {
    let scorer = indolm_eval::bertscore::Scorer::new(model, layer, device).map_err(|e| match e {
        Error::Argument { message, .. } => Error::argument("--bertscore-layer", message),
        other => other,
    })?;
    for note in scorer.notes() {
        eprintln!("note: {note}");
    }
    Ok(scorer)
}
