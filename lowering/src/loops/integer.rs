//! Integer products: `matmul_integer_packed`, the exact i32 sums of u8 x i8 products of a
//! matrix `a` and weights packed in groups of four depths (`mx::depth_pairing` of i8), less
//! `a_zero` times each column's sum.
//!
//! On a vector unit it is the register-tiled product of `tile.rs` with `Sums::ByteGroups`: each
//! step of the depth loop takes four depths at once, A's four bytes of a row as one i32
//! broadcast to every lane, B's lane the four i8 of one column, and adds the four products of
//! each lane to its i32 sum: one `vpdpbusd` where the machine has VNNI (AVX-512 VNNI, or
//! AVX-VNNI's 256-bit form), else shifts, multiplies and adds of i32 lanes, which are as exact
//! (no saturating 16-bit step, unlike `vpmaddubsw`). The column sums are subtracted as each
//! vector of sums is finished, before the fused epilogue (dequantisation and what follows).
//! On a machine with AMX tiles the product runs on them instead (`amx.rs`: `tdpbusd`, 16 x 16
//! x 64 multiply-adds a step). Without a vector unit (`ref`), plain loops sum each element.

use super::amx;
use super::buffer::Buf;
use super::emit::{type_with_lanes, Emitter, Ty, V};
use super::tile::{self, At, MicroTile, Panels, Product, RowsOfA, Step, Sums};
use super::vector::VectorIsa;

pub(super) const I32: Ty = Ty::Int { bits: 32, signed: true };

/// Depths in a group: the four bytes of one 32-bit lane.
pub(super) const GROUP: usize = 4;

/// `out = a x unpack(bp) - a_zero * column_sums` (`matmul_integer_packed`).
pub fn matmul_integer_packed(e: &mut Emitter, ins: &[Buf], out: &Buf) {
    let (a, bp, column_sums, a_zero) = (&ins[0], &ins[1], &ins[2], &ins[3]);
    let rank = a.rank();
    let depth = a.shape[rank - 1];
    match e.isa.filter(|_| out.holds_vectors() && !a.is_empty()) {
        Some(isa) if amx::integer_usable(isa, a, bp, out) => {
            let finish = |e: &mut Emitter, idx: &[V], sums: V| less_zero_point(e, idx, sums, column_sums, a_zero);
            amx::emit_integer(e, a, bp, out, &finish);
        }
        Some(isa) => {
            let at = |_: &mut Emitter, batch: &[V], row: &V, col: &V| [batch, &[row.clone(), col.clone()]].concat();
            let rows = ByteGroups::new(a, depth, &at);
            let finish = |_: &mut Emitter, _: &[V], sums: V| sums;
            let start = |e: &mut Emitter, column: &V, lanes: usize| {
                less_zero_point_start(e, column, lanes, column_sums, a_zero)
            };
            let product = Product {
                batch: out.extents()[..rank - 2].to_vec(),
                m: a.extents().swap_remove(rank - 2),
                n: out.shape[rank - 1],
                a: &rows,
                b: Panels::Packed(bp),
                out,
                out_at: &at,
                finish: &finish,
                sums: Sums::ByteGroups,
                start: Some(&start),
            };
            tile::emit(e, &product, isa);
        }
        None => plain_loops(e, ins, out),
    }
}

/// Each element summed on its own, in i32 (the `ref` target).
fn plain_loops(e: &mut Emitter, ins: &[Buf], out: &Buf) {
    let (a, bp, column_sums, a_zero) = (&ins[0], &ins[1], &ins[2], &ins[3]);
    let rank = a.rank();
    let depth = a.shape[rank - 1];
    e.nest(&out.shape, |e, idx| {
        let (m, n) = (&idx[rank - 2], &idx[rank - 1]);
        let zero = e.zero(I32);
        let sums = e.nest_acc(&[depth], &[zero], |e, k, acc| {
            let k = &k[0];
            let x = e.read(a, &[&idx[..rank - 2], &[m.clone(), k.clone()]].concat());
            let x = e.convert(&x, I32);
            let w = packed_weight(e, bp, n, k);
            let product = e.mul(&x, &w);
            vec![e.add(&acc[0], &product)]
        });
        let v = less_zero_point(e, idx, sums[0].clone(), column_sums, a_zero);
        e.write(out, idx, &v);
    });
}

/// `sums` (at output index `idx`, a vector along the last dimension or one element) less the
/// zero point times the columns' sums: the sums of the centred products.
pub(super) fn less_zero_point(e: &mut Emitter, idx: &[V], sums: V, column_sums: &Buf, zero: &Buf) -> V {
    let zero = e.read(zero, &[]);
    let column = &idx[idx.len() - 1..];
    let column_sums = e.read_lanes(column_sums, column, sums.lanes);
    let correction = e.mul(&zero, &column_sums);
    e.sub(&sums, &correction)
}

/// `-zero * column_sums` for the `lanes` columns from `column` on: where a tiled product's
/// sums start, so that they end as `less_zero_point`'s.
pub(super) fn less_zero_point_start(e: &mut Emitter, column: &V, lanes: usize, column_sums: &Buf, zero: &Buf) -> V {
    let nothing = e.zero(I32);
    let nothing = e.splat(&nothing, lanes);
    less_zero_point(e, std::slice::from_ref(column), nothing, column_sums, zero)
}

/// The weight of column `n` at depth `k` in i8 panels of groups of four depths, as i32.
pub(super) fn packed_weight(e: &mut Emitter, bp: &Buf, n: &V, k: &V) -> V {
    let panel = (bp.shape[2] / GROUP) as i64;
    let (p, j) = (e.div_idx(n, panel), e.rem_idx(n, panel));
    let (group, t) = (e.div_idx(k, GROUP as i64), e.rem_idx(k, GROUP as i64));
    let at = e.lin(&[(&j, GROUP as i64), (&t, 1)], 0);
    let w = e.read(bp, &[p, group, at]);
    e.convert(&w, I32)
}

/// The four bytes at `at` in `memref` (named `name`, of type `memref_ty`) as one i32: read
/// under `mask` (a `vector<4xi1>`, zeros where it is unset) when one is given.
pub(super) fn word(e: &mut Emitter, (name, memref_ty): (&str, &str), at: &str, mask: Option<&V>) -> V {
    let bytes_ty = Ty::Int { bits: 8, signed: false };
    let bytes = match mask {
        None => e.op_lanes(
            "g",
            bytes_ty,
            GROUP,
            &format!("vector.load {name}[{at}] : {memref_ty}, vector<4xi8>"),
        ),
        Some(mask) => {
            let zero = e.int(bytes_ty, 0);
            let zeros = e.splat(&zero, GROUP);
            e.op_lanes(
                "g",
                bytes_ty,
                GROUP,
                &format!(
                    "vector.maskedload {name}[{at}], {mask}, {zeros} : {memref_ty}, vector<4xi1>, vector<4xi8> into vector<4xi8>"
                ),
            )
        }
    };
    let word = e.op_lanes(
        "g",
        I32,
        1,
        &format!("vector.bitcast {bytes} : vector<4xi8> to vector<1xi32>"),
    );
    e.op("g", I32, &format!("vector.extract {word}[0] : i32 from vector<1xi32>"))
}

/// A as a u8 matrix read four depths at a time: at step `g`, the bytes of depths `4g..4g + 4`
/// of each row as one i32 (those past the depth, in a last partial group, read as zeros).
pub(super) struct ByteGroups<'a> {
    buf: &'a Buf,
    depth: usize,
    at: At<'a>,
}

impl RowsOfA for ByteGroups<'_> {
    fn steps(&self) -> (usize, usize) {
        (self.depth.div_ceil(GROUP), 1)
    }

    fn tile(&self, isa: VectorIsa, m: usize) -> MicroTile {
        MicroTile::for_matrix(isa, m)
    }

    fn accumulate(
        &self,
        e: &mut Emitter,
        batch: &[V],
        rows: &[V],
        inits: &[V],
        (from, to): (&V, &V),
        step: Step,
    ) -> Vec<V> {
        let groups = self.depth.div_ceil(GROUP) as u64;
        e.for_between(from, to, groups, inits, |e, g, acc| {
            let k = e.lin(&[(g, GROUP as i64)], 0);
            let a: Vec<V> = rows
                .iter()
                .map(|row| {
                    let idx = (self.at)(e, batch, row, &k);
                    self.group(e, &idx, &k)
                })
                .collect();
            step(e, acc, g, &a)
        })
    }
}

impl<'a> ByteGroups<'a> {
    /// The rows of `buf`, `depth` bytes each, the element at depth `k` of row `r` at
    /// `at(batch, r, k)`.
    pub(super) fn new(buf: &'a Buf, depth: usize, at: At<'a>) -> Self {
        ByteGroups { buf, depth, at }
    }

    /// The four bytes from `idx` (depth `k`) on, as one i32; where the depth is not a multiple
    /// of four, a masked load, so that the last group reads no byte past its row.
    fn group(&self, e: &mut Emitter, idx: &[V], k: &V) -> V {
        let buf = self.buf;
        let (at, memref) = (super::vector::index_list(idx), buf.memref());
        let mask = (!self.depth.is_multiple_of(GROUP)).then(|| {
            let end = e.idx(self.depth as i64);
            let left = e.lin(&[(&end, 1), (k, -1)], 0);
            e.op_lanes("m", Ty::I1, GROUP, &format!("vector.create_mask {left} : vector<4xi1>"))
        });
        word(e, (&buf.name, &memref), &at, mask.as_ref())
    }
}

impl Emitter {
    /// `lanes` lanes of i32 from i8 panels in groups of four: the `4 * lanes` bytes from `idx`
    /// on, each lane one column's four depths.
    pub fn read_byte_groups(&mut self, buf: &Buf, idx: &[V], lanes: usize) -> V {
        let bytes = self.vload(buf, idx, GROUP * lanes);
        let to = type_with_lanes(I32, lanes);
        self.op_lanes(
            "b",
            I32,
            lanes,
            &format!("vector.bitcast {bytes} : {} to {to}", bytes.mlir_ty()),
        )
    }

    /// `acc` plus, in each i32 lane, the four products of the lane's bytes of `a` (u8) and of
    /// `b` (i8), exactly: `vpdpbusd` where the vector unit has VNNI, else each byte taken out
    /// with shifts and multiplied in i32.
    pub fn dot_u8_i8(&mut self, acc: &V, a: &V, b: &V) -> V {
        let lanes = acc.lanes;
        let vnni = self.isa.is_some_and(|isa| isa.vnni) && matches!(lanes, 8 | 16);
        if vnni {
            let ty = type_with_lanes(I32, lanes);
            let bytes = format!("vector<{}xi8>", GROUP * lanes);
            let [a, b] = [a, b].map(|v| {
                let at = format!("vector.bitcast {v} : {ty} to {bytes}");
                self.op_lanes("d", Ty::Int { bits: 8, signed: false }, GROUP * lanes, &at)
            });
            let bits = 32 * lanes;
            return self.op_lanes(
                "d",
                I32,
                lanes,
                &format!(
                    "llvm.call_intrinsic \"llvm.x86.avx512.vpdpbusd.{bits}\"({acc}, {a}, {b}) : ({ty}, {bytes}, {bytes}) -> {ty}"
                ),
            );
        }
        let mut sum = acc.clone();
        for byte in 0..GROUP as u32 {
            let shifted = self.bits_const("shrui", a, 8 * byte);
            let x = self.bits_const("andi", &shifted, 0xff);
            let raised = self.bits_const("shli", b, 24 - 8 * byte);
            let w = self.bits_const("shrsi", &raised, 24);
            let product = self.mul(&x, &w);
            sum = self.add(&sum, &product);
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, lower_one, lower_one_for, t, AVX2, AVX512};
    use mxc_dialects::{Attr, DType, OpKind};

    fn operands(m: usize, k: usize, n: usize) -> Vec<mxc_dialects::TensorType> {
        vec![
            t(DType::U8, &[m, k]),
            t(DType::I8, &[n.div_ceil(16), k.div_ceil(4), 64]),
            t(DType::I32, &[n]),
            t(DType::I32, &[]),
        ]
    }

    #[test]
    fn with_vnni_each_group_of_four_depths_is_one_dot_product_instruction() {
        let vnni = super::VectorIsa { vnni: true, ..AVX512 };
        let m = lower_one_for(
            vnni,
            OpKind::MatMulIntegerPacked,
            &operands(20, 64, 100),
            attrs(&[("n", Attr::Int(100))]),
        );
        check_in_order(
            &m,
            &[
                "vector.load %in0",
                "vector.bitcast",
                "vector.broadcast",
                "llvm.x86.avx512.vpdpbusd.512",
                "arith.muli",
                "arith.subi",
                "vector.maskedstore",
            ],
        );
        // 8 rows x 3 vectors of i32 sums, as the f32 product of a matrix
        let accumulators = m.lines().find(|l| l.contains("iter_args")).unwrap();
        assert_eq!(accumulators.matches("vector<16xi32>").count(), 21, "{accumulators}");
    }

    #[test]
    fn without_vnni_the_bytes_are_multiplied_in_i32_lanes_never_saturating() {
        for isa in [AVX512, AVX2] {
            let m = lower_one_for(
                isa,
                OpKind::MatMulIntegerPacked,
                &operands(5, 8, 16),
                attrs(&[("n", Attr::Int(16))]),
            );
            assert!(!m.contains("vpdpbusd"), "{m}");
            assert!(!m.contains("xi16>"), "no 16-bit step: {m}");
            check_in_order(
                &m,
                &[
                    "arith.shrui",
                    "arith.andi",
                    "arith.shli",
                    "arith.shrsi",
                    "arith.muli",
                    "arith.addi",
                ],
            );
        }
    }

    #[test]
    fn a_depth_not_a_multiple_of_four_reads_its_last_group_masked() {
        let vnni = super::VectorIsa { vnni: true, ..AVX512 };
        let m = lower_one_for(
            vnni,
            OpKind::MatMulIntegerPacked,
            &operands(3, 10, 16),
            attrs(&[("n", Attr::Int(16))]),
        );
        check_in_order(&m, &["vector.create_mask", "vector.maskedload %in0", "vpdpbusd"]);
    }

    #[test]
    fn the_reference_loops_sum_in_i32() {
        let m = lower_one(
            OpKind::MatMulIntegerPacked,
            &operands(3, 10, 16),
            attrs(&[("n", Attr::Int(16))]),
        )
        .mlir;
        check_in_order(
            &m,
            &["arith.extui", "arith.extsi", "arith.muli", "arith.addi", "arith.subi"],
        );
    }
}
