//! `indolm dist-check`'s test of the gradient all-reduce the engine overlaps with backward
//! ([`DataParallel::check_overlap`]): on the launch's own group, a small model trained as the
//! engine trains, its summed gradients compared with sums computed apart.
use super::data_parallel::{DataParallel, OverlapCounts, Reduction};
use indolm_torch::distributed::ReduceOp;
use indolm_torch::error::{Error, Result};
use indolm_torch::optim::AdamW;
use std::collections::BTreeMap;
use tch::{Kind, Tensor};

impl DataParallel {
    /// `dist-check`'s test of the overlapped reduction on this group: a small three-layer model
    /// under two optimizers (its first layer, the rest), its weights drawn from each rank's own
    /// seed so that the ranks' gradients differ, trained as the engine trains (an update that records the gradients' order, then one whose buckets
    /// of `bucket_bytes` the hooks launch during backward), in fp32 and then in bf16. Its summed
    /// gradients must equal a plain all-reduce of copies of the same local gradients (fp32), and
    /// the sum of every rank's gradients rounded to bf16, added in rank order and rounded again
    /// (bf16; gathered by broadcasts). Over one rank both are exact (no addition: the
    /// reduction hands back each rank's own gradients, through the bf16 staging copy for bf16)
    /// and over two too (one addition, either order); over more, the ring's order of additions is
    /// NCCL's, so they are compared within a relative 1e-5 (fp32) and two bf16 steps (bf16).
    /// Returns the buckets and how many the hooks launched during backward.
    pub fn check_overlap(&mut self, bucket_bytes: usize) -> Result<OverlapCounts> {
        let device = self.device();
        let rank = self.rank();
        tch::manual_seed(1000 + rank as i64);
        let options = (Kind::Float, device);
        let named: BTreeMap<String, Tensor> = [
            ("a.weight", vec![48, 32]),
            ("a.bias", vec![48]),
            ("b.weight", vec![24, 48]),
            ("b.bias", vec![24]),
            ("c.weight", vec![8, 24]),
        ]
        .into_iter()
        .map(|(name, shape)| (name.to_string(), Tensor::randn(shape.as_slice(), options).set_requires_grad(true)))
        .collect();
        let input = Tensor::randn([16, 32], options);
        let loss_of = |p: &BTreeMap<String, Tensor>| {
            let h = input.linear(&p["a.weight"], Some(&p["a.bias"])).relu();
            let h = h.linear(&p["b.weight"], Some(&p["b.bias"])).tanh();
            h.linear::<Tensor>(&p["c.weight"], None).pow_tensor_scalar(2).mean(Kind::Float)
        };
        // Each rank's own gradients, by autograd on copies of the weights.
        let local: Vec<(String, Tensor)> = {
            let copies: BTreeMap<String, Tensor> =
                named.iter().map(|(n, t)| (n.clone(), t.detach().copy().set_requires_grad(true))).collect();
            loss_of(&copies).backward();
            copies.into_iter().map(|(n, t)| (n, t.grad().detach().copy())).collect()
        };
        let mut fp32 = Vec::new();
        for (_, g) in &local {
            let mut sum = g.copy();
            self.group().all_reduce(&mut sum, ReduceOp::Sum, "dist-check's plain gradient all-reduce")?;
            fp32.push(sum);
        }
        let mut bf16 = Vec::new();
        for (_, g) in &local {
            let mut total = g.zeros_like().to_kind(Kind::BFloat16);
            for root in 0..self.world_size() {
                let mut theirs = g.copy();
                self.group().broadcast(&mut theirs, root, "dist-check's gathering of the gradients")?;
                total += theirs.to_kind(Kind::BFloat16);
            }
            bf16.push(total.to_kind(Kind::Float));
        }
        // Two optimizers, as BertAbs has (the encoder's and the decoder's): each lays out its own
        // buffers from its share of the recorded order.
        let optimizer_of = |first_layer: bool| {
            let vars = named.iter().filter(|(n, _)| n.starts_with("a.") == first_layer);
            AdamW::new(vars.map(|(n, t)| (n.clone(), t.shallow_clone())).collect(), [0.9, 0.999], 1e-8, 0.0)
        };
        let (mut first, mut second) = (optimizer_of(true), optimizer_of(false));
        let exact = self.world_size() <= 2;
        let mut counts = OverlapCounts::default();
        for (expected, in_bf16) in [(&fp32, false), (&bf16, true)] {
            self.attach(&[&first, &second], Reduction { bucket_bytes, bf16: in_bf16 })?;
            let before = self.overlap_counts;
            for update in ["recording the order", "with buckets launched during backward"] {
                first.zero_grad();
                second.zero_grad();
                self.before_last_backward();
                let loss = loss_of(&named);
                loss.backward();
                self.reduce(&mut [&mut first, &mut second], &loss.detach(), false)?;
                for ((name, _), want) in local.iter().zip(expected) {
                    let found = named[name].grad();
                    let differs = (&found - want).abs().max().double_value(&[]);
                    let scale = want.abs().max().double_value(&[]).max(1e-30);
                    let tolerance = match (exact, in_bf16) {
                        (true, _) => 0.0,
                        (false, false) => 1e-5 * scale,
                        (false, true) => 2.0 * scale / 128.0,
                    };
                    if differs > tolerance {
                        return Err(Error::system(
                            "dist-check",
                            format!(
                                "the overlapped gradient all-reduce ({}, {update}) differs from the expected sum of `{name}` by {differs:e} (allowed {tolerance:e})",
                                if in_bf16 { "bf16" } else { "fp32" },
                            ),
                        ));
                    }
                }
            }
            counts.buckets += self.overlap_counts.buckets - before.buckets;
            counts.during_backward += self.overlap_counts.during_backward - before.during_backward;
        }
        self.detach();
        Ok(counts)
    }
}
