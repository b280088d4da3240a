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
use indolm_core::outputs::RunFile;
use std::collections::BTreeMap;
use tch::{Kind, Tensor};

indolm_core::declare_run_files!(OPTIMIZER_STATE_FILES: RunFile::Pattern("optimizer", ".safetensors"));

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
    /// The parameters laid out in it, in order (indices in the optimizer's order).
    members: Vec<usize>,
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
    /// Updates applied before this process (a resumed run's), where the count starts.
    steps: u64,
    /// Updates applied so far, counted on the device (a skipped update does not count).
    device_steps: Option<Tensor>,
}

/// Whether a parameter gets weight decay: not biases, not LayerNorm weights.
pub(crate) fn decays(name: &str) -> bool {
    !(name.ends_with(".bias") || name.contains("LayerNorm."))
}

extern "C" {
    fn indolm_set_grad(param: *mut std::ffi::c_void, grad: *mut std::ffi::c_void) -> std::ffi::c_int;
    fn indolm_optim_free_message(message: *mut std::ffi::c_char);
    #[allow(clippy::too_many_arguments)]
    fn indolm_fused_adamw(
        params: *const *mut std::ffi::c_void,
        grads: *const *mut std::ffi::c_void,
        exp_avgs: *const *mut std::ffi::c_void,
        exp_avg_sqs: *const *mut std::ffi::c_void,
        n: usize,
        step: *mut std::ffi::c_void,
        lr: f64,
        beta1: f64,
        beta2: f64,
        weight_decay: f64,
        eps: f64,
        found_inf: *mut std::ffi::c_void,
        error: *mut *mut std::ffi::c_char,
    ) -> std::ffi::c_int;
}

/// The hyper-parameters of one fused AdamW call.
#[derive(Clone, Copy)]
struct FusedHyper {
    lr: f64,
    beta1: f64,
    beta2: f64,
    weight_decay: f64,
    eps: f64,
}

/// Parallel lists of tensors (one device and dtype) that one fused AdamW call updates.
struct FusedLists {
    decay: bool,
    weights: Vec<Tensor>,
    grads: Vec<Tensor>,
    exp_avg: Vec<Tensor>,
    exp_avg_sq: Vec<Tensor>,
}

/// libtorch's fused AdamW over `lists`, their step count `step` (float32, this update counted)
/// and an optional `found_inf` (float32; 1 skips).
fn fused_adamw(
    lists: &FusedLists,
    step: &Tensor,
    h: FusedHyper,
    found_inf: Option<&Tensor>,
) -> std::result::Result<(), String> {
    let ptrs = |ts: &[Tensor]| ts.iter().map(|t| t.as_ptr() as *mut std::ffi::c_void).collect::<Vec<_>>();
    let (w, g, m, v) = (ptrs(&lists.weights), ptrs(&lists.grads), ptrs(&lists.exp_avg), ptrs(&lists.exp_avg_sq));
    let skip = found_inf.map_or(std::ptr::null_mut(), |t| t.as_ptr() as *mut std::ffi::c_void);
    let mut error = std::ptr::null_mut();
    // SAFETY: every pointer is a live `at::Tensor` owned by the slices borrowed for the call; the
    // shim copies the handles and catches every exception, returning its message in `error`.
    let ok = unsafe {
        indolm_fused_adamw(
            w.as_ptr(),
            g.as_ptr(),
            m.as_ptr(),
            v.as_ptr(),
            w.len(),
            step.as_ptr() as *mut _,
            h.lr,
            h.beta1,
            h.beta2,
            h.weight_decay,
            h.eps,
            skip,
            &mut error,
        )
    };
    if ok != 0 {
        return Ok(());
    }
    if error.is_null() {
        return Err("no message".into());
    }
    // SAFETY: a NUL-terminated message the shim allocated, freed here once.
    let text = unsafe { std::ffi::CStr::from_ptr(error) }.to_string_lossy().to_string();
    unsafe { indolm_optim_free_message(error) };
    Err(text)
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
            device_steps: None,
        }
    }

    /// Moves the parameters that have a gradient into flat groups (once, when the first gradients
    /// exist), keeping their values, gradients and moments; in each group, in the optimizer's
    /// (name) order.
    fn flatten(&mut self) {
        self.flatten_in_order(&[]);
    }

    /// [`AdamW::flatten`], each group laid out by `ready` (per parameter, in the optimizer's
    /// order: where its gradient became ready in backward; parameters beyond it, or with equal
    /// values, in name order). Data parallelism lays the buffers out so (see
    /// `indolm_train::data_parallel`): its buckets, contiguous slices of them, then fill one
    /// after another during backward. Nothing happens once the groups exist.
    pub fn flatten_in_order(&mut self, ready: &[usize]) {
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
                    let mut group: Vec<usize> = members
                        .iter()
                        .copied()
                        .filter(|&i| (self.params[i].tensor.kind(), self.params[i].tensor.device()) == key)
                        .collect();
                    group.sort_by_key(|&i| ready.get(i).copied().unwrap_or(usize::MAX));
                    let flat = self.flat_group(decay, group);
                    self.groups.push(flat);
                }
            }
        });
    }

    /// Flat buffers holding the parameters at `members` (in order), which become their views.
    fn flat_group(&mut self, decay: bool, members: Vec<usize>) -> FlatGroup {
        let cat = |part: &dyn Fn(&Param) -> Tensor| {
            Tensor::cat(&members.iter().map(|&i| part(&self.params[i]).reshape([-1])).collect::<Vec<_>>(), 0)
        };
        let group = FlatGroup {
            decay,
            weights: cat(&|p| p.tensor.detach()),
            grads: cat(&|p| p.tensor.grad()),
            exp_avg: cat(&|p| p.exp_avg.shallow_clone()),
            exp_avg_sq: cat(&|p| p.exp_avg_sq.shallow_clone()),
            members: Vec::new(),
        };
        let mut offset = 0;
        for &i in &members {
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
        FlatGroup { members, ..group }
    }

    /// The gradients to reduce across ranks: the flat buffers, then any parameter outside them
    /// that has a gradient, in a fixed order (the same on every rank of the same model).
    pub fn gradient_buffers(&mut self) -> Vec<Tensor> {
        self.flatten();
        let mut out: Vec<Tensor> = self.groups.iter().map(|g| g.grads.shallow_clone()).collect();
        out.extend(self.loose_gradients());
        out
    }

    /// The flat gradient buffers with their parameters, in layout order: (index in the
    /// optimizer's order, element count). Empty before the first update's gradients.
    pub fn flat_layouts(&self) -> Vec<(Tensor, Vec<(usize, i64)>)> {
        let numel = |i: usize| self.params[i].tensor.numel() as i64;
        self.groups
            .iter()
            .map(|g| (g.grads.shallow_clone(), g.members.iter().map(|&i| (i, numel(i))).collect()))
            .collect()
    }

    /// The gradients of the parameters outside the flat buffers that have one (in the
    /// optimizer's order).
    pub fn loose_gradients(&self) -> Vec<Tensor> {
        self.params.iter().filter(|p| !p.in_flat).map(|p| p.tensor.grad()).filter(Tensor::defined).collect()
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
    /// Returns the norm before clipping, a scalar fp32 tensor on the parameters' device (a zero
    /// made there by a fill kernel when no parameter has a gradient, so that it stacks with the
    /// other optimizers' norms; the CPU when there are no parameters).
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> Tensor {
        let grads = self.gradient_buffers();
        if grads.is_empty() {
            let device = self.params.first().map_or(tch::Device::Cpu, |p| p.tensor.device());
            return Tensor::zeros([], (Kind::Float, device));
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
        self.step_if(lr, None);
    }

    /// One AdamW update with learning rate `lr` where `applies` (a boolean scalar on the device)
    /// is true, and an exact no-op where it is false: weights, moments and the update count stay
    /// as they were. It is decided on the device, so nothing is read back (the trainer skips
    /// non-finite losses so). The update is libtorch's fused AdamW kernel (`_fused_adamw_`, what
    /// `torch.optim.AdamW(fused=True)` runs) on each flat buffer: a few kernels for the whole
    /// model, with the learning rate and the other hyper-parameters passed as values. The
    /// update count lives on the device (float32, as torch keeps it for the fused kernel); a
    /// skipped update's `found_inf` makes the kernel return before it touches anything.
    pub fn step_if(&mut self, lr: f64, applies: Option<&Tensor>) {
        self.flatten();
        let Some(device) = self.params.first().map(|p| p.tensor.device()) else { return };
        let start = self.steps as f64;
        // Made by a fill kernel on the device (no copy from the host), once.
        let steps = self.device_steps.get_or_insert_with(|| Tensor::full([], start, (Kind::Float, device)));
        let found_inf = applies.map(|a| a.logical_not().to_kind(Kind::Float));
        tch::no_grad(|| match &found_inf {
            Some(skip) => {
                let _ = steps.g_add_(&(skip.ones_like() - skip));
            }
            None => {
                let _ = steps.g_add_scalar_(1.0);
            }
        });
        let steps = steps.shallow_clone();
        // The flat groups, then any parameter outside them that has a gradient, by decay.
        let mut calls: Vec<FusedLists> = self
            .groups
            .iter()
            .map(|g| FusedLists {
                decay: g.decay,
                weights: vec![g.weights.shallow_clone()],
                grads: vec![g.grads.shallow_clone()],
                exp_avg: vec![g.exp_avg.shallow_clone()],
                exp_avg_sq: vec![g.exp_avg_sq.shallow_clone()],
            })
            .collect();
        for decay in [true, false] {
            let loose: Vec<&Param> =
                self.params.iter().filter(|p| !p.in_flat && p.decay == decay && p.tensor.grad().defined()).collect();
            if !loose.is_empty() {
                calls.push(FusedLists {
                    decay,
                    weights: loose.iter().map(|p| p.tensor.detach()).collect(),
                    grads: loose.iter().map(|p| p.tensor.grad()).collect(),
                    exp_avg: loose.iter().map(|p| p.exp_avg.shallow_clone()).collect(),
                    exp_avg_sq: loose.iter().map(|p| p.exp_avg_sq.shallow_clone()).collect(),
                });
            }
        }
        for call in calls {
            let weight_decay = if call.decay { self.weight_decay } else { 0.0 };
            let hyper = FusedHyper { lr, beta1: self.beta1, beta2: self.beta2, weight_decay, eps: self.eps };
            if let Err(message) = fused_adamw(&call, &steps, hyper, found_inf.as_ref()) {
                // The tensors are the optimizer's own (same device and dtype by construction):
                // a failure here is libtorch's, surfaced as tch surfaces its own.
                panic!("fused AdamW failed: {message}");
            }
        }
    }

    /// The parameters, in the optimizer's (name) order.
    pub fn parameters(&self) -> Vec<Tensor> {
        self.params.iter().map(|p| p.tensor.shallow_clone()).collect()
    }

    /// The parameters' names, in the optimizer's (name) order.
    pub fn parameter_names(&self) -> Vec<String> {
        self.params.iter().map(|p| p.name.clone()).collect()
    }

    /// The number of parameter tensors.
    pub fn parameter_tensors(&self) -> usize {
        self.params.len()
    }

    /// The number of parameter elements.
    pub fn parameter_count(&self) -> i64 {
        self.params.iter().map(|p| p.tensor.numel() as i64).sum()
    }

    /// Updates applied so far (read from the device).
    pub fn steps(&self) -> u64 {
        self.device_steps.as_ref().map_or(self.steps, |t| t.double_value(&[]) as u64)
    }

    /// The moments, named `exp_avg.<param>` and `exp_avg_sq.<param>`, for a checkpoint.
    pub(crate) fn state_tensors(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::with_capacity(self.params.len() * 2);
        for p in &self.params {
            out.push((format!("exp_avg.{}", p.name), p.exp_avg.shallow_clone()));
            out.push((format!("exp_avg_sq.{}", p.name), p.exp_avg_sq.shallow_clone()));
        }
        out
    }

    /// The checkpoint part of the optimizer named `name` (`""` for a task's only one):
    /// `optimizer`, `optimizer-<name>`.
    pub fn part_name(name: &str) -> String {
        match name {
            "" => "optimizer".into(),
            n => format!("optimizer-{n}"),
        }
    }

    /// Writes the moments into `dir` as the state file of the optimizer named `name`
    /// (`optimizer.safetensors`, `optimizer-<name>.safetensors`), returning the file's name.
    pub fn save_into(&self, dir: &std::path::Path, name: &str) -> Result<String> {
        let file = format!("{}.safetensors", Self::part_name(name));
        crate::model::weights::write_file(&dir.join(&file), &self.state_tensors())?;
        Ok(file)
    }

    /// Restores the moments [`AdamW::save_into`] wrote into `dir`, after `steps` updates.
    pub fn restore_from(&mut self, dir: &std::path::Path, name: &str, steps: u64) -> Result<()> {
        let path = dir.join(format!("{}.safetensors", Self::part_name(name)));
        self.load_state(crate::model::weights::read_file(&path)?, steps, &path)
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
        self.device_steps = None;
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

    #[test]
    fn a_skipped_update_changes_nothing_and_does_not_count() {
        let make = || {
            let w = Tensor::from_slice(&[1.0f32, -2.0, 3.0]).set_requires_grad(true);
            let b = Tensor::from_slice(&[0.5f32]).set_requires_grad(true);
            let opt = AdamW::new(named(&[("l.weight", &w), ("l.bias", &b)]), [0.9, 0.999], 1e-8, 0.1);
            (w, b, opt)
        };
        let (w, b, mut opt) = make();
        let (w2, b2, mut twin) = make();
        let loss = |w: &Tensor, b: &Tensor| (w * b).pow_tensor_scalar(2).sum(Kind::Float);
        // A first update skipped (non-finite gradients): weights, moments and count stay.
        opt.zero_grad();
        (loss(&w, &b) * f64::NAN).backward();
        opt.step_if(0.01, Some(&Tensor::from(false)));
        assert_eq!(Vec::<f32>::try_from(&w).unwrap(), vec![1.0, -2.0, 3.0]);
        assert_eq!(Vec::<f32>::try_from(&b).unwrap(), vec![0.5]);
        assert_eq!(opt.steps(), 0);
        assert!(opt.state_tensors().iter().all(|(_, t)| t.abs().max().double_value(&[]) == 0.0));
        // Then two applied updates, bit for bit those of an optimizer that never skipped.
        for _ in 0..2 {
            for (w, b, o, applies) in [(&w, &b, &mut opt, Some(Tensor::from(true))), (&w2, &b2, &mut twin, None)] {
                o.zero_grad();
                loss(w, b).backward();
                o.step_if(0.01, applies.as_ref());
            }
        }
        assert_eq!(opt.steps(), 2);
        assert_eq!(Vec::<f32>::try_from(&w).unwrap(), Vec::<f32>::try_from(&w2).unwrap());
        assert_eq!(Vec::<f32>::try_from(&b).unwrap(), Vec::<f32>::try_from(&b2).unwrap());
        assert_ne!(Vec::<f32>::try_from(&w).unwrap(), vec![1.0, -2.0, 3.0]);
    }

    /// The CPU side of a CUDA-only defect: without gradients the norm was a CPU scalar, which
    /// `Tensor::stack` refuses beside another optimizer's CUDA norm. It is an fp32 scalar made on
    /// the parameters' device, and stacks with a norm computed from gradients.
    #[test]
    fn the_norm_without_gradients_is_an_fp32_zero_on_the_parameters_device() {
        let w = Tensor::from_slice(&[3.0f32, 4.0]).set_requires_grad(true);
        let idle = Tensor::from_slice(&[1.0f32]).set_requires_grad(true);
        let mut busy = AdamW::new(named(&[("l.weight", &w)]), [0.9, 0.999], 1e-8, 0.0);
        let mut without = AdamW::new(named(&[("other.weight", &idle)]), [0.9, 0.999], 1e-8, 0.0);
        (&w * &w).sum(Kind::Float).backward();
        let zero = without.clip_grad_norm(1.0);
        assert_eq!((zero.kind(), zero.device(), zero.dim()), (Kind::Float, idle.device(), 0));
        assert_eq!(zero.double_value(&[]), 0.0);
        let norms = Tensor::stack(&[busy.clip_grad_norm(0.0), zero], 0);
        // The gradient 2w = (6, 8): norm 10.
        assert_eq!(Vec::<f32>::try_from(&norms).unwrap(), vec![10.0, 0.0]);
        assert_eq!(AdamW::new(BTreeMap::new(), [0.9, 0.999], 1e-8, 0.0).clip_grad_norm(1.0).kind(), Kind::Float);
    }
}
