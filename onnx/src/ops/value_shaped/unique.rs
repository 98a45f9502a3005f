//! `Unique` (opsets 11, 28), as `numpy.unique` finds them: the distinct elements of the input
//! flattened, or its distinct slices along `axis` (compared element by element in row-major
//! order), sorted ascending (`sorted` 1, NaN last) or in the order they first occur
//! (`sorted` 0); with the position each first occurs at, the number of its group for each
//! item of the input, and how many items each has. Flattened, all NaNs are one value (numpy's
//! `equal_nan`); slices holding a NaN are distinct from every other slice.

use super::super::super::ctx::Ctx;
use super::super::axes;
use super::{float_order, i64_vector, known_input, take};
use mxc_dialects::{DType, Tensor, ValueId};
use std::cmp::Ordering;

pub(super) fn unique(ctx: &mut Ctx) -> Result<Vec<ValueId>, String> {
    let x = known_input(ctx, 0, "X")?;
    let sorted = match ctx.node.int("sorted", 1)? {
        0 => false,
        1 => true,
        s => return Err(format!("attribute `sorted` is {s}, not 0 or 1")),
    };
    let axis = match ctx.node.opt_int("axis")? {
        None => None,
        Some(a) => Some(axes::axis(a, x.shape().len()).map_err(|e| format!("attribute `axis`: {e}"))?),
    };
    let items = Items::new(&x, axis);
    let groups = items.groups(sorted);
    let firsts: Vec<usize> = groups.iter().map(|g| g[0]).collect();
    let mut inverse = vec![0; items.count];
    for (number, group) in groups.iter().enumerate() {
        for &k in group {
            inverse[k] = number as i64;
        }
    }
    let counts: Vec<i64> = groups.iter().map(|g| g.len() as i64).collect();
    // the input as a constant, to gather from (the value itself where it is one already)
    let source = match ctx.input(0)? {
        v if ctx.graph().constant_value(v).is_some() => v,
        _ => ctx.constant(x),
    };
    let y = take(ctx, source, axis, &firsts)?;
    let firsts: Vec<i64> = firsts.iter().map(|&f| f as i64).collect();
    Ok(vec![
        y,
        i64_vector(ctx, &firsts),
        i64_vector(ctx, &inverse),
        i64_vector(ctx, &counts),
    ])
}

/// A tensor's elements as they compare: integers exactly, floats by `float_order`.
enum Values {
    Ints(Vec<i128>),
    Floats(Vec<f64>),
}

impl Values {
    fn of(t: &Tensor) -> Values {
        match t.dtype() {
            d if d.is_float() => Values::Floats(t.to_f64_vec()),
            DType::U64 => Values::Ints((0..t.len()).map(|i| t.get_i64(i) as u64 as i128).collect()),
            _ => Values::Ints((0..t.len()).map(|i| t.get_i64(i) as i128).collect()),
        }
    }

    fn order(&self, i: usize, j: usize) -> Ordering {
        match self {
            Values::Ints(v) => v[i].cmp(&v[j]),
            Values::Floats(v) => float_order(v[i], v[j]),
        }
    }

    fn is_nan(&self, i: usize) -> bool {
        matches!(self, Values::Floats(v) if v[i].is_nan())
    }
}

/// What `Unique` compares: the `count` items of the input, each `outer` runs of `inner`
/// elements (the input as `[outer, count, inner]` around the axis; flattened, each item is
/// one element).
struct Items {
    values: Values,
    outer: usize,
    count: usize,
    inner: usize,
    /// Whether items are slices (compared as numpy compares them, so NaN is not equal to
    /// itself) rather than elements (where all NaNs are one value).
    slices: bool,
}

impl Items {
    fn new(x: &Tensor, axis: Option<usize>) -> Items {
        let shape = x.shape();
        let (outer, count, inner) = match axis {
            Some(a) => (shape[..a].iter().product(), shape[a], shape[a + 1..].iter().product()),
            None => (1, x.len(), 1),
        };
        Items {
            values: Values::of(x),
            outer,
            count,
            inner,
            slices: axis.is_some(),
        }
    }

    /// The flat positions of item `k`'s elements, in order.
    fn elements(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.outer).flat_map(move |o| {
            let start = (o * self.count + k) * self.inner;
            start..start + self.inner
        })
    }

    /// Items in lexicographic order of their elements.
    fn order(&self, a: usize, b: usize) -> Ordering {
        self.elements(a)
            .zip(self.elements(b))
            .map(|(i, j)| self.values.order(i, j))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }

    fn same(&self, a: usize, b: usize) -> bool {
        self.order(a, b).is_eq() && !(self.slices && self.elements(a).any(|i| self.values.is_nan(i)))
    }

    /// The items grouped by value, each group in ascending order of position; the groups in
    /// ascending order of value (`sorted`), or of their first positions.
    fn groups(&self, sorted: bool) -> Vec<Vec<usize>> {
        let mut order: Vec<usize> = (0..self.count).collect();
        order.sort_by(|&a, &b| self.order(a, b)); // stable: equal items keep their order
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for k in order {
            match groups.last_mut() {
                Some(group) if self.same(group[group.len() - 1], k) => group.push(k),
                _ => groups.push(vec![k]),
            }
        }
        if !sorted {
            groups.sort_by_key(|g| g[0]);
        }
        groups
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::super::proto::tensor_proto::DataType;
    use super::super::super::super::proto::{AttributeProto, TensorProto};
    use super::super::super::super::testutil::*;
    use super::super::testing::outputs;
    use mxc_dialects::Tensor;

    fn unique(x: TensorProto, attrs: Vec<AttributeProto>) -> Vec<Tensor> {
        outputs(
            ModelBuilder::new(11)
                .init(x)
                .node(node("Unique", &["x"], &["y", "indices", "inverse", "counts"], attrs))
                .output("y")
                .output("indices")
                .output("inverse")
                .output("counts"),
        )
    }

    /// Y's shape and values, then indices, inverse_indices and counts.
    fn check(out: &[Tensor], y_shape: &[usize], y: &[f64], indices: &[i64], inverse: &[i64], counts: &[i64]) {
        assert_eq!(out[0].shape(), y_shape);
        assert_eq!(out[0].to_f64_vec(), y);
        assert_eq!(out[1].to_i64_vec(), indices);
        assert_eq!(out[2].to_i64_vec(), inverse);
        assert_eq!(out[3].to_i64_vec(), counts);
    }

    #[test]
    fn the_spec_examples_without_an_axis() {
        // example 1: in order of first occurrence
        let x = i64_tensor("x", &[6], &[2, 1, 1, 3, 4, 3]);
        let out = unique(x, vec![int_attr("sorted", 0)]);
        assert_eq!(out[0].dtype(), mxc_dialects::DType::I64);
        check(
            &out,
            &[4],
            &[2., 1., 3., 4.],
            &[0, 1, 3, 4],
            &[0, 1, 1, 2, 3, 2],
            &[1, 2, 2, 1],
        );
        // example 2: sorted, the input flattened
        let x = i64_tensor("x", &[2, 2], &[1, 3, 2, 3]);
        check(
            &unique(x, vec![]),
            &[3],
            &[1., 2., 3.],
            &[0, 2, 1],
            &[0, 2, 1, 2],
            &[1, 1, 2],
        );
    }

    #[test]
    fn the_spec_examples_with_an_axis() {
        // example 3
        let x = i64_tensor("x", &[3, 3], &[1, 0, 0, 1, 0, 0, 2, 3, 4]);
        let out = unique(x, vec![int_attr("axis", 0)]);
        check(&out, &[2, 3], &[1., 0., 0., 2., 3., 4.], &[0, 2], &[0, 0, 1], &[2, 1]);
        // example 4, the axis given as -2
        let x = f32_tensor(
            "x",
            &[2, 4, 2],
            &[1., 1., 0., 1., 2., 1., 0., 1., 1., 1., 0., 1., 2., 1., 0., 1.],
        );
        let out = unique(x, vec![int_attr("axis", -2)]);
        let y = [0., 1., 1., 1., 2., 1., 0., 1., 1., 1., 2., 1.];
        check(&out, &[2, 3, 2], &y, &[1, 0, 2], &[1, 0, 2, 0], &[2, 1, 1]);
    }

    #[test]
    fn nans_are_one_value_flattened_but_distinct_slices() {
        // as numpy.unique: NaN sorts last; -0 and 0 are equal (the first one's sign is kept)
        let x = f32_tensor("x", &[6], &[2., f32::NAN, 1., f32::NAN, -0., 0.]);
        let out = unique(x, vec![]);
        let y = out[0].to_f64_vec();
        assert_eq!(y[..3], [0., 1., 2.]);
        assert!(y[0].is_sign_negative() && y[3].is_nan());
        assert_eq!(out[1].to_i64_vec(), [4, 2, 0, 1]);
        assert_eq!(out[2].to_i64_vec(), [2, 3, 1, 3, 0, 0]);
        assert_eq!(out[3].to_i64_vec(), [2, 1, 1, 2]);
        let x = f32_tensor("x", &[3, 2], &[1., f32::NAN, 1., 0., 1., f32::NAN]);
        let out = unique(x, vec![int_attr("axis", 0)]);
        assert_eq!(out[1].to_i64_vec(), [1, 0, 2]);
        assert_eq!(out[3].to_i64_vec(), [1, 1, 1]);
    }

    #[test]
    fn bad_attributes_and_run_time_inputs_are_refused() {
        let b = |attrs| {
            ModelBuilder::new(11)
                .init(i64_tensor("x", &[2], &[1, 1]))
                .node(node("Unique", &["x"], &["y"], attrs))
                .output("y")
        };
        let e = b(vec![int_attr("sorted", 2)]).error();
        assert!(e.contains("attribute `sorted` is 2, not 0 or 1"), "{e}");
        let e = b(vec![int_attr("axis", 1)]).error();
        assert!(e.contains("attribute `axis`: axis 1 is out of range for rank 1"), "{e}");
        let e = ModelBuilder::new(11)
            .input("x", DataType::Int64, &[2])
            .node(node("Unique", &["x"], &["y"], vec![]))
            .output("y")
            .error();
        assert!(
            e.contains(
                "Unique's output shape depends on the values of input \"X\", known only at run time: not supported"
            ),
            "{e}"
        );
    }
}
