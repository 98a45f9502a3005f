//! A graph of symbolic types at given sizes: every type and symbolic size attribute evaluated
//! at the symbols' values, in the graph, its regions and its fused bodies, and the result
//! verified (each op type-checks at those sizes). This is how a program for one point of a
//! symbolic graph is made without importing the model again, and how `mxc rules check` runs a
//! rewrite it applied over symbolic sizes at sizes of its choice.

use crate::dim::Dim;
use crate::{verify, Attr, Graph, IrError, TensorType, ValueId};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `g` with each symbol at the size `sizes` gives it; a symbol without a size, or a size
/// outside the symbol's range, is an error naming it.
pub fn at_sizes(g: &Graph, sizes: &BTreeMap<String, u64>) -> Result<Graph, IrError> {
    let out = rebuilt(g, sizes)?;
    verify(&out)?;
    Ok(out)
}

fn rebuilt(g: &Graph, sizes: &BTreeMap<String, u64>) -> Result<Graph, IrError> {
    let mut out = Graph::new(&g.name);
    out.interface = g.interface.clone();
    let mut map: Vec<Option<ValueId>> = vec![None; g.num_values()];
    for p in &g.inputs {
        map[p.value.index()] = Some(out.add_input(&p.name, fixed(g.ty(p.value), sizes)?));
    }
    let mapped = |map: &[Option<ValueId>], v: &ValueId| map[v.index()].expect("operands are defined before use");
    for op in &g.ops {
        let operands = op.operands.iter().map(|v| mapped(&map, v)).collect();
        let mut attrs = op.attrs.clone();
        for (name, a) in &op.attrs.0 {
            match a {
                Attr::Sizes(dims) => {
                    let values = dims.iter().map(|d| evaluated(d, sizes).map(|n| n as i64));
                    attrs.set(name, Attr::Ints(values.collect::<Result<_, _>>()?));
                }
                Attr::Graph(region) => attrs.set(name, Attr::Graph(Arc::new(rebuilt(region, sizes)?))),
                _ => {}
            }
        }
        let types = op
            .results
            .iter()
            .map(|r| fixed(g.ty(*r), sizes))
            .collect::<Result<_, _>>()?;
        let results = out.push_op(op.kind, operands, attrs, types);
        if let Some(body) = &op.body {
            out.ops.last_mut().expect("just pushed").body = Some(Arc::new(rebuilt(body, sizes)?));
        }
        for (old, new) in op.results.iter().zip(results) {
            map[old.index()] = Some(new);
        }
    }
    for p in &g.outputs {
        out.add_output(&p.name, mapped(&map, &p.value));
    }
    Ok(out)
}

fn evaluated(d: &Dim, sizes: &BTreeMap<String, u64>) -> Result<u64, IrError> {
    d.eval(sizes).map_err(|e| IrError::Graph(e.to_string()))
}

/// The fixed type `t` takes at `sizes`.
fn fixed(t: &TensorType, sizes: &BTreeMap<String, u64>) -> Result<TensorType, IrError> {
    let Some(dims) = &t.symbolic else {
        return Ok(t.clone());
    };
    let shape = dims.iter().map(|d| evaluated(d, sizes).map(|n| n as usize));
    Ok(TensorType::new(t.dtype, shape.collect::<Result<_, _>>()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{parse, print};

    #[test]
    fn a_symbolic_graph_specialises_to_the_fixed_graph_at_its_sizes() {
        let g = parse(
            r#"graph "g" symbols<b[1..8]{2}, s[1..64]{16}> (%arg0: tensor<(b)x(s)x4xf32> "x") {
  %0 = mx.reshape %arg0 {shape = sizes<(b * s)x4>} : tensor<(b * s)x4xf32>
  %1 = mx.fused %0 : tensor<(b * s)x4xf32> graph "kernel" (%arg0: tensor<(b * s)x4xf32> "in0") {
    %0 = mx.relu %arg0 : tensor<(b * s)x4xf32>
    return "out0" = %0
  }
  return "y" = %1
}
"#,
        )
        .unwrap();
        let sizes = BTreeMap::from([("b".to_string(), 3), ("s".to_string(), 5)]);
        assert_eq!(
            print(&at_sizes(&g, &sizes).unwrap()),
            r#"graph "g" (%arg0: tensor<3x5x4xf32> "x") {
  %0 = mx.reshape %arg0 {shape = [15, 4]} : tensor<15x4xf32>
  %1 = mx.fused %0 : tensor<15x4xf32> graph "kernel" (%arg0: tensor<15x4xf32> "in0") {
    %0 = mx.relu %arg0 : tensor<15x4xf32>
    return "out0" = %0
  }
  return "y" = %1
}
"#
        );
        let outside = BTreeMap::from([("b".to_string(), 9), ("s".to_string(), 5)]);
        let err = at_sizes(&g, &outside).unwrap_err().to_string();
        assert!(err.contains("b is 9, outside its range [1..8]"), "{err}");
        let missing = BTreeMap::from([("b".to_string(), 1)]);
        let err = at_sizes(&g, &missing).unwrap_err().to_string();
        assert!(err.contains("no size is given for s"), "{err}");
    }
}
