//! Cost models: what one kernel costs on a target, whether it computes one op or a fused
//! group. A target supplies a `CostModel`; `LinearCost` (a launch cost, a cost per byte moved
//! and per FLOP) is the start, with the `ref` and `cpu` parameters here. A fused kernel moves
//! only its operands and its result, and computes every body op once per element of its
//! result (so an op on a broadcast operand is recomputed for each element it is broadcast to). Constants, inputs and attribute leaves cost
//! nothing; the extractor (`extract.rs`) adds the costs of the kernels a selection runs, each
//! computed value counted once.

use mxc_dialects::mx::call::Callee;
use mxc_dialects::{Attrs, DType, Graph, Op, OpKind, TensorType, Trait};
use std::fmt;

/// One op as a kernel sees it: kind, attributes, operand and result types.
#[derive(Clone, Copy, Debug)]
pub struct OpSite<'a> {
    pub kind: OpKind,
    pub attrs: &'a Attrs,
    pub operands: &'a [TensorType],
    pub results: &'a [TensorType],
}

/// A fused kernel or a library call as a cost model sees it: its body, operand and result
/// types, and the library function computing it (`None` for a generated kernel).
#[derive(Clone, Copy, Debug)]
pub struct KernelSite<'a> {
    pub body: &'a Graph,
    pub operands: &'a [TensorType],
    pub results: &'a [TensorType],
    pub callee: Option<Callee>,
}

/// The cost of running kernels on a target, in its own unit (estimated nanoseconds for the
/// models here). Costs must be finite and non-negative.
pub trait CostModel: fmt::Debug + Send + Sync {
    /// A kernel computing one op.
    fn op_cost(&self, op: &OpSite) -> f64;
    /// A fused kernel; by default what its ops cost as separate kernels (no gain from fusing),
    /// and a library call cannot be made.
    fn kernel_cost(&self, kernel: &KernelSite) -> f64 {
        if kernel.callee.is_some() {
            return f64::INFINITY;
        }
        let body = kernel.body;
        body.ops
            .iter()
            .filter(|op| op.kind != OpKind::Constant)
            .map(|op| with_site(body, op, |site| self.op_cost(site)))
            .sum()
    }
}

/// Cost = `launch` + `per_byte` x bytes read and written + `per_weight_byte` x bytes of
/// weights read + `per_flop` x FLOPs, where a `conv_nhwc`'s FLOPs count as many as
/// `channels_last` says relative to `conv`'s.
#[derive(Clone, Debug, PartialEq)]
pub struct LinearCost {
    pub launch: f64,
    pub per_byte: f64,
    /// A byte of the weights of a product or convolution (`weight_bytes`): a model's weights
    /// are far larger than the caches, so each run reads them from memory again, where other
    /// bytes mostly stay cached between the kernel writing and the one reading.
    pub per_weight_byte: f64,
    pub per_flop: FlopCost,
    pub channels_last: ChannelsLast,
    /// What library calls cost, on a target that makes them (else they cannot be chosen).
    pub library: Option<LibraryCost>,
}

/// A library call (`mx.call`): the call itself (a launch and the library's own work on the
/// host), then memory as any kernel's and each FLOP at the library's rate for its callee.
#[derive(Clone, Debug, PartialEq)]
pub struct LibraryCost {
    pub call: f64,
    /// `blaslt.matmul`: hipBLASLt's and cuBLASLt's tuned products.
    pub matmul: f64,
    /// `miopen.conv_forward`.
    pub conv: f64,
}

/// The cost of a FLOP by kind of kernel: the matrix products and convolutions have kernels of
/// their own, whose speeds differ several times over; everything else is `other`.
#[derive(Clone, Debug, PartialEq)]
pub struct FlopCost {
    /// `matmul` and `gemm`, B read where it lies.
    pub matmul: f64,
    /// `conv`, `conv_nhwc` and `conv_transpose`, weights as they are, and `gemm` reading B
    /// transposed: the scalar loops.
    pub conv: f64,
    /// `matmul_packed` and one-group `conv_nhwc_packed`: the tiled kernel on packed panels.
    pub packed: f64,
    /// `conv_nhwc_packed` with a group per channel (depthwise).
    pub depthwise: f64,
    /// Winograd's transforms (`winograd_input`, `winograd_output`, `winograd_weights`).
    pub winograd: f64,
    /// `attention`: both products and the softmax between them in one kernel.
    pub attention: f64,
    pub other: f64,
    /// The factor on a tiled product's FLOPs when its A is f16 or bf16: the micro-tile reads A
    /// an element at a time and broadcasts it, and a half-precision element is widened first.
    pub half_a: f64,
    /// The factor on `matmul_packed`'s FLOPs when its B is bf16 pairs (`mx::depth_pairing`):
    /// below 1 where the machine multiplies bf16 pairs in hardware (AMX tiles), above 1 where
    /// the kernel widens each pair to f32 first.
    pub paired: f64,
    /// The factor on `packed` for `matmul_integer_packed`'s FLOPs (u8 x i8 products summed in
    /// i32): below 1 where the machine sums four byte products per lane in one instruction
    /// (VNNI), above 1 where the kernel takes each byte out with shifts.
    pub integer: f64,
    /// The same for `matmul_integer_packed` alone, which runs on AMX tiles where the machine
    /// has int8 ones (the convolutions over a window do not).
    pub integer_product: f64,
}

impl FlopCost {
    /// The same cost for every FLOP.
    pub fn flat(cost: f64) -> FlopCost {
        FlopCost {
            matmul: cost,
            conv: cost,
            packed: cost,
            depthwise: cost,
            winograd: cost,
            attention: cost,
            other: cost,
            half_a: 1.0,
            paired: 1.0,
            integer: 1.0,
            integer_product: 1.0,
        }
    }

    /// The cost of one FLOP of `op`'s kernel form. The vector forms of the implicit-GEMM
    /// convolution and of attention read f32 only, so on other element types they are the
    /// scalar loops (priced as `conv`).
    fn of(&self, op: &OpSite) -> f64 {
        let a = op.operands.first().map(|t| t.dtype);
        let f32_only = |rate: f64| if a == Some(DType::F32) { rate } else { self.conv };
        let half = |rate: f64| {
            if a.is_some_and(DType::is_half) {
                rate * self.half_a
            } else {
                rate
            }
        };
        let b_paired = op.operands.get(1).is_some_and(|b| b.dtype == DType::BF16);
        let float = a.is_some_and(|a| a.is_float());
        match op.kind {
            OpKind::MatMulPacked | OpKind::ConvNhwcPacked if b_paired => self.packed * self.paired,
            OpKind::MatMulIntegerPacked => self.packed * self.integer_product,
            OpKind::ConvNhwcIntegerPacked => self.packed * self.integer,
            // the f32 depthwise kernel's arithmetic on bytes converted as they are read
            OpKind::ConvNhwcIntegerDepthwise => self.depthwise,
            // the tiled kernels read floats: integer products are the scalar loops
            OpKind::MatMul | OpKind::Gemm if !float => self.conv,
            OpKind::Gemm if op.attrs.int("trans_b").unwrap_or(0) != 0 => self.conv,
            OpKind::MatMul | OpKind::Gemm => half(self.matmul),
            OpKind::Conv | OpKind::ConvNhwc | OpKind::ConvTranspose => self.conv,
            OpKind::MatMulPacked => half(self.packed),
            OpKind::ConvNhwcPacked if op.attrs.int("group").unwrap_or(1) > 1 => self.depthwise,
            OpKind::ConvNhwcPacked => f32_only(self.packed),
            OpKind::WinogradInput | OpKind::WinogradOutput | OpKind::WinogradWeights => self.winograd,
            OpKind::Attention => f32_only(self.attention),
            _ => self.other,
        }
    }
}

/// The time of a channels-last convolution's kernel over the channels-first one's, by kind of
/// convolution (measured by `cargo bench -p mxc-codegen --bench conv_layout`).
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelsLast {
    /// Stride 1, a window larger than 1x1.
    pub window: f64,
    /// Stride 1, a 1x1 window.
    pub pointwise: f64,
    /// Any stride above 1.
    pub strided: f64,
}

impl ChannelsLast {
    /// Both layouts equally fast.
    pub fn neutral() -> ChannelsLast {
        ChannelsLast {
            window: 1.0,
            pointwise: 1.0,
            strided: 1.0,
        }
    }

    /// The factor for a `conv_nhwc` with `attrs` and weights `w` ([M, kh, kw, C]).
    fn factor(&self, attrs: &Attrs, w: Option<&TensorType>) -> f64 {
        let strided = attrs.ints("strides").is_ok_and(|s| s.iter().any(|&s| s > 1));
        let window = w.is_some_and(|w| w.shape.len() == 4 && w.shape[1] * w.shape[2] > 1);
        match (strided, window) {
            (true, _) => self.strided,
            (false, true) => self.window,
            (false, false) => self.pointwise,
        }
    }
}

/// `FlopCost::paired` on a machine with AMX bf16 tiles.
const AMX_BF16_PAIRED: f64 = 0.2;

/// `FlopCost::integer` on a machine with VNNI.
const VNNI_INTEGER: f64 = 0.3;

/// `FlopCost::integer_product` on a machine with AMX int8 tiles.
const AMX_INT8_PRODUCT: f64 = 0.12;

impl LinearCost {
    /// The `ref` target: scalar loops for a generic x86-64, one kernel per op (about 1 FLOP and
    /// 4 bytes per ns; ref rewrites nothing, so this only prices `mxc explain --target ref`).
    pub fn reference() -> LinearCost {
        LinearCost {
            launch: 50.0,
            per_byte: 0.25,
            per_weight_byte: 0.25,
            per_flop: FlopCost::flat(1.0),
            channels_last: ChannelsLast::neutral(),
            library: None,
        }
    }

    /// The `cpu` target, fitted on the development machine (2 cores; `cargo bench --bench
    /// cost_model` and `cargo bench -p mxc-codegen --bench conv_layout`, medians, rounded):
    /// a kernel call with its result buffer, the bytes of an `add` in the caches, the bytes of
    /// weights read from memory, the FLOPs of each kernel form (products reading B where it
    /// lies and packed, direct, packed and depthwise convolutions, Winograd's transforms, `exp`
    /// for the rest); channels-last convolutions by the medians of their kinds.
    pub fn cpu() -> LinearCost {
        LinearCost {
            launch: 76.0,
            per_byte: 0.013,
            per_weight_byte: 0.06,
            per_flop: FlopCost {
                matmul: 0.0127,
                conv: 0.10,
                packed: 0.012,
                depthwise: 0.035,
                winograd: 0.034,
                attention: 0.014,
                other: 0.043,
                // a 128 x 256 x 1024 product, B an operand, AVX-512 with F16C: f32 152 GFLOP/s,
                // f16 109, bf16 120 (mxc perf, Xeon with AVX-512)
                half_a: 1.4,
                // bf16 pairs widened to f32 in the micro-tile: more work than f32 panels
                paired: 1.5,
                // bytes taken out of i32 lanes with shifts: more work than f32 panels
                integer: 1.5,
                integer_product: 1.5,
            },
            channels_last: ChannelsLast {
                window: 0.76,
                pointwise: 1.0,
                strided: 1.3,
            },
            library: None,
        }
    }

    /// The `gpu` target, in nanoseconds, estimated from data-centre GPUs' published figures
    /// (MI250X / MI300X, H100 / H200), not fitted: no GPU was at hand. A launch and its tail
    /// cost about 5 µs on the default stream, so fusing pays far more than on a CPU; memory
    /// streams at about 2 TB/s of the 3 to 5 the chips quote (0.0005 ns a byte, weights
    /// alike: they do not stay in the caches); a generated product or convolution is a tiled
    /// GEMM (64x64 tiles staged through shared memory, 4x4 results a thread, implicit for a
    /// convolution: `gpu_gemm.rs`) at about 10 TFLOP/s of f32 (a fifth of the peak, what such
    /// a kernel without tuning reaches), the attention kernel (a thread per query row walking
    /// the keys) about 2, other arithmetic about 20. A library call costs a
    /// launch and about 3 µs of the library's host-side work, and its products reach about 33
    /// TFLOP/s of f32 (hipBLASLt's and cuBLASLt's tuned kernels near two thirds of the f32
    /// peak), MIOpen's convolutions about 20. To be fitted on a GPU with
    /// `scripts/gpu-check.sh`'s times.
    pub fn gpu() -> LinearCost {
        LinearCost {
            launch: 5000.0,
            per_byte: 0.0005,
            per_weight_byte: 0.0005,
            per_flop: FlopCost {
                attention: 0.0005,
                other: 0.00005,
                ..FlopCost::flat(0.0001)
            },
            channels_last: ChannelsLast::neutral(),
            library: Some(LibraryCost {
                call: 8000.0,
                matmul: 0.00003,
                conv: 0.00005,
            }),
        }
    }

    /// The `cpu` target on a vector unit of `lanes` f32 lanes: `cpu()`, fitted with 8 lanes,
    /// with the arithmetic of the vector kernels (the tiled products and convolutions,
    /// depthwise, Winograd's transforms, attention) priced `8 / lanes` times as much, and the
    /// memory as it was. On an AVX-512 machine `cargo bench --bench cost_model` measured the
    /// packed products and convolutions 2.1 times faster per FLOP than the AVX2 fit, the depthwise
    /// convolutions 2.9 times and attention 1.5 times, while weights streamed from memory no
    /// faster: wider vectors make FLOPs cheaper against bytes, which is what decides between an
    /// implicit GEMM and Winograd's 4 times larger weights on the small images.
    pub fn cpu_with_lanes(lanes: usize) -> LinearCost {
        let base = LinearCost::cpu();
        let scale = 8.0 / lanes.max(1) as f64;
        let f = &base.per_flop;
        LinearCost {
            per_flop: FlopCost {
                matmul: f.matmul * scale,
                packed: f.packed * scale,
                depthwise: f.depthwise * scale,
                winograd: f.winograd * scale,
                attention: f.attention * scale,
                ..f.clone()
            },
            ..base
        }
    }

    /// The same machine with AMX tiles that multiply bf16 pairs (`amx.rs`): a product on bf16
    /// pairs priced by what its kernel measured against the f32 panels' (a 128 x 256 x 1024
    /// product on a Xeon with AMX, one thread: bf16 pairs 1140 GFLOP/s, f32 panels 187).
    pub fn with_amx_bf16(self) -> LinearCost {
        LinearCost {
            per_flop: FlopCost {
                paired: AMX_BF16_PAIRED,
                ..self.per_flop
            },
            ..self
        }
    }

    /// The same machine with VNNI (`vpdpbusd`): four u8 x i8 products a lane per instruction,
    /// where an f32 multiply-add does one.
    pub fn with_vnni(self) -> LinearCost {
        LinearCost {
            per_flop: FlopCost {
                integer: VNNI_INTEGER,
                integer_product: self.per_flop.integer_product.min(VNNI_INTEGER),
                ..self.per_flop
            },
            ..self
        }
    }

    /// The same machine with AMX int8 tiles: the integer products on them, 2.5 times the VNNI
    /// kernel's rate (`cargo bench --bench gemm`'s int8 table on a Xeon with AMX: 1700-2000 GOP/s
    /// against 660-750).
    pub fn with_amx_int8(self) -> LinearCost {
        LinearCost {
            per_flop: FlopCost {
                integer_product: AMX_INT8_PRODUCT,
                ..self.per_flop
            },
            ..self
        }
    }

    /// The memory part of a kernel's cost: `bytes` moved, `weights` of them packed weights.
    fn memory(&self, bytes: f64, weights: f64) -> f64 {
        self.per_byte * (bytes - weights) + self.per_weight_byte * weights
    }

    /// The arithmetic part of an op's cost.
    fn compute(&self, op: &OpSite) -> f64 {
        let layout = match op.kind {
            OpKind::ConvNhwc => self.channels_last.factor(op.attrs, op.operands.get(1)),
            _ => 1.0,
        };
        self.per_flop.of(op) * flops(op) * layout
    }
}

impl CostModel for LinearCost {
    fn op_cost(&self, op: &OpSite) -> f64 {
        self.launch + self.memory(bytes_moved(op), weight_bytes(op)) + self.compute(op)
    }

    fn kernel_cost(&self, k: &KernelSite) -> f64 {
        let bytes: f64 = k.operands.iter().chain(k.results).map(|t| t.num_bytes() as f64).sum();
        let weights: f64 = k.body.ops.iter().map(|op| with_site(k.body, op, weight_bytes)).sum();
        let memory = self.memory(bytes, weights);
        match (k.callee, &self.library) {
            (None, _) => self.launch + memory + kernel_work(k.body, |site| self.compute(site)),
            (Some(_), None) => f64::INFINITY,
            (Some(callee), Some(library)) => {
                let rate = match callee {
                    Callee::BlasLtMatmul => library.matmul,
                    Callee::MiopenConvForward => library.conv,
                };
                library.call + memory + rate * kernel_flops(k.body)
            }
        }
    }
}

/// Arithmetic a fused kernel performs: each body op's, times the number of result elements it
/// is computed for (an element-wise op on broadcast operands runs once per result element).
pub fn kernel_flops(body: &Graph) -> f64 {
    kernel_work(body, flops)
}

/// `work` of each body op, scaled as `kernel_flops` scales FLOPs, summed.
fn kernel_work(body: &Graph, work: impl Fn(&OpSite) -> f64) -> f64 {
    let Some(out) = body.outputs.first() else {
        return 0.0;
    };
    let elements = body.ty(out.value).num_elements() as f64;
    body.ops
        .iter()
        .filter(|op| op.kind != OpKind::Constant)
        .map(|op| {
            with_site(body, op, |site| {
                let own = site.results.first().map_or(1, |t| t.num_elements()).max(1) as f64;
                match op.kind.is_elementwise() {
                    true => work(site) * elements / own,
                    false => work(site),
                }
            })
        })
        .sum()
}

/// Bytes of weights an op reads: the second operand of the ops whose second operand is weights
/// (`Trait::Weights`: the products and convolutions).
pub fn weight_bytes(op: &OpSite) -> f64 {
    match op.kind.has(Trait::Weights) {
        true => op.operands.get(1).map_or(0.0, |t| t.num_bytes() as f64),
        false => 0.0,
    }
}

/// Bytes a kernel reads and writes: its operands once and its results once.
pub fn bytes_moved(op: &OpSite) -> f64 {
    op.operands.iter().chain(op.results).map(|t| t.num_bytes() as f64).sum()
}

/// Arithmetic operations an op performs (data movement performs none).
pub fn flops(op: &OpSite) -> f64 {
    use OpKind::*;
    let out = op.results.first().map_or(0.0, |t| t.num_elements() as f64);
    let input = op.operands.first().map_or(0.0, |t| t.num_elements() as f64);
    let weight = |i: usize| op.operands.get(i).map_or(1.0, |t| t.num_elements() as f64);
    let dim = |i: usize, d: usize| {
        op.operands
            .get(i)
            .and_then(|t| t.shape.get(d))
            .map_or(1.0, |&n| n as f64)
    };
    match op.kind {
        Constant | Identity | Reshape | BitCast | Transpose | Concat | Slice | Gather | Scatter | Expand | Pack => 0.0,
        // B^T d B on each 6x6 patch of each channel, A^T X A on each tile's 6x6 products,
        // G g G^T on each filter: about the additions and multiplications written out
        WinogradInput => 6.0 * out,
        WinogradOutput => 6.0 * input,
        WinogradWeights => 4.0 * out,
        // a fused op's or a call's arithmetic is its body's (`kernel_flops`)
        Fused | Call => 0.0,
        // control steps run on the host; their regions' ops are kernels of their own
        If | Loop => 0.0,
        // one pass over each string (bytes are not known here)
        StringConcat | StringCase | RegexFullMatch => out,
        Exp | Log | Erf | Tanh | Sigmoid | Pow | Sin | Cos | Tan | Asin | Acos | Atan => 8.0 * out,
        // x / sqrt(2), erf, + 1, * 0.5, * x; tanh form: x * x, * x, * c, + x, * k, tanh, + 1,
        // * 0.5, * x (the chains they replace)
        Gelu if op.attrs.str("approximate") == Ok("tanh") => 16.0 * out,
        Gelu => 12.0 * out,
        Cast | Add | Sub | Mul | Div | Max | Min | Equal | Less | Greater | Where | Not | Sqrt | Neg | Abs
        | Reciprocal | Floor | Ceil | Round | Relu | LeakyRelu | Clip | BitAnd | BitOr | BitXor | ShiftLeft
        | ShiftRight => out,
        // the zero point subtracted, the scale multiplied
        DequantizeLinear => 2.0 * out,
        Softmax => 5.0 * out,
        // per score: the dot product of q and k, the softmax's steps (as `softmax`), and its
        // share of the product with v
        Attention => {
            let layout = op
                .attrs
                .str("layout")
                .ok()
                .and_then(|l| mxc_dialects::mx::attention::axes(l).ok());
            let seq = layout.map_or(2, |(_, seq)| seq);
            let (depth, keys, value_depth) = (dim(0, 3), dim(1, seq), dim(2, 3));
            out / value_depth * keys * (2.0 * depth + 5.0 + 2.0 * value_depth)
        }
        LayerNorm => 8.0 * input,
        BatchNorm => 2.0 * out,
        ReduceMean | ReduceSum | ReduceMax | GlobalAveragePool => input,
        MatMulPacked | MatMulIntegerPacked => {
            2.0 * out
                * op.operands
                    .first()
                    .and_then(|t| t.shape.last())
                    .map_or(1.0, |&k| k as f64)
        }
        // packed weights [P, kh * kw * C / group, panel]: each output element is a dot product
        // of the middle dimension's size
        ConvNhwcPacked => 2.0 * out * dim(1, 1),
        // the same, each row of the panels four depths
        ConvNhwcIntegerPacked => 8.0 * out * dim(1, 1),
        // panels [P, kh * kw, 16]: a dot product over the window per output element
        ConvNhwcIntegerDepthwise => 2.0 * out * dim(1, 1),
        MatMul => {
            let k = op
                .operands
                .first()
                .and_then(|t| t.shape.last())
                .map_or(1.0, |&n| n as f64);
            2.0 * out * k
        }
        Gemm => {
            let trans_a = op.attrs.int("trans_a").unwrap_or(0) != 0;
            let k = if trans_a { dim(0, 0) } else { dim(0, 1) };
            2.0 * out * k + out
        }
        // Weights [C_out, C_in / group, k...] (`conv_nhwc`: [C_out, k..., C_in / group]): each
        // output element is a dot product of that size.
        Conv | ConvNhwc => 2.0 * out * weight(1) / dim(1, 0),
        // Weights [C_in, C_out / group, k...]: each input element scatters into that many.
        ConvTranspose => 2.0 * input * weight(1) / dim(1, 0),
        MaxPool | AveragePool | MaxPoolNhwc | AveragePoolNhwc => {
            let kernel: f64 = op
                .attrs
                .ints("kernel")
                .map_or(1.0, |k| k.iter().product::<i64>() as f64);
            out * kernel
        }
    }
}

/// The cost of a graph: every op that reaches an output, once (constants are free).
pub fn graph_cost(g: &Graph, model: &dyn CostModel) -> f64 {
    let g = g.prune();
    g.ops
        .iter()
        .filter(|op| op.kind != OpKind::Constant)
        .map(|op| with_site(&g, op, |site| kernel_cost(model, site, op.body.as_deref())))
        .sum()
}

/// The cost of the kernel computing `site`: a fused kernel's or a library call's when `body`
/// is its body.
pub fn kernel_cost(model: &dyn CostModel, site: &OpSite, body: Option<&Graph>) -> f64 {
    let callee = match site.kind {
        OpKind::Call => site.attrs.str("callee").ok().and_then(Callee::from_name),
        _ => None,
    };
    match body {
        Some(body) => model.kernel_cost(&KernelSite {
            body,
            operands: site.operands,
            results: site.results,
            callee,
        }),
        None => model.op_cost(site),
    }
}

/// `f` applied to `op` of `g` as a kernel sees it.
pub fn with_site<R>(g: &Graph, op: &Op, f: impl FnOnce(&OpSite) -> R) -> R {
    let operands: Vec<TensorType> = op.operands.iter().map(|v| g.ty(*v).clone()).collect();
    let results: Vec<TensorType> = op.results.iter().map(|v| g.ty(*v).clone()).collect();
    f(&OpSite {
        kind: op.kind,
        attrs: &op.attrs,
        operands: &operands,
        results: &results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mxc_dialects::{Attr, DType};

    fn t(shape: &[usize]) -> TensorType {
        TensorType::new(DType::F32, shape.to_vec())
    }

    #[test]
    fn matmul_and_conv_flops_are_two_per_multiply_add() {
        let attrs = Attrs::new();
        let mm = OpSite {
            kind: OpKind::MatMul,
            attrs: &attrs,
            operands: &[t(&[4, 8]), t(&[8, 16])],
            results: &[t(&[4, 16])],
        };
        assert_eq!(flops(&mm), 2.0 * 4.0 * 16.0 * 8.0);
        assert_eq!(bytes_moved(&mm), 4.0 * (32.0 + 128.0 + 64.0));
        let conv_attrs = Attrs::new().with("group", Attr::Int(1));
        let conv = OpSite {
            kind: OpKind::Conv,
            attrs: &conv_attrs,
            operands: &[t(&[1, 3, 8, 8]), t(&[16, 3, 3, 3])],
            results: &[t(&[1, 16, 6, 6])],
        };
        assert_eq!(flops(&conv), 2.0 * (16.0 * 36.0) * 27.0);
    }

    #[test]
    fn cpu_launches_cost_more_and_arithmetic_less_than_ref() {
        let attrs = Attrs::new();
        let add = OpSite {
            kind: OpKind::Add,
            attrs: &attrs,
            operands: &[t(&[1 << 20]), t(&[1 << 20])],
            results: &[t(&[1 << 20])],
        };
        let (r, c) = (LinearCost::reference(), LinearCost::cpu());
        assert!(c.launch > r.launch);
        assert!(c.op_cost(&add) < r.op_cost(&add));
    }

    #[test]
    fn wider_vectors_make_the_vector_kernels_arithmetic_cheaper_not_their_memory() {
        assert_eq!(LinearCost::cpu_with_lanes(8), LinearCost::cpu());
        let attrs = Attrs::new();
        // a product on packed weights: 128 x 256 times [16 panels, 256, 16]
        let packed = OpSite {
            kind: OpKind::MatMulPacked,
            attrs: &attrs,
            operands: &[t(&[128, 256]), t(&[16, 256, 16])],
            results: &[t(&[128, 256])],
        };
        let (avx2, avx512) = (LinearCost::cpu_with_lanes(8), LinearCost::cpu_with_lanes(16));
        let memory = |c: &LinearCost| c.memory(bytes_moved(&packed), weight_bytes(&packed));
        assert_eq!(memory(&avx2), memory(&avx512));
        assert!((avx512.compute(&packed) - avx2.compute(&packed) / 2.0).abs() < 1e-9);
        assert!(avx512.op_cost(&packed) < avx2.op_cost(&packed));
        // the scalar convolution loops are priced as they were
        let conv_attrs = Attrs::new();
        let conv = OpSite {
            kind: OpKind::Conv,
            attrs: &conv_attrs,
            operands: &[t(&[1, 3, 8, 8]), t(&[16, 3, 3, 3])],
            results: &[t(&[1, 16, 6, 6])],
        };
        assert_eq!(avx512.op_cost(&conv), avx2.op_cost(&conv));
    }

    #[test]
    fn bf16_pair_products_are_cheap_only_where_the_machine_has_amx() {
        let attrs = Attrs::new();
        let of = |d: DType, shape: &[usize]| TensorType::new(d, shape.to_vec());
        // the same 128 x 256 x 256 product on f32 panels and on bf16 pairs
        let f32_panels = [of(DType::F32, &[128, 256]), of(DType::F32, &[16, 256, 16])];
        let pairs = [of(DType::BF16, &[128, 256]), of(DType::BF16, &[16, 128, 32])];
        let results = [of(DType::F32, &[128, 256])];
        let site = |operands| OpSite {
            kind: OpKind::MatMulPacked,
            attrs: &attrs,
            operands,
            results: &results,
        };
        let (plain, amx) = (
            LinearCost::cpu_with_lanes(16),
            LinearCost::cpu_with_lanes(16).with_amx_bf16(),
        );
        assert!(plain.compute(&site(&pairs)) > plain.compute(&site(&f32_panels)));
        assert!(amx.compute(&site(&pairs)) < amx.compute(&site(&f32_panels)) / 4.0);
        assert_eq!(amx.compute(&site(&f32_panels)), plain.compute(&site(&f32_panels)));
    }
}
