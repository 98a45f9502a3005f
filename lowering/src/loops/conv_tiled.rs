//! Channels-last convolutions with packed weights (`conv_nhwc_packed`) on a vector unit.
//!
//! - **Implicit GEMM** (one group): the convolution is the product of A, whose rows are the
//!   output pixels and whose depth is the window times the channels (`kh, kw, c`), with the
//!   packed weights; A is never built. The micro-tiles of `tile.rs` read it straight from the
//!   input: per window position, each row's input pixel is found once, and the depth loop over
//!   its channels reads them in order (with few channels, as the first layer's 3, per kernel
//!   row: `kw` pixels side by side are one run of `kw * C` elements). A position outside the
//!   input (padding) reads zeros instead, from a scratch buffer chosen with a pointer select,
//!   so the inner loop has no test; a micro-tile whose rows' windows all lie inside the input
//!   (most of them) skips even that choice, in a copy of the depth loop without it.
//! - **On AMX tiles** (one group of bf16, the weights packed as bf16 pairs, on a machine with
//!   AMX): `amx.rs`.
//! - **Depthwise** (a group per channel): vectors run across the channels
//!   (`conv_tiled/depthwise.rs`).

use super::amx;
use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::sizes::Extent;
use super::tile::{self, Matrix, MicroTile, Panels, Product, RowsOfA, Start, Step, Sums, PANEL};
use super::vector::VectorIsa;
use super::window::{spans, Window};
use depthwise::Bytes;
use mxc_dialects::DType;

/// Writes `conv_nhwc_packed` on `ins` (`x`, packed weights, optional bias) into `out` as an
/// implicit GEMM or a depthwise kernel when it is one of those and everything holds f32 on a
/// vector unit; returns whether it did (else the caller writes the scalar form).
pub fn lower(e: &mut Emitter, window: &Window, group: usize, kernel: &[usize], ins: &[Buf], out: &Buf) -> bool {
    let (x, wp, bias) = (&ins[0], &ins[1], ins.get(2));
    let Some(isa) = e.isa else {
        return false;
    };
    let finish = |e: &mut Emitter, idx: &[V], acc: V| match bias {
        Some(b) => {
            let bv = e.read_bcast_lanes(b, idx, acc.lanes);
            e.add(&acc, &bv)
        }
        None => acc,
    };
    let sized_at_run_time = x.is_sized_at_run_time() || out.is_sized_at_run_time();
    if !sized_at_run_time && amx::conv_usable(isa, group, x, wp, out) && bias.is_none_or(Buf::holds_float_vectors) {
        amx::emit_conv(e, window, kernel, x, wp, out, &finish);
        return true;
    }
    if !ins.iter().chain([out]).all(Buf::holds_float_vectors) || wp.shape[2] != PANEL {
        return false;
    }
    let channels = x.shape[3];
    let conv = PackedConv {
        isa,
        window,
        kernel,
        x,
        wp,
        out,
        finish: &finish,
        bytes: None,
    };
    // the implicit GEMM reads the image's runs of channels as f32 (`ROW_SOURCE`)
    if group == 1 && x.dtype == DType::F32 {
        conv.implicit_gemm(e);
        return true;
    }
    if group == channels && out.shape[3] == channels {
        conv.depthwise(e);
        return true;
    }
    false
}

/// A channels-last convolution with packed weights, on a vector unit.
struct PackedConv<'a> {
    isa: VectorIsa,
    window: &'a Window,
    kernel: &'a [usize],
    x: &'a Buf,
    wp: &'a Buf,
    out: &'a Buf,
    /// The value stored for accumulated sums (the bias added).
    finish: &'a dyn Fn(&mut Emitter, &[V], V) -> V,
    /// An image of bytes (`lower_integer_depthwise`); `None` for an image of floats.
    bytes: Option<Bytes>,
}

/// The rows of A of an implicit GEMM: output pixels, each reading the input under the window,
/// one run of consecutive input elements per outer step of the depth: a window position's
/// channels (`C` long), or for few channels a whole kernel row's (`kw * C` long, adjacent in
/// memory channels last).
struct ImageRows<'a> {
    x: &'a Buf,
    window: &'a Window,
    kernel: &'a [usize],
    /// The output's height and width.
    out_hw: [Extent; 2],
    /// The image's batch and row strides (`image_strides`).
    strides: [Extent; 2],
    /// Whether an outer step is a kernel row (else a window position).
    kernel_rows: bool,
    /// The micro-tile the product is computed in.
    tile: MicroTile,
    /// The equal parts a run is read in, each an outer step of its own, so that the depth can
    /// be cut into chunks inside a run (a window position's 512 channels are 64 KB of B for a
    /// tile of 32 columns, more than the L1 cache holds).
    parts: usize,
    /// `x` as a flat `memref<?xf32>`, made at the function's entry.
    flat: String,
    /// Where a run that leaves the input is read instead, when one can (padding): a row of
    /// zeros (window positions), or per tile row a copy of the run with zeros outside the input
    /// (kernel rows); made at the function's entry.
    outside: Option<String>,
}

/// `memref<?xf32>`: the type runs are read through (the input or the scratch, chosen per row).
const ROW_SOURCE: &str = "memref<?xf32>";

/// Kernel rows are the outer steps when a kernel row's run is at most this long.
pub(super) const KERNEL_ROW_RUN: usize = 64;

/// Output pixel `row` of an implicit GEMM (rows numbered `n, oh, ow` over the output's height
/// and width `out_hw`) as `[n, oh, ow]`.
pub(super) fn pixel(e: &mut Emitter, row: &V, [oh, ow]: &[Extent; 2]) -> [V; 3] {
    let w = e.rem_extent(row, ow);
    let rest = e.div_extent(row, ow);
    let h = e.rem_extent(&rest, oh);
    let n = e.div_extent(&rest, oh);
    [n, h, w]
}

/// The image `x` as one flat memref of type `flat_ty` (`memref<?x...>`), at the function's
/// entry: its name.
pub(super) fn flat_view(e: &mut Emitter, x: &Buf, flat_ty: &str) -> String {
    let flat = e.fresh("image");
    let len = e.extent_product(&x.extents()).operand();
    e.line(&format!(
        "{flat} = memref.reinterpret_cast {} to offset: [0], sizes: [{len}], strides: [1] : {} to {flat_ty}",
        x.name,
        x.memref()
    ));
    flat
}

/// The strides of a channels-last image's batch and row (`H * W * C`, `W * C`), computed at
/// the kernel's entry where the image's sizes are known only at run time.
pub(super) fn image_strides(e: &mut Emitter, x: &Buf) -> [Extent; 2] {
    let dims = x.extents();
    [e.extent_product(&dims[1..]), e.extent_product(&dims[2..])]
}

/// The offset of input pixel `[n, ih, iw]`'s first channel in a channels-last image whose
/// batch and row strides are `strides` and which has `channels` channels.
pub(super) fn image_offset(e: &mut Emitter, [n, ih, iw]: [&V; 3], strides: &[Extent; 2], channels: usize) -> V {
    let channels = Extent::Fixed(channels);
    e.lin_over(&[(n, &strides[0]), (ih, &strides[1]), (iw, &channels)], 0)
}

/// A scratch of `len` elements on the stack, at the function's entry (so one per thread),
/// seen as the flat memref the image is read through: `(element type, flat memref type)`.
pub(super) fn flat_scratch(e: &mut Emitter, hint: &str, len: usize, (elem, flat_ty): (&str, &str)) -> String {
    let name = e.fresh(hint);
    e.line(&format!("{name}_ = memref.alloca() : memref<{len}x{elem}>"));
    e.line(&format!(
        "{name} = memref.cast {name}_ : memref<{len}x{elem}> to {flat_ty}"
    ));
    name
}

/// Whether some window of a convolution of the channels-last image `x` into `out_hw` reaches
/// past the image's height or width (into the padding).
pub(super) fn leaves_the_image(window: &Window, x: &Buf, out_hw: &[Extent; 2], kernel: &[usize]) -> bool {
    let dims = x.extents();
    (0..2).any(|d| {
        let (below, above) = window.leaves(d, (0, &dims[d + 1]), &out_hw[d], kernel[d]);
        below || above
    })
}

/// The implicit GEMM of a channels-last convolution into `out`: the output pixels are the
/// rows (read by `a`), the packed weights `wp` the panels; the result is written as the matrix
/// `[pixels, channels]` where its epilogue allows, else indexed by `(n, oh, ow)` found from
/// the row. The sums start from `start` where one is given (else zero).
pub(super) fn pixel_product(
    e: &mut Emitter,
    isa: VectorIsa,
    (a, wp): (&dyn RowsOfA, &Buf),
    out: &Buf,
    finish: &dyn Fn(&mut Emitter, &[V], V) -> V,
    (sums, start): (Sums, Option<Start>),
) {
    let dims = out.extents();
    let out_hw = [dims[1].clone(), dims[2].clone()];
    // a result sized at run time is written at `[n, oh, ow, channel]`, found from the row
    let matrix = match out.is_sized_at_run_time() {
        true => None,
        false => e.as_matrix(out),
    };
    let pixel_at = |e: &mut Emitter, _: &[V], row: &V, col: &V| {
        let [n, h, w] = pixel(e, row, &out_hw);
        vec![n, h, w, col.clone()]
    };
    let matrix_at = |_: &mut Emitter, _: &[V], row: &V, col: &V| vec![row.clone(), col.clone()];
    let product = Product {
        batch: Vec::new(),
        m: e.extent_product(&dims[..3]),
        n: out.shape[3],
        a,
        b: Panels::Packed(wp),
        out: matrix.as_ref().unwrap_or(out),
        out_at: if matrix.is_some() { &matrix_at } else { &pixel_at },
        finish,
        sums,
        start,
    };
    tile::emit(e, &product, isa);
}

impl ImageRows<'_> {
    /// The length of one run.
    fn run(&self) -> usize {
        match self.kernel_rows {
            true => self.kernel[1] * self.x.shape[3],
            false => self.x.shape[3],
        }
    }

    /// Where tile row `i` (output pixel `[n, oh, ow]`) reads the run of outer step `k`
    /// (`[kh, kw]`, `kw` 0 for a kernel row): a source and an offset into it.
    /// `checked`: whether the run may leave the input (else it is read in place, untested).
    fn source(&self, e: &mut Emitter, i: usize, [n, oh, ow]: &[V; 3], k: &[V; 2], checked: bool) -> (String, V) {
        let o = [oh.clone(), ow.clone()];
        let first = self.window.positions(e, &o, k);
        let at = image_offset(e, [n, &first[0], &first[1]], &self.strides, self.x.shape[3]);
        let Some(outside) = self.outside.as_ref().filter(|_| checked) else {
            return (self.flat.clone(), at);
        };
        let bounds = spans(&self.x.extents()[1..3]);
        let mut inside = self.window.inside(e, &first, &bounds, &self.out_hw, self.kernel);
        if self.kernel_rows {
            // the run ends at the kernel row's last column
            let last_column = e.idx(self.kernel[1] as i64 - 1);
            let last = self.window.positions(e, &o, &[k[0].clone(), last_column]);
            inside.extend(self.window.inside(e, &last, &bounds, &self.out_hw, self.kernel));
        }
        if inside.is_empty() {
            return (self.flat.clone(), at);
        }
        let ok = e.all(&inside);
        let instead = match self.kernel_rows {
            true => {
                let copy = e.idx((i * self.run()) as i64);
                let out = e.not(&ok);
                e.if_then(&out, |e| self.copy_run(e, &copy, &at, &first));
                copy
            }
            false => e.idx(0),
        };
        let source = e.fresh("row");
        e.line(&format!(
            "{source} = arith.select {ok}, {}, {outside} : {ROW_SOURCE}",
            self.flat
        ));
        (source, e.select(&ok, &at, &instead))
    }

    /// Copies a kernel row's run starting at input position `first` (offset `at` in the flat
    /// input) to the scratch at `to`, zeros where it lies outside the input.
    fn copy_run(&self, e: &mut Emitter, to: &V, at: &V, first: &[V]) {
        let outside = self.outside.as_ref().expect("a scratch to copy to");
        let zero = e.zero(Ty::F32);
        let run = Run {
            x: self.x,
            flat: (&self.flat, ROW_SOURCE, Ty::F32),
            len: self.run(),
        };
        run.copy(e, (outside, to), (at, first), &zero);
    }
}

/// A kernel row's run of a channels-last image `x`, read through its flat view `flat` (name,
/// memref type, element type): `len` consecutive elements, `kw` pixels' channels.
pub(super) struct Run<'a> {
    pub x: &'a Buf,
    pub flat: (&'a str, &'a str, Ty),
    pub len: usize,
}

impl Run<'_> {
    /// Copies the run from input position `first` (offset `at` in the flat image) to
    /// `scratch` (of the flat view's type) at `to`: `outside` where a pixel lies outside the
    /// image.
    pub(super) fn copy(&self, e: &mut Emitter, (scratch, to): (&str, &V), (at, first): (&V, &[V]), outside: &V) {
        let dims = self.x.extents();
        let channels = self.x.shape[3] as i64;
        let (flat, flat_ty, ty) = self.flat;
        e.for_each(self.len, |e, j| {
            let column = e.div_idx(&j, channels);
            let iw = e.lin(&[(&first[1], 1), (&column, 1)], 0);
            let (zero, h, w) = (e.idx(0), e.extent_value(&dims[1]), e.extent_value(&dims[2]));
            let conds = [
                e.cmp_idx("sge", &first[0], &zero),
                e.cmp_idx("slt", &first[0], &h),
                e.cmp_idx("sge", &iw, &zero),
                e.cmp_idx("slt", &iw, &w),
            ];
            let from = e.lin(&[(at, 1), (&j, 1)], 0);
            let v = e.when(&conds, std::slice::from_ref(outside), |e| {
                vec![e.op("x", ty, &format!("memref.load {flat}[{from}] : {flat_ty}"))]
            });
            let dest = e.lin(&[(to, 1), (&j, 1)], 0);
            e.store_line(&format!("memref.store {}, {scratch}[{dest}] : {flat_ty}", v[0]));
        });
    }
}

impl RowsOfA for ImageRows<'_> {
    fn prepare(&self, e: &mut Emitter) {
        // the row of zeros window positions outside the input read
        let Some(zeros) = self.outside.as_ref().filter(|_| !self.kernel_rows) else {
            return;
        };
        let zero = e.zero(Ty::F32);
        e.for_each(self.x.shape[3], |e, c| {
            e.store_line(&format!("memref.store {zero}, {zeros}[{c}] : {ROW_SOURCE}"));
        });
    }

    fn tile(&self, _: VectorIsa, _: usize) -> MicroTile {
        self.tile
    }

    fn steps(&self) -> (usize, usize) {
        let runs = if self.kernel_rows {
            self.kernel[0]
        } else {
            self.kernel.iter().product()
        };
        (runs * self.parts, self.run() / self.parts)
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
        if self.outside.is_none() {
            return self.depth_loop(e, &pixels, inits, (from, to), step, false);
        }
        // where every row's whole window lies inside the input (most tiles), the runs are read
        // in place without a test per row and step
        let interior = self.interior(e, &pixels);
        e.if_else_like(
            &interior,
            inits,
            |e| self.depth_loop(e, &pixels, inits, (from, to), step, false),
            |e| self.depth_loop(e, &pixels, inits, (from, to), step, true),
        )
    }
}

impl ImageRows<'_> {
    /// Whether the windows of all of `pixels` lie inside the input.
    fn interior(&self, e: &mut Emitter, pixels: &[[V; 3]]) -> V {
        let bounds = spans(&self.x.extents()[1..3]);
        let mut conds = Vec::new();
        for [_, oh, ow] in pixels {
            let o = [oh.clone(), ow.clone()];
            let first = [e.idx(0), e.idx(0)];
            let last = [e.idx(self.kernel[0] as i64 - 1), e.idx(self.kernel[1] as i64 - 1)];
            for k in [first, last] {
                let at = self.window.positions(e, &o, &k);
                conds.extend(self.window.inside(e, &at, &bounds, &self.out_hw, self.kernel));
            }
        }
        e.all(&conds)
    }

    /// The depth loop over outer steps `from..to` for the tile rows at `pixels`, each step's runs
    /// tested against the input's edges (`checked`) or read in place.
    fn depth_loop(
        &self,
        e: &mut Emitter,
        pixels: &[[V; 3]],
        inits: &[V],
        (from, to): (&V, &V),
        step: Step,
        checked: bool,
    ) -> Vec<V> {
        let (steps, part) = self.steps();
        e.for_between(from, to, steps as u64, inits, |e, s, acc| {
            let run = e.div_idx(s, self.parts as i64);
            let k = match self.kernel_rows {
                true => [run, e.idx(0)],
                false => [
                    e.div_idx(&run, self.kernel[1] as i64),
                    e.rem_idx(&run, self.kernel[1] as i64),
                ],
            };
            // where the part starts in each row's run, and in the depth
            let part_of_run = e.rem_idx(s, self.parts as i64);
            let sources: Vec<(String, V)> = pixels
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let (source, at) = self.source(e, i, p, &k, checked);
                    (source, e.lin(&[(&at, 1), (&part_of_run, part as i64)], 0))
                })
                .collect();
            let first = e.lin(&[(s, part as i64)], 0);
            e.nest_acc(&[part], acc, |e, j, acc| {
                let j = &j[0];
                let depth = e.lin(&[(&first, 1), (j, 1)], 0);
                let a: Vec<V> = sources
                    .iter()
                    .map(|(source, at)| {
                        let i = e.lin(&[(at, 1), (j, 1)], 0);
                        e.op("x", Ty::F32, &format!("memref.load {source}[{i}] : {ROW_SOURCE}"))
                    })
                    .collect();
                step(e, acc, &depth, &a)
            })
        })
    }
}

impl PackedConv<'_> {
    /// One group: the product of the window-gathered input with the packed weights.
    fn implicit_gemm(&self, e: &mut Emitter) {
        let (isa, window, kernel, x, wp, out, finish) = (
            self.isa,
            self.window,
            self.kernel,
            self.x,
            self.wp,
            self.out,
            self.finish,
        );
        let dims = out.extents();
        let out_hw = [dims[1].clone(), dims[2].clone()];
        let m = out.shape[3];
        let channels = x.shape[3];
        // a pointwise, stride-1 convolution without padding reads the image as the matrix
        // [pixels, channels]; the others gather runs of it through a flat view
        let pointwise = window.pointwise(kernel);
        let flat = match pointwise {
            true => String::new(),
            false => flat_view(e, x, ROW_SOURCE),
        };
        let padded = leaves_the_image(window, x, &out_hw, kernel);
        let kernel_rows = window.dilations[1] == 1 && kernel[1] * channels <= KERNEL_ROW_RUN && kernel[1] > 1;
        // the tile's shape is chosen for the pixels at the cost point where they vary
        let pixels = out.shape[..3].iter().product();
        let tile = match kernel_rows {
            true => MicroTile::for_short_runs(isa, pixels, m),
            false => MicroTile::for_isa(isa, pixels),
        };
        let outside = padded.then(|| {
            let size = match kernel_rows {
                true => tile.rows * kernel[1] * channels,
                false => channels,
            };
            flat_scratch(e, "outside", size, ("f32", ROW_SOURCE))
        });
        // a kernel row's run is short; a window position's channels may be cut
        let parts = match kernel_rows {
            true => 1,
            false => tile::run_parts(channels, tile.width()),
        };
        let rows = ImageRows {
            x,
            window,
            kernel,
            strides: image_strides(e, x),
            out_hw,
            kernel_rows,
            tile,
            parts,
            flat,
            outside,
        };
        let image = pointwise.then(|| {
            let pixels = e.extent_product(&x.extents()[..3]);
            e.view_over(x, vec![pixels, Extent::Fixed(channels)])
        });
        let image_at = |_: &mut Emitter, _: &[V], row: &V, k: &V| vec![row.clone(), k.clone()];
        let image_rows = image.as_ref().map(|buf| Matrix {
            buf,
            depth: channels,
            at: &image_at,
        });
        let a: &dyn RowsOfA = match &image_rows {
            Some(m) => m,
            None => &rows,
        };
        pixel_product(e, isa, (a, wp), out, finish, (Sums::Float, None));
    }
}

mod depthwise;
#[cfg(test)]
mod tests;

pub use depthwise::lower_integer_depthwise;
