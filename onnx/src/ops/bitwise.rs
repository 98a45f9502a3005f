//! Bit operations on integers: `BitwiseAnd`, `BitwiseOr`, `BitwiseXor`, `BitwiseNot` (an
//! exclusive or with every bit set) and `BitShift` (`direction` "LEFT" or "RIGHT").

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use mxc_dialects::{OpKind, Tensor, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("BitwiseAnd", |ctx| binary(ctx, OpKind::BitAnd));
    r.add_all("BitwiseOr", |ctx| binary(ctx, OpKind::BitOr));
    r.add_all("BitwiseXor", |ctx| binary(ctx, OpKind::BitXor));
    r.add_all("BitwiseNot", bitwise_not);
    r.add_all("BitShift", bit_shift);
}

fn binary(ctx: &mut Ctx, kind: OpKind) -> Result<Vec<ValueId>, String> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    Ok(vec![ctx.op(kind, &[a, b])?])
}

fn bitwise_not(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let dtype = ctx.ty(x).dtype;
    if !dtype.is_int() {
        return Err(format!("operand must be an integer, got {dtype}"));
    }
    // -1 has every bit set in every width (encoded truncated for the unsigned types)
    let ones = ctx.constant(Tensor::from_i64s(dtype, vec![], &[-1]));
    Ok(vec![ctx.op(OpKind::BitXor, &[x, ones])?])
}

fn bit_shift(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let kind = match ctx.node.opt_string("direction")?.as_deref() {
        Some("LEFT") => OpKind::ShiftLeft,
        Some("RIGHT") => OpKind::ShiftRight,
        Some(other) => return Err(format!("direction {other:?} is not \"LEFT\" or \"RIGHT\"")),
        None => return Err("missing attribute `direction`".into()),
    };
    binary(ctx, kind)
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use mxc_dialects::eval::run;
    use mxc_dialects::{DType, Tensor};

    fn shift(direction: &str) -> ModelBuilder {
        ModelBuilder::new(11)
            .input("x", DataType::Uint8, &[3])
            .input("n", DataType::Uint8, &[3])
            .node(node(
                "BitShift",
                &["x", "n"],
                &["y"],
                vec![str_attr("direction", direction)],
            ))
            .output("y")
    }

    #[test]
    fn shifts_drop_the_bits_moved_out() {
        let x = Tensor::from_i64s(DType::U8, vec![3], &[0b1001_0110, 1, 255]);
        let n = Tensor::from_i64s(DType::U8, vec![3], &[1, 7, 8]);
        let left = run(&shift("LEFT").import().unwrap(), &[x.clone(), n.clone()]).unwrap();
        assert_eq!(left[0].to_i64_vec(), [0b0010_1100, 128, 0]);
        let right = run(&shift("RIGHT").import().unwrap(), &[x, n]).unwrap();
        assert_eq!(right[0].to_i64_vec(), [0b0100_1011, 0, 0]);
        let err = shift("UP").error();
        assert!(err.contains("direction \"UP\" is not"), "{err}");
    }
}
