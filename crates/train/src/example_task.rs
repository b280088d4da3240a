//! (Test only.) The steps of docs/architecture.md's "Adding a task", followed once: a one-weight regression
//! task (y = 3x) with its recipe sections, its `Task`, its `Evaluations` and plan, its run and a
//! file it declares, trained by the engine like any task — checkpoints, best weights, resume.
use super::engine::{Engine, EngineSettings, TaskRun, TrainOptions};
use super::task::{
    BatchSource, Drawn, Evaluation, EvaluationPlan, Evaluations, OptimizerSpec, Slice, Task, Throughput,
};
use indolm_core::logger::Logger;
use indolm_core::outputs::RunFile;
use indolm_core::recipe::{CheckpointSection, Fingerprint, LoggingSection, OptimizerSection, SharedSections};
use indolm_core::run::{Run, RunLayout};
use indolm_core::schedule::Schedule;
use indolm_torch::error::Result;
use indolm_torch::model::Precision;
use std::collections::BTreeMap;
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// Step 5: the file this task writes into its run folder, declared beside its writer.
const WEIGHT_FILE: &str = "slope.txt";
indolm_core::declare_run_files!(EXAMPLE_FILES: RunFile::Named(WEIGHT_FILE));

/// Step 1: the recipe, its shared sections borrowed by the engine.
struct SlopeRecipe {
    name: String,
    optimizer: OptimizerSection,
    logging: LoggingSection,
    checkpoint: CheckpointSection,
}

/// Step 2: the task: one weight, batches of (x, 3x) drawn from the seed and the cursor.
struct Slope {
    w: Tensor,
    /// The recipe's learning rate, decaying linearly to 0 at `max_steps`.
    lr: f64,
    /// Updates in the whole run.
    max_steps: u64,
}

/// Its batch source: x = 1, 2, 3, 4 shifted by the cursor, so a resumed run draws the same.
struct SlopeSource;

impl BatchSource for SlopeSource {
    type Batch = Vec<f32>;
    type Cursor = u64;

    fn next(&mut self, cursor: &mut u64) -> Drawn<Vec<f32>> {
        *cursor += 1;
        let xs: Vec<f32> = (0..4).map(|i| ((*cursor + i) % 5) as f32 / 4.0).collect();
        Drawn { batch: xs, units: 4, global_units: 4, rows: 4 }
    }
}

impl Slope {
    fn mse(&self, xs: &[f32]) -> Tensor {
        let x = Tensor::from_slice(xs);
        (&self.w * &x - &x * 3.0).square().mean(Kind::Float)
    }
}

impl Task for Slope {
    type Source = SlopeSource;

    fn describe(&self) -> String {
        "a one-weight regression".into()
    }
    fn precision(&self) -> Precision {
        Precision::Fp32
    }
    fn optimizers(&self) -> Vec<OptimizerSpec> {
        vec![OptimizerSpec {
            name: String::new(),
            vars: BTreeMap::from([("w".to_string(), self.w.shallow_clone())]),
            betas: [0.9, 0.999],
            eps: 1e-8,
            weight_decay: 0.0,
            schedule: Schedule::Linear { peak: self.lr, warmup: 0, total: self.max_steps },
            grad_clip: 0.0,
        }]
    }
    fn source(&mut self, _slice: Slice) -> Result<SlopeSource> {
        Ok(SlopeSource)
    }
    fn start_cursor(&self) -> u64 {
        0
    }
    fn loss(&self, batch: &Vec<f32>) -> Tensor {
        self.mse(batch)
    }
    fn save_model(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| indolm_torch::error::Error::io(dir, e))?;
        indolm_torch::model::weights::write_file(
            &dir.join(indolm_torch::model::model_dir::WEIGHTS_FILE),
            &[("w".into(), self.w.detach().copy())],
        )?;
        indolm_core::files::write_atomic(&dir.join(WEIGHT_FILE), format!("{}\n", self.w.double_value(&[])).as_bytes())
    }
    fn load_weights(&mut self, dir: &Path) -> Result<()> {
        let saved = indolm_torch::model::weights::read_file(&dir.join(indolm_torch::model::model_dir::WEIGHTS_FILE))?;
        tch::no_grad(|| self.w.copy_(&saved["w"]));
        Ok(())
    }
    fn throughput(&self) -> Throughput {
        Throughput { per_update: 4.0, per_row: 1.0, unit: "examples", short: "ex", flops_per_unit: None }
    }
}

/// Step 3: what it evaluates (the loss on fixed points, as a score: higher is better) and when.
impl Evaluations for Slope {
    fn plan(&self) -> EvaluationPlan {
        EvaluationPlan { every: 5, at_last: true, at_start: true, ..EvaluationPlan::default() }
    }
    fn evaluate(&mut self, step: u64, logger: &mut Logger) -> Result<Evaluation> {
        let loss = tch::no_grad(|| self.mse(&[0.5, 1.0, 2.0])).double_value(&[]);
        logger.scalar("eval/loss", loss, step);
        Ok(Evaluation { score: Some(("negative loss".into(), -loss)) })
    }
}

/// Step 4: the run: the run folder, the engine configured from the shared sections, trained.
fn train(recipe: &SlopeRecipe, dir: &Path, opts: &TrainOptions) -> Result<(u64, f64)> {
    let max_steps = recipe.optimizer.max_steps.unwrap_or(1);
    let tensorboard = dir.join("runs").join(&recipe.name);
    let layout = RunLayout::new(dir.join("checkpoints").join(&recipe.name));
    let (run, resume) = Run::open(layout, &opts.run_options(true, &recipe.checkpoint, tensorboard, max_steps))?;
    let shared = SharedSections { name: &recipe.name, seed: 7, optimizer: &recipe.optimizer, logging: &recipe.logging };
    let fingerprint = Fingerprint::of(&[("optimizer", serde_json::to_value(&recipe.optimizer).unwrap())]);
    let settings =
        EngineSettings::for_recipe(&shared, TaskRun { torch_salt: 99, max_steps, patience: None, fingerprint });
    let task = Slope {
        w: Tensor::zeros([], (Kind::Float, Device::Cpu)).set_requires_grad(true),
        lr: recipe.optimizer.lr,
        max_steps,
    };
    let finished = Engine::new(task, settings, opts, run, resume, None)?.run()?;
    Ok((finished.summary.final_step, finished.task.w.double_value(&[])))
}

fn recipe(steps: u64) -> SlopeRecipe {
    SlopeRecipe {
        name: "slope".into(),
        optimizer: toml::from_str(&format!("lr = 0.3\nbatch_size = 4\nmax_steps = {steps}")).unwrap(),
        logging: toml::from_str("every = 5").unwrap(),
        checkpoint: toml::from_str("every = 10").unwrap(),
    }
}

#[test]
fn a_task_added_by_the_guide_s_steps_trains_checkpoints_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = TrainOptions::on(Device::Cpu);
    let (step, w) = train(&recipe(60), dir.path(), &TrainOptions { stop_after: Some(30), ..opts.clone() }).unwrap();
    assert_eq!(step, 30);
    let run = dir.path().join("checkpoints/slope");
    assert!(run.join("step-30/slope.txt").exists() && run.join("step-30/trainer_state.json").exists());
    let (step, resumed) =
        train(&recipe(60), dir.path(), &TrainOptions { resume: Some("latest".into()), ..opts.clone() }).unwrap();
    assert_eq!(step, 60);
    assert!((resumed - 3.0).abs() < (w - 3.0).abs() && (resumed - 3.0).abs() < 0.05, "w {w} -> {resumed}");
    let best: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("best/best.json")).unwrap()).unwrap();
    assert!(best["step"].as_u64().unwrap() > 30, "{best}");
    // --overwrite removes it all: every name in the run folder is declared, this task's too.
    train(&recipe(10), dir.path(), &TrainOptions { overwrite: true, ..opts }).unwrap();
    assert!(!run.join("step-60").exists() && run.join("step-10/slope.txt").exists());
}
