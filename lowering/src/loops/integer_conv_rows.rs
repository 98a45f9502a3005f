//! Integer convolutions read a kernel row at a time: few channels, not a multiple of four (a
//! model's first layer: 3), or short kernel rows of whole groups (16 channels by 3).
//! Channels last, a kernel row's `kw` pixels of `C` channels are
//! `kw * C` consecutive bytes of the image and consecutive depths of the weights, so the depth
//! is walked by kernel rows, each a run of `kw * C` bytes read four at a time, its last group
//! masked to the bytes the run has. The weights are packed the same way, each kernel row's
//! depths padded with zeros to a multiple of four (`integer.rules`, `conv-integer-packed-kernel-rows`),
//! so a masked byte meets a zero weight.
//!
//! A run that leaves the image (the padding) is copied to a scratch row first, the zero point
//! where a pixel lies outside (its centred value 0, what the padding is), and read from there.

use super::buffer::Buf;
use super::conv_tiled::{pixel, Run};
use super::emit::{Emitter, Ty, V};
use super::integer::{word, GROUP};
use super::sizes::Extent;
use super::tile::{MicroTile, RowsOfA, Step};
use super::window::{spans, Window};

/// The type the image and the scratch are read through: flat bytes.
const BYTES: &str = "memref<?xi8>";

/// The depth of one kernel row in the packed weights: its `kw * C` bytes padded to whole groups.
pub fn kernel_row_depth(kw: usize, channels: usize) -> usize {
    (kw * channels).div_ceil(GROUP) * GROUP
}

/// The rows of A: output pixels, each reading its window a kernel row at a time.
pub struct KernelRowGroups<'a> {
    pub x: &'a Buf,
    pub x_zero: &'a Buf,
    pub window: &'a Window,
    pub kernel: &'a [usize],
    pub out_hw: [Extent; 2],
    pub tile: MicroTile,
    /// `x` as flat bytes.
    pub flat: String,
    /// Where a run that leaves the image is copied (a run per tile row), when one can.
    pub scratch: Option<String>,
}

impl KernelRowGroups<'_> {
    /// The bytes of a kernel row's run.
    fn run(&self) -> usize {
        self.kernel[1] * self.x.shape[3]
    }

    /// Where tile row `i` (output pixel `[n, oh, ow]`) reads kernel row `kh`: a source and the
    /// offset of the run in it.
    fn source(&self, e: &mut Emitter, i: usize, [n, oh, ow]: &[V; 3], kh: &V) -> (String, V) {
        let [_, height, width, channels] = [0, 1, 2, 3].map(|d| self.x.shape[d] as i64);
        let o = [oh.clone(), ow.clone()];
        let zero = e.idx(0);
        let first = self.window.positions(e, &o, &[kh.clone(), zero]);
        let at = e.lin(
            &[
                (n, height * width * channels),
                (&first[0], width * channels),
                (&first[1], channels),
            ],
            0,
        );
        let Some(scratch) = &self.scratch else {
            return (self.flat.clone(), at);
        };
        let bounds = spans(&self.x.extents()[1..3]);
        let last_column = e.idx(self.kernel[1] as i64 - 1);
        let last = self.window.positions(e, &o, &[kh.clone(), last_column]);
        let mut inside = self.window.inside(e, &first, &bounds, &self.out_hw, self.kernel);
        inside.extend(self.window.inside(e, &last, &bounds, &self.out_hw, self.kernel));
        if inside.is_empty() {
            return (self.flat.clone(), at);
        }
        let ok = e.all(&inside);
        let copy = e.idx((i * kernel_row_depth(self.kernel[1], self.x.shape[3])) as i64);
        let leaves = e.not(&ok);
        e.if_then(&leaves, |e| self.copy_run(e, scratch, &copy, &at, &first));
        let source = e.fresh("row");
        e.line(&format!(
            "{source} = arith.select {ok}, {}, {scratch} : {BYTES}",
            self.flat
        ));
        (source, e.select(&ok, &at, &copy))
    }

    /// Copies the run from input position `first` (offset `at` in the flat image) to `scratch`
    /// at `to`: the zero point where a pixel lies outside the image.
    fn copy_run(&self, e: &mut Emitter, scratch: &str, to: &V, at: &V, first: &[V]) {
        let byte = Ty::Int { bits: 8, signed: false };
        let zero_point = e.read(self.x_zero, &[]);
        let zero_point = e.convert(&zero_point, byte);
        let run = Run {
            x: self.x,
            flat: (&self.flat, BYTES, byte),
            len: self.run(),
        };
        run.copy(e, (scratch, to), (at, first), &zero_point);
    }
}

impl RowsOfA for KernelRowGroups<'_> {
    fn tile(&self, _: super::vector::VectorIsa, _: usize) -> MicroTile {
        self.tile
    }

    fn steps(&self) -> (usize, usize) {
        (
            self.kernel[0],
            kernel_row_depth(self.kernel[1], self.x.shape[3]) / GROUP,
        )
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
        let (kernel_rows, groups) = self.steps();
        let tail = self.run() % GROUP;
        e.for_between(from, to, kernel_rows as u64, inits, |e, kh, acc| {
            let sources: Vec<(String, V)> = pixels
                .iter()
                .enumerate()
                .map(|(i, p)| self.source(e, i, p, kh))
                .collect();
            let first = e.lin(&[(kh, groups as i64)], 0);
            let group = |e: &mut Emitter, g: &V, acc: &[V], mask: Option<&V>| {
                let depth = e.lin(&[(&first, 1), (g, 1)], 0);
                let a: Vec<V> = sources
                    .iter()
                    .map(|(source, at)| {
                        let i = e.lin(&[(at, 1), (g, GROUP as i64)], 0);
                        word(e, (source, BYTES), &i.to_string(), mask)
                    })
                    .collect();
                step(e, acc, &depth, &a)
            };
            let whole = if tail == 0 { groups } else { groups - 1 };
            let acc = e.nest_acc(&[whole], acc, |e, g, acc| group(e, &g[0], acc, None));
            match tail {
                0 => acc,
                _ => {
                    // the run's last bytes: a group masked to them (the rest would be the next
                    // pixel's, or past the image's end)
                    let mask = e.op_lanes(
                        "m",
                        Ty::I1,
                        GROUP,
                        &format!("vector.constant_mask [{tail}] : vector<{GROUP}xi1>"),
                    );
                    let last = e.idx(whole as i64);
                    group(e, &last, &acc, Some(&mask))
                }
            }
        })
    }
}
