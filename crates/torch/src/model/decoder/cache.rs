//! Incremental decoding: [`KvCache`], every layer's keys and values for a batch of rows,
//! preallocated for the prompt and the new tokens and written in place, with the mask of real
//! tokens among them; and `Step`, what one forward pass needs beside its token ids (which keys
//! are real, how many come before the new tokens, the new tokens' positions). The scoring pass (a
//! right-padded batch, no cache) and every generation step run the same family code with a
//! `Step`: the first with `Step::full` and no cache, the others with the cache's.
use super::layers::{rope_tables, rope_tables_at, Attention, Mask};
use crate::error::{Error, Result};
use tch::{Device, Kind, Tensor};

/// One layer's keys and values [batch, kv_heads, capacity, head_dim], made at its first store.
type LayerCache = Option<(Tensor, Tensor)>;

/// Keys and values of every layer for a batch of rows, preallocated for `capacity` tokens a row
/// and filled from the start: the rows of a left-padded batch share one length. Grouped key/value
/// heads are kept as they are, one per group (fused attention reads them in place for its query
/// heads; eager attention repeats them).
#[derive(Debug)]
pub struct KvCache {
    layers: Vec<LayerCache>,
    /// 1 at real tokens, 0 at padding [batch, capacity] (int64), filled up to `len`.
    mask: Tensor,
    len: i64,
    capacity: i64,
}

impl KvCache {
    /// An empty cache of `layers` layers for `batch` rows of at most `capacity` tokens each (the
    /// prompt's and the new ones) on `device`.
    pub fn new(layers: usize, batch: i64, capacity: i64, device: Device) -> Self {
        KvCache {
            layers: (0..layers).map(|_| None).collect(),
            mask: Tensor::zeros([batch, capacity], (Kind::Int64, device)),
            len: 0,
            capacity,
        }
    }

    /// Tokens held a row (padding included).
    pub fn len(&self) -> i64 {
        self.len
    }

    /// Whether it holds no token yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tokens a row it has room for.
    pub fn capacity(&self) -> i64 {
        self.capacity
    }

    /// Its rows.
    pub fn batch(&self) -> i64 {
        self.mask.size()[0]
    }

    /// 1 at the real tokens it holds, 0 at padding [batch, len].
    pub fn mask(&self) -> Tensor {
        self.mask.narrow(1, 0, self.len)
    }

    /// Keeps the rows `rows` (int64 indices on the cache's device), in that order: a batch whose
    /// finished rows leave it. The capacity stays.
    pub fn keep(&mut self, rows: &Tensor) {
        self.mask = self.mask.index_select(0, rows);
        for (k, v) in self.layers.iter_mut().flatten() {
            *k = k.index_select(0, rows);
            *v = v.index_select(0, rows);
        }
    }

    /// The step of `s` new tokens after those held, `mask` [batch, s] marking the real ones:
    /// records them in the mask and gives their positions, counted from each row's first real
    /// token as transformers' `generate` counts them (`cumsum(mask) - 1`, padding at 0). An error
    /// if the rows or the room do not match.
    pub(crate) fn begin(&mut self, mask: &Tensor) -> Result<Step> {
        let (b, s) = mask.size2().map_err(|e| Error::torch("the mask of a cached step", e))?;
        if b != self.batch() {
            return Err(Error::unsupported(
                "a cached forward pass",
                format!("{b} rows for a cache of {} rows", self.batch()),
            ));
        }
        if self.len + s > self.capacity {
            return Err(Error::unsupported(
                "a cached forward pass",
                format!("{s} tokens after {} do not fit the cache's {} a row", self.len, self.capacity),
            ));
        }
        let new = mask.to_kind(Kind::Int64);
        self.mask.narrow(1, self.len, s).copy_(&new);
        let key_real = self.mask.narrow(1, 0, self.len + s);
        let positions =
            (key_real.cumsum(1, Kind::Int64) - 1i64).narrow(1, self.len, s).masked_fill(&new.eq(0i64), 0i64);
        Ok(Step { key_real, past: self.len, positions: Some(positions) })
    }

    /// Counts the `s` tokens of the step just run as held.
    pub(crate) fn advance(&mut self, s: i64) {
        self.len += s;
    }

    /// Writes layer `layer`'s keys and values of the new tokens ([batch, kv_heads, s, head_dim])
    /// after the `past` held, and returns every key and value so far ([batch, kv_heads, past + s,
    /// head_dim], views of the cache).
    pub(crate) fn store(&mut self, layer: usize, past: i64, k: &Tensor, v: &Tensor) -> (Tensor, Tensor) {
        let capacity = self.capacity;
        let (keys, values) = self.layers[layer].get_or_insert_with(|| {
            let room = |t: &Tensor| {
                let size = t.size();
                Tensor::zeros([size[0], size[1], capacity, size[3]], (t.kind(), t.device()))
            };
            (room(k), room(v))
        });
        let s = k.size()[2];
        keys.narrow(2, past, s).copy_(k);
        values.narrow(2, past, s).copy_(v);
        (keys.narrow(2, 0, past + s), values.narrow(2, 0, past + s))
    }
}

/// What one forward pass needs beside its token ids.
#[derive(Debug)]
pub(crate) struct Step {
    /// 1 at the real tokens among every key the new tokens see [batch, past + s].
    pub key_real: Tensor,
    /// Keys before the new tokens (0 without a cache).
    pub past: i64,
    /// The new tokens' positions [batch, s]; `None`: 0..s in every row (a right-padded batch
    /// without a cache, whose rows start at their first column).
    pub positions: Option<Tensor>,
}

impl Step {
    /// A whole right-padded batch without a cache, `mask` [batch, seq] marking its real tokens.
    pub(crate) fn full(mask: &Tensor) -> Self {
        Step { key_real: mask.shallow_clone(), past: 0, positions: None }
    }

    /// Where each new token may look over the `past + s` keys, in the form `attention` takes
    /// (see [`Mask::new`]): with `window`, an additive `bias` [batch, heads, 1, past + s] (ALiBi)
    /// and a logit `softcap`.
    pub(crate) fn mask(
        &self,
        attention: Attention,
        window: Option<i64>,
        bias: Option<Tensor>,
        softcap: Option<f64>,
    ) -> Mask {
        Mask::new(attention, &self.key_real, self.past, window, bias, softcap)
    }

    /// cos and sin of the new tokens' rotary embedding from the inverse frequencies `inv`: [s,
    /// head_dim] for positions 0..s, [batch, 1, s, head_dim] at each row's positions.
    pub(crate) fn rope_tables(&self, inv: &Tensor, scaling: f64, s: i64, kind: Kind) -> (Tensor, Tensor) {
        match &self.positions {
            None => rope_tables(inv, scaling, s, kind),
            Some(positions) => rope_tables_at(inv, scaling, positions, kind),
        }
    }
}
