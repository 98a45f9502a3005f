//! Convolution and transposed convolution, N-d, with groups, strides, dilations, explicit pads
//! and an optional bias: one loop nest over the result, a reduction over the group's input
//! channels and the kernel window inside, positions outside the input skipped (zero padding).

use super::buffer::Buf;
use super::emit::{Emitter, V};
use super::window::Window;
use mxc_dialects::{Attrs, OpKind};

pub fn lower(e: &mut Emitter, kind: OpKind, attrs: &Attrs, ins: &[Buf], outs: &[Buf]) -> Result<(), String> {
    let window = Window::from_attrs(attrs)?;
    let group = attrs.int("group")?;
    if group < 1 {
        return Err(format!("group must be positive, got {group}"));
    }
    let conv = Conv {
        x: &ins[0],
        w: &ins[1],
        bias: ins.get(2),
        out: &outs[0],
        group: group as usize,
        window,
    };
    match kind {
        OpKind::Conv => conv.forward(e),
        OpKind::ConvTranspose => conv.transposed(e),
        _ => return Err(format!("{kind} is not a convolution")),
    }
    Ok(())
}

struct Conv<'a> {
    x: &'a Buf,
    w: &'a Buf,
    bias: Option<&'a Buf>,
    out: &'a Buf,
    group: usize,
    window: Window,
}

impl Conv<'_> {
    /// `y[n, m, o] = sum over c, k of x[n, g*C/G + c, o*s + k*d - p] * w[m, c, k] (+ b[m])`
    /// where `g = m / (M/G)`.
    fn forward(&self, e: &mut Emitter) {
        let (x, w, out) = (self.x, self.w, self.out);
        let channels = w.shape[1];
        let per_group_out = out.shape[1] / self.group;
        let kernel = &w.shape[2..];
        let extents = &x.shape[2..];
        let mut inner = vec![channels];
        inner.extend_from_slice(kernel);
        e.nest(&out.shape, |e, idx| {
            let (n, m, o) = (&idx[0], &idx[1], &idx[2..]);
            let g = e.div_idx(m, per_group_out as i64);
            let zero = e.zero(out.ty());
            let acc = e.nest_acc(&inner, &[zero], |e, ck, acc| {
                let (c, k) = (&ck[0], &ck[1..]);
                let pos = self.window.positions(e, o, k);
                let bounds: Vec<(i64, i64)> = extents.iter().map(|&n| (0, n as i64)).collect();
                let conds = self.window.inside(e, &pos, &bounds, &out.shape[2..], kernel);
                e.when(&conds, acc, |e| {
                    let channel = e.lin(&[(&g, channels as i64), (c, 1)], 0);
                    let mut xi = vec![n.clone(), channel];
                    xi.extend(pos);
                    let mut wi = vec![m.clone(), c.clone()];
                    wi.extend_from_slice(k);
                    vec![e.multiply_add(&acc[0], x, &xi, w, &wi)]
                })
            });
            self.finish(e, idx, &acc[0]);
        });
    }

    /// `y[n, m, o] = sum of x[n, c, i] * w[c, m - g*M/G, k]` over the group's channels `c`
    /// and the `i`, `k` with `i*s + k*d - p = o`.
    fn transposed(&self, e: &mut Emitter) {
        let (x, w, out) = (self.x, self.w, self.out);
        let channels = x.shape[1] / self.group;
        let per_group_out = w.shape[1];
        let kernel = &w.shape[2..];
        let win = &self.window;
        let mut inner = vec![channels];
        inner.extend_from_slice(kernel);
        e.nest(&out.shape, |e, idx| {
            let (n, m, o) = (&idx[0], &idx[1], &idx[2..]);
            let g = e.div_idx(m, per_group_out as i64);
            let m_in_group = e.rem_idx(m, per_group_out as i64);
            let zero = e.zero(out.ty());
            let acc = e.nest_acc(&inner, &[zero], |e, ck, acc| {
                let (c, k) = (&ck[0], &ck[1..]);
                let mut conds = Vec::new();
                let mut pos = Vec::new();
                for d in 0..win.spatial() {
                    // o = i*s + k*d - p, so i*s = o + p - k*d
                    let t = e.lin(&[(&o[d], 1), (&k[d], -(win.dilations[d] as i64))], win.pad_begin(d));
                    let s = win.strides[d] as i64;
                    let zero = e.idx(0);
                    conds.push(e.cmp_idx("sge", &t, &zero));
                    if s > 1 {
                        let r = e.rem_idx(&t, s);
                        conds.push(e.cmp_idx("eq", &r, &zero));
                    }
                    let i = e.div_idx(&t, s);
                    let extent = e.idx(x.shape[d + 2] as i64);
                    conds.push(e.cmp_idx("slt", &i, &extent));
                    pos.push(i);
                }
                e.when(&conds, acc, |e| {
                    let channel = e.lin(&[(&g, channels as i64), (c, 1)], 0);
                    let mut xi = vec![n.clone(), channel.clone()];
                    xi.extend(pos);
                    let mut wi = vec![channel, m_in_group.clone()];
                    wi.extend_from_slice(k);
                    vec![e.multiply_add(&acc[0], x, &xi, w, &wi)]
                })
            });
            self.finish(e, idx, &acc[0]);
        });
    }

    /// Adds the bias (after the sum, as the ONNX reference does) and stores.
    fn finish(&self, e: &mut Emitter, idx: &[V], acc: &V) {
        let r = match self.bias {
            Some(b) => {
                let bv = e.read(b, &idx[1..2]);
                e.add(acc, &bv)
            }
            None => acc.clone(),
        };
        e.write(self.out, idx, &r);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, ints, loop_depth, lower_one, t};
    use mxc_dialects::{Attr, Attrs, DType, OpKind};

    fn window(pads: &[i64], strides: &[i64]) -> Attrs {
        attrs(&[
            ("strides", ints(strides)),
            ("pads", ints(pads)),
            ("dilations", ints(&[1, 1])),
            ("group", Attr::Int(1)),
        ])
    }

    #[test]
    fn a_2d_conv_is_seven_loops_deep() {
        let m = lower_one(
            OpKind::Conv,
            &[t(DType::F32, &[1, 3, 8, 8]), t(DType::F32, &[4, 3, 3, 3])],
            window(&[0; 4], &[1, 1]),
        );
        assert_eq!(loop_depth(&m.mlir), 7, "{}", m.mlir);
        // without padding no position can fall outside the input
        assert!(!m.mlir.contains("scf.if"), "{}", m.mlir);
        check_in_order(
            &m.mlir,
            &["iter_args", "arith.mulf", "arith.addf", "scf.yield", "memref.store"],
        );
    }

    #[test]
    fn padding_guards_the_input_reads_and_bias_is_added_last() {
        let tys = [
            t(DType::F32, &[1, 3, 8, 8]),
            t(DType::F32, &[4, 3, 3, 3]),
            t(DType::F32, &[4]),
        ];
        let m = lower_one(OpKind::Conv, &tys, window(&[1, 1, 1, 1], &[1, 1]));
        check_in_order(
            &m.mlir,
            &[
                "arith.cmpi sge",
                "arith.cmpi slt",
                "scf.if",
                "memref.load %in0",
                "} else {",
                "memref.load %in2",
                "arith.addf",
                "memref.store",
            ],
        );
    }

    #[test]
    fn a_strided_transposed_conv_tests_divisibility() {
        let mut a = window(&[0; 4], &[2, 2]);
        a.set("output_padding", ints(&[1, 1]));
        let m = lower_one(
            OpKind::ConvTranspose,
            &[t(DType::F32, &[1, 2, 3, 3]), t(DType::F32, &[2, 4, 3, 3])],
            a,
        );
        check_in_order(&m.mlir, &["arith.remsi", "arith.cmpi eq", "arith.divsi", "scf.if"]);
    }
}
