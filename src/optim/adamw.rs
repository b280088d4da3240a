//! AdamW, written out so that the optimizer state (the moments) can be checkpointed and
//! restored exactly. Matches `torch.optim.AdamW`; weight decay skips biases and LayerNorm
//! weights, as HF's `run_mlm` does.
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use tch::{Kind, Tensor};

struct Param {
    name: String,
    tensor: Tensor,
    decay: bool,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
}

/// AdamW over a fixed set of named parameters, with its moments in the open for checkpoints.
pub struct AdamW {
    params: Vec<Param>,
    beta1: f64,
    beta2: f64,
    eps: f64,
    weight_decay: f64,
    /// Updates applied so far.
    pub steps: u64,
}

/// Whether a parameter gets weight decay: not biases, not LayerNorm weights.
pub fn decays(name: &str) -> bool {
    !(name.ends_with(".bias") || name.contains("LayerNorm."))
}

impl AdamW {
    /// AdamW over `vars` (named parameters) with fresh zero moments.
    pub fn new(vars: BTreeMap<String, Tensor>, betas: [f64; 2], eps: f64, weight_decay: f64) -> Self {
        let params = vars
            .into_iter()
            .map(|(name, tensor)| Param {
                decay: decays(&name),
                exp_avg: tensor.zeros_like().detach(),
                exp_avg_sq: tensor.zeros_like().detach(),
                name,
                tensor,
            })
            .collect();
        AdamW { params, beta1: betas[0], beta2: betas[1], eps, weight_decay, steps: 0 }
    }

    /// Zeroes every parameter's gradient.
    pub fn zero_grad(&mut self) {
        for p in &mut self.params {
            let mut g = p.tensor.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }

    /// Global L2 norm of the gradients; scales them to `max_norm` when above it (as
    /// `torch.nn.utils.clip_grad_norm_`, with its 1e-6). Returns the norm before clipping.
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> f64 {
        let grads: Vec<Tensor> = self.params.iter().map(|p| p.tensor.grad()).filter(|g| g.defined()).collect();
        if grads.is_empty() {
            return 0.0;
        }
        let norms: Vec<Tensor> = grads.iter().map(|g| g.to_kind(Kind::Float).norm()).collect();
        let total = Tensor::stack(&norms, 0).norm();
        let total_value = total.double_value(&[]);
        if max_norm > 0.0 {
            let coef = (max_norm / (total_value + 1e-6)).min(1.0);
            for mut g in grads {
                let _ = g.g_mul_scalar_(coef);
            }
        }
        total_value
    }

    /// One AdamW update with learning rate `lr`.
    pub fn step(&mut self, lr: f64) {
        self.steps += 1;
        let bc1 = 1.0 - self.beta1.powi(self.steps as i32);
        let bc2_sqrt = (1.0 - self.beta2.powi(self.steps as i32)).sqrt();
        tch::no_grad(|| {
            for p in &mut self.params {
                let grad = p.tensor.grad();
                if !grad.defined() {
                    continue;
                }
                if p.decay && self.weight_decay != 0.0 {
                    let _ = p.tensor.g_mul_scalar_(1.0 - lr * self.weight_decay);
                }
                let _ = p.exp_avg.lerp_(&grad, 1.0 - self.beta1);
                let _ = p.exp_avg_sq.g_mul_scalar_(self.beta2).addcmul_(&grad, &(&grad * (1.0 - self.beta2)));
                let denom = (p.exp_avg_sq.sqrt() / bc2_sqrt) + self.eps;
                let _ = p.tensor.addcdiv_(&(&p.exp_avg * (-lr / bc1)), &denom);
            }
        });
    }

    /// The moments, named `exp_avg.<param>` and `exp_avg_sq.<param>`, for a checkpoint.
    pub fn state_tensors(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::with_capacity(self.params.len() * 2);
        for p in &self.params {
            out.push((format!("exp_avg.{}", p.name), p.exp_avg.shallow_clone()));
            out.push((format!("exp_avg_sq.{}", p.name), p.exp_avg_sq.shallow_clone()));
        }
        out
    }

    /// Restores the moments written by `state_tensors`.
    pub fn load_state(
        &mut self,
        mut tensors: BTreeMap<String, Tensor>,
        steps: u64,
        path: &std::path::Path,
    ) -> Result<()> {
        tch::no_grad(|| {
            for p in &mut self.params {
                for (prefix, slot) in [("exp_avg", &mut p.exp_avg), ("exp_avg_sq", &mut p.exp_avg_sq)] {
                    let name = format!("{prefix}.{}", p.name);
                    let t = tensors
                        .remove(&name)
                        .ok_or_else(|| Error::invalid(path, format!("optimizer state lacks `{name}`")))?;
                    if t.size() != slot.size() {
                        return Err(Error::Shape {
                            path: path.into(),
                            tensor: name,
                            expected: slot.size(),
                            found: t.size(),
                        });
                    }
                    slot.copy_(&t);
                }
            }
            Ok(())
        })?;
        self.steps = steps;
        Ok(())
    }
}
