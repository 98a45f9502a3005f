//! Host steps: an op the plan runs on the host with the evaluator (`crate::eval`) instead of a
//! kernel, reading its operand buffers and writing its result buffers. These are the ops on
//! strings (`Trait::Host`, and data movement or `equal` of strings): a string buffer holds
//! 8-byte handles into the strings of a run, which the runtime resolves before the step and
//! interns after it.

use super::{PlanError, Program};
use crate::{mx, Attr, Attrs, OpKind, TensorType, Trait};

/// Runs op `kind` with `attrs` on the values of `operands`, writing `results`.
#[derive(Clone, Debug, PartialEq)]
pub struct HostStep {
    pub kind: OpKind,
    pub attrs: Attrs,
    pub operands: Vec<usize>,
    pub results: Vec<usize>,
}

impl Program {
    /// Checks a host step: an op the evaluator computes, attributes that are plain values, its
    /// buffers in range, its results temporaries of the types its operands give.
    pub(super) fn validate_host(&self, s: &HostStep) -> Result<(), PlanError> {
        let at = |m: String| PlanError(format!("host step `{}`: {m}", s.kind));
        if !s.kind.has(Trait::Evaluable) || s.kind.is_control() {
            return Err(at("the op is not one the host evaluates".into()));
        }
        if let Some((name, _)) = s
            .attrs
            .0
            .iter()
            .find(|(_, a)| matches!(a, Attr::Tensor(_) | Attr::Graph(_) | Attr::Sizes(_)))
        {
            return Err(at(format!(
                "attribute `{name}` is a tensor, graph or symbolic sizes, not a plain value"
            )));
        }
        let types = |buffers: &[usize]| -> Result<Vec<TensorType>, PlanError> {
            buffers.iter().map(|&b| Ok(self.buffer(b)?.ty.clone())).collect()
        };
        let (operands, results) = (types(&s.operands)?, types(&s.results)?);
        let inferred = mx::infer(s.kind, &operands, &s.attrs).map_err(at)?;
        if inferred != results {
            let list = |t: &[TensorType]| t.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            return Err(at(format!(
                "its operands give {}, its result buffers are {}",
                list(&inferred),
                list(&results)
            )));
        }
        self.temps(&s.results, "a host step's result")
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Binding, Buffer, BufferKind, Item, Program};
    use super::*;
    use crate::{DType, Tensor};

    /// `y = x ++ ["a", "b"]` and `m = y == ["a", "b"]`, both host steps.
    fn program() -> Program {
        let strings = |kind| Buffer {
            ty: TensorType::new(DType::Str, vec![2]),
            kind,
        };
        let words = Tensor::from_strings(vec![2], vec!["a".into(), "b".into()]);
        let host = |kind, operands, results| {
            Item::Host(Box::new(HostStep {
                kind,
                attrs: Attrs::new(),
                operands,
                results,
            }))
        };
        let binding = |name: &str, buffer| Binding {
            name: name.into(),
            buffer,
        };
        Program {
            buffers: vec![
                strings(BufferKind::Input(0)),
                strings(BufferKind::Constant(words)),
                strings(BufferKind::Temp),
                Buffer {
                    ty: TensorType::new(DType::Bool, vec![2]),
                    kind: BufferKind::Temp,
                },
            ],
            kernels: Vec::new(),
            steps: Vec::new(),
            main: vec![
                host(OpKind::StringConcat, vec![0, 1], vec![2]),
                host(OpKind::Equal, vec![2, 1], vec![3]),
            ],
            inputs: vec![binding("x", 0)],
            outputs: vec![binding("y", 2), binding("m", 3)],
            interface: Default::default(),
            symbols: Vec::new(),
        }
    }

    fn refusal(change: impl Fn(&mut HostStep)) -> String {
        let mut p = program();
        let Item::Host(s) = &mut p.main[0] else { unreachable!() };
        change(s);
        let memory = p.memory_plan();
        p.validate(&memory).unwrap_err().to_string()
    }

    #[test]
    fn host_steps_are_checked_against_their_buffers() {
        let p = program();
        p.validate(&p.memory_plan()).unwrap();
        let err = refusal(|s| s.results = vec![3]);
        assert!(
            err.contains("host step `mx.string_concat`: its operands give tensor<2xstring>, its result buffers are tensor<2xbool>"),
            "{err}"
        );
        let err = refusal(|s| s.results = vec![1]);
        assert!(
            err.contains("a host step's result is buffer 1, which is not a temporary"),
            "{err}"
        );
        let err = refusal(|s| s.operands = vec![0, 9]);
        assert!(err.contains("names buffer 9 of 4"), "{err}");
        let err = refusal(|s| s.kind = OpKind::Sub);
        assert!(err.contains("does not apply to strings"), "{err}");
        let err = refusal(|s| s.kind = OpKind::Loop);
        assert!(err.contains("not one the host evaluates"), "{err}");
        let err = refusal(|s| s.attrs.set("to", Attr::Tensor(Tensor::from_f32s(vec![1], &[1.0]))));
        assert!(
            err.contains("attribute `to` is a tensor, graph or symbolic sizes"),
            "{err}"
        );
    }
}
