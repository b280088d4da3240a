//! Training subcommands: `train` and `recipe check`.
use indolm::data::tokenizer::TextTokenizer;
use indolm::error::Result;
use indolm::train::recipe::Recipe;
use indolm::train::trainer::{train as run_training, TrainOptions};
use std::path::Path;

pub fn train(recipe: &Path, opts: &TrainOptions) -> Result<()> {
    let summary = run_training(recipe, opts)?;
    println!("finished at step {} in {}", summary.final_step, summary.run_dir.display());
    if let (Some(first), Some(last)) = (summary.first_heldout_loss, summary.last_heldout_loss) {
        println!("held-out MLM loss {first:.4} -> {last:.4}");
    }
    if summary.nonfinite_skipped > 0 {
        println!("{} step(s) skipped for non-finite loss", summary.nonfinite_skipped);
    }
    Ok(())
}

pub fn check_recipe(path: &Path) -> Result<()> {
    let recipe = Recipe::load(path)?;
    print!("{}", recipe.resolved_toml());
    let tokenizer_path = recipe.resolve(&recipe.tokenizer.path);
    match TextTokenizer::from_path(&tokenizer_path) {
        Ok(tok) => {
            let config = recipe.model_config(tok.vocab_size(), path)?;
            println!("\n# resolved model config.json\n{}", config.to_hf_json());
        }
        Err(e) => println!(
            "\n# tokenizer not available yet ({e}); train it with `indolm tokenizer train --recipe {}`",
            path.display()
        ),
    }
    for source in &recipe.data.sources {
        let files = source.files(&recipe.base_dir)?;
        println!("# source {} ({}): {} file(s), weight {}", source.name, source.lang, files.len(), source.weight);
    }
    println!("# run directory {}, TensorBoard {}", recipe.run_dir().display(), recipe.tensorboard_dir().display());
    Ok(())
}
