//! Building blocks with HF's parameter names and initialisation, shared by BERT and the decoder
//! families: `Linear` (`weight`, `bias`), `LayerNorm` (`weight`, `bias`), `Embedding` (`weight`),
//! run in the compute precision
//! (`device::Precision`) that casts matrix multiplications to bf16 on CUDA while keeping fp32
//! master weights.
use crate::device::Precision;
use tch::nn::{Init, Path};
use tch::{Kind, Tensor};

/// HF `nn.Linear`: `weight` [out, in] ~ N(0, initializer_range), `bias` zeros; the decoder
/// families' layers without a bias, or over a tied weight, are built by `model::decoder::layers`.
#[derive(Debug)]
pub struct Linear {
    /// [out, in].
    pub weight: Tensor,
    /// [out], when the layer has one.
    pub bias: Option<Tensor>,
}

impl Linear {
    /// `weight` ~ N(0, `init_std`²) and zero `bias` under `p`.
    pub fn new(p: Path, in_dim: i64, out_dim: i64, init_std: f64) -> Self {
        let weight = p.var("weight", &[out_dim, in_dim], Init::Randn { mean: 0.0, stdev: init_std });
        let bias = p.var("bias", &[out_dim], Init::Const(0.0));
        Linear { weight, bias: Some(bias) }
    }

    /// x · weightᵀ + bias over the last dimension, computed and returned in `precision`'s dtype
    /// (trained weights: fp32 masters cast for the product).
    pub fn forward(&self, x: &Tensor, precision: Precision) -> Tensor {
        let kind = precision.compute_kind();
        if x.kind() == kind && kind == Kind::Float {
            return x.linear(&self.weight, self.bias.as_ref());
        }
        let bias = self.bias.as_ref().map(|b| b.to_kind(kind));
        x.to_kind(kind).linear(&self.weight.to_kind(kind), bias.as_ref())
    }
}

/// HF `nn.LayerNorm` (named `LayerNorm` in BERT, BLOOM's layer norms): always computed in fp32.
#[derive(Debug)]
pub struct LayerNorm {
    /// Scale [dim], initialised to ones.
    pub weight: Tensor,
    /// Shift [dim], initialised to zeros.
    pub bias: Tensor,
    eps: f64,
}

impl LayerNorm {
    /// `weight` (ones) and `bias` (zeros) of width `dim` under `p`.
    pub fn new(p: Path, dim: i64, eps: f64) -> Self {
        let weight = p.var("weight", &[dim], Init::Const(1.0));
        let bias = p.var("bias", &[dim], Init::Const(0.0));
        LayerNorm { weight, bias, eps }
    }

    /// Over weights already loaded (a checkpoint's, in any dtype).
    pub(crate) fn from_tensors(weight: Tensor, bias: Tensor, eps: f64) -> Self {
        LayerNorm { weight, bias, eps }
    }

    /// Normalises the last dimension; the result is fp32 whatever the input's dtype.
    pub fn forward(&self, x: &Tensor) -> Tensor {
        let dim = *self.weight.size().last().unwrap();
        // BERT's trained weights are fp32 already: cast (an operation a step) only a checkpoint's
        // half-precision ones.
        let fp32 = |t: &Tensor| if t.kind() == Kind::Float { t.shallow_clone() } else { t.to_kind(Kind::Float) };
        x.to_kind(Kind::Float).layer_norm([dim], Some(&fp32(&self.weight)), Some(&fp32(&self.bias)), self.eps, true)
    }

    /// [`LayerNorm::forward`], returned in the input's dtype (the decoder families).
    pub(crate) fn forward_in_input_kind(&self, x: &Tensor) -> Tensor {
        self.forward(x).to_kind(x.kind())
    }
}

/// HF `nn.Embedding`: `weight` [n, dim] ~ N(0, initializer_range), the padding row zeroed.
pub(crate) fn embedding(p: Path, n: i64, dim: i64, init_std: f64, padding_idx: Option<i64>) -> Tensor {
    let weight = p.var("weight", &[n, dim], Init::Randn { mean: 0.0, stdev: init_std });
    if let Some(pad) = padding_idx {
        tch::no_grad(|| {
            let _ = weight.get(pad).fill_(0.0);
        });
    }
    weight
}

/// Inverted dropout (zero with probability `p`, scale the rest by 1/(1 − p)). On CUDA this is
/// libtorch's fused kernel. On CPU libtorch draws one Mersenne-Twister number per element
/// (about 6 ns each, a tenth of a small model's training step), so here each element gets 16
/// random bits instead, four elements to one 64-bit draw, and is dropped when they fall below
/// round(p · 65536): p is honoured to 1/65536 (0.1 becomes 0.100006) and the scale uses that
/// value, so the expectation is exact. Every bit comes from torch's generator, so a seeded step
/// repeats exactly.
pub fn dropout(x: &Tensor, p: f64, train: bool) -> Tensor {
    if !train || p <= 0.0 {
        return x.shallow_clone();
    }
    if x.device() != tch::Device::Cpu || p >= 1.0 {
        return x.dropout(p, train);
    }
    let n = x.numel() as i64;
    let drop_below = (p * 65536.0).round();
    let mut words = Tensor::empty([(n + 3) / 4], (Kind::Int64, x.device()));
    let _ = words.random_from_(i64::MIN, None);
    let bits = words.view_dtype(Kind::Int16).narrow(0, 0, n).view(x.size().as_slice());
    // int16 values are uniform on [-32768, 32767]: keep those at or above the threshold.
    let keep = bits.ge(drop_below as i64 - 32768);
    let mask = Tensor::where_scalar(&keep, 1.0 / (1.0 - drop_below / 65536.0), 0.0).to_kind(x.kind());
    x * mask
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(t: &Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(t.reshape([-1])).unwrap()
    }

    #[test]
    fn dropout_off_returns_the_input() {
        let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0]);
        assert_eq!(values(&dropout(&x, 0.5, false)), vec![1.0, -2.0, 3.0]);
        assert_eq!(values(&dropout(&x, 0.0, true)), vec![1.0, -2.0, 3.0]);
    }

    #[test]
    fn cpu_dropout_drops_at_the_16_bit_rate_and_rescales_by_it() {
        // p 0.1 is applied as round(0.1 · 65536) = 6554 of 65536: survivors are scaled by
        // 65536 / (65536 − 6554) = 1.1111186, not 1 / 0.9.
        let n = 200_000;
        let x = Tensor::ones([n], (Kind::Float, tch::Device::Cpu));
        tch::manual_seed(11);
        let y = values(&dropout(&x, 0.1, true));
        let scale = (65536.0 / (65536.0 - 6554.0)) as f32;
        assert!(y.iter().all(|&v| v == 0.0 || v == scale), "values other than 0 and {scale}");
        let dropped = y.iter().filter(|&&v| v == 0.0).count() as f64 / n as f64;
        assert!((dropped - 6554.0 / 65536.0).abs() < 0.003, "dropped {dropped}");
        // The same seed drops the same elements; the mask does not depend on the values.
        tch::manual_seed(11);
        let again = values(&dropout(&(x * 2.0), 0.1, true));
        assert!(y.iter().zip(&again).all(|(a, b)| *b == 2.0 * a));
        // An odd element count (not a multiple of the four 16-bit draws in a word) works too.
        let odd = dropout(&Tensor::ones([3, 5], (Kind::Float, tch::Device::Cpu)), 0.5, true);
        assert_eq!(odd.size(), vec![3, 5]);
    }

    #[test]
    fn precision_picks_the_matmul_dtype_and_layer_norm_returns_fp32() {
        assert_eq!(Precision::Fp32.compute_kind(), Kind::Float);
        assert_eq!(Precision::Bf16.compute_kind(), Kind::BFloat16);
        let vs = tch::nn::VarStore::new(tch::Device::Cpu);
        let norm = LayerNorm::new(vs.root() / "norm", 4, 1e-12);
        let x = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0]).to_kind(Kind::BFloat16).view([1, 4]);
        let y = norm.forward(&x);
        assert_eq!(y.kind(), Kind::Float);
        // (x − 2.5) / sqrt(1.25) with weight 1, bias 0.
        let expected = [-1.5f32, -0.5, 0.5, 1.5].map(|v| v / 1.25f32.sqrt());
        assert!(values(&y).iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-5), "{:?}", values(&y));
        // Built by hand: `Linear::new` would draw from torch's generator, which the dropout test seeds.
        let linear = Linear {
            weight: Tensor::ones([2, 4], (Kind::Float, tch::Device::Cpu)),
            bias: Some(Tensor::zeros([2], (Kind::Float, tch::Device::Cpu))),
        };
        assert_eq!(linear.forward(&y, Precision::Bf16).kind(), Kind::BFloat16);
        assert_eq!(linear.forward(&y, Precision::Fp32).kind(), Kind::Float);
    }
}
