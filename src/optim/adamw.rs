//! AdamW, written out so that the optimizer state (the moments) can be checkpointed and
//! restored exactly. Matches `torch.optim.AdamW`; weight decay skips biases and LayerNorm
//! weights, as HF's `run_mlm` does.
//!
//! It works on flat buffers, as PyTorch's fused optimizers do. At the first update the parameters
//! that have a gradient move into one contiguous buffer per weight-decay group: each parameter
//! becomes a view of it (under the same name, so every holder of the parameter sees it), and so
//! do its gradient and moments. Backward then accumulates into the flat gradient buffer in place,
//! and zeroing, clipping, the update and a data-parallel reduction launch a handful of kernels
//! whatever the number of parameter tensors (BERT-base has about 200). A parameter without a
//! gradient at that first update (one the loss never reaches, such as an unused pooler) stays
//! outside and is skipped, as torch skips it.
use crate::error::{Error, Result};
use std::collections::BTreeMap;
use tch::{Kind, Tensor};

struct Param {
    name: String,
    tensor: Tensor,
    decay: bool,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
    /// Whether it is a view of a flat group (else updated alone, if it has a gradient).
    in_flat: bool,
}

/// One weight-decay group's parameters, gradients and moments, each one contiguous buffer.
struct FlatGroup {
    decay: bool,
    weights: Tensor,
    grads: Tensor,
    exp_avg: Tensor,
    exp_avg_sq: Tensor,
}

/// AdamW over a fixed set of named parameters, with its moments in the open for checkpoints.
pub struct AdamW {
    params: Vec<Param>,
    groups: Vec<FlatGroup>,
    flattened: bool,
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

extern "C" {
    fn indolm_set_grad(param: *mut std::ffi::c_void, grad: *mut std::ffi::c_void) -> std::ffi::c_int;
}

/// Makes `grad` (same shape, kind and device) the `.grad` of `param`.
fn set_grad(param: &Tensor, grad: &Tensor) {
    debug_assert_eq!(param.size(), grad.size());
    // SAFETY: both pointers are live `at::Tensor`s owned by the tch handles borrowed here; the
    // shim copies the `grad` handle (a reference count) and catches every exception.
    let ok = unsafe { indolm_set_grad(param.as_ptr() as *mut _, grad.as_ptr() as *mut _) };
    assert!(ok == 1, "setting a parameter's gradient to a view of the flat buffer failed");
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
                in_flat: false,
            })
            .collect();
        AdamW {
            params,
            groups: Vec::new(),
            flattened: false,
            beta1: betas[0],
            beta2: betas[1],
            eps,
            weight_decay,
            steps: 0,
        }
    }

    /// Moves the parameters that have a gradient into flat groups (once, when the first gradients
    /// exist), keeping their values, gradients and moments.
    fn flatten(&mut self) {
        if self.flattened || !self.params.iter().any(|p| p.tensor.grad().defined()) {
            return;
        }
        self.flattened = true;
        tch::no_grad(|| {
            for decay in [true, false] {
                let members: Vec<usize> = (0..self.params.len())
                    .filter(|&i| self.params[i].decay == decay && self.params[i].tensor.grad().defined())
                    .collect();
                // One kind and device per buffer (the model's master weights are all fp32).
                let mut kinds: Vec<(Kind, tch::Device)> = Vec::new();
                for &i in &members {
                    let key = (self.params[i].tensor.kind(), self.params[i].tensor.device());
                    if !kinds.contains(&key) {
                        kinds.push(key);
                    }
                }
                for key in kinds {
                    let group: Vec<usize> = members
                        .iter()
                        .copied()
                        .filter(|&i| (self.params[i].tensor.kind(), self.params[i].tensor.device()) == key)
                        .collect();
                    let flat = self.flat_group(decay, &group);
                    self.groups.push(flat);
                }
            }
        });
    }

    /// Flat buffers holding the parameters at `members` (in order), which become their views.
    fn flat_group(&mut self, decay: bool, members: &[usize]) -> FlatGroup {
        let cat = |part: &dyn Fn(&Param) -> Tensor| {
            Tensor::cat(&members.iter().map(|&i| part(&self.params[i]).reshape([-1])).collect::<Vec<_>>(), 0)
        };
        let group = FlatGroup {
            decay,
            weights: cat(&|p| p.tensor.detach()),
            grads: cat(&|p| p.tensor.grad()),
            exp_avg: cat(&|p| p.exp_avg.shallow_clone()),
            exp_avg_sq: cat(&|p| p.exp_avg_sq.shallow_clone()),
        };
        let mut offset = 0;
        for &i in members {
            let p = &mut self.params[i];
            let (n, shape) = (p.tensor.numel() as i64, p.tensor.size());
            let view = |flat: &Tensor| flat.narrow(0, offset, n).view(shape.as_slice());
            p.tensor.set_data(&view(&group.weights));
            set_grad(&p.tensor, &view(&group.grads));
            p.exp_avg = view(&group.exp_avg);
            p.exp_avg_sq = view(&group.exp_avg_sq);
            p.in_flat = true;
            offset += n;
        }
        group
    }

    /// The gradients to reduce across ranks: the flat buffers, then any parameter outside them
    /// that has a gradient, in a fixed order (the same on every rank of the same model).
    pub fn gradient_buffers(&mut self) -> Vec<Tensor> {
        self.flatten();
        let mut out: Vec<Tensor> = self.groups.iter().map(|g| g.grads.shallow_clone()).collect();
        out.extend(self.params.iter().filter(|p| !p.in_flat).map(|p| p.tensor.grad()).filter(Tensor::defined));
        out
    }

    /// Zeroes every gradient.
    pub fn zero_grad(&mut self) {
        for g in &mut self.groups {
            let _ = g.grads.zero_();
        }
        for p in self.params.iter_mut().filter(|p| !p.in_flat) {
            let mut g = p.tensor.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
    }

    /// Global L2 norm of the gradients; scales them to `max_norm` when above it (as
    /// `torch.nn.utils.clip_grad_norm_`, with its 1e-6, on the device: nothing is read back).
    /// Returns the norm before clipping, a scalar tensor.
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> Tensor {
        let grads = self.gradient_buffers();
        if grads.is_empty() {
            return Tensor::from(0f32);
        }
        let norms: Vec<Tensor> = grads.iter().map(|g| g.to_kind(Kind::Float).norm()).collect();
        let total = Tensor::stack(&norms, 0).norm();
        if max_norm > 0.0 {
            // torch: clamp(max_norm / (total + 1e-6), max=1), its division a reciprocal times.
            let coef = ((&total + 1e-6).reciprocal() * max_norm).clamp_max(1.0);
            for mut g in grads {
                let _ = g.g_mul_(&coef);
            }
        }
        total
    }

    /// One AdamW update with learning rate `lr`.
    pub fn step(&mut self, lr: f64) {
        self.flatten();
        self.steps += 1;
        let bc1 = 1.0 - self.beta1.powi(self.steps as i32);
        let bc2_sqrt = (1.0 - self.beta2.powi(self.steps as i32)).sqrt();
        let (beta1, beta2, eps, weight_decay) = (self.beta1, self.beta2, self.eps, self.weight_decay);
        let update = |weights: &mut Tensor, grad: &Tensor, exp_avg: &mut Tensor, exp_avg_sq: &mut Tensor, decay| {
            if decay && weight_decay != 0.0 {
                let _ = weights.g_mul_scalar_(1.0 - lr * weight_decay);
            }
            let _ = exp_avg.lerp_(grad, 1.0 - beta1);
            let _ = exp_avg_sq.g_mul_scalar_(beta2).addcmul_(grad, &(grad * (1.0 - beta2)));
            let denom = (exp_avg_sq.sqrt() / bc2_sqrt) + eps;
            let _ = weights.addcdiv_(&(&*exp_avg * (-lr / bc1)), &denom);
        };
        tch::no_grad(|| {
            for g in &mut self.groups {
                update(&mut g.weights, &g.grads, &mut g.exp_avg, &mut g.exp_avg_sq, g.decay);
            }
            for p in self.params.iter_mut().filter(|p| !p.in_flat) {
                let grad = p.tensor.grad();
                if grad.defined() {
                    update(&mut p.tensor, &grad, &mut p.exp_avg, &mut p.exp_avg_sq, p.decay);
                }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn named(pairs: &[(&str, &Tensor)]) -> BTreeMap<String, Tensor> {
        pairs.iter().map(|(n, t)| (n.to_string(), t.shallow_clone())).collect()
    }

    #[test]
    fn flat_buffers_hold_the_parameters_and_gradients_and_skip_the_unused() {
        let w = Tensor::from_slice(&[1.0f32, -2.0, 3.0, 0.5]).view([2, 2]).set_requires_grad(true);
        let bias = Tensor::from_slice(&[0.25f32, -0.75]).set_requires_grad(true);
        let unused = Tensor::from_slice(&[5.0f32, 6.0]).set_requires_grad(true);
        let mut opt = AdamW::new(
            named(&[("l.weight", &w), ("l.bias", &bias), ("pooler.weight", &unused)]),
            [0.9, 0.999],
            1e-8,
            0.1,
        );
        // The same updates, one tensor at a time, as torch.optim.AdamW computes them.
        let reference: Vec<Tensor> = [&w, &bias].iter().map(|t| t.detach().copy()).collect();
        let mut moments: Vec<(Tensor, Tensor)> = reference.iter().map(|t| (t.zeros_like(), t.zeros_like())).collect();
        let loss = |w: &Tensor, b: &Tensor| {
            (w.sum_dim_intlist([1].as_slice(), false, Kind::Float) * b).pow_tensor_scalar(2).sum(Kind::Float)
        };
        for step in 1..=3 {
            opt.zero_grad();
            loss(&w, &bias).backward();
            let _ = opt.clip_grad_norm(0.0);
            opt.step(0.01);
            // The reference: gradients by autograd on copies, then the textbook update.
            let (rw, rb) =
                (reference[0].detach().set_requires_grad(true), reference[1].detach().set_requires_grad(true));
            loss(&rw, &rb).backward();
            for (k, (param, grad)) in [(&reference[0], rw.grad()), (&reference[1], rb.grad())].into_iter().enumerate() {
                let (m, v) = &mut moments[k];
                *m = &*m * 0.9 + &grad * 0.1;
                *v = &*v * 0.999 + &grad * &grad * 0.001;
                let decay = if k == 0 { 1.0 - 0.01 * 0.1 } else { 1.0 };
                let m_hat = &*m / (1.0 - 0.9f64.powi(step));
                let v_hat = &*v / (1.0 - 0.999f64.powi(step));
                let updated = param * decay - m_hat * 0.01 / (v_hat.sqrt() + 1e-8);
                tch::no_grad(|| param.shallow_clone().copy_(&updated));
            }
        }
        for (mine, theirs) in [(&w, &reference[0]), (&bias, &reference[1])] {
            let diff = (mine - theirs).abs().max().double_value(&[]);
            assert!(diff < 1e-6, "flat AdamW differs from the per-tensor update by {diff}");
        }
        // Two buffers (decay: the weight; none: the bias), the parameters views of them.
        assert_eq!(opt.groups.len(), 2);
        let buffers = opt.gradient_buffers();
        assert_eq!(buffers.len(), 2);
        assert_eq!(Vec::<f32>::try_from(&buffers[0]).unwrap(), Vec::<f32>::try_from(w.grad().reshape([-1])).unwrap());
        assert_eq!(w.data_ptr(), opt.groups[0].weights.data_ptr());
        assert_eq!(w.grad().data_ptr(), opt.groups[0].grads.data_ptr());
        // The parameter the loss never reached: no gradient, no update, no decay.
        assert!(!unused.grad().defined());
        assert_eq!(Vec::<f32>::try_from(&unused).unwrap(), vec![5.0, 6.0]);
        // Clipping scales the flat gradients to the norm asked for.
        opt.zero_grad();
        loss(&w, &bias).backward();
        let before = opt.clip_grad_norm(1e-3).double_value(&[]);
        assert!(before > 1e-3);
        let after: f64 = opt
            .gradient_buffers()
            .iter()
            .map(|g| g.pow_tensor_scalar(2).sum(Kind::Double).double_value(&[]))
            .sum::<f64>()
            .sqrt();
        assert!((after - 1e-3).abs() < 1e-6, "{after}");
    }
}
