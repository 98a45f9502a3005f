//! Normalisations: inference-mode batch norm, layer norm (results Y, mean and inverse
//! standard deviation) and softmax along one axis (after subtracting the maximum). Formulas
//! follow the ONNX reference implementation, in the input's compute type. On a vector unit,
//! f32 softmax and layer norm over the last axis pass over each row in vectors (`rows.rs`),
//! their sums folded lane by lane and then across the lanes.

use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::rows;
use mxc_dialects::{Attrs, OpKind};

/// The lanes to run a normalisation over rows of `row` elements with: the vector unit's, when
/// the rows are the buffers' last dimension and every buffer holds f32.
fn row_lanes(e: &Emitter, along_last: bool, bufs: &[&Buf]) -> Option<usize> {
    e.f32_lanes()
        .filter(|_| along_last && bufs.iter().all(|b| b.holds_float_vectors()))
}

pub fn lower(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    match kind {
        OpKind::BatchNorm => batch_norm(e, attrs.float("epsilon")?, ins, &outs[0]),
        OpKind::LayerNorm => layer_norm(e, attrs.int("axis")? as usize, attrs.float("epsilon")?, ins, outs),
        OpKind::Softmax => softmax(e, attrs.int("axis")? as usize, &ins[0], &outs[0]),
        _ => return Err(format!("{kind} is not a normalisation")),
    }
    Ok(())
}

/// `scale * (x - mean) / sqrt(var + epsilon) + bias`, the parameters indexed by channel.
fn batch_norm(e: &mut Emitter, epsilon: f64, ins: &[Buf], out: &Buf) {
    let (x, scale, bias, mean, var) = (&ins[0], &ins[1], &ins[2], &ins[3], &ins[4]);
    e.nest_over(&x.extents(), |e, idx| {
        let c = &idx[1..2];
        let v = e.read(x, idx);
        let (s, b, m, var) = (e.read(scale, c), e.read(bias, c), e.read(mean, c), e.read(var, c));
        let eps = e.float(v.ty, epsilon);
        let centred = e.sub(&v, &m);
        let scaled = e.mul(&s, &centred);
        let var_eps = e.add(&var, &eps);
        let std = e.math("sqrt", &var_eps);
        let normalised = e.div(&scaled, &std);
        let y = e.add(&normalised, &b);
        e.write(out, idx, &y);
    });
}

/// Over the dimensions from `axis` on: `mean`, `inv_std = 1 / sqrt(var + epsilon)`, then
/// `Y = (x - mean) * inv_std * scale + bias` (scale and bias broadcast to those dimensions).
fn layer_norm(e: &mut Emitter, axis: usize, epsilon: f64, ins: &[Buf], outs: &[Buf]) {
    let (x, scale, bias) = (&ins[0], &ins[1], ins.get(2));
    let (y, mean_out, inv_std_out) = (&outs[0], &outs[1], &outs[2]);
    let extents = x.extents();
    let (outer, inner) = extents.split_at(axis);
    let mut bufs = vec![x, scale, y, mean_out, inv_std_out];
    bufs.extend(bias);
    let flat_params = scale.rank() <= 1 && bias.is_none_or(|b| b.rank() <= 1);
    if let Some(lanes) = row_lanes(e, inner.len() == 1 && flat_params, &bufs) {
        return layer_norm_rows(e, lanes, epsilon, (x, scale, bias), outs);
    }
    let count = e.extent_product(inner);
    let ty = x.ty();
    e.nest_over(outer, |e, o| {
        let at = |i: &[V]| [o, i].concat();
        let zero = e.zero(ty);
        let n = e.extent_as_number(&count, ty);
        let sum = e.nest_acc_over(inner, std::slice::from_ref(&zero), |e, i, acc| {
            let v = e.read(x, &at(i));
            vec![e.add(&acc[0], &v)]
        });
        let mean = e.div(&sum[0], &n);
        let squares = e.nest_acc_over(inner, &[zero], |e, i, acc| {
            let v = e.read(x, &at(i));
            let d = e.sub(&v, &mean);
            let d2 = e.mul(&d, &d);
            vec![e.add(&acc[0], &d2)]
        });
        let variance = e.div(&squares[0], &n);
        let eps = e.float(ty, epsilon);
        let var_eps = e.add(&variance, &eps);
        let std = e.math("sqrt", &var_eps);
        let one = e.one(ty);
        let inv_std = e.div(&one, &std);
        e.nest_over(inner, |e, i| {
            let v = e.read(x, &at(i));
            let d = e.sub(&v, &mean);
            let normalised = e.mul(&d, &inv_std);
            let s = e.read_bcast(scale, i);
            let mut r = e.mul(&normalised, &s);
            if let Some(bias) = bias {
                let b = e.read_bcast(bias, i);
                r = e.add(&r, &b);
            }
            e.write(y, &at(i), &r);
        });
        let zeros: Vec<V> = inner.iter().map(|_| e.idx(0)).collect();
        e.write(mean_out, &at(&zeros), &mean);
        e.write(inv_std_out, &at(&zeros), &inv_std);
    });
}

/// `exp(x - max) / sum(exp(x - max))` along `axis`.
fn softmax(e: &mut Emitter, axis: usize, x: &Buf, out: &Buf) {
    if let Some(lanes) = row_lanes(e, axis + 1 == x.rank(), &[x, out]) {
        return softmax_rows(e, lanes, x, out);
    }
    let mut outer = x.extents();
    let n = outer.remove(axis);
    let ty = x.ty();
    e.nest_over(&outer, |e, o| {
        let at = |j: &V| {
            let mut idx = o.to_vec();
            idx.insert(axis, j.clone());
            idx
        };
        let lowest = e.lowest(ty);
        let max = e.nest_acc_over(std::slice::from_ref(&n), &[lowest], |e, j, acc| {
            let v = e.read(x, &at(&j[0]));
            vec![e.max(&acc[0], &v)]
        });
        let shifted_exp = |e: &mut Emitter, j: &V| {
            let v = e.read(x, &at(j));
            let d = e.sub(&v, &max[0]);
            e.math("exp", &d)
        };
        let zero = e.zero(ty);
        let sum = e.nest_acc_over(std::slice::from_ref(&n), &[zero], |e, j, acc| {
            let ex = shifted_exp(e, &j[0]);
            vec![e.add(&acc[0], &ex)]
        });
        e.for_each(n.clone(), |e, j| {
            let ex = shifted_exp(e, &j);
            let y = e.div(&ex, &sum[0]);
            e.write(out, &at(&j), &y);
        });
    });
}

/// `layer_norm` over the last axis, each row in vectors.
fn layer_norm_rows(
    e: &mut Emitter,
    lanes: usize,
    epsilon: f64,
    (x, scale, bias): (&Buf, &Buf, Option<&Buf>),
    outs: &[Buf],
) {
    let (y, mean_out, inv_std_out) = (&outs[0], &outs[1], &outs[2]);
    let mut outer = x.extents();
    let n = outer.pop().expect("a row has a dimension");
    e.nest_over(&outer, |e, o| {
        let at = |j: &V| [o, std::slice::from_ref(j)].concat();
        let read = |e: &mut Emitter, j: &V, lanes: usize| e.read_lanes(x, &at(j), lanes);
        let count = e.extent_as_number(&n, Ty::F32);
        let sum = rows::fold(e, (n.clone(), lanes), (0.0, 0.0), &read, &|e, acc, v| e.add(acc, v));
        let sum = e.reduce_lanes("add", &sum);
        let mean = e.div(&sum, &count);
        let centred = |e: &mut Emitter, j: &V, lanes: usize| {
            let v = read(e, j, lanes);
            e.sub(&v, &mean)
        };
        let squares = rows::fold(e, (n.clone(), lanes), (0.0, 0.0), &centred, &|e, acc, d| {
            e.fma(d, d, acc)
        });
        let squares = e.reduce_lanes("add", &squares);
        let variance = e.div(&squares, &count);
        let eps = e.float(Ty::F32, epsilon);
        let var_eps = e.add(&variance, &eps);
        let std = e.math("sqrt", &var_eps);
        let one = e.one(Ty::F32);
        let inv_std = e.div(&one, &std);
        rows::each(e, (n.clone(), lanes), &|e, j, lanes| {
            let d = centred(e, j, lanes);
            let normalised = e.mul(&d, &inv_std);
            let s = e.read_bcast_lanes(scale, std::slice::from_ref(j), lanes);
            let mut r = e.mul(&normalised, &s);
            if let Some(bias) = bias {
                let b = e.read_bcast_lanes(bias, std::slice::from_ref(j), lanes);
                r = e.add(&r, &b);
            }
            e.write(y, &at(j), &r);
        });
        let zero = e.idx(0);
        e.write(mean_out, &at(&zero), &mean);
        e.write(inv_std_out, &at(&zero), &inv_std);
    });
}

/// `softmax` over the last axis, each row in vectors: its maximum, the sum of the shifted
/// exponentials, then each exponential over the sum.
fn softmax_rows(e: &mut Emitter, lanes: usize, x: &Buf, out: &Buf) {
    let mut outer = x.extents();
    let n = outer.pop().expect("a row has a dimension");
    e.nest_over(&outer, |e, o| {
        let at = |j: &V| [o, std::slice::from_ref(j)].concat();
        let read = |e: &mut Emitter, j: &V, lanes: usize| e.read_lanes(x, &at(j), lanes);
        let max = rows::fold(
            e,
            (n.clone(), lanes),
            (f64::NEG_INFINITY, f64::NEG_INFINITY),
            &read,
            &|e, acc, v| e.max(acc, v),
        );
        let max = e.reduce_lanes("maximumf", &max);
        let shifted_exp = |e: &mut Emitter, j: &V, lanes: usize| {
            let v = read(e, j, lanes);
            let d = e.sub(&v, &max);
            e.math("exp", &d)
        };
        let sum = rows::fold(e, (n.clone(), lanes), (0.0, 0.0), &shifted_exp, &|e, acc, v| {
            e.add(acc, v)
        });
        let sum = e.reduce_lanes("add", &sum);
        rows::each(e, (n.clone(), lanes), &|e, j, lanes| {
            let ex = shifted_exp(e, j, lanes);
            let y = e.div(&ex, &sum);
            e.write(out, &at(j), &y);
        });
    });
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, lower_one, t};
    use mxc_dialects::{Attr, DType, OpKind};

    #[test]
    fn softmax_subtracts_the_maximum_before_exponentiating() {
        let m = lower_one(
            OpKind::Softmax,
            &[t(DType::F32, &[2, 3, 4])],
            attrs(&[("axis", Attr::Int(1))]),
        )
        .mlir;
        check_in_order(
            &m,
            &[
                "arith.maximumf",
                "arith.subf",
                "math.exp",
                "arith.addf",
                "math.exp",
                "arith.divf",
                "memref.store",
            ],
        );
    }

    #[test]
    fn layer_norm_writes_its_three_results() {
        let a = attrs(&[("axis", Attr::Int(1)), ("epsilon", Attr::Float(1e-5))]);
        let m = lower_one(OpKind::LayerNorm, &[t(DType::F16, &[2, 3]), t(DType::F16, &[3])], a).mlir;
        check_in_order(
            &m,
            &[
                "%out1: memref<2x1xf32>",
                "%out2: memref<2x1xf32>",
                "math.sqrt",
                "memref.store",
                "%out0",
                "%out1",
                "%out2",
            ],
        );
    }

    #[test]
    fn batch_norm_reads_its_parameters_by_channel() {
        let p = t(DType::F32, &[3]);
        let a = attrs(&[("epsilon", Attr::Float(1e-5))]);
        let m = lower_one(
            OpKind::BatchNorm,
            &[t(DType::F32, &[2, 3, 4]), p.clone(), p.clone(), p.clone(), p],
            a,
        )
        .mlir;
        check_in_order(
            &m,
            &[
                "the parallel loop over 2x3x4 of 2x3x4",
                "%t2 = arith.divsi %i0, %c4",
                "%t3 = arith.remsi %t2, %c3",
                "memref.load %in1[%t3]",
                "math.sqrt",
                "arith.divf",
            ],
        );
    }
}
