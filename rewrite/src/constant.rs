//! Constants in the e-graph (`Mx::Const`). A constant is either known byte for byte (compared
//! and hashed by its content) or a folded weight whose bytes are deferred (`Tensor::deferred`):
//! compared and hashed by how it is computed (the op, its attributes, its operands). The
//! rewrite offers several forms of each weight (channels last, packed panels, Winograd's
//! filters); deferring them means only the form extraction picks is ever computed, by the file
//! writer, one weight at a time.

use crate::lang::AttrValue;
use mxc_dialects::{eval, Attrs, DType, OpKind, Tensor, TensorType};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

/// A constant tensor (the hash is computed once).
#[derive(Clone, Debug)]
pub struct ConstValue {
    hash: u64,
    pub tensor: Arc<Tensor>,
    identity: Identity,
    /// For integers, the least and the greatest value (found once, when a rule first asks:
    /// rules ask it of weights at every match, `values_in`).
    range: Arc<OnceLock<Option<(i64, i64)>>>,
}

/// What makes two constants the same node.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Identity {
    /// Their bytes.
    Content,
    /// The op that computes a deferred value from its operands.
    Folded(Arc<Recipe>),
    /// A deferred tensor made elsewhere (a program converted back into an e-graph): its bytes,
    /// wherever it goes.
    Shared(usize),
}

/// An op applied to constants.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Recipe {
    kind: OpKind,
    attrs: Vec<AttrValue>,
    operands: Vec<ConstValue>,
}

impl ConstValue {
    /// A constant of `tensor`'s value (a deferred tensor stays deferred).
    pub fn new(tensor: Tensor) -> ConstValue {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        tensor.ty.hash(&mut h);
        let identity = match tensor.deferred_id() {
            Some(id) => {
                id.hash(&mut h);
                Identity::Shared(id)
            }
            None => {
                h.write_u64(content_hash(tensor.bytes()));
                Identity::Content
            }
        };
        ConstValue::with(h.finish(), tensor, identity)
    }

    /// `kind` (with `attrs`, whose leaves are `leaves`) applied to `operands`, giving `ty`:
    /// computed when its bytes are first needed. `kind` must be one `eval` computes for every
    /// operand that type-checks (weight layouts and preprocessing: `defers`).
    pub fn folded(
        kind: OpKind,
        attrs: &Attrs,
        leaves: Vec<AttrValue>,
        operands: &[&ConstValue],
        ty: TensorType,
    ) -> ConstValue {
        let recipe = Recipe {
            kind,
            attrs: leaves,
            operands: operands.iter().map(|&c| c.clone()).collect(),
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        ty.hash(&mut h);
        recipe.kind.hash(&mut h);
        recipe.attrs.hash(&mut h);
        recipe.operands.iter().for_each(|c| c.hash.hash(&mut h));
        let inputs: Vec<Tensor> = operands.iter().map(|c| (*c.tensor).clone()).collect();
        let attrs = attrs.clone();
        let compute = move || {
            // operands computed for this value alone, and dropped with it
            let values: Vec<Tensor> = inputs.iter().map(Tensor::materialized).collect();
            let refs: Vec<&Tensor> = values.iter().collect();
            match eval::eval(kind, &refs, &attrs) {
                Some(Ok(mut results)) if results.len() == 1 => results.remove(0),
                _ => unreachable!("`{kind}` evaluates every operand that type-checks (`defers`)"),
            }
        };
        let tensor = Tensor::deferred(ty, Box::new(compute));
        ConstValue::with(h.finish(), tensor, Identity::Folded(Arc::new(recipe)))
    }

    fn with(hash: u64, tensor: Tensor, identity: Identity) -> ConstValue {
        ConstValue {
            hash,
            tensor: Arc::new(tensor),
            identity,
            range: Arc::new(OnceLock::new()),
        }
    }

    /// For integers of up to 32 bits, the least and the greatest value (none for an empty
    /// tensor, or another element type).
    pub fn range(&self) -> Option<(i64, i64)> {
        let integers = matches!(
            self.tensor.dtype(),
            DType::I8 | DType::U8 | DType::I16 | DType::U16 | DType::I32 | DType::U32
        );
        *self
            .range
            .get_or_init(|| integers.then(|| integer_range(&self.tensor.materialized())).flatten())
    }

    /// Whether the two hold the same value, however each is computed (a deferred value is
    /// computed for the comparison, and not kept).
    pub fn same_value(&self, other: &ConstValue) -> bool {
        if self == other {
            return true;
        }
        let both_known = self.identity == Identity::Content && other.identity == Identity::Content;
        self.tensor.ty == other.tensor.ty
            && !both_known
            && self.tensor.materialized().bytes() == other.tensor.materialized().bytes()
    }
}

/// Whether folding `kind` into a constant of `ty` from `operands` is deferred: a large result
/// (more than `limit` elements) of an op that `eval` computes for every operand that
/// type-checks and that copies (a reshape of known bytes shares them, and is not deferred).
pub fn defers(kind: OpKind, attrs: &Attrs, operands: &[&ConstValue], ty: &TensorType, limit: usize) -> bool {
    use mxc_dialects::Trait::{Evaluable, Preprocessing, WeightLayout};
    let weight_op = kind.has(WeightLayout) || kind.has(Preprocessing) || kind == OpKind::Concat;
    let shares = matches!(kind, OpKind::Identity | OpKind::Reshape);
    ty.num_elements() > limit
        && ty.dtype != DType::Str
        && weight_op
        && kind.has(Evaluable)
        && !attrs.has_symbolic_sizes()
        && (!shares || operands.iter().any(|c| c.tensor.is_deferred()))
}

impl PartialEq for ConstValue {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.tensor, &other.tensor)
            || (self.hash == other.hash
                && self.tensor.ty == other.tensor.ty
                && self.identity == other.identity
                && (self.identity != Identity::Content || self.tensor.bytes() == other.tensor.bytes()))
    }
}

impl Eq for ConstValue {}

impl Hash for ConstValue {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.hash.hash(state);
    }
}

impl PartialOrd for ConstValue {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ConstValue {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.tensor, &other.tensor) {
            return std::cmp::Ordering::Equal;
        }
        self.hash
            .cmp(&other.hash)
            .then_with(|| self.tensor.ty.dtype.cmp(&other.tensor.ty.dtype))
            .then_with(|| self.tensor.ty.shape.cmp(&other.tensor.ty.shape))
            .then_with(|| self.identity.cmp(&other.identity))
            .then_with(|| match self.identity {
                Identity::Content => self.tensor.bytes().cmp(other.tensor.bytes()),
                _ => std::cmp::Ordering::Equal,
            })
    }
}

/// The least and the greatest value of an integer tensor of up to 32 bits (none for an empty
/// one, or another element type).
fn integer_range(t: &Tensor) -> Option<(i64, i64)> {
    let b = t.bytes();
    let values: Box<dyn Iterator<Item = i64>> = match t.dtype() {
        DType::I8 => Box::new(b.iter().map(|&v| v as i8 as i64)),
        DType::U8 => Box::new(b.iter().map(|&v| v as i64)),
        DType::I16 => Box::new(b.chunks_exact(2).map(|v| i16::from_le_bytes([v[0], v[1]]) as i64)),
        DType::U16 => Box::new(b.chunks_exact(2).map(|v| u16::from_le_bytes([v[0], v[1]]) as i64)),
        DType::I32 => Box::new(
            b.chunks_exact(4)
                .map(|v| i32::from_le_bytes([v[0], v[1], v[2], v[3]]) as i64),
        ),
        DType::U32 => Box::new(
            b.chunks_exact(4)
                .map(|v| u32::from_le_bytes([v[0], v[1], v[2], v[3]]) as i64),
        ),
        _ => return None,
    };
    values.fold(None, |r, v| match r {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// A hash of a constant's bytes: all of them, eight at a time, for up to `SAMPLED_ABOVE`
/// bytes; of a larger one (a weight of megabytes, still in the mapped model file) its first and
/// last `EDGE` bytes and `SAMPLES` words spread evenly between, so that importing a model
/// does not read every weight. Equal hashes are confirmed by comparing all the bytes.
fn content_hash(bytes: &[u8]) -> u64 {
    if bytes.len() <= SAMPLED_ABOVE {
        return words_hash(bytes.len() as u64, bytes);
    }
    let n = bytes.len();
    let mut h = words_hash(n as u64, &bytes[..EDGE]);
    h = words_hash(h, &bytes[n - EDGE..]);
    let step = (n - 8) / SAMPLES;
    for i in 0..SAMPLES {
        h = words_hash(h, &bytes[i * step..i * step + 8]);
    }
    h
}

const SAMPLED_ABOVE: usize = 1 << 16;
const EDGE: usize = 4096;
const SAMPLES: usize = 512;

/// `bytes` mixed into `h`, eight at a time.
fn words_hash(mut h: u64, bytes: &[u8]) -> u64 {
    let mix = |h: u64, w: u64| (h ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    let words = bytes.chunks_exact(8);
    let rest = words.remainder();
    for w in words {
        h = mix(h, u64::from_le_bytes(w.try_into().expect("eight bytes")));
    }
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    mix(h, u64::from_le_bytes(last))
}
