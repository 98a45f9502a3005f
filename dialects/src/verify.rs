//! The verifier: a graph is valid when every operand is defined before use, every op's
//! recorded result types are the ones its type rule gives, and the ports are well formed.

use crate::dim::{Dim, Symbol};
use crate::{mx, Def, Graph, IrError, Op, OpKind, ValueId};
use std::collections::{HashMap, HashSet};

pub fn verify(g: &Graph) -> Result<(), IrError> {
    let mut defined = vec![false; g.num_values()];
    let mut names = HashSet::new();
    for (i, p) in g.inputs.iter().enumerate() {
        if !names.insert(&p.name) {
            return Err(IrError::Graph(format!("two inputs are named `{}`", p.name)));
        }
        if g.def(p.value) != Def::Input(i) {
            return Err(IrError::Graph(format!(
                "input `{}` is not bound to its own value",
                p.name
            )));
        }
        defined[p.value.index()] = true;
    }
    for (i, op) in g.ops.iter().enumerate() {
        let at = |message: String| IrError::Op {
            op: format!("op #{i} ({})", op.kind),
            message,
        };
        for v in &op.operands {
            if !defined.get(v.index()).copied().unwrap_or(false) {
                return Err(at(format!("operand %{} is used before it is defined", v.0)));
            }
        }
        check_types(g, op).map_err(at)?;
        for (r, v) in op.results.iter().enumerate() {
            if g.def(*v) != (Def::Op { op: i, result: r }) {
                return Err(at(format!("result {r} is not bound to this op")));
            }
            defined[v.index()] = true;
        }
    }
    check_symbols(g)?;
    let mut names = HashSet::new();
    for p in &g.outputs {
        if !names.insert(&p.name) {
            return Err(IrError::Graph(format!("two outputs are named `{}`", p.name)));
        }
        if !defined.get(p.value.index()).copied().unwrap_or(false) {
            return Err(IrError::Graph(format!("output `{}` is not defined", p.name)));
        }
    }
    Ok(())
}

/// Refuses a graph whose types use one symbol name with different constraints: a name is one
/// size wherever it appears.
fn check_symbols(g: &Graph) -> Result<(), IrError> {
    let mut seen: HashMap<&str, &Symbol> = HashMap::new();
    for v in 0..g.num_values() {
        let dims = g.ty(ValueId(v as u32)).symbolic.iter().flatten();
        for s in dims.flat_map(Dim::symbols) {
            match seen.insert(&s.name, s) {
                Some(before) if before != s => {
                    return Err(IrError::Graph(format!(
                        "symbol {} is {} in one type and {} in another",
                        s.name,
                        Dim::symbol(before.clone()),
                        Dim::symbol(s.clone())
                    )))
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Whether `op` (of `g`, its operands defined) type-checks and records the result types its
/// type rule gives; the parser calls it on each op as it reads it, to name the op's line.
pub(crate) fn check_types(g: &Graph, op: &Op) -> Result<(), String> {
    let operand_types: Vec<_> = op.operands.iter().map(|v| g.ty(*v).clone()).collect();
    let inferred = match op.kind {
        OpKind::Fused if op.attrs.0.is_empty() => mx::fused::infer(op.body.as_deref(), &operand_types),
        OpKind::Fused => Err("takes no attributes".to_string()),
        OpKind::Call => match (op.attrs.str("callee"), op.attrs.0.len()) {
            (Ok(callee), 1) => mx::call::infer(callee, op.body.as_deref(), &operand_types),
            _ => Err("takes one attribute, `callee`, a string".to_string()),
        },
        _ if op.body.is_some() => Err("only mx.fused and mx.call have a body".to_string()),
        kind => mx::infer(kind, &operand_types, &op.attrs),
    }?;
    let recorded: Vec<_> = op.results.iter().map(|v| g.ty(*v).clone()).collect();
    if inferred != recorded {
        let show = |ts: &[crate::TensorType]| ts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ");
        return Err(format!(
            "result types ({}) differ from the inferred ({})",
            show(&recorded),
            show(&inferred)
        ));
    }
    Ok(())
}
