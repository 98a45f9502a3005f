//! Integer convolutions channels last: `conv_nhwc_integer_packed`, the exact i32 sums of a u8
//! image (less its zero point) under the window times i8 weights packed in groups of four
//! depths (`integer.rs`'s panels; the depth runs over the window, then the channels).
//!
//! On a vector unit it is an implicit GEMM on `tile.rs`'s micro-tiles with `Sums::ByteGroups`:
//! the rows of A are the output pixels, and for each window position each row reads its input
//! pixel's channels four at a time (the channels are a multiple of four, so a group never
//! straddles two positions). A position outside the input (padding) reads a row of the zero
//! point instead, chosen with a pointer select, so that the sum of every window is taken over
//! all its positions and `zero * column_sums` subtracted once, as the product does. Without a
//! vector unit (`ref`), plain loops sum the centred values of the positions inside the input.
//! Channels that are not a multiple of four, and short kernel rows (at most 256 bytes: 16 or
//! 64 channels by 3), are read a kernel row at a time (`integer_conv_rows.rs`).

use super::buffer::Buf;
use super::conv_tiled::{flat_scratch, flat_view, leaves_the_image, pixel, pixel_product, KERNEL_ROW_RUN};
use super::emit::{fixed, Emitter, Ty, V};
use super::integer::{less_zero_point_start, packed_weight, word, ByteGroups, GROUP, I32};
use super::integer_conv_rows::{kernel_row_depth, KernelRowGroups};
use super::sizes::Extent;
use super::tile::{MicroTile, RowsOfA, Start, Step, Sums};
use super::vector::VectorIsa;
use super::window::{spans, Window};
use mxc_dialects::Attrs;

/// The type the image is read through: flat bytes (the input, or the row of zero points).
const BYTES: &str = "memref<?xi8>";

/// Kernel rows are the outer steps when a kernel row is at most this many bytes: the f32
/// kernel's limit (`KERNEL_ROW_RUN` elements) in bytes.
const KERNEL_ROW_BYTES: usize = 4 * KERNEL_ROW_RUN;

/// `out = conv(x - x_zero, unpack(wp))` (`conv_nhwc_integer_packed`).
pub fn conv_nhwc_integer_packed(e: &mut Emitter, attrs: &Attrs, ins: &[Buf], out: &Buf) -> Result<(), String> {
    let window = Window::from_attrs(attrs)?;
    let kernel = attrs.dims("kernel")?;
    match e.isa.filter(|_| out.holds_vectors()) {
        Some(isa) => implicit_gemm(e, isa, &window, &kernel, ins, out),
        None => plain_loops(e, &window, &kernel, ins, out),
    }
    Ok(())
}

fn implicit_gemm(e: &mut Emitter, isa: VectorIsa, window: &Window, kernel: &[usize], ins: &[Buf], out: &Buf) {
    let (x, wp, column_sums, x_zero) = (&ins[0], &ins[1], &ins[2], &ins[3]);
    let [batch, oh, ow] = [0, 1, 2].map(|d| out.shape[d]);
    let out_hw = [oh, ow].map(Extent::Fixed);
    let channels = x.shape[3];
    let finish = |_: &mut Emitter, _: &[V], sums: V| sums;
    let start =
        |e: &mut Emitter, column: &V, lanes: usize| less_zero_point_start(e, column, lanes, column_sums, x_zero);
    let sums = (Sums::ByteGroups, Some(&start as Start));
    if window.pointwise(kernel) {
        // pointwise: the image is the matrix [pixels, channels], each row in place (no
        // window to place, so no pixel's coordinates to find per row)
        let image = e.view(x, &[x.len() / channels, channels]);
        let at = |_: &mut Emitter, _: &[V], row: &V, k: &V| vec![row.clone(), k.clone()];
        let rows = ByteGroups::new(&image, channels, &at);
        return pixel_product(e, isa, (&rows, wp), out, &finish, sums);
    }
    let flat = flat_view(e, x, BYTES);
    // a kernel row at a time: channels not in whole groups, or a short kernel row of whole
    // groups (16 channels by 3: 12 steps per kernel row rather than 4 per window position,
    // each of which finds every tile row's pixel)
    let short_rows = kernel[1] > 1 && window.dilations[1] == 1 && kernel[1] * channels <= KERNEL_ROW_BYTES;
    if !channels.is_multiple_of(GROUP) || short_rows {
        let pixels = batch * oh * ow;
        let tile = MicroTile::for_short_runs(isa, pixels, out.shape[3]);
        let scratch = leaves_the_image(window, x, &out_hw, kernel).then(|| {
            let size = tile.rows * kernel_row_depth(kernel[1], channels);
            flat_scratch(e, "outside", size, ("i8", BYTES))
        });
        let rows = KernelRowGroups {
            x,
            x_zero,
            window,
            kernel,
            out_hw: out_hw.clone(),
            tile,
            flat,
            scratch,
        };
        return pixel_product(e, isa, (&rows, wp), out, &finish, sums);
    }
    let zeros =
        leaves_the_image(window, x, &out_hw, kernel).then(|| flat_scratch(e, "zero_points", channels, ("i8", BYTES)));
    let rows = WindowGroups {
        x,
        x_zero,
        window,
        kernel,
        out_hw,
        tile: MicroTile::for_isa(isa, batch * oh * ow),
        flat,
        zeros,
    };
    pixel_product(e, isa, (&rows, wp), out, &finish, sums);
}

/// The rows of A: output pixels, each reading its window's input pixels' channels four at a
/// time; an outer step of the depth is a window position.
struct WindowGroups<'a> {
    x: &'a Buf,
    x_zero: &'a Buf,
    window: &'a Window,
    kernel: &'a [usize],
    out_hw: [Extent; 2],
    tile: MicroTile,
    /// `x` as flat bytes, made at the function's entry.
    flat: String,
    /// Where a position outside the input reads instead, when one can (padding): a row of
    /// the zero point, filled per iteration of the parallel loop.
    zeros: Option<String>,
}

impl WindowGroups<'_> {
    /// Where the pixel `[n, oh, ow]` reads window position `k`'s channels: a source and the
    /// offset of the first channel in it.
    fn source(&self, e: &mut Emitter, [n, oh, ow]: &[V; 3], k: &[V; 2]) -> (String, V) {
        let [_, height, width, channels] = [0, 1, 2, 3].map(|d| self.x.shape[d] as i64);
        let first = self.window.positions(e, &[oh.clone(), ow.clone()], k);
        let at = e.lin(
            &[
                (n, height * width * channels),
                (&first[0], width * channels),
                (&first[1], channels),
            ],
            0,
        );
        let bounds = spans(&self.x.extents()[1..3]);
        let inside = self.window.inside(e, &first, &bounds, &self.out_hw, self.kernel);
        let Some(zeros) = self.zeros.as_ref().filter(|_| !inside.is_empty()) else {
            return (self.flat.clone(), at);
        };
        let ok = e.all(&inside);
        let source = e.fresh("row");
        e.line(&format!(
            "{source} = arith.select {ok}, {}, {zeros} : {BYTES}",
            self.flat
        ));
        let start = e.idx(0);
        (source, e.select(&ok, &at, &start))
    }
}

impl RowsOfA for WindowGroups<'_> {
    fn prepare(&self, e: &mut Emitter) {
        let Some(zeros) = &self.zeros else {
            return;
        };
        let zero = e.read(self.x_zero, &[]);
        let byte = e.convert(&zero, Ty::Int { bits: 8, signed: false });
        e.for_each(self.x.shape[3], |e, c| {
            e.store_line(&format!("memref.store {byte}, {zeros}[{c}] : {BYTES}"));
        });
    }

    fn tile(&self, _: VectorIsa, _: usize) -> MicroTile {
        self.tile
    }

    fn steps(&self) -> (usize, usize) {
        (self.kernel.iter().product(), self.x.shape[3] / GROUP)
    }

    fn accumulate(
        &self,
        e: &mut Emitter,
        _batch: &[V],
        rows: &[V],
        inits: &[V],
        (from, to): (&V, &V),
        step: Step,
    ) -> Vec<V> {
        let pixels: Vec<[V; 3]> = rows.iter().map(|r| pixel(e, r, &self.out_hw)).collect();
        let (positions, groups) = self.steps();
        e.for_between(from, to, positions as u64, inits, |e, s, acc| {
            let k = [e.div_idx(s, self.kernel[1] as i64), e.rem_idx(s, self.kernel[1] as i64)];
            let sources: Vec<(String, V)> = pixels.iter().map(|p| self.source(e, p, &k)).collect();
            let first = e.lin(&[(s, groups as i64)], 0);
            e.nest_acc(&[groups], acc, |e, g, acc| {
                let g = &g[0];
                let depth = e.lin(&[(&first, 1), (g, 1)], 0);
                let a: Vec<V> = sources
                    .iter()
                    .map(|(source, at)| {
                        let i = e.lin(&[(at, 1), (g, GROUP as i64)], 0);
                        word(e, (source, BYTES), &i.to_string(), None)
                    })
                    .collect();
                step(e, acc, &depth, &a)
            })
        })
    }
}

/// Each element summed on its own over the window positions inside the input, in i32 (the
/// `ref` target).
fn plain_loops(e: &mut Emitter, window: &Window, kernel: &[usize], ins: &[Buf], out: &Buf) {
    let (x, wp, x_zero) = (&ins[0], &ins[1], &ins[3]);
    let [height, width, channels] = [1, 2, 3].map(|d| x.shape[d]);
    let out_hw = fixed(&out.shape[1..3]);
    e.nest(&out.shape, |e, idx| {
        let [n, oh, ow, m] = [0, 1, 2, 3].map(|d| idx[d].clone());
        let zero = e.read(x_zero, &[]);
        let init = e.zero(I32);
        let sums = e.nest_acc(&[kernel[0], kernel[1], channels], &[init], |e, k, acc| {
            let at = window.positions(e, &[oh.clone(), ow.clone()], &k[..2]);
            let bounds = spans(&fixed(&[height, width]));
            let inside = window.inside(e, &at, &bounds, &out_hw, kernel);
            let nothing = e.zero(I32);
            let product = e.when(&inside, &[nothing], |e| {
                let v = e.read(x, &[n.clone(), at[0].clone(), at[1].clone(), k[2].clone()]);
                let v = e.convert(&v, I32);
                let centred = e.sub(&v, &zero);
                // kernel rows of whole groups of four depths (`integer_conv_rows.rs`; with a
                // multiple of four channels, already whole)
                let row_depth = kernel_row_depth(kernel[1], channels);
                let depth = e.lin(&[(&k[0], row_depth as i64), (&k[1], channels as i64), (&k[2], 1)], 0);
                let w = packed_weight(e, wp, &m, &depth);
                vec![e.mul(&centred, &w)]
            });
            vec![e.add(&acc[0], &product[0])]
        });
        e.write(out, idx, &sums[0]);
    });
}

#[cfg(test)]
mod tests {
    use super::super::testing::{attrs, check_in_order, lower_one, lower_one_for, t, AVX512};
    use mxc_dialects::{Attr, Attrs, DType, OpKind, TensorType};

    fn operands(c: usize, m: usize) -> Vec<TensorType> {
        vec![
            t(DType::U8, &[1, 6, 6, c]),
            t(DType::I8, &[m.div_ceil(16), 9 * c / 4, 64]),
            t(DType::I32, &[m]),
            t(DType::I32, &[]),
        ]
    }

    fn window(pads: i64) -> Attrs {
        attrs(&[
            ("dilations", Attr::Ints(vec![1, 1])),
            ("kernel", Attr::Ints(vec![3, 3])),
            ("out_channels", Attr::Int(20)),
            ("pads", Attr::Ints(vec![pads; 4])),
            ("strides", Attr::Ints(vec![1, 1])),
        ])
    }

    #[test]
    fn a_padded_window_reads_a_row_of_zero_points_outside_the_input() {
        // 96 channels: kernel rows of 288 bytes, so the depth goes by window positions
        let vnni = super::VectorIsa { vnni: true, ..AVX512 };
        let m = lower_one_for(vnni, OpKind::ConvNhwcIntegerPacked, &operands(96, 20), window(1));
        check_in_order(
            &m,
            &[
                "memref.reinterpret_cast %in0",
                "memref.alloca() : memref<96xi8>",
                "arith.trunci",
                "memref.store",
                "arith.select",
                "vector.load %row",
                "vpdpbusd",
                "arith.subi",
            ],
        );
        // without padding every position is read in place
        let unpadded = lower_one_for(vnni, OpKind::ConvNhwcIntegerPacked, &operands(96, 20), window(0));
        assert!(!unpadded.contains("memref.alloca() : memref<96xi8>"), "{unpadded}");
    }

    #[test]
    fn the_reference_loops_skip_positions_outside_the_input() {
        let m = lower_one(OpKind::ConvNhwcIntegerPacked, &operands(8, 20), window(1)).mlir;
        check_in_order(
            &m,
            &[
                "scf.if",
                "arith.extui",
                "arith.subi",
                "arith.extsi",
                "arith.muli",
                "arith.addi",
            ],
        );
    }
}
