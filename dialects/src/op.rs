//! The `mx` op kinds, each defined once in the table below: the name it prints under, how
//! many operands it takes, the attributes it carries, and its traits (what passes may assume of
//! it). Its type rule is `mx::infer`'s, its evaluation `eval`'s, its kernel `lowering/src/loops`'s
//! and its cost `rewrite/src/cost.rs`'s: each an exhaustive match, so a new kind is a compile
//! error until every one of them handles it (docs/adding-an-op.md).

use std::fmt;

/// What the rest of the compiler may assume of an op, declared with it in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trait {
    /// Computes each result element from the operand elements at the same (numpy broadcast)
    /// position, with no other memory access: a fused kernel can inline any number.
    Elementwise,
    /// Element-wise and computed by a polynomial or rational function (or a call) rather than
    /// a few instructions: exponentials, logarithms, powers, the logistic function and kin.
    Transcendental,
    /// Its kernel computes each result element once, at its full index, after reading its
    /// operands in its own pattern: a fused kernel may hold one, with element-wise ops applied
    /// to its result before the store (an epilogue: bias, activation, residual).
    Anchor,
    /// `mxc_dialects::eval` computes it, so it folds on constants.
    Evaluable,
    /// Runs regions (graph attributes) on the host instead of being a kernel: the plan holds a
    /// control step for it, and each region's ops are kernels of their own (`mx::control`).
    Control,
    /// An op on strings: no kernel computes it; the plan runs it on the host with `eval`.
    Host,
    /// Weight preprocessing: an element-wise or data-movement op whose result is no larger
    /// than its largest operand (transposing a weight, scaling it per channel, dequantising
    /// it), folded on constants at any size (`rewrite`'s fold policy): it costs time linear in
    /// the weights, never more memory than the largest weight.
    Preprocessing,
    /// Puts weights in the layout a kernel reads (`pack`, `winograd_weights`): folded on
    /// constants at any size, whatever the size of its result; it runs once, at compile time.
    WeightLayout,
    /// A product or convolution whose second operand is weights (a model's, in all but a few:
    /// attention's products of activations are priced as if theirs were too): the cost model
    /// reads their bytes from memory (`rewrite`'s `weight_bytes`).
    Weights,
    /// Moves or compares elements without computing on them, so it takes string operands too
    /// (`mx::strings::applies_to_strings`; the string ops and the control ops take them anyway).
    OnStrings,
}

macro_rules! op_kinds {
    ($($variant:ident => $name:literal, $min:literal..=$max:literal, [$($attr:literal),*], [$($trait:ident),*];)*) => {
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

            /// The attributes the op carries in normalised form, sorted by name: exactly these,
            /// no more (the verifier checks it).
            pub fn attr_names(self) -> &'static [&'static str] {
                match self { $(OpKind::$variant => &[$($attr),*]),* }
            }

            /// The op's traits.
            pub fn traits(self) -> &'static [Trait] {
                match self { $(OpKind::$variant => &[$(Trait::$trait),*]),* }
            }
        }
    };
}

// name, operand counts, attributes (sorted), traits
op_kinds! {
    Constant => "constant", 0..=0, ["value"], [];
    Identity => "identity", 1..=1, [], [Elementwise, Evaluable, Preprocessing, OnStrings];
    Cast => "cast", 1..=1, ["to"], [Elementwise, Evaluable, Preprocessing];
    BitCast => "bitcast", 1..=1, ["to"], [Evaluable];
    Add => "add", 2..=2, [], [Elementwise, Evaluable, Preprocessing];
    Sub => "sub", 2..=2, [], [Elementwise, Evaluable, Preprocessing];
    Mul => "mul", 2..=2, [], [Elementwise, Evaluable, Preprocessing];
    Div => "div", 2..=2, [], [Elementwise, Evaluable, Preprocessing];
    Pow => "pow", 2..=2, [], [Elementwise, Transcendental];
    Max => "max", 2..=2, [], [Elementwise, Evaluable, Preprocessing];
    Min => "min", 2..=2, [], [Elementwise, Evaluable, Preprocessing];
    Equal => "equal", 2..=2, [], [Elementwise, Evaluable, OnStrings];
    Less => "less", 2..=2, [], [Elementwise, Evaluable];
    Greater => "greater", 2..=2, [], [Elementwise, Evaluable];
    Where => "where", 3..=3, [], [Elementwise, Evaluable, OnStrings];
    Not => "not", 1..=1, [], [Elementwise, Evaluable];
    Sqrt => "sqrt", 1..=1, [], [Elementwise, Evaluable, Preprocessing];
    Exp => "exp", 1..=1, [], [Elementwise, Transcendental];
    Log => "log", 1..=1, [], [Elementwise, Transcendental];
    Neg => "neg", 1..=1, [], [Elementwise, Evaluable, Preprocessing];
    Abs => "abs", 1..=1, [], [Elementwise, Evaluable, Preprocessing];
    Reciprocal => "reciprocal", 1..=1, [], [Elementwise, Evaluable, Preprocessing];
    Floor => "floor", 1..=1, [], [Elementwise, Evaluable, Preprocessing];
    Ceil => "ceil", 1..=1, [], [Elementwise, Evaluable, Preprocessing];
    Round => "round", 1..=1, [], [Elementwise, Evaluable, Preprocessing];
    Sin => "sin", 1..=1, [], [Elementwise, Transcendental, Evaluable];
    Cos => "cos", 1..=1, [], [Elementwise, Transcendental, Evaluable];
    Tan => "tan", 1..=1, [], [Elementwise, Transcendental, Evaluable];
    Asin => "asin", 1..=1, [], [Elementwise, Transcendental, Evaluable];
    Acos => "acos", 1..=1, [], [Elementwise, Transcendental, Evaluable];
    Atan => "atan", 1..=1, [], [Elementwise, Transcendental, Evaluable];
    BitAnd => "bit_and", 2..=2, [], [Elementwise, Evaluable];
    BitOr => "bit_or", 2..=2, [], [Elementwise, Evaluable];
    BitXor => "bit_xor", 2..=2, [], [Elementwise, Evaluable];
    ShiftLeft => "shift_left", 2..=2, [], [Elementwise, Evaluable];
    ShiftRight => "shift_right", 2..=2, [], [Elementwise, Evaluable];
    Relu => "relu", 1..=1, [], [Elementwise, Evaluable];
    LeakyRelu => "leaky_relu", 1..=1, ["alpha"], [Elementwise];
    Sigmoid => "sigmoid", 1..=1, [], [Elementwise, Transcendental];
    Tanh => "tanh", 1..=1, [], [Elementwise, Transcendental];
    Erf => "erf", 1..=1, [], [Elementwise, Transcendental];
    Gelu => "gelu", 1..=1, ["approximate"], [Elementwise, Transcendental];
    Clip => "clip", 3..=3, [], [Elementwise];
    DequantizeLinear => "dequantize_linear", 3..=3, [], [Elementwise, Evaluable, Preprocessing];
    Softmax => "softmax", 1..=1, ["axis"], [Anchor];
    Conv => "conv", 2..=3, ["dilations", "group", "pads", "strides"], [Anchor, Weights];
    ConvTranspose => "conv_transpose", 2..=3, ["dilations", "group", "output_padding", "pads", "strides"], [Anchor, Weights];
    ConvNhwc => "conv_nhwc", 2..=3, ["dilations", "group", "pads", "strides"], [Anchor, Weights];
    Gemm => "gemm", 2..=3, ["alpha", "beta", "trans_a", "trans_b"], [Anchor, Weights];
    MatMul => "matmul", 2..=2, [], [Anchor, Weights];
    MatMulPacked => "matmul_packed", 2..=2, ["n"], [Anchor, Weights];
    ConvNhwcPacked => "conv_nhwc_packed", 2..=3, ["dilations", "group", "kernel", "out_channels", "pads", "strides"], [Anchor, Weights];
    MatMulIntegerPacked => "matmul_integer_packed", 4..=4, ["n"], [Anchor, Weights];
    ConvNhwcIntegerPacked => "conv_nhwc_integer_packed", 4..=4, ["dilations", "kernel", "out_channels", "pads", "strides"], [Anchor, Weights];
    ConvNhwcIntegerDepthwise => "conv_nhwc_integer_depthwise", 3..=3, ["dilations", "kernel", "pads", "strides"], [Anchor, Weights];
    Pack => "pack", 1..=1, ["panel"], [Evaluable, WeightLayout];
    WinogradInput => "winograd_input", 1..=1, ["pads"], [];
    WinogradWeights => "winograd_weights", 1..=1, [], [Evaluable, WeightLayout];
    WinogradOutput => "winograd_output", 1..=1, ["shape"], [Anchor];
    Attention => "attention", 3..=4, ["layout", "scale", "zero_nan_rows"], [];
    MaxPool => "max_pool", 1..=1, ["ceil_mode", "dilations", "kernel", "pads", "strides"], [Anchor];
    AveragePool => "average_pool", 1..=1, ["ceil_mode", "count_include_pad", "dilations", "kernel", "pads", "strides"], [Anchor];
    MaxPoolNhwc => "max_pool_nhwc", 1..=1, ["ceil_mode", "dilations", "kernel", "pads", "strides"], [Anchor];
    AveragePoolNhwc => "average_pool_nhwc", 1..=1, ["ceil_mode", "count_include_pad", "dilations", "kernel", "pads", "strides"], [Anchor];
    GlobalAveragePool => "global_average_pool", 1..=1, [], [Anchor];
    BatchNorm => "batch_norm", 5..=5, ["epsilon"], [Anchor];
    LayerNorm => "layer_norm", 2..=3, ["axis", "epsilon"], [];
    Reshape => "reshape", 1..=1, ["shape"], [Evaluable, Preprocessing, OnStrings];
    Transpose => "transpose", 1..=1, ["perm"], [Evaluable, Preprocessing, OnStrings];
    Concat => "concat", 1..=4096, ["axis"], [Evaluable, OnStrings];
    Slice => "slice", 1..=1, ["ends", "starts", "steps"], [Evaluable, Preprocessing, OnStrings];
    Gather => "gather", 2..=2, ["axis"], [Evaluable, OnStrings];
    Scatter => "scatter", 3..=3, ["reduction"], [Evaluable];
    Expand => "expand", 1..=1, ["shape"], [Evaluable, OnStrings];
    ReduceMean => "reduce_mean", 1..=1, ["axes", "keepdims"], [Anchor, Evaluable];
    ReduceSum => "reduce_sum", 1..=1, ["axes", "keepdims"], [Anchor, Evaluable];
    ReduceMax => "reduce_max", 1..=1, ["axes", "keepdims"], [Anchor, Evaluable];
    Fused => "fused", 1..=4096, [], [];
    Call => "call", 1..=4096, ["callee"], [];
    If => "if", 1..=4096, ["else_branch", "then_branch"], [Control];
    Loop => "loop", 2..=4096, ["body", "carried", "iterations"], [Control];
    StringConcat => "string_concat", 2..=2, [], [Evaluable, Host];
    StringCase => "string_case", 1..=1, ["to"], [Evaluable, Host];
    RegexFullMatch => "regex_full_match", 1..=1, ["pattern"], [Evaluable, Host];
}

impl OpKind {
    pub fn has(self, t: Trait) -> bool {
        self.traits().contains(&t)
    }

    /// See `Trait::Elementwise`.
    pub fn is_elementwise(self) -> bool {
        self.has(Trait::Elementwise)
    }

    /// See `Trait::Transcendental`.
    pub fn is_transcendental(self) -> bool {
        self.has(Trait::Transcendental)
    }

    /// See `Trait::Anchor`.
    pub fn is_fusion_anchor(self) -> bool {
        self.has(Trait::Anchor)
    }

    /// See `Trait::Control`.
    pub fn is_control(self) -> bool {
        self.has(Trait::Control)
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
