//! The generators of `mxc rules check`, all in one place: element types, operand shapes (by the
//! op and position an operand is used in), attribute values (by attribute name, from the
//! operands the op gets), constant values and input data. Everything draws from one seeded
//! generator, so a check is reproducible. Values that make identities hold (the identity
//! permutation, a reshape to the same shape, a whole slice) are drawn often on purpose: rules
//! are written for them.

use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType};
use mxc_driver::fill::SplitMix64;

/// The shapes instances are built around; operands get variants of one of them. Shapes with
/// equal extents let a wrong permutation or reshape keep its type, so the engine applies it.
const BASE_SHAPES: &[&[usize]] = &[
    &[2, 3],
    &[4],
    &[],
    &[3, 1],
    &[3, 3],
    &[2, 3, 4],
    &[2, 2, 3],
    &[2, 2, 2],
    &[1, 2, 4, 4],
    &[2, 1, 3],
];

/// Element types of an instance: f32 first and most often, then integers, f64 and the half
/// precisions.
const DTYPES: &[DType] = &[
    DType::F32,
    DType::F32,
    DType::F32,
    DType::F32,
    DType::I64,
    DType::I32,
    DType::U8,
    DType::F64,
    DType::F16,
    DType::BF16,
];

/// Splat values tried for constants beside the ones a rule's condition names.
const SPLATS: &[f64] = &[0.0, 1.0, -1.0, 2.0];

/// The seeded source of every random choice.
pub struct Gen(SplitMix64);

impl Gen {
    pub fn new(seed: u64) -> Gen {
        Gen(SplitMix64(seed))
    }

    /// A seed derived from a name (FNV-1a), so each rule's draws do not depend on its position.
    pub fn seed_of(name: &str) -> u64 {
        name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        })
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.0.unit() < p
    }

    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }

    /// Uniform in `lo..=hi`.
    fn int_in(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }

    pub fn dtype(&mut self) -> DType {
        self.pick(DTYPES)
    }

    pub fn base_shape(&mut self) -> Vec<usize> {
        self.pick(BASE_SHAPES).to_vec()
    }
}

/// The element type of an operand used at `(kind, index)` after `siblings`, in an instance of
/// type `dtype`.
pub fn operand_dtype(kind: OpKind, index: usize, dtype: DType, siblings: &[TensorType]) -> DType {
    use OpKind::*;
    match (kind, index, siblings.first()) {
        (Where, 0, _) | (Not, 0, _) => DType::Bool,
        (Gather, 1, _) => DType::I64,
        // quantised integers (8-bit, signed or not), a float scale, a zero point of x's type
        (DequantizeLinear, 0, _) if dtype.is_int() && dtype.bits() == 8 => dtype,
        (DequantizeLinear, 0, _) if dtype.is_signed_int() => DType::I8,
        (DequantizeLinear, 0, _) => DType::U8,
        (DequantizeLinear, 1, _) if dtype.is_float() => dtype,
        (DequantizeLinear, 1, _) => DType::F32,
        // the operands of one type take the first's (which may be an op's result, a cast's)
        (DequantizeLinear, 2, Some(first)) => first.dtype,
        (Add | Sub | Mul | Div | Max | Min | MatMul | Conv | ConvNhwc, _, Some(first)) => first.dtype,
        _ => dtype,
    }
}

/// The shape of an operand used at `(kind, index)`, given its earlier siblings' types.
pub fn operand_shape(g: &mut Gen, kind: OpKind, index: usize, siblings: &[TensorType], base: &[usize]) -> Vec<usize> {
    let Some(first) = siblings.first().map(|t| t.shape.as_slice()) else {
        // 2-D channels-last ops take an image [N, H, W, C] big enough for a 3x3 window
        if matches!(kind, OpKind::ConvNhwc | OpKind::MaxPoolNhwc | OpKind::AveragePoolNhwc) {
            return vec![
                g.pick(&[1, 2]),
                g.pick(&[3, 4, 5]),
                g.pick(&[3, 4, 6]),
                g.pick(&[1, 2, 3]),
            ];
        }
        return variant(g, base);
    };
    let dim = |i: usize| first.get(i).copied().unwrap_or(1);
    let last = first.last().copied().unwrap_or(1);
    let n = g.pick(&[2, 3]);
    match (kind, index) {
        // a batched product half the time when A has batch dimensions
        (OpKind::MatMul, 1) if first.len() >= 3 && g.chance(0.5) => [&first[..first.len() - 2], &[last, n]].concat(),
        (OpKind::MatMul, 1) => vec![last, n],
        // k, v and the mask of the same shape as q: as many keys as queries, the depth too
        (OpKind::Attention, _) => first.to_vec(),
        (OpKind::Gemm, 1) => {
            let k = if first.is_empty() { 1 } else { g.pick(first) };
            if g.chance(0.5) {
                vec![k, n]
            } else {
                vec![n, k]
            }
        }
        (OpKind::Gemm, 2) => g.pick(&[
            vec![],
            vec![1],
            vec![siblings[1].shape.iter().copied().max().unwrap_or(1)],
        ]),
        (OpKind::Conv, 1) => {
            let k = g.pick(&[1, 2, 3]).min(dim(2));
            let mut w = vec![n, dim(1)];
            w.extend(std::iter::repeat_n(k, first.len().saturating_sub(2)));
            w
        }
        (OpKind::Conv, 2) | (OpKind::ConvNhwc, 2) => {
            vec![siblings.get(1).and_then(|w| w.shape.first().copied()).unwrap_or(1)]
        }
        // channels last: [M, kh, kw, C], or depthwise [C, kh, kw, 1] a third of the time
        (OpKind::ConvNhwc, 1) => {
            let k = g.pick(&[1, 2, 3, 3]).min(dim(1)).min(dim(2));
            match g.chance(0.3) {
                true => vec![last, k, k, 1],
                false => vec![n, k, k, last],
            }
        }
        (OpKind::BatchNorm, _) => vec![dim(1)],
        (OpKind::LayerNorm, _) => vec![last],
        (OpKind::Concat, _) | (OpKind::Where, 2) => first.to_vec(),
        (OpKind::Where, 1) => variant(g, base),
        // a quantised tensor's scale and zero point: one value half the time (per tensor),
        // else a shape that broadcasts to it (per axis) or not
        (OpKind::DequantizeLinear, _) if g.chance(0.5) => vec![],
        _ => variant(g, first),
    }
}

/// `shape` itself most often; else a scalar, a suffix, some dimensions set to 1, or reversed.
fn variant(g: &mut Gen, shape: &[usize]) -> Vec<usize> {
    match g.below(10) {
        0..=4 => shape.to_vec(),
        5 => vec![],
        6 | 7 if !shape.is_empty() => shape[g.below(shape.len())..].to_vec(),
        8 => shape.iter().map(|&d| if g.chance(0.5) { 1 } else { d }).collect(),
        _ => shape.iter().rev().copied().collect(),
    }
}

/// A value for every attribute of `kind` applied to operands of types `operands`.
pub fn attributes(g: &mut Gen, kind: OpKind, operands: &[TensorType]) -> Attrs {
    let shape: &[usize] = operands.first().map_or(&[], |t| &t.shape);
    let mut attrs = Attrs::new();
    if kind == OpKind::Slice {
        let (starts, ends, steps) = slice_of(g, shape);
        attrs.set("starts", Attr::Ints(starts));
        attrs.set("ends", Attr::Ints(ends));
        attrs.set("steps", Attr::Ints(steps));
    }
    if kind == OpKind::ConvNhwc {
        // one group, or (weights [C, kh, kw, 1]) a group per channel
        let channels = shape.get(3).copied();
        let depthwise = operands
            .get(1)
            .is_some_and(|w| w.shape.len() == 4 && w.shape[3] == 1 && Some(w.shape[0]) == channels);
        let group = if depthwise { channels.unwrap_or(1) } else { 1 };
        attrs.set("group", Attr::Int(group as i64));
    }
    if let (OpKind::MatMulPacked, Some(panels)) = (kind, operands.get(1)) {
        // as many columns as the panels hold (a pack's padding is not known here)
        let r = panels.rank();
        if r >= 3 {
            let width = panels.shape[r - 1] / mxc_dialects::mx::depth_pairing(panels.dtype);
            attrs.set("n", Attr::Int((panels.shape[r - 3] * width) as i64));
        }
    }
    for name in kind.attr_names() {
        if attrs.get(name).is_none() {
            attrs.set(name, attribute(g, name, kind, shape));
        }
    }
    attrs
}

/// A value for attribute `name` of an op whose first operand has shape `shape`.
fn attribute(g: &mut Gen, name: &str, kind: OpKind, shape: &[usize]) -> Attr {
    let rank = shape.len();
    let spatial = rank.saturating_sub(2);
    let ints = |v: Vec<i64>| Attr::Ints(v);
    let small = |g: &mut Gen, n: usize, choices: &[i64]| (0..n).map(|_| g.pick(choices)).collect::<Vec<_>>();
    match name {
        "perm" => ints(permutation(g, rank)),
        "axis" => Attr::Int(g.below(rank.max(1)) as i64),
        "axes" if g.chance(0.25) => ints((0..rank as i64).collect()),
        "axes" => ints((0..rank as i64).filter(|_| g.chance(0.5)).collect()),
        "shape" if g.chance(0.3) => ints(shape.iter().map(|&d| d as i64).collect()),
        "shape" if kind == OpKind::Expand => ints(expansion_of(g, shape)),
        "shape" => ints(factorisation(g, shape.iter().product())),
        "kernel" => {
            // the spatial dimensions: after the channels, or before them channels last
            let nhwc = matches!(kind, OpKind::MaxPoolNhwc | OpKind::AveragePoolNhwc);
            let spatial_dims = match nhwc {
                true => shape.get(1..rank.saturating_sub(1)).unwrap_or(&[]),
                false => &shape[2.min(rank)..],
            };
            ints(spatial_dims.iter().map(|&d| g.pick(&[1, 2, 3]).min(d as i64)).collect())
        }
        "strides" | "dilations" => ints(small(g, spatial, &[1, 1, 2])),
        "pads" => ints(small(g, 2 * spatial, &[0, 0, 1])),
        "output_padding" => ints(vec![0; spatial]),
        "group" if kind == OpKind::Conv && g.chance(0.3) => Attr::Int(shape.get(1).copied().unwrap_or(1) as i64),
        "group" => Attr::Int(1),
        "alpha" if kind == OpKind::LeakyRelu => Attr::Float(g.pick(&[0.01, 0.2])),
        "alpha" => Attr::Float(g.pick(&[1.0, 0.5, -2.0])),
        "beta" => Attr::Float(g.pick(&[1.0, 0.5, 0.0])),
        "epsilon" => Attr::Float(g.pick(&[1e-5, 1e-3])),
        "to" => Attr::DType(g.pick(&[
            DType::F32,
            DType::I64,
            DType::I32,
            DType::U8,
            DType::F64,
            DType::Bool,
            DType::F16,
            DType::BF16,
        ])),
        "approximate" => Attr::Str(g.pick(&["none", "tanh"]).into()),
        "layout" => Attr::Str(g.pick(&["bhsd", "bshd"]).into()),
        "scale" => Attr::Float(g.pick(&[1.0, 0.5])),
        "panel" => Attr::Int(g.pick(&[16, 2])),
        // ceil_mode, count_include_pad, keepdims, trans_a, trans_b, zero_nan_rows
        _ => Attr::Int(g.below(2) as i64),
    }
}

/// The identity a fifth of the time, else a random permutation of `0..n`.
fn permutation(g: &mut Gen, n: usize) -> Vec<i64> {
    let mut p: Vec<i64> = (0..n as i64).collect();
    if g.chance(0.2) {
        return p;
    }
    for i in (1..n).rev() {
        p.swap(i, g.below(i + 1));
    }
    p
}

/// A shape of 1 to 3 dimensions with `numel` elements.
fn factorisation(g: &mut Gen, numel: usize) -> Vec<i64> {
    let mut dims = Vec::new();
    let mut rest = numel;
    for _ in 0..g.below(3) {
        let divisors: Vec<usize> = (1..=rest).filter(|d| rest.is_multiple_of(*d)).collect();
        let d = g.pick(&divisors);
        dims.push(d as i64);
        rest /= d;
    }
    dims.push(rest as i64);
    dims
}

/// A shape `shape` broadcasts to: dimensions of 1 grown, sometimes a leading dimension added.
fn expansion_of(g: &mut Gen, shape: &[usize]) -> Vec<i64> {
    let mut out: Vec<i64> = shape
        .iter()
        .map(|&d| if d == 1 { g.pick(&[1, 2, 3]) } else { d as i64 })
        .collect();
    if g.chance(0.4) {
        out.insert(0, 2);
    }
    out
}

/// Normalised `starts`, `ends`, `steps` of a slice of `shape`: per axis the whole axis, a
/// part of it, every other element, or the axis reversed.
fn slice_of(g: &mut Gen, shape: &[usize]) -> (Vec<i64>, Vec<i64>, Vec<i64>) {
    let whole = g.chance(0.2);
    let (mut starts, mut ends, mut steps) = (Vec::new(), Vec::new(), Vec::new());
    for &d in shape {
        let d = d as i64;
        let (s, e, t) = match g.below(4) {
            _ if whole => (0, d, 1),
            0 => (0, d, 1),
            1 => {
                let s = g.int_in(0, d - 1);
                (s, g.int_in(s + 1, d), 1)
            }
            2 => (g.int_in(0, d - 1), d, 2),
            _ => (d - 1, -1, -1),
        };
        starts.push(s);
        ends.push(e);
        steps.push(t);
    }
    (starts, ends, steps)
}

/// A constant of type `ty`: mostly a splat of a value the rule's condition names (`hints`) or
/// of 0, 1, -1, 2; sometimes random data.
pub fn constant(g: &mut Gen, ty: &TensorType, hints: &[f64]) -> Tensor {
    let n = ty.num_elements();
    let splat = |v: f64| Tensor::from_f64s(ty.dtype, ty.shape.clone(), &vec![v; n]);
    match g.below(10) {
        0..=5 if !hints.is_empty() => splat(g.pick(hints)),
        0..=7 => splat(g.pick(SPLATS)),
        _ => data(g, ty, Domain::Data, 1),
    }
}

/// What values an input may take.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Domain {
    /// Any value of its element type (within the small ranges of `data`).
    Data,
    /// Indices into an axis of this extent (negative ones count from the end).
    Indices(usize),
}

/// Seeded input data. Floats: on draw 0 a grid of quarters in [-2, 2] (zeros and exact
/// values), on later draws uniform in [-4, 4). Signed integers in [-6, 6], unsigned in
/// [0, 12], bools 0 or 1.
pub fn data(g: &mut Gen, ty: &TensorType, domain: Domain, draw: usize) -> Tensor {
    let n = ty.num_elements();
    let shape = ty.shape.clone();
    match (domain, ty.dtype) {
        (Domain::Indices(extent), d) => {
            let e = extent.max(1) as i64;
            let v: Vec<i64> = (0..n).map(|_| g.int_in(-e, e - 1)).collect();
            Tensor::from_i64s(d, shape, &v)
        }
        (_, d) if d.is_float() => {
            let v: Vec<f64> = (0..n)
                .map(|_| match draw {
                    0 => g.int_in(-8, 8) as f64 / 4.0,
                    _ => g.0.unit() * 8.0 - 4.0,
                })
                .collect();
            Tensor::from_f64s(d, shape, &v)
        }
        (_, d) => {
            let (lo, hi) = match d {
                DType::Bool => (0, 1),
                d if d.is_unsigned_int() => (0, 12),
                _ => (-6, 6),
            };
            let v: Vec<i64> = (0..n).map(|_| g.int_in(lo, hi)).collect();
            Tensor::from_i64s(d, shape, &v)
        }
    }
}
