//! A static look at the result type of each side of a rule: the element type and rank each
//! side is known to have, from literal attributes, the op's type rule and the conditions
//! `dtype(?x) == T` / `rank(?x) == N`. A rule whose sides provably differ in either is
//! rejected; anything not provable is left to the run-time guard, which refuses to apply a
//! rule whose right side's inferred type differs from the matched value's.

use super::ast::{BinOp, Expr, Lit, OpPat, Pat, RuleDef};
use super::error::Located;
use mxc_dialects::{DType, OpKind};
use std::collections::BTreeMap;

/// What is statically known about a property of a value.
#[derive(Clone, Debug, PartialEq)]
enum Known<T> {
    Is(T),
    /// The same as the named variable's.
    Of(String),
    Unknown,
}

impl<T: PartialEq> Known<T> {
    /// Known when both agree (the result of a same-shaped element-wise op).
    fn join(self, other: Known<T>) -> Known<T> {
        if self == other {
            self
        } else {
            Known::Unknown
        }
    }
}

/// The statically known element type and rank of one side.
struct Sig {
    dtype: Known<DType>,
    rank: Known<usize>,
}

/// Facts the conditions state about variables: `dtype(?x) == f32`, `rank(?x) == 2`.
#[derive(Default)]
struct Stated {
    dtype: BTreeMap<String, DType>,
    rank: BTreeMap<String, usize>,
}

fn collect(e: &Expr, out: &mut Stated) {
    match e {
        Expr::Bin(BinOp::And, a, b, _) => {
            collect(a, out);
            collect(b, out);
        }
        Expr::Bin(BinOp::Eq, a, b, _) => {
            for (f, lit) in [(a, b), (b, a)] {
                if let (Expr::Call(name, args, _), Expr::Lit(lit, _)) = (f.as_ref(), lit.as_ref()) {
                    match (name.as_str(), args.as_slice(), lit) {
                        ("dtype", [Expr::Var(v, _)], Lit::DType(d)) => {
                            out.dtype.insert(v.clone(), *d);
                        }
                        ("rank", [Expr::Var(v, _)], Lit::Int(r)) if *r >= 0 => {
                            out.rank.insert(v.clone(), *r as usize);
                        }
                        _ => {}
                    }
                }
            }
        }
        _ => {}
    }
}

fn attr<'a>(op: &'a OpPat, name: &str) -> Option<&'a Lit> {
    op.attrs.iter().find_map(|(n, _, e)| match e {
        Expr::Lit(lit, _) if n == name => Some(lit),
        _ => None,
    })
}

fn sig(pat: &Pat, stated: &Stated) -> Sig {
    let op = match pat {
        Pat::Var(v, _) => {
            return Sig {
                dtype: stated.dtype.get(v).map_or(Known::Of(v.clone()), |d| Known::Is(*d)),
                rank: stated.rank.get(v).map_or(Known::Of(v.clone()), |r| Known::Is(*r)),
            }
        }
        Pat::Op(op) => op,
        // Result 0 of `layer_norm` is shaped like its input; the statistics are f32.
        Pat::Result(n, inner, _) => {
            return match inner.as_ref() {
                Pat::Op(op) if op.kind == OpKind::LayerNorm && *n == 0 => sig(inner, stated),
                Pat::Op(op) if op.kind == OpKind::LayerNorm => Sig {
                    dtype: Known::Is(DType::F32),
                    rank: sig(&op.operands[0], stated).rank,
                },
                _ => Sig {
                    dtype: Known::Unknown,
                    rank: Known::Unknown,
                },
            }
        }
        Pat::Const(_) => {
            return Sig {
                dtype: Known::Unknown,
                rank: Known::Unknown,
            }
        }
    };
    let operands: Vec<Sig> = op.operands.iter().map(|o| sig(o, stated)).collect();
    let first = || Sig {
        dtype: operands[0].dtype.clone(),
        rank: operands[0].rank.clone(),
    };
    let joined_rank = || {
        operands[1..]
            .iter()
            .fold(operands[0].rank.clone(), |r, o| match (r, &o.rank) {
                (Known::Is(a), Known::Is(b)) => Known::Is(a.max(*b)),
                (r, other) => r.join(other.clone()),
            })
    };
    let list_len = |name: &str| match attr(op, name) {
        Some(Lit::Ints(v)) => Known::Is(v.len()),
        _ => Known::Unknown,
    };
    use OpKind::*;
    match op.kind {
        Cast | BitCast => Sig {
            dtype: match attr(op, "to") {
                Some(Lit::DType(d)) => Known::Is(*d),
                _ => Known::Unknown,
            },
            rank: operands[0].rank.clone(),
        },
        Equal | Less | Greater => Sig {
            dtype: Known::Is(DType::Bool),
            rank: joined_rank(),
        },
        StringConcat => Sig {
            dtype: Known::Is(DType::Str),
            rank: joined_rank(),
        },
        StringCase => Sig {
            dtype: Known::Is(DType::Str),
            rank: operands[0].rank.clone(),
        },
        RegexFullMatch => Sig {
            dtype: Known::Is(DType::Bool),
            rank: operands[0].rank.clone(),
        },
        Add | Sub | Mul | Div | Pow | Max | Min | BitAnd | BitOr | BitXor | ShiftLeft | ShiftRight => Sig {
            dtype: operands[0].dtype.clone(),
            rank: joined_rank(),
        },
        Where => Sig {
            dtype: operands[1].dtype.clone(),
            rank: joined_rank(),
        },
        // the scale's element type, x's shape
        DequantizeLinear => Sig {
            dtype: operands[1].dtype.clone(),
            rank: operands[0].rank.clone(),
        },
        Transpose => Sig {
            dtype: operands[0].dtype.clone(),
            rank: match list_len("perm") {
                Known::Unknown => operands[0].rank.clone(),
                known => known,
            },
        },
        Reshape | Expand => Sig {
            dtype: operands[0].dtype.clone(),
            rank: list_len("shape"),
        },
        Gemm => Sig {
            dtype: operands[0].dtype.clone(),
            rank: Known::Is(2),
        },
        MatMul | Gather | ReduceMean | ReduceSum | ReduceMax => Sig {
            dtype: operands[0].dtype.clone(),
            rank: Known::Unknown,
        },
        // the first operand's element type and rank: the element-wise ops on one operand, and
        // the ops whose result keeps their first operand's rank
        Identity | Not | Sqrt | Exp | Log | Neg | Abs | Reciprocal | Floor | Ceil | Round | Sin | Cos | Tan | Asin
        | Acos | Atan | Relu | LeakyRelu | Sigmoid | Tanh | Erf | Gelu | Clip | Softmax | Conv | ConvTranspose
        | ConvNhwc | ConvNhwcPacked | Attention | MaxPool | AveragePool | MaxPoolNhwc | AveragePoolNhwc
        | GlobalAveragePool | BatchNorm | LayerNorm | Concat | Slice | Scatter => first(),
        MatMulIntegerPacked | ConvNhwcIntegerPacked | ConvNhwcIntegerDepthwise => Sig {
            dtype: Known::Is(DType::I32),
            rank: operands[0].rank.clone(),
        },
        // the first operand's element type, another rank (the kernels' layouts, a fused body)
        MatMulPacked | Pack | WinogradInput | WinogradWeights | WinogradOutput | Fused | Call => Sig {
            dtype: operands[0].dtype.clone(),
            rank: Known::Unknown,
        },
        // a constant's type is its value's; a control op's results are its regions'
        Constant | If | Loop => Sig {
            dtype: Known::Unknown,
            rank: Known::Unknown,
        },
    }
}

/// Rejects a rule whose two sides provably have different element types or ranks.
pub fn check_result_types(rule: &RuleDef) -> Result<(), Located> {
    let mut stated = Stated::default();
    if let Some(cond) = &rule.cond {
        collect(cond, &mut stated);
    }
    let (l, r) = (sig(&rule.lhs, &stated), sig(&rule.rhs, &stated));
    if let (Known::Is(a), Known::Is(b)) = (&l.dtype, &r.dtype) {
        if a != b {
            return Err(Located::new(
                rule.rhs.pos(),
                format!("the left side gives {a} elements, the right side {b}"),
            ));
        }
    }
    if let (Known::Is(a), Known::Is(b)) = (&l.rank, &r.rank) {
        if a != b {
            return Err(Located::new(
                rule.rhs.pos(),
                format!("the left side has rank {a}, the right side rank {b}"),
            ));
        }
    }
    Ok(())
}
