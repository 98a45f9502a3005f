//! `mx.call`: a kernel that a library computes, as IREE's ukernel op names one. Its `callee`
//! attribute names the library function and its body is what the call computes, in the form
//! of an `mx.fused` body (`mx::fused`), so whatever reads a fused op (the evaluator, the
//! generated kernel that runs where the library is absent, `mxc verify`) reads a call too.
//! A callee takes only the bodies it computes exactly; `recognise` gives the call's
//! parameters from the body, which the plan records and the runtime hands the library:
//!
//! - `blaslt.matmul` (hipBLASLt on AMD GPUs, cuBLASLt on NVIDIA GPUs): a matrix product of
//!   f32 matrices, batched with the same or one shared matrix per operand (`matmul`), or a
//!   `gemm` whose C is a row vector added with `beta = 1`; then optionally a row vector added
//!   (the bias epilogue) and `relu`. Not GELU: neither library documents which form of GELU
//!   its GELU epilogue computes (the exact one or the tanh approximation, which differ by up
//!   to 4e-4), so a GELU stays a generated kernel after the call.
//! - `miopen.conv_forward` (MIOpen, AMD GPUs): a 2-D f32 convolution with symmetric pads,
//!   any group count, with its bias operand if it has one.

use super::fused;
use crate::{Def, Graph, OpKind, TensorType};
use std::fmt;

/// A library function a call may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Callee {
    BlasLtMatmul,
    MiopenConvForward,
}

impl Callee {
    pub const ALL: [Callee; 2] = [Callee::BlasLtMatmul, Callee::MiopenConvForward];

    /// The name the `callee` attribute holds.
    pub fn name(self) -> &'static str {
        match self {
            Callee::BlasLtMatmul => "blaslt.matmul",
            Callee::MiopenConvForward => "miopen.conv_forward",
        }
    }

    pub fn from_name(name: &str) -> Option<Callee> {
        Callee::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The libraries that compute it, for messages and `mxc explain`.
    pub fn libraries(self) -> &'static str {
        match self {
            Callee::BlasLtMatmul => "hipBLASLt on AMD GPUs, cuBLASLt on NVIDIA GPUs",
            Callee::MiopenConvForward => "MIOpen on AMD GPUs",
        }
    }
}

impl fmt::Display for Callee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The activation a matrix product's epilogue applies last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    None,
    Relu,
}

/// `blaslt.matmul`'s parameters: `batch` products of row-major matrices, A `m x k` (stored
/// `k x m` when `trans_a`), B `k x n` (`n x k` when `trans_b`), the result `m x n`, each
/// operand advancing by its stride in elements from one product to the next (0: one matrix for
/// all); the result is `activation(alpha * A B + bias)`, `bias` a vector of `n` added to every
/// row. Operands are named by their index among the call's operands.
#[derive(Clone, Debug, PartialEq)]
pub struct MatmulCall {
    pub batch: u64,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub trans_a: bool,
    pub trans_b: bool,
    pub stride_a: u64,
    pub stride_b: u64,
    pub alpha: f32,
    pub a: usize,
    pub b: usize,
    pub bias: Option<usize>,
    pub activation: Activation,
}

/// `miopen.conv_forward`'s parameters: an NCHW image `batch x channels x height x width`
/// convolved with `out_channels x channels/group x kernel_h x kernel_w` weights, pads the same
/// on both sides, then the bias (one value per output channel) added when there is one.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvCall {
    pub batch: u64,
    pub channels: u64,
    pub height: u64,
    pub width: u64,
    pub out_channels: u64,
    pub kernel: [u64; 2],
    pub group: u64,
    pub pads: [u64; 2],
    pub strides: [u64; 2],
    pub dilations: [u64; 2],
    pub out: [u64; 2],
    pub input: usize,
    pub weights: usize,
    pub bias: Option<usize>,
}

/// A call's parameters, by callee.
#[derive(Clone, Debug, PartialEq)]
pub enum LibraryCall {
    Matmul(MatmulCall),
    Conv(ConvCall),
}

const F32: usize = 4;

impl LibraryCall {
    pub fn callee(&self) -> Callee {
        match self {
            LibraryCall::Matmul(_) => Callee::BlasLtMatmul,
            LibraryCall::Conv(_) => Callee::MiopenConvForward,
        }
    }

    /// The bytes each operand the call reads must have, by operand index, then the result's.
    pub fn operand_bytes(&self) -> (Vec<(usize, u64)>, u64) {
        let f = F32 as u64;
        match self {
            LibraryCall::Matmul(c) => {
                let extent = |stride: u64, one: u64| (c.batch - 1) * stride + one;
                let mut ops = vec![
                    (c.a, extent(c.stride_a, c.m * c.k) * f),
                    (c.b, extent(c.stride_b, c.k * c.n) * f),
                ];
                ops.extend(c.bias.map(|b| (b, c.n * f)));
                (ops, c.batch * c.m * c.n * f)
            }
            LibraryCall::Conv(c) => {
                let image = c.batch * c.channels * c.height * c.width * f;
                let weights = c.out_channels * (c.channels / c.group) * c.kernel[0] * c.kernel[1] * f;
                let mut ops = vec![(c.input, image), (c.weights, weights)];
                ops.extend(c.bias.map(|b| (b, c.out_channels * f)));
                (ops, c.batch * c.out_channels * c.out[0] * c.out[1] * f)
            }
        }
    }

    /// The parameters as integers, for the `.mxr` file (`decode` reads them back).
    pub fn encode(&self) -> Vec<u64> {
        let index = |o: Option<usize>| o.map_or(u64::MAX, |i| i as u64);
        match self {
            LibraryCall::Matmul(c) => vec![
                c.batch,
                c.m,
                c.n,
                c.k,
                c.trans_a as u64,
                c.trans_b as u64,
                c.stride_a,
                c.stride_b,
                c.alpha.to_bits() as u64,
                c.a as u64,
                c.b as u64,
                index(c.bias),
                c.activation as u64,
            ],
            LibraryCall::Conv(c) => {
                let mut v = vec![c.batch, c.channels, c.height, c.width, c.out_channels, c.group];
                for pair in [c.kernel, c.pads, c.strides, c.dilations, c.out] {
                    v.extend(pair);
                }
                v.extend([c.input as u64, c.weights as u64, index(c.bias)]);
                v
            }
        }
    }

    /// The call `encode` wrote for `callee`; an error naming what does not fit.
    pub fn decode(callee: Callee, v: &[u64]) -> Result<LibraryCall, String> {
        let index = |x: u64| (x != u64::MAX).then_some(x as usize);
        let flag = |x: u64| match x {
            0 | 1 => Ok(x == 1),
            _ => Err(format!("{callee}: a flag is {x}, not 0 or 1")),
        };
        let call = match callee {
            Callee::BlasLtMatmul => {
                let [batch, m, n, k, ta, tb, stride_a, stride_b, alpha, a, b, bias, act] = v[..] else {
                    return Err(format!("{callee} has {} parameters, not 13", v.len()));
                };
                let activation = match act {
                    0 => Activation::None,
                    1 => Activation::Relu,
                    _ => return Err(format!("{callee}: activation {act} is not 0 or 1")),
                };
                let alpha = u32::try_from(alpha).map_err(|_| format!("{callee}: alpha {alpha} is not f32 bits"))?;
                LibraryCall::Matmul(MatmulCall {
                    batch,
                    m,
                    n,
                    k,
                    trans_a: flag(ta)?,
                    trans_b: flag(tb)?,
                    stride_a,
                    stride_b,
                    alpha: f32::from_bits(alpha),
                    a: a as usize,
                    b: b as usize,
                    bias: index(bias),
                    activation,
                })
            }
            Callee::MiopenConvForward => {
                let [batch, channels, height, width, out_channels, group, kh, kw, ph, pw, sh, sw, dh, dw, oh, ow, input, weights, bias] =
                    v[..]
                else {
                    return Err(format!("{callee} has {} parameters, not 19", v.len()));
                };
                LibraryCall::Conv(ConvCall {
                    batch,
                    channels,
                    height,
                    width,
                    out_channels,
                    kernel: [kh, kw],
                    group,
                    pads: [ph, pw],
                    strides: [sh, sw],
                    dilations: [dh, dw],
                    out: [oh, ow],
                    input: input as usize,
                    weights: weights as usize,
                    bias: index(bias),
                })
            }
        };
        call.check_sizes().map_err(|e| format!("{callee} {e}"))?;
        Ok(call)
    }

    /// Refuses parameters whose sizes are zero, overflow or disagree with each other (a call
    /// read from a file is handed to a library that trusts them).
    fn check_sizes(&self) -> Result<(), String> {
        let fits = |xs: &[u64]| {
            xs.iter()
                .try_fold(1u64, |acc, &x| {
                    acc.checked_mul(x).filter(|_| x > 0 && x <= u32::MAX as u64)
                })
                .filter(|p| *p <= isize::MAX as u64 / 16)
                .is_some()
        };
        let ok = match self {
            LibraryCall::Matmul(c) => {
                // each operand's matrices in turn, or one for every product
                fits(&[c.batch, c.m, c.n, c.k])
                    && [0, c.m * c.k].contains(&c.stride_a)
                    && [0, c.k * c.n].contains(&c.stride_b)
            }
            LibraryCall::Conv(c) => {
                fits(&[c.batch, c.channels, c.height, c.width])
                    && fits(&[c.out_channels, c.channels, c.kernel[0], c.kernel[1]])
                    && fits(&[c.batch, c.out_channels, c.out[0], c.out[1]])
                    && fits(&[c.group, c.strides[0], c.strides[1], c.dilations[0], c.dilations[1]])
                    && c.channels % c.group == 0
                    && c.out_channels % c.group == 0
                    && (0..2).all(|i| {
                        let reach = c.dilations[i].saturating_mul(c.kernel[i] - 1).saturating_add(1);
                        let span = [c.height, c.width][i].saturating_add(c.pads[i].saturating_mul(2));
                        span >= reach && (span - reach) / c.strides[i] + 1 == c.out[i]
                    })
            }
        };
        match ok {
            true => Ok(()),
            false => Err(format!("has inconsistent sizes {:?}", self.encode())),
        }
    }
}

/// The parameters of `callee` computing `body` (an `mx.fused` body), or why it cannot.
pub fn recognise(callee: Callee, body: &Graph) -> Result<LibraryCall, String> {
    fused::check_body(body).map_err(|e| format!("is not a kernel body ({e})"))?;
    let ops: Vec<_> = body.ops.iter().filter(|op| op.kind != OpKind::Constant).collect();
    if ops.len() != body.ops.len() {
        return Err("holds constants, which no epilogue of the library takes".into());
    }
    let input = |v| match body.def(v) {
        Def::Input(i) => Some(i),
        Def::Op { .. } => None,
    };
    let all_f32 = body.ops.iter().flat_map(|op| op.operands.iter().chain(&op.results));
    if let Some(v) = all_f32.clone().find(|v| body.ty(**v).dtype != crate::DType::F32) {
        return Err(format!("computes on {}, not f32", body.ty(*v).dtype));
    }
    let anchor = ops.first().ok_or("is empty")?;
    match callee {
        Callee::MiopenConvForward => {
            if ops.len() != 1 || anchor.kind != OpKind::Conv {
                return Err("computes one 2-D convolution and nothing after it".into());
            }
            conv_call(body, anchor, &input)
        }
        Callee::BlasLtMatmul => {
            let mut call = match anchor.kind {
                OpKind::MatMul => matmul_call(body, anchor, &input)?,
                OpKind::Gemm => gemm_call(body, anchor, &input)?,
                k => return Err(format!("starts with a matrix product, not {k}")),
            };
            let mut last = anchor.results[0];
            let mut rest = ops[1..].iter().peekable();
            if let Some(add) = rest.next_if(|op| op.kind == OpKind::Add) {
                let other = match add.operands[..] {
                    [x, y] if x == last => y,
                    [x, y] if y == last => x,
                    _ => return Err("adds two values neither of which is the product".into()),
                };
                let n = call.n as usize;
                let row = body.ty(other).shape.iter().rev().skip(1).all(|&d| d == 1);
                match (input(other), call.bias) {
                    (Some(i), None) if row && body.ty(other).shape.last() == Some(&n) => call.bias = Some(i),
                    _ => return Err("adds something other than one vector along the rows".into()),
                }
                last = add.results[0];
            }
            if let Some(act) = rest.next() {
                call.activation = match act.kind {
                    OpKind::Relu => Activation::Relu,
                    k => {
                        return Err(format!(
                            "applies {k}, not relu (the only activation it is sure to compute alike)"
                        ))
                    }
                };
                if act.operands[0] != last {
                    return Err("applies its activation to something other than the product".into());
                }
            }
            if rest.next().is_some() {
                return Err("applies more than a bias and one activation".into());
            }
            Ok(LibraryCall::Matmul(call))
        }
    }
    .and_then(|call| {
        call.check_sizes()?;
        Ok(call)
    })
}

type InputOf<'a> = dyn Fn(crate::ValueId) -> Option<usize> + 'a;

fn conv_call(body: &Graph, conv: &crate::Op, input: &InputOf) -> Result<LibraryCall, String> {
    let ins: Option<Vec<usize>> = conv.operands.iter().map(|v| input(*v)).collect();
    let ins = ins.ok_or("convolves values computed inside the body")?;
    let (x, w, y) = (
        body.ty(conv.operands[0]),
        body.ty(conv.operands[1]),
        body.ty(conv.results[0]),
    );
    if x.rank() != 4 {
        return Err(format!(
            "convolves a {}-d image, not a 2-d one",
            x.rank().saturating_sub(2)
        ));
    }
    let dims = |name| conv.attrs.dims(name);
    let (pads, strides, dilations) = (dims("pads")?, dims("strides")?, dims("dilations")?);
    if pads[0] != pads[2] || pads[1] != pads[3] {
        return Err(format!("has pads {pads:?} that differ between the two sides"));
    }
    let u = |d: usize| d as u64;
    Ok(LibraryCall::Conv(ConvCall {
        batch: u(x.shape[0]),
        channels: u(x.shape[1]),
        height: u(x.shape[2]),
        width: u(x.shape[3]),
        out_channels: u(w.shape[0]),
        kernel: [u(w.shape[2]), u(w.shape[3])],
        group: conv.attrs.int("group")? as u64,
        pads: [u(pads[0]), u(pads[1])],
        strides: [u(strides[0]), u(strides[1])],
        dilations: [u(dilations[0]), u(dilations[1])],
        out: [u(y.shape[2]), u(y.shape[3])],
        input: ins[0],
        weights: ins[1],
        bias: ins.get(2).copied(),
    }))
}

/// The strides of an operand of `batch` products whose own batch dimensions are `dims`, each
/// matrix `size` elements: its matrices in turn when they are the result's, else one shared.
fn batch_stride(dims: &[usize], result: &[usize], size: usize) -> Result<u64, String> {
    if dims == result {
        Ok(size as u64)
    } else if dims.iter().all(|&d| d == 1) {
        Ok(0)
    } else {
        Err(format!("broadcasts batch dimensions {dims:?} to {result:?} partly"))
    }
}

fn matmul_call(body: &Graph, op: &crate::Op, input: &InputOf) -> Result<MatmulCall, String> {
    let (a, b) = (body.ty(op.operands[0]), body.ty(op.operands[1]));
    if a.rank() < 2 || b.rank() < 2 {
        return Err("multiplies a vector; the library takes matrices".into());
    }
    let (ra, rb) = (a.rank(), b.rank());
    let (m, k, n) = (a.shape[ra - 2], a.shape[ra - 1], b.shape[rb - 1]);
    let y: &TensorType = body.ty(op.results[0]);
    let batch_dims = &y.shape[..y.rank() - 2];
    let pad = |s: &[usize]| {
        let mut d = vec![1; batch_dims.len() - s.len()];
        d.extend_from_slice(s);
        d
    };
    Ok(MatmulCall {
        batch: batch_dims.iter().product::<usize>() as u64,
        m: m as u64,
        n: n as u64,
        k: k as u64,
        trans_a: false,
        trans_b: false,
        stride_a: batch_stride(&pad(&a.shape[..ra - 2]), batch_dims, m * k)?,
        stride_b: batch_stride(&pad(&b.shape[..rb - 2]), batch_dims, k * n)?,
        alpha: 1.0,
        a: input(op.operands[0]).ok_or("reads A from inside the body")?,
        b: input(op.operands[1]).ok_or("reads B from inside the body")?,
        bias: None,
        activation: Activation::None,
    })
}

fn gemm_call(body: &Graph, op: &crate::Op, input: &InputOf) -> Result<MatmulCall, String> {
    let y = body.ty(op.results[0]);
    let (m, n) = (y.shape[0], y.shape[1]);
    let a = body.ty(op.operands[0]);
    let k = if op.attrs.int("trans_a")? != 0 {
        a.shape[0]
    } else {
        a.shape[1]
    };
    let alpha = op.attrs.float("alpha")? as f32;
    let bias = match op.operands.get(2) {
        None => None,
        Some(&c) => {
            let c_ty = body.ty(c);
            let row = c_ty.shape.last() == Some(&n) && c_ty.shape.iter().rev().skip(1).all(|&d| d == 1);
            if !row || op.attrs.float("beta")? != 1.0 {
                return Err(format!(
                    "adds C of shape {:?} times beta {}; the library adds a row vector",
                    c_ty.shape,
                    op.attrs.float("beta")?
                ));
            }
            Some(input(c).ok_or("reads C from inside the body")?)
        }
    };
    Ok(MatmulCall {
        batch: 1,
        m: m as u64,
        n: n as u64,
        k: k as u64,
        trans_a: op.attrs.int("trans_a")? != 0,
        trans_b: op.attrs.int("trans_b")? != 0,
        stride_a: 0,
        stride_b: 0,
        alpha,
        a: input(op.operands[0]).ok_or("reads A from inside the body")?,
        b: input(op.operands[1]).ok_or("reads B from inside the body")?,
        bias,
        activation: Activation::None,
    })
}

/// The result types of an `mx.call` of `callee` with `body` on operands of types `operands`:
/// a fused op's, when the callee computes the body.
pub fn infer(callee: &str, body: Option<&Graph>, operands: &[TensorType]) -> Result<Vec<TensorType>, String> {
    let results = fused::infer(body, operands)?;
    let callee = Callee::from_name(callee).ok_or_else(|| {
        let known: Vec<&str> = Callee::ALL.iter().map(|c| c.name()).collect();
        format!("callee `{callee}` is not one of {}", known.join(", "))
    })?;
    recognise(callee, body.expect("fused::infer checked it"))
        .map_err(|why| format!("{callee} cannot compute this body: it {why}"))?;
    Ok(results)
}

#[cfg(test)]
mod tests;
