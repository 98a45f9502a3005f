//! Random values: `RandomUniform`, `RandomNormal`, their `*Like` forms, `Bernoulli`,
//! `Multinomial` and training-mode `Dropout`'s mask, drawn from a seeded generator **at
//! import**. The generator is splitmix64, seeded with the bits of the node's `seed` attribute
//! (an f32) when it has one, else with a fixed hash of the node's first output name (so two
//! nodes draw differently, and compiling a model twice gives the same program). The draws
//! become constants, so a compiled model gives the same values on every run.
//!
//! - Uniform in [low, high): `low + (high - low) * u` with `u` the top 53 bits of a draw
//!   over 2^53 (a value that rounds up to `high` in the element type becomes `low`); normal:
//!   Box–Muller from two uniforms. Element type: `dtype` (float by default; for the `*Like`
//!   ops the input's), one of f16, bf16, f32 and f64; the shape: `shape`, or for the `*Like`
//!   ops the input's (whose values are not read).
//! - `Bernoulli(p)`: `cast(less(u, p), dtype)` with `u` a constant uniform tensor of `p`'s
//!   shape and type, so `p` may be a run-time value.
//! - `Multinomial(logits)`: per sample, the number of classes whose cumulative weight
//!   (`exp(x - max x)`, summed along the classes) is at most `u` times the total, at most the
//!   last class; `u` a constant [batch, sample_size, 1].
//! - Training-mode `Dropout` (ratio in (0, 1), known at compile time): `x` times a constant
//!   that is `1 / (1 - ratio)` where a draw `u >= ratio` keeps the element and 0 where it
//!   drops it; the mask is those draws.

use super::super::ctx::Ctx;
use super::super::node::NodeView;
use super::super::proto::attribute_proto::AttributeType;
use super::super::registry::{Registry, LATEST};
use super::super::tensor::{check_constant, require_numeric_dtype};
use super::build::float_compute_type;
use super::layout::{slice_value, DimSlice};
use super::scan::cumulative_sum;
use super::shape::reshape;
use mxc_dialects::{DType, OpKind, Tensor, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("RandomUniform", |ctx| random(ctx, false, Distribution::Uniform));
    r.add_all("RandomNormal", |ctx| random(ctx, false, Distribution::Normal));
    r.add_all("RandomUniformLike", |ctx| random(ctx, true, Distribution::Uniform));
    r.add_all("RandomNormalLike", |ctx| random(ctx, true, Distribution::Normal));
    r.add("", "Bernoulli", 15, LATEST, bernoulli);
    r.add("", "Multinomial", 7, LATEST, multinomial);
}

/// splitmix64: a 64-bit state stepped by a constant, each step's state mixed into a draw.
struct Generator(u64);

impl Generator {
    /// The generator of the node being parsed: seeded with its `seed`'s bits, else with a
    /// hash (FNV-1a) of its first output's name.
    fn of(node: &NodeView) -> Result<Generator, String> {
        Ok(Generator(match seed(node)? {
            Some(seed) => seed.to_bits() as u64,
            None => {
                let name = node.proto.output.first().map_or("", String::as_str);
                name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
                    (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
                })
            }
        }))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A draw from [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A draw from the standard normal distribution (Box–Muller).
    fn normal(&mut self) -> f64 {
        // in (0, 1], so that the logarithm is finite
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// A tensor of `ty` drawn uniformly from [low, high).
    fn uniform_tensor(&mut self, ty: &TensorType, low: f64, high: f64) -> Result<Tensor, String> {
        check_constant(ty)?;
        let mut values: Vec<f64> = (0..ty.num_elements())
            .map(|_| low + (high - low) * self.uniform())
            .collect();
        let t = Tensor::from_f64s(ty.dtype, ty.shape.clone(), &values);
        // a draw just below `high` may round to it in the element type (for f32, about one
        // in 2^24): it becomes `low`
        let rounded: Vec<f64> = t.to_f64_vec();
        if low >= high || rounded.iter().all(|&v| v < high) {
            return Ok(t);
        }
        for (v, r) in values.iter_mut().zip(rounded) {
            if r >= high {
                *v = low;
            }
        }
        Ok(Tensor::from_f64s(ty.dtype, ty.shape.clone(), &values))
    }

    /// A tensor of `ty` drawn from the normal distribution of `mean` and standard deviation
    /// `scale`.
    fn normal_tensor(&mut self, ty: &TensorType, mean: f64, scale: f64) -> Result<Tensor, String> {
        check_constant(ty)?;
        let values: Vec<f64> = (0..ty.num_elements()).map(|_| mean + scale * self.normal()).collect();
        Ok(Tensor::from_f64s(ty.dtype, ty.shape.clone(), &values))
    }
}

/// The `seed` attribute: a float in the schemas; the node tests' `Dropout` models write it
/// as an integer, taken as that value.
fn seed(node: &NodeView) -> Result<Option<f32>, String> {
    let is_int = node
        .proto
        .attribute
        .iter()
        .any(|a| a.name() == "seed" && a.r#type() == AttributeType::Int);
    if is_int {
        Ok(node.opt_int("seed")?.map(|i| i as f32))
    } else {
        node.opt_float("seed")
    }
}

/// `dtype` if random values are drawn in it (the types of the ONNX schemas).
fn drawn_type(dtype: DType, what: &str) -> Result<DType, String> {
    if matches!(dtype, DType::F16 | DType::BF16 | DType::F32 | DType::F64) {
        Ok(dtype)
    } else {
        Err(format!(
            "{what} {dtype} is not supported: random values are drawn in f16, bf16, f32 and f64"
        ))
    }
}

/// The `dtype` attribute, if the node has one.
fn dtype_attr(ctx: &Ctx) -> Result<Option<DType>, String> {
    ctx.node
        .opt_int("dtype")?
        .map(|code| require_numeric_dtype(code as i32))
        .transpose()
}

enum Distribution {
    Uniform,
    Normal,
}

/// `RandomUniform`/`RandomNormal` (the shape from `shape`) and their `*Like` forms (the
/// shape, and the type unless `dtype` gives one, from the input).
fn random(ctx: &mut Ctx, like: bool, distribution: Distribution) -> Result<Vec<ValueId>, String> {
    let ty = if like {
        let input = ctx.ty(ctx.input(0)?).clone();
        match dtype_attr(ctx)? {
            Some(dtype) => input.with_dtype(drawn_type(dtype, "dtype")?),
            None => input.with_dtype(drawn_type(input.dtype, "the input's type")?),
        }
    } else {
        let dtype = drawn_type(dtype_attr(ctx)?.unwrap_or(DType::F32), "dtype")?;
        let dims = ctx.node.opt_ints("shape")?.ok_or("attribute `shape` is missing")?;
        let shape = dims
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("shape {dims:?} has a negative entry")))
            .collect::<Result<Vec<usize>, String>>()?;
        TensorType::new(dtype, shape)
    };
    let mut gen = Generator::of(&ctx.node)?;
    let t = match distribution {
        Distribution::Uniform => {
            let low = ctx.node.float("low", 0.0)? as f64;
            let high = ctx.node.float("high", 1.0)? as f64;
            gen.uniform_tensor(&ty, low, high)?
        }
        Distribution::Normal => {
            let mean = ctx.node.float("mean", 0.0)? as f64;
            let scale = ctx.node.float("scale", 1.0)? as f64;
            gen.normal_tensor(&ty, mean, scale)?
        }
    };
    Ok(vec![ctx.constant(t)])
}

/// `Bernoulli(p)`: 1 where a uniform draw is below `p`, of `dtype` (`p`'s type by default).
fn bernoulli(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let p = ctx.input(0)?;
    let ty = ctx.ty(p).clone();
    drawn_type(ty.dtype, "the input's type")?;
    let dtype = dtype_attr(ctx)?.unwrap_or(ty.dtype);
    let u = Generator::of(&ctx.node)?.uniform_tensor(&ty, 0.0, 1.0)?;
    let u = ctx.constant(u);
    let drawn = ctx.op(OpKind::Less, &[u, p])?;
    Ok(vec![ctx.cast(drawn, dtype)?])
}

/// `Multinomial(logits [batch, class])`: `sample_size` class indices per batch entry.
fn multinomial(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    drawn_type(ty.dtype, "the input's type")?;
    let [batch, classes] = ty.shape[..] else {
        return Err(format!("input must be [batch, class], got shape {:?}", ty.shape));
    };
    if classes == 0 {
        return Err("the input has no classes to draw from".into());
    }
    let size = ctx.node.int("sample_size", 1)?;
    let samples = usize::try_from(size).map_err(|_| format!("sample_size {size} is negative"))?;
    let dtype = dtype_attr(ctx)?.unwrap_or(DType::I32);
    if !matches!(dtype, DType::I32 | DType::I64) {
        return Err(format!("dtype {dtype} is not supported: Multinomial gives i32 or i64"));
    }
    let compute = float_compute_type(ty.dtype);
    let u = Generator::of(&ctx.node)?.uniform_tensor(&TensorType::new(compute, vec![batch, samples, 1]), 0.0, 1.0)?;
    let x = ctx.cast(x, compute)?;
    // the unnormalised probabilities exp(x - max x), summed along the classes
    let max = ctx.reduce(OpKind::ReduceMax, x, &[1], true)?;
    let shifted = ctx.op(OpKind::Sub, &[x, max])?;
    let weights = ctx.op(OpKind::Exp, &[shifted])?;
    let cumulative = cumulative_sum(ctx, weights, 1)?;
    let last = DimSlice {
        start: classes as i64 - 1,
        end: classes as i64,
        step: 1,
    };
    let total = slice_value(ctx, cumulative, &[(1, last)])?;
    let total = reshape(ctx, total, &[batch, 1, 1])?;
    let cumulative = reshape(ctx, cumulative, &[batch, 1, classes])?;
    // [batch, sample, 1] thresholds against [batch, 1, class] cumulative weights
    let u = ctx.constant(u);
    let threshold = ctx.op(OpKind::Mul, &[u, total])?;
    let above = ctx.op(OpKind::Greater, &[cumulative, threshold])?;
    let within = ctx.op(OpKind::Not, &[above])?;
    let within = ctx.cast(within, dtype)?;
    let count = ctx.reduce(OpKind::ReduceSum, within, &[2], false)?;
    let last_class = ctx.scalar(dtype, (classes - 1) as f64);
    Ok(vec![ctx.op(OpKind::Min, &[count, last_class])?])
}

/// Training-mode `Dropout` of `x` with `ratio` known and not 0: `x` scaled by `1 / (1 -
/// ratio)` where a uniform draw is at least `ratio`, 0 elsewhere; and the mask (bool) if the
/// node asks for it.
pub fn training_dropout(ctx: &mut Ctx, x: ValueId, ratio: f64) -> Result<Vec<ValueId>, String> {
    if !(0.0..1.0).contains(&ratio) {
        return Err(format!("ratio {ratio} is outside [0, 1)"));
    }
    let ty = ctx.ty(x).clone();
    check_constant(&ty)?;
    let mut gen = Generator::of(&ctx.node)?;
    let kept: Vec<bool> = (0..ty.num_elements()).map(|_| gen.uniform() >= ratio).collect();
    let scale = 1.0 / (1.0 - ratio);
    let factors: Vec<f64> = kept.iter().map(|&k| if k { scale } else { 0.0 }).collect();
    let factors = ctx.constant(Tensor::from_f64s(ty.dtype, ty.shape.clone(), &factors));
    let mut outputs = vec![ctx.op(OpKind::Mul, &[x, factors])?];
    if ctx.wants_output(1) {
        let mask: Vec<f64> = kept.iter().map(|&k| k as u8 as f64).collect();
        outputs.push(ctx.constant(Tensor::from_f64s(DType::Bool, ty.shape, &mask)));
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::proto::{AttributeProto, TensorProto};
    use super::super::super::testutil::*;
    use mxc_dialects::eval;
    use mxc_dialects::{Graph, Op, OpKind, Tensor};

    /// `eval::run`, with `mx.exp` (not evaluable there) computed here.
    fn run(g: &Graph, inputs: &[Tensor]) -> Vec<Tensor> {
        let exp = |op: &Op, args: &[&Tensor]| {
            (op.kind == OpKind::Exp).then(|| {
                let e: Vec<f64> = args[0].to_f64_vec().iter().map(|v| v.exp()).collect();
                vec![Tensor::from_f64s(args[0].dtype(), args[0].shape().to_vec(), &e)]
            })
        };
        eval::run_with(g, inputs, &exp).unwrap()
    }

    fn float_attr(name: &str, v: f32) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            r#type: Some(super::AttributeType::Float as i32),
            f: Some(v),
            ..Default::default()
        }
    }

    /// The outputs of the model `b` run on `inputs`.
    fn draw(b: ModelBuilder, inputs: &[Tensor]) -> Vec<Tensor> {
        run(&b.import().unwrap(), inputs)
    }

    fn one(op: &str, attrs: Vec<AttributeProto>) -> ModelBuilder {
        ModelBuilder::new(22).node(node(op, &[], &["y"], attrs)).output("y")
    }

    fn mean_and_variance(v: &[f64]) -> (f64, f64) {
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        (mean, v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n)
    }

    #[test]
    fn uniform_values_fill_the_interval_evenly() {
        let attrs = vec![
            ints_attr("shape", &[100, 200]),
            float_attr("low", -2.0),
            float_attr("high", 3.0),
            float_attr("seed", 1.5),
        ];
        let y = &draw(one("RandomUniform", attrs), &[])[0];
        assert_eq!((y.dtype(), y.shape()), (mxc_dialects::DType::F32, &[100, 200][..]));
        let v = y.to_f64_vec();
        assert!(v.iter().all(|&x| (-2.0..3.0).contains(&x)));
        let (mean, variance) = mean_and_variance(&v);
        // the middle 0.5, the variance 5^2 / 12
        assert!((mean - 0.5).abs() < 0.1, "mean {mean}");
        assert!((variance / (25.0 / 12.0) - 1.0).abs() < 0.05, "variance {variance}");
    }

    #[test]
    fn uniform_values_in_half_precision_stay_below_high() {
        // the input's shape and type; its values are not read
        let y = &draw(
            ModelBuilder::new(22)
                .input("x", DataType::Float16, &[20000])
                .node(node("RandomUniformLike", &["x"], &["y"], vec![]))
                .output("y"),
            &[Tensor::from_f64s(mxc_dialects::DType::F16, vec![20000], &[0.0; 20000])],
        )[0];
        assert_eq!(y.dtype(), mxc_dialects::DType::F16);
        let v = y.to_f64_vec();
        assert!(v.iter().all(|&x| (0.0..1.0).contains(&x)));
        let (mean, variance) = mean_and_variance(&v);
        assert!((mean - 0.5).abs() < 0.02, "mean {mean}");
        assert!((variance * 12.0 - 1.0).abs() < 0.05, "variance {variance}");
    }

    #[test]
    fn normal_values_have_the_mean_and_deviation_asked_for() {
        let attrs = vec![
            ints_attr("shape", &[20000]),
            float_attr("mean", 3.0),
            float_attr("scale", 2.0),
            int_attr("dtype", DataType::Double as i64),
        ];
        let y = &draw(one("RandomNormal", attrs), &[])[0];
        assert_eq!(y.dtype(), mxc_dialects::DType::F64);
        let (mean, variance) = mean_and_variance(&y.to_f64_vec());
        assert!((mean - 3.0).abs() < 0.06, "mean {mean}");
        assert!((variance.sqrt() - 2.0).abs() < 0.06, "deviation {}", variance.sqrt());
        // the Like form: the input's shape, the type from `dtype`
        let like = &draw(
            ModelBuilder::new(22)
                .input("x", DataType::Int64, &[20000])
                .node(node(
                    "RandomNormalLike",
                    &["x"],
                    &["y"],
                    vec![int_attr("dtype", DataType::Float as i64)],
                ))
                .output("y"),
            &[Tensor::from_i64s(mxc_dialects::DType::I64, vec![20000], &[0; 20000])],
        )[0];
        assert_eq!((like.dtype(), like.shape()), (mxc_dialects::DType::F32, &[20000][..]));
        let (mean, variance) = mean_and_variance(&like.to_f64_vec());
        assert!(mean.abs() < 0.03 && (variance - 1.0).abs() < 0.05, "{mean} {variance}");
    }

    #[test]
    fn a_seed_fixes_the_values_and_nodes_without_one_differ() {
        let uniform = |seed: Option<f32>, name: &str| {
            let mut attrs = vec![ints_attr("shape", &[16])];
            attrs.extend(seed.map(|s| float_attr("seed", s)));
            draw(
                ModelBuilder::new(22)
                    .node(node("RandomUniform", &[], &[name], attrs))
                    .output(name),
                &[],
            )[0]
            .to_f64_vec()
        };
        assert_eq!(uniform(Some(7.0), "y"), uniform(Some(7.0), "z"));
        assert_ne!(uniform(Some(7.0), "y"), uniform(Some(8.0), "y"));
        // without a seed: the same for the same node, compiled twice; another for another
        assert_eq!(uniform(None, "y"), uniform(None, "y"));
        assert_ne!(uniform(None, "y"), uniform(None, "z"));
    }

    #[test]
    fn bernoulli_draws_ones_with_the_probability_given() {
        let p = vec![0.3f32; 10000];
        let y = &draw(
            ModelBuilder::new(22)
                .init(f32_tensor("p", &[10000], &p))
                .node(node("Bernoulli", &["p"], &["y"], vec![float_attr("seed", 2.0)]))
                .output("y"),
            &[],
        )[0];
        assert_eq!(y.dtype(), mxc_dialects::DType::F32);
        let v = y.to_f64_vec();
        assert!(v.iter().all(|&x| x == 0.0 || x == 1.0));
        let (mean, _) = mean_and_variance(&v);
        assert!((mean - 0.3).abs() < 0.02, "mean {mean}");
        // p at run time, of 0 and 1: exactly those, as bools when `dtype` says so
        let y = &draw(
            ModelBuilder::new(22)
                .input("p", DataType::Float, &[4])
                .node(node(
                    "Bernoulli",
                    &["p"],
                    &["y"],
                    vec![int_attr("dtype", DataType::Bool as i64)],
                ))
                .output("y"),
            &[Tensor::from_f32s(vec![4], &[0.0, 1.0, 1.0, 0.0])],
        )[0];
        assert_eq!(y.dtype(), mxc_dialects::DType::Bool);
        assert_eq!(y.to_i64_vec(), [0, 1, 1, 0]);
    }

    /// `Multinomial` of `logits` [batch, classes].
    fn multinomial(logits: &[f32], classes: usize, samples: i64, dtype: DataType) -> Tensor {
        let batch = logits.len() / classes;
        draw(
            ModelBuilder::new(22)
                .input("x", DataType::Float, &[batch as i64, classes as i64])
                .node(node(
                    "Multinomial",
                    &["x"],
                    &["y"],
                    vec![int_attr("sample_size", samples), int_attr("dtype", dtype as i64)],
                ))
                .output("y"),
            &[Tensor::from_f32s(vec![batch, classes], logits)],
        )
        .remove(0)
    }

    #[test]
    fn multinomial_draws_classes_by_their_softmax() {
        // a class of weight e^10 against two of weight 1: almost always (each batch entry
        // its own)
        let y = multinomial(&[0.0, 10.0, 0.0, 10.0, 0.0, 0.0], 3, 1000, DataType::Int32);
        assert_eq!((y.dtype(), y.shape()), (mxc_dialects::DType::I32, &[2, 1000][..]));
        let v = y.to_i64_vec();
        assert!(v.iter().all(|&c| (0..3).contains(&c)));
        assert!(v[..1000].iter().filter(|&&c| c == 1).count() >= 990);
        assert!(v[1000..].iter().filter(|&&c| c == 0).count() >= 990);
        // two classes of probability 1/4 and 3/4; a class of weight 0 never
        let y = multinomial(&[0.0, 3f32.ln(), f32::NEG_INFINITY], 3, 4000, DataType::Int64);
        assert_eq!(y.dtype(), mxc_dialects::DType::I64);
        let v = y.to_i64_vec();
        assert!(v.iter().all(|&c| c == 0 || c == 1));
        let ones = v.iter().filter(|&&c| c == 1).count() as f64 / 4000.0;
        assert!((ones - 0.75).abs() < 0.03, "frequency {ones}");
    }

    fn dropout(ratio: f32, training: bool, seed: AttributeProto) -> ModelBuilder {
        let training = TensorProto {
            name: Some("t".into()),
            data_type: Some(DataType::Bool as i32),
            int32_data: vec![training as i32],
            ..Default::default()
        };
        ModelBuilder::new(13)
            .input("x", DataType::Float, &[10000])
            .init(f32_tensor("r", &[], &[ratio]))
            .init(training)
            .node(node("Dropout", &["x", "r", "t"], &["y", "mask"], vec![seed]))
            .output("y")
            .output("mask")
    }

    #[test]
    fn training_dropout_drops_the_ratio_and_scales_the_rest() {
        let x = [Tensor::from_f32s(vec![10000], &[1.0; 10000])];
        let out = draw(dropout(0.25, true, float_attr("seed", 0.0)), &x);
        let (y, mask) = (out[0].to_f64_vec(), out[1].to_i64_vec());
        let zeros = y.iter().filter(|&&v| v == 0.0).count() as f64 / 10000.0;
        assert!((zeros - 0.25).abs() < 0.02, "dropped {zeros}");
        let kept = (1.0 / 0.75f32) as f64;
        assert!(y
            .iter()
            .zip(&mask)
            .all(|(&v, &m)| (m == 1 && v == kept) || (m == 0 && v == 0.0)));
        // the node tests write `seed` as an integer: the same seed
        let int_seed = draw(dropout(0.25, true, int_attr("seed", 0)), &x);
        assert_eq!(int_seed[1].to_i64_vec(), mask);
        // not in training mode: nothing dropped
        let out = draw(dropout(0.25, false, float_attr("seed", 0.0)), &x);
        assert!(out[0].to_f64_vec().iter().all(|&v| v == 1.0));
        assert!(out[1].to_i64_vec().iter().all(|&m| m == 1));
    }

    #[test]
    fn what_cannot_be_drawn_is_refused() {
        let err = one(
            "RandomUniform",
            vec![ints_attr("shape", &[2]), int_attr("dtype", DataType::Int32 as i64)],
        )
        .error();
        assert!(
            err.ends_with(
                "(RandomUniform): dtype i32 is not supported: random values are drawn in f16, bf16, f32 and f64"
            ),
            "{err}"
        );
        let err = ModelBuilder::new(22)
            .input("x", DataType::Int32, &[2])
            .node(node("RandomNormalLike", &["x"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(err.contains("the input's type i32 is not supported"), "{err}");
        let err = ModelBuilder::new(22)
            .input("x", DataType::Float, &[1, 2])
            .node(node(
                "Multinomial",
                &["x"],
                &["y"],
                vec![int_attr("dtype", DataType::Float as i64)],
            ))
            .output("y")
            .error();
        assert!(
            err.contains("dtype f32 is not supported: Multinomial gives i32 or i64"),
            "{err}"
        );
        let err = dropout(1.0, true, float_attr("seed", 0.0)).error();
        assert!(err.contains("(Dropout): ratio 1 is outside [0, 1)"), "{err}");
        // training mode must be known at compile time
        let err = ModelBuilder::new(13)
            .input("x", DataType::Float, &[2])
            .input("t", DataType::Bool, &[])
            .node(node("Dropout", &["x", "", "t"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(
            err.contains("input \"training_mode\" must be known at compile time"),
            "{err}"
        );
    }
}
