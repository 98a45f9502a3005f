//! Block rearrangements and masks with static shapes: `DepthToSpace` and `SpaceToDepth` as
//! reshape, transpose, reshape; `Trilu` as a `where` with a constant triangular mask.

use super::super::ctx::Ctx;
use super::super::registry::Registry;
use super::super::tensor::check_constant;
use super::shape::reshape;
use mxc_dialects::{Attr, Attrs, DType, OpKind, Tensor, TensorType, ValueId};

pub fn register(r: &mut Registry) {
    r.add_all("DepthToSpace", depth_to_space);
    r.add_all("SpaceToDepth", space_to_depth);
    r.add_all("Trilu", trilu);
}

/// Input 0 as [N, C, H, W] and the `blocksize` attribute.
fn image_and_block(ctx: &Ctx) -> Result<(ValueId, [usize; 4], usize), String> {
    let x = ctx.input(0)?;
    let [n, c, h, w] = ctx.ty(x).shape[..] else {
        return Err(format!("input must be N x C x H x W, got shape {:?}", ctx.ty(x).shape));
    };
    let b = ctx.node.opt_int("blocksize")?.ok_or("missing attribute `blocksize`")?;
    let b = usize::try_from(b)
        .ok()
        .filter(|&b| b > 0 && b <= 1 << 16)
        .ok_or(format!("invalid blocksize {b}"))?;
    Ok((x, [n, c, h, w], b))
}

/// `x` reshaped to `split`, transposed by `perm`, reshaped to `out`.
fn shuffle(ctx: &mut Ctx, x: ValueId, split: &[usize], perm: &[i64], out: &[usize]) -> Result<Vec<ValueId>, String> {
    let s = reshape(ctx, x, split)?;
    let t = ctx.build1(
        OpKind::Transpose,
        vec![s],
        Attrs::new().with("perm", Attr::Ints(perm.to_vec())),
    )?;
    Ok(vec![reshape(ctx, t, out)?])
}

fn depth_to_space(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, [n, c, h, w], b) = image_and_block(ctx)?;
    if c % (b * b) != 0 {
        return Err(format!("channels {c} do not divide into blocks of {b} x {b}"));
    }
    let d = c / (b * b);
    let out = [n, d, h * b, w * b];
    match ctx.node.string("mode", "DCR")?.as_str() {
        "DCR" => shuffle(ctx, x, &[n, b, b, d, h, w], &[0, 3, 4, 1, 5, 2], &out),
        "CRD" => shuffle(ctx, x, &[n, d, b, b, h, w], &[0, 1, 4, 2, 5, 3], &out),
        other => Err(format!("unknown mode \"{other}\" (known: DCR, CRD)")),
    }
}

fn space_to_depth(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let (x, [n, c, h, w], b) = image_and_block(ctx)?;
    if h % b != 0 || w % b != 0 {
        return Err(format!("height {h} and width {w} do not divide into blocks of {b}"));
    }
    let split = [n, c, h / b, b, w / b, b];
    let out = [n, c * b * b, h / b, w / b];
    // the block's offsets ahead of the channel (DCR) or after it (CRD, since opset 28)
    match ctx.node.string("mode", "DCR")?.as_str() {
        "DCR" => shuffle(ctx, x, &split, &[0, 3, 5, 1, 2, 4], &out),
        "CRD" => shuffle(ctx, x, &split, &[0, 1, 3, 5, 2, 4], &out),
        other => Err(format!("unknown mode \"{other}\" (known: DCR, CRD)")),
    }
}

/// Trilu: the elements on and above (`upper`) or on and below diagonal `k` of the last two
/// dims, zeros elsewhere.
fn trilu(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    let [.., rows, cols] = ty.shape[..] else {
        return Err(format!("input must have rank 2 or more, got shape {:?}", ty.shape));
    };
    let k = ctx
        .opt_const_input(1, "k")?
        .map_or(0, |t| if t.is_empty() { 0 } else { t.get_i64(0) });
    let upper = ctx.node.int("upper", 1)? != 0;
    check_constant(&TensorType::new(DType::Bool, vec![rows, cols]))?;
    let keep: Vec<i64> = (0..rows * cols)
        .map(|i| {
            let diagonal = (i % cols) as i64 - (i / cols) as i64;
            (if upper { diagonal >= k } else { diagonal <= k }) as i64
        })
        .collect();
    let mask = ctx.constant(Tensor::from_i64s(DType::Bool, vec![rows, cols], &keep));
    let zero = ctx.zero(ty.dtype);
    Ok(vec![ctx.build1(OpKind::Where, vec![mask, x, zero], Attrs::new())?])
}

#[cfg(test)]
mod tests {
    use super::super::super::proto::tensor_proto::DataType;
    use super::super::super::testutil::*;
    use mxc_dialects::{eval, DType, Tensor};

    #[test]
    fn depth_to_space_is_a_shuffle() {
        let text = ModelBuilder::new(13)
            .input("x", DataType::Float, &[1, 8, 2, 3])
            .node(node(
                "DepthToSpace",
                &["x"],
                &["y"],
                vec![int_attr("blocksize", 2), str_attr("mode", "CRD")],
            ))
            .output("y")
            .text();
        assert!(text.contains("{shape = [1, 2, 2, 2, 2, 3]}"), "{text}");
        assert!(text.contains("{perm = [0, 1, 4, 2, 5, 3]}"), "{text}");
        assert!(text.contains("{shape = [1, 2, 4, 6]} : tensor<1x2x4x6xf32>"), "{text}");
    }

    /// SpaceToDepth of `x[0, c, h, w] = 100 c + 10 h + w` (2 channels of 4 x 4, blocks of 2).
    fn space_to_depth(mode: &str) -> Result<Tensor, String> {
        let g = ModelBuilder::new(28)
            .input("x", DataType::Float, &[1, 2, 4, 4])
            .node(node(
                "SpaceToDepth",
                &["x"],
                &["y"],
                vec![int_attr("blocksize", 2), str_attr("mode", mode)],
            ))
            .output("y")
            .import()
            .map_err(|e| e.to_string())?;
        let values: Vec<f64> = (0..32)
            .map(|i| (100 * (i / 16) + 10 * (i / 4 % 4) + i % 4) as f64)
            .collect();
        let x = Tensor::from_f64s(DType::F32, vec![1, 2, 4, 4], &values);
        Ok(eval::run(&g, &[x])?.remove(0))
    }

    #[test]
    fn space_to_depth_orders_blocks_as_its_mode_says() {
        for (mode, channel) in [
            // output channel of input channel c at block offset (bh, bw)
            (
                "DCR",
                (|c, bh, bw| (bh * 2 + bw) * 2 + c) as fn(usize, usize, usize) -> usize,
            ),
            ("CRD", |c, bh, bw| c * 4 + bh * 2 + bw),
        ] {
            let y = space_to_depth(mode).unwrap();
            assert_eq!(y.ty.shape, vec![1, 8, 2, 2]);
            for (c, bh, bw, i, j) in (0..32).map(|k| (k / 16, k / 8 % 2, k / 4 % 2, k / 2 % 2, k % 2)) {
                let at = (channel(c, bh, bw) * 2 + i) * 2 + j;
                let want = (100 * c + 10 * (2 * i + bh) + 2 * j + bw) as f64;
                assert_eq!(
                    y.get_f64(at),
                    want,
                    "{mode}: channel {c}, block ({bh}, {bw}), pixel ({i}, {j})"
                );
            }
        }
        let unknown = space_to_depth("RDC").unwrap_err();
        assert!(
            unknown.contains("SpaceToDepth") && unknown.contains("unknown mode \"RDC\""),
            "{unknown}"
        );
    }

    #[test]
    fn trilu_masks_a_triangle() {
        let text = ModelBuilder::new(14)
            .input("x", DataType::Float, &[2, 3])
            .node(node("Trilu", &["x"], &["y"], vec![int_attr("upper", 0)]))
            .output("y")
            .text();
        assert!(text.contains("dense<[1, 0, 0, 1, 1, 0]> : tensor<2x3xbool>"), "{text}");
    }
}
