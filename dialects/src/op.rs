//! The `mx` op kinds: the names they print under and how many operands they take.

use std::fmt;

macro_rules! op_kinds {
    ($($variant:ident => $name:literal, $min:literal..=$max:literal;)*) => {
        /// Every op of the `mx` dialect.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum OpKind { $($variant),* }

        impl OpKind {
            pub const ALL: &'static [OpKind] = &[$(OpKind::$variant),*];

            /// The name without the dialect prefix (`conv`, `reduce_sum`, ...).
            pub fn name(self) -> &'static str {
                match self { $(OpKind::$variant => $name),* }
            }

            /// The inclusive range of operand counts the op accepts.
            pub fn arity(self) -> (usize, usize) {
                match self { $(OpKind::$variant => ($min, $max)),* }
            }
        }
    };
}

op_kinds! {
    Constant => "constant", 0..=0;
    Identity => "identity", 1..=1;
    Cast => "cast", 1..=1;
    BitCast => "bitcast", 1..=1;
    Add => "add", 2..=2;
    Sub => "sub", 2..=2;
    Mul => "mul", 2..=2;
    Div => "div", 2..=2;
    Pow => "pow", 2..=2;
    Max => "max", 2..=2;
    Min => "min", 2..=2;
    Equal => "equal", 2..=2;
    Less => "less", 2..=2;
    Greater => "greater", 2..=2;
    Where => "where", 3..=3;
    Not => "not", 1..=1;
    Sqrt => "sqrt", 1..=1;
    Exp => "exp", 1..=1;
    Log => "log", 1..=1;
    Neg => "neg", 1..=1;
    Abs => "abs", 1..=1;
    Reciprocal => "reciprocal", 1..=1;
    Floor => "floor", 1..=1;
    Ceil => "ceil", 1..=1;
    Sin => "sin", 1..=1;
    Cos => "cos", 1..=1;
    Tan => "tan", 1..=1;
    Asin => "asin", 1..=1;
    Acos => "acos", 1..=1;
    Atan => "atan", 1..=1;
    BitAnd => "bit_and", 2..=2;
    BitOr => "bit_or", 2..=2;
    BitXor => "bit_xor", 2..=2;
    ShiftLeft => "shift_left", 2..=2;
    ShiftRight => "shift_right", 2..=2;
    Relu => "relu", 1..=1;
    LeakyRelu => "leaky_relu", 1..=1;
    Sigmoid => "sigmoid", 1..=1;
    Tanh => "tanh", 1..=1;
    Erf => "erf", 1..=1;
    Gelu => "gelu", 1..=1;
    Clip => "clip", 3..=3;
    Softmax => "softmax", 1..=1;
    Conv => "conv", 2..=3;
    ConvTranspose => "conv_transpose", 2..=3;
    ConvNhwc => "conv_nhwc", 2..=3;
    Gemm => "gemm", 2..=3;
    MatMul => "matmul", 2..=2;
    MatMulPacked => "matmul_packed", 2..=2;
    ConvNhwcPacked => "conv_nhwc_packed", 2..=3;
    Pack => "pack", 1..=1;
    WinogradInput => "winograd_input", 1..=1;
    WinogradWeights => "winograd_weights", 1..=1;
    WinogradOutput => "winograd_output", 1..=1;
    Attention => "attention", 3..=4;
    MaxPool => "max_pool", 1..=1;
    AveragePool => "average_pool", 1..=1;
    MaxPoolNhwc => "max_pool_nhwc", 1..=1;
    AveragePoolNhwc => "average_pool_nhwc", 1..=1;
    GlobalAveragePool => "global_average_pool", 1..=1;
    BatchNorm => "batch_norm", 5..=5;
    LayerNorm => "layer_norm", 2..=3;
    Reshape => "reshape", 1..=1;
    Transpose => "transpose", 1..=1;
    Concat => "concat", 1..=4096;
    Slice => "slice", 1..=1;
    Gather => "gather", 2..=2;
    Scatter => "scatter", 3..=3;
    Expand => "expand", 1..=1;
    ReduceMean => "reduce_mean", 1..=1;
    ReduceSum => "reduce_sum", 1..=1;
    ReduceMax => "reduce_max", 1..=1;
    Fused => "fused", 1..=4096;
}

impl OpKind {
    /// Ops that compute each result element from the operand elements at the same (numpy
    /// broadcast) position, with no other memory access: a fused kernel can inline any number.
    pub fn is_elementwise(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            Identity
                | Cast
                | Add
                | Sub
                | Mul
                | Div
                | Pow
                | Max
                | Min
                | Equal
                | Less
                | Greater
                | Where
                | Not
                | Sqrt
                | Exp
                | Log
                | Neg
                | Abs
                | Reciprocal
                | Floor
                | Ceil
                | Sin
                | Cos
                | Tan
                | Asin
                | Acos
                | Atan
                | BitAnd
                | BitOr
                | BitXor
                | ShiftLeft
                | ShiftRight
                | Relu
                | LeakyRelu
                | Sigmoid
                | Tanh
                | Erf
                | Gelu
                | Clip
        )
    }

    /// Element-wise ops computed by a polynomial or rational function (or a call) rather than
    /// a few instructions: exponentials, logarithms, powers, the logistic function and kin.
    pub fn is_transcendental(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            Exp | Log | Pow | Sigmoid | Tanh | Erf | Gelu | Sin | Cos | Tan | Asin | Acos | Atan
        )
    }

    /// Ops whose kernel computes each result element once, at its full index, after reading
    /// its operands in its own pattern: a fused kernel may hold one of them, with element-wise
    /// ops applied to its result before the store (an epilogue: bias, activation, residual).
    pub fn is_fusion_anchor(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            Conv | ConvTranspose
                | ConvNhwc
                | ConvNhwcPacked
                | Gemm
                | MatMul
                | MatMulPacked
                | WinogradOutput
                | MaxPool
                | AveragePool
                | MaxPoolNhwc
                | AveragePoolNhwc
                | GlobalAveragePool
                | BatchNorm
                | Softmax
                | ReduceMean
                | ReduceSum
                | ReduceMax
        )
    }

    pub fn from_name(name: &str) -> Option<OpKind> {
        OpKind::ALL.iter().copied().find(|k| k.name() == name)
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "mx.{}", self.name())
    }
}
