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
//! - **Depthwise** (a group per channel): vectors run across the channels; for each output
//!   pixel the window positions inside the input are a rectangle, so the loops over it have
//!   bounds computed per pixel and no test inside, and several vectors of channels accumulate
//!   at once.

use super::amx;
use super::buffer::Buf;
use super::emit::{Emitter, Ty, V};
use super::sizes::Extent;
use super::tile::{self, Matrix, MicroTile, Panels, Product, RowsOfA, Start, Step, Sums, PANEL};
use super::vector::VectorIsa;
use super::window::{spans, Window};
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

/// Writes `conv_nhwc_integer_depthwise` on `ins` (`x` bytes, i8 panels, the zero point) into
/// `out` on a vector unit: the depthwise kernel below on f32 lanes, each byte read as f32 and
/// the sums converted to i32. Every product and partial sum is an integer below 2^24 in
/// magnitude (the op's bound on the window), so f32 computes them exactly and the result is
/// the integer one to the bit. The kernel's preamble converts the weights to f32 and computes
/// `-zero_point x sum(w)` per channel, on the stack: a pixel whose window lies inside the
/// image starts its sums there and reads its bytes as they are, and only a pixel at the border
/// subtracts the zero point from each byte it reads. Returns whether it did (else the caller
/// writes the scalar form).
pub fn lower_integer_depthwise(e: &mut Emitter, window: &Window, kernel: &[usize], ins: &[Buf], out: &Buf) -> bool {
    let (x, wp, x_zero) = (&ins[0], &ins[1], &ins[2]);
    let Some(isa) = e.isa else {
        return false;
    };
    if !x.holds_vectors() || !out.holds_vectors() || wp.shape[2] != PANEL || !PANEL.is_multiple_of(isa.lanes) {
        return false;
    }
    let zero = e.read(x_zero, &[]);
    let zero = e.convert(&zero, Ty::F32);
    let zero = e.splat(&zero, isa.lanes);
    let (weights, starts) = e.preamble(|e| float_weights_and_starts(e, isa.lanes, wp, &zero));
    let groups = isa
        .vnni
        .then(|| e.preamble(|e| byte_groups::interleaved_weights(e, wp, kernel)));
    let finish = |e: &mut Emitter, _: &[V], sums: V| e.convert(&sums, Ty::Int { bits: 32, signed: true });
    let conv = PackedConv {
        isa,
        window,
        kernel,
        x,
        wp: &weights,
        out,
        finish: &finish,
        bytes: Some(Bytes { zero, starts, groups }),
    };
    conv.depthwise(e);
    true
}

/// The i8 panels `wp` (`[P, taps, PANEL]`) as f32 in a buffer on the stack, and per channel
/// `-zero x` the sum of its taps' weights (`[P * PANEL]`), in vectors of `lanes`.
fn float_weights_and_starts(e: &mut Emitter, lanes: usize, wp: &Buf, zero: &V) -> (Buf, Buf) {
    let (panels, taps) = (wp.shape[0], wp.shape[1]);
    let weights = Buf::new(&e.fresh("weights"), DType::F32, &wp.shape);
    let starts = Buf::new(&e.fresh("starts"), DType::F32, &[panels * PANEL]);
    for b in [&weights, &starts] {
        e.line(&format!("{} = memref.alloca() : {}", b.name, b.memref()));
    }
    e.nest(&[panels, PANEL / lanes], |e, idx| {
        let (p, off) = (&idx[0], e.lin(&[(&idx[1], lanes as i64)], 0));
        let zeros = {
            let z = e.zero(Ty::F32);
            e.splat(&z, lanes)
        };
        let sum = e.nest_acc(&[taps], &[zeros], |e, t, acc| {
            let at = [p.clone(), t[0].clone(), off.clone()];
            let w = e.read_lanes(wp, &at, lanes);
            let w = e.convert(&w, Ty::F32);
            e.write(&weights, &at, &w);
            vec![e.add(&acc[0], &w)]
        });
        let start = e.mul(&sum[0], zero);
        let start = e.neg(&start);
        let channel = e.lin(&[(p, PANEL as i64), (&off, 1)], 0);
        e.write(&starts, &[channel], &start);
    });
    (weights, starts)
}

/// The bytes of an integer depthwise convolution's image: their zero point in f32 lanes, per
/// channel the sums' start inside the image (`float_weights_and_starts`), and on VNNI the
/// weights interleaved four kernel rows at a time (`byte_groups.rs`).
struct Bytes {
    zero: V,
    starts: Buf,
    groups: Option<Buf>,
}

/// Vectors of channels accumulated at once by the depthwise kernel at the image's border.
const DEPTHWISE_VECTORS: usize = 4;

/// At most this many output pixels along a row are computed at once by the depthwise kernel
/// inside the image (more share more input loads, but leave a longer rest to the row).
const DEPTHWISE_PIXELS: usize = 8;

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

    /// Depthwise: packed weights `[C / PANEL, kh * kw, PANEL]`, vectors across the channels.
    /// Output rows whose windows lie inside the image in height go in three parts along the
    /// row: the left border, the interior in steps of a few pixels (`depthwise_pixels`: no
    /// test, no loop over the window), and the rest with the right border; the other rows,
    /// and the border pixels, each loop over their window's part inside the image.
    fn depthwise(&self, e: &mut Emitter) {
        let out = self.out.extents();
        let [rows, cols] = [0, 1].map(|d| self.interior_outputs(e, d));
        e.nest_over(&out[..2], |e, idx| {
            let (n, oh) = (&idx[0], &idx[1]);
            self.depthwise_row(e, n, oh, &rows, &cols);
            if self.out.deferred_store().is_some() {
                self.epilogue_row(e, n, oh);
            }
        });
    }

    /// Output row `oh` of the depthwise kernel: `interior_row` where the row's windows lie
    /// inside the image in height (`rows`), else every pixel at the border.
    fn depthwise_row(&self, e: &mut Emitter, n: &V, oh: &V, rows: &(V, V), cols: &(V, V)) {
        let width = self.out.extents()[2].clone();
        let every_row = rows.0.known == Some(0) && rows.1.known.map(|h| h as usize) == self.out.extents()[1].fixed();
        if every_row {
            return self.interior_row(e, n, oh, cols);
        }
        let conds = [e.cmp_idx("sge", oh, &rows.0), e.cmp_idx("slt", oh, &rows.1)];
        let inside = e.all(&conds);
        e.if_else_like(
            &inside,
            &[],
            |e| {
                self.interior_row(e, n, oh, cols);
                Vec::new()
            },
            |e| {
                let (first, last) = (e.idx(0), e.extent_value(&width));
                self.border_pixels(e, n, oh, (&first, &last));
                Vec::new()
            },
        );
    }

    /// A long epilogue (`Buf::deferred_store`) applied to output row `oh`, once its sums are
    /// stored.
    fn epilogue_row(&self, e: &mut Emitter, n: &V, oh: &V) {
        let lanes = self.isa.lanes;
        e.for_each(self.out.extents()[2].clone(), |e, ow| {
            for_channel_blocks(e, self.out.shape[3], (DEPTHWISE_VECTORS, lanes), &|e, block| {
                for (j, col) in block.columns.iter().enumerate() {
                    let at = [n.clone(), oh.clone(), ow.clone(), col.clone()];
                    let mask = block.mask(e, j);
                    e.masked(mask, |e| e.apply_epilogue(self.out, &at, lanes));
                }
            });
        });
    }

    /// The output positions `lo..hi` along spatial dimension `d` whose windows lie inside the
    /// input (an empty range where none does): numbers where the sizes are fixed, else
    /// computed at the kernel's entry.
    fn interior_outputs(&self, e: &mut Emitter, d: usize) -> (V, V) {
        let (s, dil, pad) = (
            self.window.strides[d],
            self.window.dilations[d],
            self.window.pad_begin(d) as usize,
        );
        let (size, out) = (&self.x.extents()[d + 1], &self.out.extents()[d + 1]);
        if let (Extent::Fixed(size), Extent::Fixed(out)) = (size, out) {
            let lo = pad.div_ceil(s).min(*out);
            // o * s + (k - 1) * dil - pad <= size - 1
            let hi = (size - 1 + pad)
                .checked_sub((self.kernel[d] - 1) * dil)
                .map_or(0, |reach| (reach / s + 1).min(*out));
            return (e.idx(lo as i64), e.idx(hi.max(lo) as i64));
        }
        let (size, out) = (e.extent_value(size), e.extent_value(out));
        let first = e.idx(pad.div_ceil(s) as i64);
        let lo = e.min_idx(&first, &out);
        // the last interior position is floor((size - 1 + pad - (k - 1) * dil) / s), less
        // than lo (an empty range) where the window is wider than the padded image
        let reach = e.lin(&[(&size, 1)], pad as i64 - 1 - ((self.kernel[d] - 1) * dil) as i64);
        let stride = e.idx(s as i64);
        let last = e.op("t", Ty::Index, &format!("arith.floordivsi {reach}, {stride} : index"));
        let end = e.lin(&[(&last, 1)], 1);
        let end = e.min_idx(&end, &out);
        let hi = e.op("t", Ty::Index, &format!("arith.maxsi {end}, {lo} : index"));
        (lo, hi)
    }

    /// Output row `oh`, its windows inside the image in height: the pixels of `cols` (inside
    /// in width too) up to `DEPTHWISE_PIXELS` at a time (`depthwise_pixels`), the others one
    /// by one.
    fn interior_row(&self, e: &mut Emitter, n: &V, oh: &V, (lo, hi): &(V, V)) {
        let (first, width) = (e.idx(0), e.extent_value(&self.out.extents()[2]));
        self.border_pixels(e, n, oh, (&first, lo));
        let (Some(lo_at), Some(hi_at)) = (lo.known, hi.known) else {
            // sizes known at run time: whole steps of DEPTHWISE_PIXELS, then the rest one by one
            let steps = {
                let span = e.lin(&[(hi, 1), (lo, -1)], 0);
                e.div_idx(&span, DEPTHWISE_PIXELS as i64)
            };
            let zero = e.idx(0);
            let trips = (self.out.shape[2] / DEPTHWISE_PIXELS) as u64;
            e.for_between(&zero, &steps, trips, &[], |e, step, _| {
                let first = e.lin(&[(step, DEPTHWISE_PIXELS as i64), (lo, 1)], 0);
                self.depthwise_pixels(e, n, oh, &first, DEPTHWISE_PIXELS);
                Vec::new()
            });
            let rest = e.lin(&[(&steps, DEPTHWISE_PIXELS as i64), (lo, 1)], 0);
            self.border_pixels(e, n, oh, (&rest, hi));
            return self.border_pixels(e, n, oh, (hi, &width));
        };
        let (lo_at, hi_at) = (lo_at as usize, hi_at as usize);
        let pixels = DEPTHWISE_PIXELS.min(hi_at - lo_at);
        let (steps, rest) = match pixels {
            0 => (0, 0),
            _ => ((hi_at - lo_at) / pixels, (hi_at - lo_at) % pixels),
        };
        if steps > 0 {
            e.for_each(steps, |e, step| {
                let first = e.lin(&[(&step, pixels as i64)], lo_at as i64);
                self.depthwise_pixels(e, n, oh, &first, pixels);
            });
        }
        if rest > 0 {
            let first = e.idx((lo_at + steps * pixels) as i64);
            self.depthwise_pixels(e, n, oh, &first, rest);
        }
        self.border_pixels(e, n, oh, (hi, &width));
    }

    /// The output pixels `from..to` of row `oh`, each by `depthwise_pixel` (none where the
    /// bounds are numbers and `from` is not below `to`).
    fn border_pixels(&self, e: &mut Emitter, n: &V, oh: &V, (from, to): (&V, &V)) {
        let trips = match (from.known, to.known) {
            (Some(a), Some(b)) if a >= b => return,
            (Some(a), Some(b)) => (b - a) as u64,
            _ => self.kernel[1] as u64,
        };
        e.for_between(from, to, trips, &[], |e, ow, _| {
            self.depthwise_pixel(e, n, &[oh.clone(), ow.clone()]);
            Vec::new()
        });
    }

    /// `pixels` output pixels along row `oh` from column `first`, their windows inside the
    /// image. Per block of channel vectors and kernel row, the row's weights are loaded once,
    /// and each input column the pixels read is loaded once and multiplied into every pixel
    /// reading it: with stride 1 and 8 pixels, 10 loads of the input serve 24 products. As
    /// many vectors go in a block as leave the accumulators, one kernel row's weights and an
    /// input vector in the registers.
    fn depthwise_pixels(&self, e: &mut Emitter, n: &V, oh: &V, first: &V, pixels: usize) {
        if let Some(groups) = self.bytes.as_ref().and_then(|b| b.groups.as_ref()) {
            return self.byte_group_pixels(e, n, oh, first, pixels, groups);
        }
        let (kernel, lanes, window) = (self.kernel, self.isa.lanes, self.window);
        let vectors = ((self.isa.registers - 1) / (pixels + kernel[1])).max(1);
        let readers = self.span_readers(pixels);
        let left = e.lin(&[(first, window.strides[1] as i64)], -window.pad_begin(1));
        for_channel_blocks(e, self.x.shape[3], (vectors, lanes), &|e, block| {
            let width = block.columns.len();
            let mut acc: Vec<Option<V>> = vec![None; pixels * width];
            if let Some(bytes) = &self.bytes {
                for j in 0..width {
                    let mask = block.mask(e, j);
                    let start = e.masked(mask, |e| {
                        e.read_lanes(&bytes.starts, &[block.columns[j].clone()], lanes)
                    });
                    for p in 0..pixels {
                        acc[p * width + j] = Some(start.clone());
                    }
                }
            }
            for kh in 0..kernel[0] {
                let ih = e.lin(
                    &[(oh, window.strides[0] as i64)],
                    (kh * window.dilations[0]) as i64 - window.pad_begin(0),
                );
                let weights: Vec<Vec<V>> = (0..kernel[1])
                    .map(|kw| {
                        let tap = e.idx((kh * kernel[1] + kw) as i64);
                        block.columns.iter().map(|col| self.tap_weights(e, &tap, col)).collect()
                    })
                    .collect();
                for (iw, readers) in read_columns(e, &readers, &left) {
                    for j in 0..width {
                        let xv = self.input(e, n, &[ih.clone(), iw.clone()], block, j, false);
                        for &(p, kw) in readers {
                            let sum = &mut acc[p * width + j];
                            *sum = Some(match sum.take() {
                                None => e.mul(&xv, &weights[kw][j]),
                                Some(sum) => e.fma(&xv, &weights[kw][j], &sum),
                            });
                        }
                    }
                }
            }
            let sums: Vec<V> = acc
                .into_iter()
                .map(|sum| sum.expect("every pixel reads a tap"))
                .collect();
            for p in 0..pixels {
                let ow = e.lin(&[(first, 1)], p as i64);
                self.store_pixel(e, n, &[oh.clone(), ow], block, &sums[p * width..(p + 1) * width]);
            }
        });
    }

    /// For each input column `pixels` pixels side by side read along a row (from the first
    /// pixel's window's left), the pixels reading it, with the kernel column they read it
    /// with.
    fn span_readers(&self, pixels: usize) -> Vec<Vec<(usize, usize)>> {
        let (stride, dilation, width) = (self.window.strides[1], self.window.dilations[1], self.kernel[1]);
        let span = (pixels - 1) * stride + (width - 1) * dilation + 1;
        (0..span)
            .map(|c| {
                (0..pixels)
                    .filter_map(|p| {
                        let offset = c.checked_sub(p * stride)?;
                        (offset % dilation == 0 && offset / dilation < width).then_some((p, offset / dilation))
                    })
                    .collect()
            })
            .collect()
    }

    /// The packed weights of tap `row` (`kh * kw_size + kw`) for the channels from `col` on,
    /// as f32.
    fn tap_weights(&self, e: &mut Emitter, row: &V, col: &V) -> V {
        let (p, off) = (e.div_idx(col, PANEL as i64), e.rem_idx(col, PANEL as i64));
        let w = e.read_lanes(self.wp, &[p, row.clone(), off], self.isa.lanes);
        e.convert(&w, Ty::F32)
    }

    /// Vector `j` of a block of channels of the input at position `pos` (row, column), as f32:
    /// bytes converted, less their zero point where `centred` (at the border; inside the
    /// image the sums start from the zero point's share instead, `Bytes::starts`).
    fn input(&self, e: &mut Emitter, n: &V, pos: &[V], block: &ChannelBlock, j: usize, centred: bool) -> V {
        let idx = [n.clone(), pos[0].clone(), pos[1].clone(), block.columns[j].clone()];
        let mask = block.mask(e, j);
        let x = e.masked(mask, |e| e.read_lanes(self.x, &idx, self.isa.lanes));
        match &self.bytes {
            Some(bytes) => {
                let x = e.convert(&x, Ty::F32);
                match centred {
                    true => e.sub(&x, &bytes.zero),
                    false => x,
                }
            }
            None => x,
        }
    }

    /// The sums of a block of channels of output pixel `o` (row, column), finished and stored.
    fn store_pixel(&self, e: &mut Emitter, n: &V, o: &[V], block: &ChannelBlock, sums: &[V]) {
        for (j, (col, sum)) in block.columns.iter().zip(sums).enumerate() {
            let at = [n.clone(), o[0].clone(), o[1].clone(), col.clone()];
            let mask = block.mask(e, j);
            e.masked(mask, |e| {
                let v = (self.finish)(e, &at, sum.clone());
                e.write(self.out.deferred_store().unwrap_or(self.out), &at, &v);
            });
        }
    }

    /// One output pixel `o` (row, column) at the image's border: loops over its window's part
    /// inside the image.
    fn depthwise_pixel(&self, e: &mut Emitter, n: &V, o: &[V]) {
        let (window, kernel, x, out) = (self.window, self.kernel, self.x, self.out);
        let lanes = self.isa.lanes;
        let (input, out_dims) = (spans(&x.extents()[1..3]), out.extents());
        let ranges: Vec<(V, V)> = (0..2)
            .map(|d| window.range_inside(e, d, &input[d], (&out_dims[d + 1], kernel[d]), &o[d]))
            .collect();
        for_channel_blocks(e, x.shape[3], (DEPTHWISE_VECTORS, lanes), &|e, block| {
            let zero = e.zero(Ty::F32);
            let zeros = vec![e.splat(&zero, lanes); block.columns.len()];
            let trips = kernel[0] as u64;
            let sums = e.for_between(&ranges[0].0, &ranges[0].1, trips, &zeros, |e, kh, acc| {
                e.for_between(&ranges[1].0, &ranges[1].1, kernel[1] as u64, acc, |e, kw, acc| {
                    let k = [kh.clone(), kw.clone()];
                    let pos = window.positions(e, o, &k);
                    let row = e.lin(&[(kh, kernel[1] as i64), (kw, 1)], 0);
                    (0..block.columns.len())
                        .map(|j| {
                            let w = self.tap_weights(e, &row, &block.columns[j]);
                            let xv = self.input(e, n, &pos, block, j, true);
                            e.fma(&xv, &w, &acc[j])
                        })
                        .collect()
                })
            });
            self.store_pixel(e, n, o, block, &sums);
        });
    }
}

/// The input columns of a row's span that pixels read (`readers`, from `span_readers`) as
/// positions from `left`, with their readers.
fn read_columns<'r>(e: &mut Emitter, readers: &'r [Vec<(usize, usize)>], left: &V) -> Vec<(V, &'r [(usize, usize)])> {
    (readers.iter().enumerate())
        .filter(|(_, r)| !r.is_empty())
        .map(|(c, r)| (e.lin(&[(left, 1)], c as i64), r.as_slice()))
        .collect()
}

/// A block of channels: the first column of each of its vectors, and the lanes of the last one
/// that hold channels.
struct ChannelBlock {
    columns: Vec<V>,
    valid: usize,
    lanes: usize,
}

impl ChannelBlock {
    /// The lane mask of vector `j`: only the last one's, when it is partial.
    fn mask(&self, e: &mut Emitter, j: usize) -> Option<V> {
        (j + 1 == self.columns.len() && self.valid < self.lanes).then(|| e.first_lanes(self.valid, self.lanes))
    }
}

/// Calls `block` for the blocks of `vectors` vectors that cover `channels`: a loop over the
/// whole blocks, then the rest (its last vector partial when `channels` is not a multiple of
/// `lanes`).
fn for_channel_blocks(
    e: &mut Emitter,
    channels: usize,
    (vectors, lanes): (usize, usize),
    block: &dyn Fn(&mut Emitter, &ChannelBlock),
) {
    let width = vectors * lanes;
    let of = |e: &mut Emitter, first: &V, count: usize, valid: usize| ChannelBlock {
        columns: (0..count).map(|j| e.lin(&[(first, 1)], (j * lanes) as i64)).collect(),
        valid,
        lanes,
    };
    let blocks = channels / width;
    if blocks > 0 {
        e.for_each(blocks, |e, b| {
            let first = e.lin(&[(&b, width as i64)], 0);
            let whole = of(e, &first, vectors, lanes);
            block(e, &whole);
        });
    }
    let rest = channels % width;
    if rest > 0 {
        let first = e.idx((blocks * width) as i64);
        let last = of(e, &first, rest.div_ceil(lanes), (rest - 1) % lanes + 1);
        block(e, &last);
    }
}

mod byte_groups;
#[cfg(test)]
mod tests;
