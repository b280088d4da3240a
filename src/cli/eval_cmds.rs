//! Evaluation subcommands: `eval pll` and `eval bias` (one model, or every checkpoint of a run).
use super::PllMetric;
use indolm::error::{read_to_string, write_atomic, Error, Result};
use indolm::eval::bias::{evaluate, BiasReport, Metric};
use indolm::eval::pairs::{load_crows, load_indobias, PairSet};
use indolm::eval::pll::{crows_inputs, PllScorer, ScoringInput};
use indolm::model::model_dir::load_masked_lm;
use indolm::train::logger::Logger;
use std::path::{Path, PathBuf};
use tch::Device;

pub fn pll(model: &Path, text: &Path, metric: PllMetric, json: bool, device: Device) -> Result<()> {
    let mut loaded = load_masked_lm(model, device)?;
    loaded.model.set_precision(indolm::device::default_precision(device));
    let scorer = PllScorer::new(&loaded.model, &loaded.tokenizer, device);
    let content = read_to_string(text)?;
    let lines: Vec<&str> = content.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut inputs: Vec<ScoringInput> = Vec::new();
    let mut labels: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match metric {
            PllMetric::Pll => {
                inputs.push(scorer.full_input(line)?);
                labels.push(line.to_string());
            }
            PllMetric::Crows => {
                let (a, b) = line.split_once('\t').ok_or_else(|| {
                    Error::invalid(text, format!("line {}: expected two tab-separated sentences", i + 1))
                })?;
                let (ia, ib) = crows_inputs(&loaded.tokenizer, a, b)?;
                inputs.extend([ia, ib]);
                labels.extend([a.to_string(), b.to_string()]);
            }
        }
    }
    let started = std::time::Instant::now();
    let scores = scorer.score(&inputs);
    let secs = started.elapsed().as_secs_f64();
    let positions: usize = scores.iter().map(|s| s.tokens).sum();
    eprintln!(
        "scored {positions} masked positions in {secs:.3} s ({:.0} positions/s)",
        positions as f64 / secs.max(1e-9)
    );
    if !json {
        println!("| pll | tokens | pppl | sentence |\n|---:|---:|---:|---|");
    }
    for (label, s) in labels.iter().zip(&scores) {
        if json {
            println!("{}", serde_json::json!({"sentence": label, "pll": s.pll, "tokens": s.tokens, "pppl": s.pppl()}));
        } else {
            println!("| {:.4} | {} | {:.2} | {} |", s.pll, s.tokens, s.pppl(), label);
        }
    }
    Ok(())
}

/// IndoBias layout, or CrowS-Pairs when the path is a CSV with `sent_more`.
fn load_pairs(path: &Path) -> Result<(PairSet, Metric)> {
    if path.is_file() && read_to_string(path)?.lines().next().is_some_and(|h| h.contains("sent_more")) {
        return Ok((load_crows(path)?, Metric::Crows));
    }
    Ok((load_indobias(path)?, Metric::Pppl))
}

#[allow(clippy::too_many_arguments)]
pub fn bias(
    model: Option<&Path>,
    run: Option<&Path>,
    pairs_path: &Path,
    languages: &[String],
    metric: Option<Metric>,
    json: Option<&Path>,
    logdir: Option<&Path>,
    device: Device,
) -> Result<()> {
    let (pairs, default_metric) = load_pairs(pairs_path)?;
    let metric = metric.unwrap_or(default_metric);
    let score = |dir: &Path, step: Option<u64>| -> Result<BiasReport> {
        let mut loaded = load_masked_lm(dir, device)?;
        for note in &loaded.notes {
            eprintln!("note: {note}");
        }
        loaded.model.set_precision(indolm::device::default_precision(device));
        let scorer = PllScorer::new(&loaded.model, &loaded.tokenizer, device);
        evaluate(&scorer, &pairs, metric, languages, step)
    };
    if let Some(model) = model {
        let report = score(model, None)?;
        print!("{}", report.markdown());
        if let Some(out) = json {
            write_atomic(out, report.to_json().as_bytes())?;
        }
        return Ok(());
    }
    let run = run.expect("clap requires --model or --run");
    let mut steps: Vec<(u64, PathBuf)> = std::fs::read_dir(run)
        .map_err(|e| Error::io(run, e))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name().to_string_lossy().strip_prefix("step-").and_then(|n| n.parse().ok()).map(|n| (n, e.path()))
        })
        .filter(|(_, p)| p.join("model.safetensors").exists())
        .collect();
    steps.sort();
    if steps.is_empty() {
        return Err(Error::invalid(run, "no checkpoint with weights (step-N/model.safetensors) in this run"));
    }
    let run_name = run.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let logdir =
        logdir.map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("runs").join(&run_name).join("eval-bias"));
    let mut logger = Logger::new(&logdir, 0, 0)?;
    let mut reports = Vec::new();
    for (step, dir) in &steps {
        let report = score(dir, Some(*step))?;
        report.log(&mut logger, *step);
        write_atomic(&dir.join("bias.json"), report.to_json().as_bytes())?;
        let overall: Vec<String> =
            report.languages.iter().map(|l| format!("{} {:.1}", l.language, l.overall.win_rate)).collect();
        println!("step {step}: {}", overall.join(", "));
        reports.push(report);
    }
    logger.finish();
    println!("\nlast checkpoint:\n{}", reports.last().unwrap().markdown());
    println!("curves in {}", logdir.display());
    if let Some(out) = json {
        write_atomic(out, (serde_json::to_string_pretty(&reports).unwrap() + "\n").as_bytes())?;
    }
    Ok(())
}

pub fn indommlu(
    model: &Path,
    data: &Path,
    mode: indolm::eval::indommlu::Mode,
    json: Option<&Path>,
    device: Device,
) -> Result<()> {
    let questions = indolm::eval::indommlu::load(data)?;
    let mut loaded = load_masked_lm(model, device)?;
    for note in &loaded.notes {
        eprintln!("note: {note}");
    }
    loaded.model.set_precision(indolm::device::default_precision(device));
    let report = indolm::eval::indommlu::evaluate(&loaded.model, &loaded.tokenizer, &questions, mode, device, None)?;
    print!("{}", report.markdown());
    if let Some(out) = json {
        write_atomic(out, report.to_json().as_bytes())?;
    }
    Ok(())
}

pub fn rouge(pred: &Path, reference: &Path) -> Result<()> {
    let (p, r) = (read_to_string(pred)?, read_to_string(reference)?);
    let (p, r): (Vec<&str>, Vec<&str>) = (p.lines().collect(), r.lines().collect());
    if p.len() != r.len() {
        return Err(Error::invalid(
            pred,
            format!("{} predictions but {} references in {}", p.len(), r.len(), reference.display()),
        ));
    }
    let pairs: Vec<(String, String)> = p.iter().zip(&r).map(|(a, b)| (a.to_string(), b.to_string())).collect();
    let (r1, r2, rl) = indolm::eval::rouge::mean_f1(&pairs);
    println!(
        "| pairs | ROUGE-1 | ROUGE-2 | ROUGE-L |\n|---:|---:|---:|---:|\n| {} | {r1:.2} | {r2:.2} | {rl:.2} |",
        pairs.len()
    );
    Ok(())
}
