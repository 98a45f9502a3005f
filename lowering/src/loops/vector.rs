//! Vectors at the loop level: the vector unit a cpu kernel is written for (`VectorIsa`), and the
//! emitter's vector values: splats of scalars and constants, whole-vector loads and stores
//! (masked while a lane mask is active, for the partial vector at the end of a row), fused
//! multiply-add and horizontal reductions.
//!
//! The scalar helpers (`scalar.rs`) take vector operands as they are and splat a scalar operand
//! to the other's lanes, so one definition of an op's arithmetic serves scalars and vectors.

use super::buffer::{storage_ty, Buf};
use super::emit::{type_with_lanes, Emitter, Ty, V};

/// The vector unit of the machine a cpu kernel is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VectorIsa {
    /// f32 lanes of one vector register: 16 with AVX-512, 8 with AVX, 4 with SSE.
    pub lanes: usize,
    /// Vector registers the code may keep values in: 32 with AVX-512, else 16.
    pub registers: usize,
    /// Whether the machine has fused multiply-add (else a multiply and an add).
    pub fma: bool,
    /// Whether the machine converts between f16 and f32 in hardware (F16C: `vcvtph2ps`,
    /// `vcvtps2ph`); else the conversions are integer arithmetic (`half.rs`).
    pub f16c: bool,
    /// Whether the machine has AMX tiles with bf16 products (`amx.rs`).
    pub amx_bf16: bool,
    /// Whether the machine has AMX tiles with u8 x i8 products (`amx.rs`).
    pub amx_int8: bool,
    /// Whether the machine sums u8 x i8 products of 32-bit lanes in one instruction
    /// (`vpdpbusd`) on these vectors: AVX-512 VNNI for 16 lanes, AVX-VNNI (or AVX-512 VNNI
    /// with 256-bit vectors) for 8 (`integer.rs`).
    pub vnni: bool,
    /// Whether the machine picks bytes from a pair of 512-bit registers by byte indices
    /// (`vpermi2b`, AVX-512 VBMI): a 256-entry table of bytes in four registers (`lookup.rs`).
    pub vbmi: bool,
}

impl VectorIsa {
    /// The widest vectors an LLVM feature string (`+avx2,+fma,-avx512f,...`) allows.
    pub fn from_features(features: &str) -> VectorIsa {
        let has = |name: &str| features.split(',').any(|f| f.strip_prefix('+') == Some(name));
        let (fma, f16c) = (has("fma"), has("f16c"));
        if has("avx512f") {
            VectorIsa {
                lanes: 16,
                registers: 32,
                fma,
                f16c,
                amx_bf16: has("amx-tile") && has("amx-bf16"),
                amx_int8: has("amx-tile") && has("amx-int8"),
                vnni: has("avx512vnni"),
                vbmi: has("avx512vbmi"),
            }
        } else if has("avx") {
            VectorIsa {
                lanes: 8,
                registers: 16,
                fma,
                f16c,
                amx_bf16: false,
                amx_int8: false,
                vnni: has("avxvnni") || (has("avx512vnni") && has("avx512vl")),
                vbmi: false,
            }
        } else {
            VectorIsa {
                lanes: 4,
                registers: 16,
                fma: false,
                f16c: false,
                amx_bf16: false,
                amx_int8: false,
                vnni: false,
                vbmi: false,
            }
        }
    }
}

impl Emitter {
    /// The lanes of a vector of f32 on this kernel's vector unit (`None` for scalar code: the
    /// `ref` target).
    pub fn f32_lanes(&self) -> Option<usize> {
        self.isa.map(|isa| isa.lanes)
    }

    /// `v` with `lanes` lanes: itself, a splat constant (hoisted) or a broadcast.
    pub fn splat(&mut self, v: &V, lanes: usize) -> V {
        if v.lanes == lanes {
            return v.clone();
        }
        assert_eq!(v.lanes, 1, "only a scalar is splat to a vector");
        if let Some(literal) = self.literal_of(&v.name) {
            return self.hoisted_splat(&literal, v.ty, lanes);
        }
        let to = type_with_lanes(v.ty, lanes);
        self.op_lanes(
            "s",
            v.ty,
            lanes,
            &format!("vector.broadcast {v} : {} to {to}", v.ty.mlir()),
        )
    }

    /// Brings two operands to the same lanes (a scalar is splat to the vector's).
    pub fn same_lanes(&mut self, a: &V, b: &V) -> (V, V) {
        let lanes = a.lanes.max(b.lanes);
        (self.splat(a, lanes), self.splat(b, lanes))
    }

    /// `vector.shuffle`: the lanes of `a` followed by those of `b`, picked by `indices` (a
    /// vector of `indices.len()` lanes of their type).
    pub fn shuffle(&mut self, a: &V, b: &V, indices: &[usize]) -> V {
        let list: Vec<String> = indices.iter().map(|i| i.to_string()).collect();
        self.op_lanes(
            "sh",
            a.ty,
            indices.len(),
            &format!(
                "vector.shuffle {a}, {b} [{}] : {}, {}",
                list.join(", "),
                a.mlir_ty(),
                b.mlir_ty()
            ),
        )
    }

    /// Four vectors of bytes interleaved into one: byte `4k + j` of the result is byte `k` of
    /// `rows[j]`, the groups of four bytes `vpdpbusd` multiplies (`dot_u8_i8`), as i32 lanes.
    pub fn interleave_bytes(&mut self, rows: &[V; 4]) -> V {
        let lanes = rows[0].lanes;
        let halves: Vec<usize> = (0..2 * lanes).collect();
        let low = self.shuffle(&rows[0], &rows[1], &halves);
        let high = self.shuffle(&rows[2], &rows[3], &halves);
        let order: Vec<usize> = (0..4 * lanes).map(|b| (b % 4) * lanes + b / 4).collect();
        let bytes = self.shuffle(&low, &high, &order);
        let to = type_with_lanes(Ty::Int { bits: 32, signed: true }, lanes);
        self.op_lanes(
            "b",
            Ty::Int { bits: 32, signed: true },
            lanes,
            &format!("vector.bitcast {bytes} : {} to {to}", bytes.mlir_ty()),
        )
    }

    /// A mask of `lanes` lanes whose first `n` are set (a constant, hoisted).
    pub fn first_lanes(&mut self, n: usize, lanes: usize) -> V {
        let ty = format!("vector<{lanes}xi1>");
        self.hoisted_op(&format!("vector.constant_mask [{n}] : {ty}"), Ty::I1, lanes)
    }

    /// A mask of the first `n` of `lanes` lanes, `n` an `index` value only the run knows
    /// (computed once, at the kernel's entry).
    pub fn run_time_lanes(&mut self, n: &V, lanes: usize) -> V {
        let ty = format!("vector<{lanes}xi1>");
        self.hoisted_op(&format!("vector.create_mask {n} : {ty}"), Ty::I1, lanes)
    }

    /// Runs `f` with loads and stores of vectors masked by `mask` (`None`: unmasked).
    pub fn masked<T>(&mut self, mask: Option<V>, f: impl FnOnce(&mut Emitter) -> T) -> T {
        let saved = std::mem::replace(&mut self.mask, mask);
        let r = f(self);
        self.mask = saved;
        r
    }

    /// Asks the cache to fetch the line of `buf` at `idx` into the L2 cache ahead of its use
    /// (no value; a prefetch past the buffer's end loads nothing: x86's prefetches never fault).
    pub fn prefetch(&mut self, buf: &Buf, idx: &[V]) {
        let at = index_list(idx);
        self.line(&format!(
            "memref.prefetch {}[{at}], read, locality<2>, data : {}",
            buf.name,
            buf.memref()
        ));
    }

    /// Loads `lanes` consecutive elements (along the last index) in their storage type.
    pub fn vload(&mut self, buf: &Buf, idx: &[V], lanes: usize) -> V {
        let ty = storage_ty(buf.dtype);
        let vty = type_with_lanes(ty, lanes);
        let at = index_list(idx);
        match self.mask.clone() {
            None => self.op_lanes(
                "x",
                ty,
                lanes,
                &format!("vector.load {}[{at}] : {}, {vty}", buf.name, buf.memref()),
            ),
            Some(mask) => {
                let zero = self.zero(ty);
                let pass = self.splat(&zero, lanes);
                self.op_lanes(
                    "x",
                    ty,
                    lanes,
                    &format!(
                        "vector.maskedload {}[{at}], {mask}, {pass} : {}, {}, {vty} into {vty}",
                        buf.name,
                        buf.memref(),
                        mask.mlir_ty()
                    ),
                )
            }
        }
    }

    /// Stores a vector of the storage type at `idx` and the elements after it.
    pub fn vstore(&mut self, buf: &Buf, idx: &[V], v: &V) {
        let at = index_list(idx);
        let line = match self.mask.clone() {
            None => format!(
                "vector.store {v}, {}[{at}] : {}, {}",
                buf.name,
                buf.memref(),
                v.mlir_ty()
            ),
            Some(mask) => format!(
                "vector.maskedstore {}[{at}], {mask}, {v} : {}, {}, {}",
                buf.name,
                buf.memref(),
                mask.mlir_ty(),
                v.mlir_ty()
            ),
        };
        self.store_line(&line);
    }

    /// `a * b + c`, fused where the machine can.
    pub fn fma(&mut self, a: &V, b: &V, c: &V) -> V {
        let lanes = a.lanes.max(b.lanes).max(c.lanes);
        let (a, b, c) = (self.splat(a, lanes), self.splat(b, lanes), self.splat(c, lanes));
        if self.isa.is_some_and(|isa| isa.fma) && a.ty.is_float() {
            return self.op_lanes("v", a.ty, lanes, &format!("math.fma {a}, {b}, {c} : {}", a.mlir_ty()));
        }
        let p = self.mul(&a, &b);
        self.add(&p, &c)
    }

    /// The sum (`add`) or maximum (`maximumf`) of a vector's lanes.
    pub fn reduce_lanes(&mut self, kind: &str, v: &V) -> V {
        if !v.is_vector() {
            return v.clone();
        }
        self.op(
            "h",
            v.ty,
            &format!("vector.reduction <{kind}>, {v} : {} into {}", v.mlir_ty(), v.ty.mlir()),
        )
    }
}

pub(super) fn index_list(idx: &[V]) -> String {
    idx.iter().map(|v| v.name.as_str()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_widest_vectors_the_features_allow() {
        let avx512 = VectorIsa::from_features("+avx,+avx2,+fma,+f16c,+avx512f");
        assert_eq!(
            (avx512.lanes, avx512.registers, avx512.fma, avx512.f16c),
            (16, 32, true, true)
        );
        let avx2 = VectorIsa::from_features("+avx,+avx2,+fma,-f16c,-avx512f");
        assert_eq!((avx2.lanes, avx2.registers, avx2.fma, avx2.f16c), (8, 16, true, false));
        assert_eq!(VectorIsa::from_features("+sse4.2,-avx").lanes, 4);
    }
}
