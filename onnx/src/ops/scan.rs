//! Running totals along an axis: `CumSum` and `CumProd` as a log-step scan (after step `s`,
//! each position holds the total of the `2s` positions ending at it: the value shifted by `s`,
//! with the identity shifted in, is combined into it), exact for integers; `exclusive` shifts
//! the input by one first and `reverse` shifts the other way.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::axes;
use super::layout::{concat_values, slice_value, DimSlice};
use mxc_dialects::{OpKind, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("CumSum", |ctx| running(ctx, OpKind::Add, 0.0));
    r.add_all("CumProd", |ctx| running(ctx, OpKind::Mul, 1.0));
}

fn running(ctx: &mut Ctx, combine: OpKind, identity: f64) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let axis_value = ctx.const_number(1, "axis")?;
    let ty = ctx.ty(x).clone();
    if ty.dtype == mxc_dialects::DType::Bool {
        return Err("a running total of a bool tensor is not defined".into());
    }
    let axis = axes::axis(axis_value.get_i64(0), ty.rank())?;
    let scan = Scan {
        axis,
        n: ty.shape[axis],
        reverse: ctx.node.int("reverse", 0)? != 0,
        identity,
    };
    let mut y = x;
    if ctx.node.int("exclusive", 0)? != 0 {
        y = scan.shifted(ctx, y, 1)?;
    }
    Ok(vec![scan.run(ctx, y, combine)?])
}

/// The inclusive running sum of `v` along `axis`, for parsers that need one (`Multinomial`'s
/// cumulative probabilities).
pub fn cumulative_sum(ctx: &mut Ctx, v: ValueId, axis: usize) -> Result<ValueId, String> {
    let scan = Scan {
        axis,
        n: ctx.ty(v).shape[axis],
        reverse: false,
        identity: 0.0,
    };
    scan.run(ctx, v, OpKind::Add)
}

struct Scan {
    axis: usize,
    n: usize,
    reverse: bool,
    identity: f64,
}

impl Scan {
    /// The log-step scan of `v` with `combine`.
    fn run(&self, ctx: &mut Ctx, v: ValueId, combine: OpKind) -> Result<ValueId, String> {
        let mut y = v;
        let mut step = 1;
        while step < self.n {
            let shifted = self.shifted(ctx, y, step)?;
            y = ctx.op(combine, &[y, shifted])?;
            step *= 2;
        }
        Ok(y)
    }

    /// `v` moved `by` positions along the axis, away from its start (towards it when
    /// `reverse`), with the identity filling the positions left empty.
    fn shifted(&self, ctx: &mut Ctx, v: ValueId, by: usize) -> Result<ValueId, String> {
        let ty = ctx.ty(v).clone();
        let by = by.min(self.n);
        let mut fill_shape = ty.shape.clone();
        fill_shape[self.axis] = by;
        let fill = ctx.filled(TensorType::new(ty.dtype, fill_shape), self.identity)?;
        if by == self.n {
            return Ok(fill);
        }
        let (start, end) = if self.reverse {
            (by as i64, self.n as i64)
        } else {
            (0, (self.n - by) as i64)
        };
        let kept = slice_value(ctx, v, &[(self.axis, DimSlice { start, end, step: 1 })])?;
        let parts = if self.reverse {
            vec![kept, fill]
        } else {
            vec![fill, kept]
        };
        concat_values(ctx, parts, self.axis)
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::Tensor;

    fn scan(op: &str, exclusive: i64, reverse: i64) -> Vec<f64> {
        let g = ModelBuilder::new(26)
            .input("x", DataType::Float, &[5])
            .init(i64_tensor("axis", &[], &[0]))
            .node(node(
                op,
                &["x", "axis"],
                &["y"],
                vec![int_attr("exclusive", exclusive), int_attr("reverse", reverse)],
            ))
            .output("y")
            .import()
            .unwrap();
        let x = Tensor::from_f32s(vec![5], &[1., 2., 3., 4., 5.]);
        run(&g, &[x]).unwrap()[0].to_f64_vec()
    }

    #[test]
    fn every_direction_and_start() {
        assert_eq!(scan("CumSum", 0, 0), [1., 3., 6., 10., 15.]);
        assert_eq!(scan("CumSum", 1, 0), [0., 1., 3., 6., 10.]);
        assert_eq!(scan("CumSum", 0, 1), [15., 14., 12., 9., 5.]);
        assert_eq!(scan("CumSum", 1, 1), [14., 12., 9., 5., 0.]);
        assert_eq!(scan("CumProd", 0, 0), [1., 2., 6., 24., 120.]);
        assert_eq!(scan("CumProd", 1, 1), [120., 60., 20., 5., 1.]);
    }
}
