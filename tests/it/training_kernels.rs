//! The CPU training shortcuts checked against what they replace: indolm's dropout (16 random
//! bits an element) keeps the rate and the expectation and repeats under a seed; the written-out
//! attention used for training on CPU equals libtorch's `scaled_dot_product_attention`; and the
//! cross-entropy that carries its own gradient equals libtorch's log-softmax + NLL in value
//! and gradient.
use indolm_torch::model::bert::cross_entropy_for_backward;
use indolm_torch::model::layers::dropout;
use indolm_torch::model::{BertConfig, BertModel};
use tch::{Device, Kind, Tensor};

#[test]
fn dropout_keeps_rate_and_expectation_and_repeats_under_a_seed() {
    let x = Tensor::ones([1000, 1000], (Kind::Float, Device::Cpu));
    for p in [0.1, 0.2, 0.5] {
        tch::manual_seed(7);
        let y = dropout(&x, p, true);
        let dropped = y.eq(0.0).to_kind(Kind::Double).mean(Kind::Double).double_value(&[]);
        let mean = y.mean(Kind::Double).double_value(&[]);
        println!("p {p}: dropped {dropped:.5}, mean {mean:.5}");
        assert!((dropped - p).abs() < 0.002, "p {p}: dropped {dropped}");
        assert!((mean - 1.0).abs() < 0.005, "p {p}: mean {mean}");
        tch::manual_seed(7);
        assert!(dropout(&x, p, true).equal(&y), "same seed, same mask");
        tch::manual_seed(8);
        assert!(!dropout(&x, p, true).equal(&y), "another seed, another mask");
    }
    assert!(dropout(&x, 0.1, false).equal(&x));
    // Each element is independent: neighbouring elements (which share a 64-bit draw) drop together
    // no more often than chance.
    tch::manual_seed(9);
    let kept = dropout(&Tensor::ones([1_000_000], (Kind::Float, Device::Cpu)), 0.5, true).ne(0.0).to_kind(Kind::Double);
    let both = (kept.narrow(0, 0, 999_999) * kept.narrow(0, 1, 999_999)).mean(Kind::Double).double_value(&[]);
    assert!((both - 0.25).abs() < 0.003, "adjacent elements kept together {both}");
}

#[test]
fn written_out_training_attention_equals_libtorch_sdpa() {
    let mut config = BertConfig::new(300, 64, 2, 4, 128);
    config.hidden_dropout_prob = 0.0;
    // Dropout so small that it drops nothing (below 1/65536): the training path runs, with
    // the same arithmetic as evaluation.
    config.attention_probs_dropout_prob = 1e-9;
    tch::manual_seed(1);
    let vs = tch::nn::VarStore::new(Device::Cpu);
    let bert = BertModel::new(vs.root() / "bert", &config, false);
    let ids = Tensor::randint(300, [3, 17], (Kind::Int64, Device::Cpu));
    let mask = Tensor::ones([3, 17], (Kind::Int64, Device::Cpu));
    let _ = mask.narrow(1, 12, 5).get(1).fill_(0);
    for m in [None, Some(&mask)] {
        let train = bert.forward(&ids, None, m, true);
        let eval = tch::no_grad(|| bert.forward(&ids, None, m, false));
        let diff = (train - eval).abs().max().double_value(&[]);
        println!("padding {}: max difference {diff:.2e}", m.is_some());
        assert!(diff < 1e-5, "{diff}");
    }
}

#[test]
fn cross_entropy_carrying_its_gradient_equals_libtorch() {
    tch::manual_seed(3);
    let base = Tensor::randn([50, 1000], (Kind::Float, Device::Cpu)) * 3.0;
    let targets = Tensor::randint(1000, [50], (Kind::Int64, Device::Cpu));
    let ours_in = base.detach().set_requires_grad(true);
    let ours = cross_entropy_for_backward(&ours_in, &targets);
    ours.backward();
    let theirs_in = base.detach().set_requires_grad(true);
    let theirs = theirs_in.log_softmax(-1, Kind::Float).nll_loss(&targets);
    theirs.backward();
    let value = (ours.double_value(&[]) - theirs.double_value(&[])).abs() / theirs.double_value(&[]).abs();
    let grad = (ours_in.grad() - theirs_in.grad()).abs().max().double_value(&[]);
    println!("value relative difference {value:.2e}, gradient max difference {grad:.2e}");
    assert!(value < 1e-6 && grad < 1e-8, "value {value}, gradient {grad}");
}
