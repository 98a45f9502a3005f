//! `NonMaxSuppression` (opsets 10, 11), as the ONNX reference implementation selects boxes:
//! for each batch and class, the boxes scoring above `score_threshold` (strictly; all of them
//! without one), by score descending (ties in order of position), each kept unless its IoU
//! with a box kept before it is above `iou_threshold`, at most `max_output_boxes_per_class`
//! (0 when absent) of them; `[selected, 3]` int64 rows of (batch, class, box). Arithmetic is
//! in f32, as the reference's. `center_point_box` 0: boxes are two opposite corners
//! `[y1, x1, y2, x2]` in either order; 1: `[x_center, y_center, width, height]`.

use super::super::super::ctx::Ctx;
use super::{float_order, known_input, opt_known_input};
use mxc_dialects::{DType, Tensor, ValueId};

pub(super) fn non_max_suppression(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let centered = match ctx.node.int("center_point_box", 0)? {
        0 => false,
        1 => true,
        c => return Err(format!("attribute `center_point_box` is {c}, not 0 or 1")),
    };
    let boxes = of_type(known_input(ctx, 0, "boxes")?, "boxes", DType::F32)?;
    let scores = of_type(known_input(ctx, 1, "scores")?, "scores", DType::F32)?;
    let limit =
        scalar_input(ctx, 2, "max_output_boxes_per_class", DType::I64)?.map_or(0, |t| t.get_i64(0).max(0) as usize);
    let iou_threshold = scalar_input(ctx, 3, "iou_threshold", DType::F32)?.map_or(0.0, |t| t.get_f64(0) as f32);
    let score_threshold = scalar_input(ctx, 4, "score_threshold", DType::F32)?.map(|t| t.get_f64(0) as f32);
    let (batches, count) = match *boxes.shape() {
        [b, n, 4] => (b, n),
        _ => return Err(format!("boxes must be [batches, boxes, 4], got {}", boxes.ty)),
    };
    let classes = match *scores.shape() {
        [b, c, n] if (b, n) == (batches, count) => c,
        _ => {
            return Err(format!(
                "scores must be [{batches}, classes, {count}] for boxes {}, got {}",
                boxes.ty, scores.ty
            ))
        }
    };
    let mut selected = Vec::new();
    for b in 0..batches {
        let rects: Vec<Rect> = (0..count)
            .map(|i| Rect::of(&boxes, (b * count + i) * 4, centered))
            .collect();
        for c in 0..classes {
            let row = (b * classes + c) * count;
            let scores: Vec<f32> = (0..count).map(|i| scores.get_f64(row + i) as f32).collect();
            let candidates = candidates(&scores, score_threshold);
            for i in suppress(&rects, candidates, iou_threshold, limit) {
                selected.extend([b as i64, c as i64, i as i64]);
            }
        }
    }
    let shape = vec![selected.len() / 3, 3];
    Ok(vec![ctx.constant(Tensor::from_i64s(DType::I64, shape, &selected))])
}

/// `t` (input `name`), checked to be of `dtype`.
fn of_type(t: Tensor, name: &str, dtype: DType) -> Result<Tensor, String> {
    if t.dtype() != dtype {
        return Err(format!("input \"{name}\" must be {dtype}, got {}", t.ty));
    }
    Ok(t)
}

/// Optional input `i`, one value of `dtype`: `None` when it is left out or empty (as the
/// reference reads it).
fn scalar_input(ctx: &Ctx, i: usize, name: &str, dtype: DType) -> Result<Option<Tensor>, String> {
    let Some(t) = opt_known_input(ctx, i, name)? else {
        return Ok(None);
    };
    let t = of_type(t, name, dtype)?;
    match t.len() {
        0 => Ok(None),
        1 => Ok(Some(t)),
        _ => Err(format!("input \"{name}\" must hold one value, got {}", t.ty)),
    }
}

/// The boxes scoring above `threshold` (all without one), by score descending, ties in
/// order of position.
fn candidates(scores: &[f32], threshold: Option<f32>) -> Vec<usize> {
    let mut boxes: Vec<usize> = (0..scores.len())
        .filter(|&i| threshold.is_none_or(|t| scores[i] > t))
        .collect();
    boxes.sort_by(|&a, &b| float_order(scores[b] as f64, scores[a] as f64));
    boxes
}

/// The boxes of `candidates` kept, in that order: each one whose IoU with every box kept
/// before it is at most `threshold`, until `limit` are.
fn suppress(rects: &[Rect], candidates: Vec<usize>, threshold: f32, limit: usize) -> Vec<usize> {
    let mut kept: Vec<usize> = Vec::new();
    for i in candidates {
        if kept.len() >= limit {
            break;
        }
        if kept.iter().all(|&k| !rects[i].overlaps(&rects[k], threshold)) {
            kept.push(i);
        }
    }
    kept
}

/// A box as its extents `(min, max)` along x and y.
struct Rect {
    x: (f32, f32),
    y: (f32, f32),
}

impl Rect {
    /// The box whose 4 values start at element `at` of `boxes`.
    fn of(boxes: &Tensor, at: usize, centered: bool) -> Rect {
        let v: [f32; 4] = std::array::from_fn(|k| boxes.get_f64(at + k) as f32);
        if centered {
            let (half_w, half_h) = (v[2] / 2.0, v[3] / 2.0);
            Rect {
                x: (v[0] - half_w, v[0] + half_w),
                y: (v[1] - half_h, v[1] + half_h),
            }
        } else {
            Rect {
                x: (v[1].min(v[3]), v[1].max(v[3])),
                y: (v[0].min(v[2]), v[0].max(v[2])),
            }
        }
    }

    fn area(&self) -> f32 {
        (self.x.1 - self.x.0) * (self.y.1 - self.y.0)
    }

    /// Whether the IoU of the two boxes is above `threshold` (boxes that do not intersect,
    /// or of no area, never are).
    fn overlaps(&self, other: &Rect, threshold: f32) -> bool {
        let x = (self.x.0.max(other.x.0), self.x.1.min(other.x.1));
        let y = (self.y.0.max(other.y.0), self.y.1.min(other.y.1));
        if x.1 <= x.0 || y.1 <= y.0 {
            return false;
        }
        let intersection = (x.1 - x.0) * (y.1 - y.0);
        let (a, b) = (self.area(), other.area());
        let union = a + b - intersection;
        if intersection <= 0.0 || a <= 0.0 || b <= 0.0 || union <= 0.0 {
            return false;
        }
        intersection / union > threshold
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::super::proto::tensor_proto::DataType;
    use super::super::super::super::proto::AttributeProto;
    use super::super::super::super::testutil::*;
    use super::super::testing::outputs;

    /// The boxes of onnx's NonMaxSuppression examples, in one batch: two clusters of three
    /// overlapping unit boxes and one apart (y1, x1, y2, x2).
    const BOXES: [f32; 24] = [
        0.0, 0.0, 1.0, 1.0, 0.0, 0.1, 1.0, 1.1, 0.0, -0.1, 1.0, 0.9, //
        0.0, 10.0, 1.0, 11.0, 0.0, 10.1, 1.0, 11.1, 0.0, 100.0, 1.0, 101.0,
    ];
    const SCORES: [f32; 6] = [0.9, 0.75, 0.6, 0.95, 0.5, 0.3];

    /// NMS of `boxes` and `scores` (one batch, one class) with the optional inputs given.
    fn nms(
        boxes: &[f32],
        scores: &[f32],
        limit: i64,
        iou: f32,
        score: Option<f32>,
        attrs: Vec<AttributeProto>,
    ) -> ModelBuilder {
        let n = scores.len() as i64;
        let mut b = ModelBuilder::new(11)
            .init(f32_tensor("boxes", &[1, n, 4], boxes))
            .init(f32_tensor("scores", &[1, 1, n], scores))
            .init(i64_tensor("limit", &[1], &[limit]))
            .init(f32_tensor("iou", &[1], &[iou]));
        let mut inputs = vec!["boxes", "scores", "limit", "iou"];
        if let Some(s) = score {
            b = b.init(f32_tensor("score", &[1], &[s]));
            inputs.push("score");
        }
        b.node(node("NonMaxSuppression", &inputs, &["selected"], attrs))
            .output("selected")
    }

    fn selected(b: ModelBuilder) -> Vec<i64> {
        let out = &outputs(b)[0];
        assert_eq!(out.shape(), [out.len() / 3, 3]);
        out.to_i64_vec()
    }

    #[test]
    fn keeps_the_best_box_of_each_cluster() {
        // box 3 (0.95), then 0 (0.9); 1 and 2 overlap 0 by IoU 0.9/1.1 and 4 overlaps 3;
        // box 5 (0.3) stands apart
        let out = selected(nms(&BOXES, &SCORES, 3, 0.5, Some(0.0), vec![]));
        assert_eq!(out, [0, 0, 3, 0, 0, 0, 0, 0, 5]);
        // a score threshold of 0.4 drops box 5; a limit of 2 stops after two boxes
        assert_eq!(
            selected(nms(&BOXES, &SCORES, 3, 0.5, Some(0.4), vec![])),
            [0, 0, 3, 0, 0, 0]
        );
        assert_eq!(selected(nms(&BOXES, &SCORES, 2, 0.5, None, vec![])), [0, 0, 3, 0, 0, 0]);
    }

    #[test]
    fn center_boxes_and_equal_scores() {
        // the same boxes as centres and sizes select the same ones
        let centered: Vec<f32> = BOXES
            .chunks(4)
            .flat_map(|b| [(b[1] + b[3]) / 2.0, (b[0] + b[2]) / 2.0, b[3] - b[1], b[2] - b[0]])
            .collect();
        let b = nms(
            &centered,
            &SCORES,
            3,
            0.5,
            Some(0.0),
            vec![int_attr("center_point_box", 1)],
        );
        assert_eq!(selected(b), [0, 0, 3, 0, 0, 0, 0, 0, 5]);
        // identical boxes with equal scores: the first is kept; IoU 1 is not above 1
        let same = [0.0, 0.0, 1.0, 1.0].repeat(3);
        assert_eq!(selected(nms(&same, &[0.9; 3], 3, 0.5, None, vec![])), [0, 0, 0]);
        assert_eq!(
            selected(nms(&same, &[0.9; 3], 3, 1.0, None, vec![])),
            [0, 0, 0, 0, 0, 1, 0, 0, 2]
        );
        // corners in either order: (1, 1, 0, 0) is box (0, 0, 1, 1)
        let flipped = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0];
        assert_eq!(selected(nms(&flipped, &[0.5, 0.9], 3, 0.5, None, vec![])), [0, 0, 1]);
    }

    #[test]
    fn bad_attributes_shapes_and_run_time_inputs_are_refused() {
        let e = nms(&BOXES, &SCORES, 3, 0.5, None, vec![int_attr("center_point_box", 2)]).error();
        assert!(e.contains("attribute `center_point_box` is 2, not 0 or 1"), "{e}");
        let shapes = |boxes: &[i64], scores: &[i64]| {
            let n = |dims: &[i64]| dims.iter().product::<i64>() as usize;
            ModelBuilder::new(11)
                .init(f32_tensor("boxes", boxes, &vec![0.0; n(boxes)]))
                .init(f32_tensor("scores", scores, &vec![0.0; n(scores)]))
                .node(node("NonMaxSuppression", &["boxes", "scores"], &["selected"], vec![]))
                .output("selected")
                .error()
        };
        let e = shapes(&[1, 5, 2], &[1, 1, 5]);
        assert!(e.contains("boxes must be [batches, boxes, 4], got"), "{e}");
        let e = shapes(&[1, 5, 4], &[2, 1, 5]);
        assert!(e.contains("scores must be [1, classes, 5] for boxes"), "{e}");
        let e = ModelBuilder::new(11)
            .init(f32_tensor("boxes", &[1, 1, 4], &BOXES[..4]))
            .input("scores", DataType::Float, &[1, 1, 1])
            .node(node("NonMaxSuppression", &["boxes", "scores"], &["selected"], vec![]))
            .output("selected")
            .error();
        assert!(
            e.contains(
                "NonMaxSuppression's output shape depends on the values of input \"scores\", known only \
                 at run time: not supported"
            ),
            "{e}"
        );
    }
}
