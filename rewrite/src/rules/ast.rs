//! The syntax tree of a rule file: rules made of a left pattern, a right pattern and
//! conditions; expressions compute attribute values and condition results.

use super::error::Pos;
use mxc_dialects::{DType, OpKind};

/// One `rule NAME: LEFT => RIGHT [if COND]` definition.
#[derive(Clone, Debug)]
pub struct RuleDef {
    pub name: String,
    pub pos: Pos,
    pub lhs: Pat,
    pub rhs: Pat,
    pub cond: Option<Expr>,
}

/// A pattern: a variable standing for any value, an op applied to operands, or (on the right
/// side only) a constant computed by a function call such as `scalar(?eps, dtype(?x))`.
#[derive(Clone, Debug)]
pub enum Pat {
    Var(String, Pos),
    Op(OpPat),
    /// A call of a tensor-valued function: a new constant leaf (right side only).
    Const(Expr),
    /// `(result N (op ...))`: result `N` of a multi-result op (right side only).
    Result(u32, Box<Pat>, Pos),
}

/// `(kind operand... name=attr...)`: operands by position, attributes by name.
#[derive(Clone, Debug)]
pub struct OpPat {
    pub kind: OpKind,
    pub pos: Pos,
    pub operands: Vec<Pat>,
    pub attrs: Vec<(String, Pos, Expr)>,
}

impl Pat {
    pub fn pos(&self) -> Pos {
        match self {
            Pat::Var(_, pos) => *pos,
            Pat::Op(op) => op.pos,
            Pat::Const(e) => e.pos(),
            Pat::Result(_, _, pos) => *pos,
        }
    }
}

/// A literal value.
#[derive(Clone, Debug, PartialEq)]
pub enum Lit {
    Int(i64),
    Float(f64),
    Ints(Vec<i64>),
    Floats(Vec<f64>),
    DType(DType),
    Bool(bool),
    Str(String),
}

/// Comparison and logical operators of conditions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

/// An expression: an attribute value on the right side, or a condition.
#[derive(Clone, Debug)]
pub enum Expr {
    Lit(Lit, Pos),
    /// A pattern variable (a tensor operand or an attribute, whichever the left side bound).
    Var(String, Pos),
    /// The value the whole left side matched (conditions only).
    Root(Pos),
    Call(String, Vec<Expr>, Pos),
    Not(Box<Expr>, Pos),
    Bin(BinOp, Box<Expr>, Box<Expr>, Pos),
}

impl Expr {
    pub fn pos(&self) -> Pos {
        match self {
            Expr::Lit(_, p) | Expr::Var(_, p) | Expr::Root(p) | Expr::Call(_, _, p) | Expr::Not(_, p) => *p,
            Expr::Bin(_, _, _, p) => *p,
        }
    }
}
