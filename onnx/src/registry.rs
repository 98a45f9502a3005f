//! The op-parser registry: parsers keyed by (domain, op type), each valid for a range of opset
//! versions, looked up with the version the model imports for the node's domain.

use super::ctx::Ctx;
use mxc_dialects::ValueId;
use std::collections::HashMap;
use std::sync::OnceLock;

/// A parser: builds the node into the graph and returns its outputs in order (a parser may
/// return fewer values than the node declares; asking for a missing one is an error).
pub type ParseFn = fn(&mut Ctx) -> Result<Vec<ValueId>, String>;

/// The highest opset version there is, as the end of an open range.
pub const LATEST: i64 = i64::MAX;

/// The newest opset of the default domain whose operators the parsers were written against
/// (onnx 1.23's): a model importing a newer one is refused, since a newer version of an
/// operator may add an attribute or a meaning that a parser would not see.
pub const NEWEST_OPSET: i64 = 28;

struct Entry {
    domain: &'static str,
    since: i64,
    until: i64,
    parse: ParseFn,
}

/// The inputs that may hold strings, by op (the ONNX schemas' type constraints): the domain,
/// the op type, the positions, and the position from which every input may (a variadic
/// input). A string tensor given to any other input is refused before the op's parser sees
/// it, since parsers make numbers of such inputs.
#[rustfmt::skip]
const STRING_INPUTS: &[(&str, &str, &[usize], Option<usize>)] = &[
    // the default domain
    ("", "Cast", &[0], None),
    ("", "CastLike", &[0, 1], None),
    ("", "CenterCropPad", &[0], None),
    ("", "Col2Im", &[0], None),
    ("", "Compress", &[0], None),
    ("", "Concat", &[], Some(0)),
    ("", "ConcatFromSequence", &[0], None),
    ("", "DepthToSpace", &[0], None),
    ("", "Equal", &[0, 1], None),
    ("", "Expand", &[0], None),
    ("", "Flatten", &[0], None),
    ("", "Gather", &[0], None),
    ("", "GatherElements", &[0], None),
    ("", "GatherND", &[0], None),
    ("", "GridSample", &[0], None),
    ("", "Identity", &[0], None),
    ("", "Loop", &[], Some(2)),
    ("", "NonZero", &[0], None),
    ("", "OneHot", &[2], None),
    ("", "Optional", &[0], None),
    ("", "OptionalGetElement", &[0], None),
    ("", "OptionalHasElement", &[0], None),
    ("", "Pad", &[0, 2], None),
    ("", "RandomNormalLike", &[0], None),
    ("", "RandomUniformLike", &[0], None),
    ("", "RegexFullMatch", &[0], None),
    ("", "Reshape", &[0], None),
    ("", "Resize", &[0], None),
    ("", "ReverseSequence", &[0], None),
    ("", "Scan", &[], Some(0)),
    ("", "Scatter", &[0, 2], None),
    ("", "ScatterElements", &[0, 2], None),
    ("", "ScatterND", &[0, 2], None),
    ("", "SequenceAt", &[0], None),
    ("", "SequenceConstruct", &[], Some(0)),
    ("", "SequenceErase", &[0], None),
    ("", "SequenceInsert", &[0, 1], None),
    ("", "SequenceLength", &[0], None),
    ("", "SequenceMap", &[0], Some(1)),
    ("", "Shape", &[0], None),
    ("", "Size", &[0], None),
    ("", "Slice", &[0], None),
    ("", "SpaceToDepth", &[0], None),
    ("", "Split", &[0], None),
    ("", "SplitToSequence", &[0], None),
    ("", "Squeeze", &[0], None),
    ("", "StringConcat", &[0, 1], None),
    ("", "StringNormalizer", &[0], None),
    ("", "StringSplit", &[0], None),
    ("", "TensorScatter", &[0, 1], None),
    ("", "TfIdfVectorizer", &[0], None),
    ("", "Tile", &[0], None),
    ("", "Transpose", &[0], None),
    ("", "Trilu", &[0], None),
    ("", "Unique", &[0], None),
    ("", "Unsqueeze", &[0], None),
    ("", "Upsample", &[0], None),
    ("", "Where", &[1, 2], None),
    // ai.onnx.ml
    ("ai.onnx.ml", "ArrayFeatureExtractor", &[0], None),
    ("ai.onnx.ml", "CastMap", &[0], None),
    ("ai.onnx.ml", "CategoryMapper", &[0], None),
    ("ai.onnx.ml", "DictVectorizer", &[0], None),
    ("ai.onnx.ml", "LabelEncoder", &[0], None),
    ("ai.onnx.ml", "OneHotEncoder", &[0], None),
];

/// The ops of the default domain whose parsers import values of symbolic dimensions: each
/// builds mx ops whose type rules take symbolic types, and reads no size of its inputs to
/// make a constant or an attribute unless it handles the size as a dimension (`Flatten`'s
/// products, a legacy `Softmax`'s matrix, a `Reshape` target's `0` and `-1`, the axes
/// `Squeeze` and `Unsqueeze` drop and insert) or refuses a symbolic one (`auto_pad` `SAME_*`
/// over a stride, `MaxPool`'s indices, training-mode `BatchNormalization`, a `Gather`'s
/// constant index past a symbolic axis's least size, a `Split` of a symbolic axis, a `Resize`
/// other than a nearest upsampling by whole scales, a `ConvTranspose` whose pads an
/// `output_shape` or `SAME_*` padding would set from the sizes). A node of any
/// other op reading a symbolic value is refused by name: its parser may compute with the
/// sizes at the cost point (`Shape` would make them constants).
#[rustfmt::skip]
const SYMBOLIC_OPS: &[&str] = &[
    "Abs", "Add", "And", "AveragePool", "BatchNormalization", "Cast", "Ceil", "Clip", "Concat", "Conv", "ConvTranspose", "Cos", "Div",
    "Equal", "Erf", "Exp", "Expand", "Flatten", "Floor", "Gather", "GatherND", "Gemm", "GlobalAveragePool", "Greater", "GreaterOrEqual",
    "Identity", "IsNaN", "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "MatMul", "Max", "MaxPool", "Min",
    "Mul", "Neg", "Not", "Or", "Pow", "Reciprocal", "ReduceMax", "ReduceMean", "ReduceSum", "Relu",
    "Reshape", "Resize", "Round", "Shape", "Sigmoid", "Sin", "Size", "Slice", "Softmax", "Split", "Sqrt", "Squeeze", "Sub",
    "Tanh", "Transpose", "Unsqueeze", "Upsample", "Where", "Xor",
];

/// Whether input `k` of `op` is a shape its parser reads as sizes (`Ctx::sizes_input`), so
/// that it may be one computed from symbolic sizes: a `Reshape`'s or `Expand`'s target, a
/// `Slice`'s starts and ends, `ConstantOfShape`'s shape, a `Range`'s limit.
pub fn reads_shape(op: &str, k: usize) -> bool {
    matches!(
        (op, k),
        ("Reshape", 1) | ("Slice", 1 | 2) | ("Expand", 1) | ("ConstantOfShape", 0) | ("Range", 1)
    )
}

/// Whether a node of `op` of `domain` may read values of symbolic dimensions (`SYMBOLIC_OPS`).
pub fn imports_symbolic(domain: &str, op: &str) -> bool {
    domain.is_empty() && SYMBOLIC_OPS.contains(&op)
}

/// Whether input `i` of `op` of `domain` may hold strings (`STRING_INPUTS`).
pub fn takes_strings(domain: &str, op: &str, i: usize) -> bool {
    STRING_INPUTS
        .iter()
        .find(|(d, o, _, _)| *d == domain && *o == op)
        .is_some_and(|(_, _, at, rest)| at.contains(&i) || rest.is_some_and(|r| i >= r))
}

/// An op mxc imports: its domain (`""` for the default one), op type and the opset versions
/// (`since..=until`; `until` is `LATEST` for an open range) its parser covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpSupport {
    pub domain: &'static str,
    pub op_type: &'static str,
    pub since: i64,
    pub until: i64,
}

/// Parsers by op type, then domain (the default domain is `""`) and opset range.
#[derive(Default)]
pub struct Registry {
    parsers: HashMap<&'static str, Vec<Entry>>,
}

impl Registry {
    /// The parsers of every op mxc imports.
    pub fn standard() -> &'static Registry {
        static STANDARD: OnceLock<Registry> = OnceLock::new();
        STANDARD.get_or_init(|| {
            let mut r = Registry::default();
            super::ops::register(&mut r);
            r
        })
    }

    /// Registers `parse` for `op` of `domain` at opset versions `since..=until`.
    pub fn add(&mut self, domain: &'static str, op: &'static str, since: i64, until: i64, parse: ParseFn) {
        self.parsers.entry(op).or_default().push(Entry {
            domain,
            since,
            until,
            parse,
        });
    }

    /// Registers `parse` for `op` of the default domain at every opset version.
    pub fn add_all(&mut self, op: &'static str, parse: ParseFn) {
        self.add("", op, 1, LATEST, parse);
    }

    /// Every op a parser is registered for: its domain, op type and first and last opset
    /// version, sorted.
    pub fn ops(&self) -> Vec<OpSupport> {
        let mut ops: Vec<OpSupport> = (self.parsers.iter())
            .flat_map(|(op, entries)| {
                entries.iter().map(|e| OpSupport {
                    domain: e.domain,
                    op_type: op,
                    since: e.since,
                    until: e.until,
                })
            })
            .collect();
        ops.sort_by_key(|o| (o.domain, o.op_type, o.since));
        ops
    }

    /// The parser of `op` in `domain` at `opset`.
    pub fn find(&self, domain: &str, op: &str, opset: i64) -> Option<ParseFn> {
        let entries = self.parsers.get(op)?;
        entries
            .iter()
            .find(|e| e.domain == domain && (e.since..=e.until).contains(&opset))
            .map(|e| e.parse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &mut Ctx) -> Result<Vec<ValueId>, String> {
        Ok(vec![])
    }

    #[test]
    fn strings_are_taken_only_where_the_schema_allows_them() {
        assert!(takes_strings("", "Gather", 0) && !takes_strings("", "Gather", 1));
        assert!(takes_strings("", "Concat", 5), "every input of a variadic list");
        assert!(!takes_strings("", "Loop", 1) && takes_strings("", "Loop", 3));
        assert!(!takes_strings("", "Where", 0) && takes_strings("", "Where", 2));
        assert!(!takes_strings("", "Add", 0) && !takes_strings("ai.onnx.ml", "Gather", 0));
        assert!(takes_strings("ai.onnx.ml", "LabelEncoder", 0));
    }

    #[test]
    fn the_standard_ops_are_listed_once_each_in_order() {
        let ops = Registry::standard().ops();
        assert!(ops.iter().any(|o| o.domain.is_empty() && o.op_type == "Conv"));
        assert!(ops.iter().any(|o| o.domain == "com.microsoft"));
        assert!(ops
            .windows(2)
            .all(|w| (w[0].domain, w[0].op_type, w[0].since) < (w[1].domain, w[1].op_type, w[1].since)));
    }

    #[test]
    fn lookup_honours_opset_ranges() {
        let mut r = Registry::default();
        r.add("", "Foo", 1, 12, none);
        r.add("", "Foo", 13, LATEST, none);
        assert!(r.find("", "Foo", 11).is_some());
        assert!(r.find("", "Foo", 21).is_some());
        assert!(r.find("", "Foo", 0).is_none());
        assert!(r.find("com.example", "Foo", 13).is_none());
        assert!(Registry::standard().find("", "Conv", 17).is_some());
    }
}
