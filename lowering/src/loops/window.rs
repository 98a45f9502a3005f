//! Sliding windows over the spatial dimensions, shared by convolution and pooling: where
//! output position `o` with kernel offset `k` reads the input, and whether that lies inside
//! a range (checked only in the dimensions where it can fall outside). The input's and the
//! output's sizes may be known only at run time (`Extent`): a range's end is then a value, and
//! a position is assumed able to pass it.

use super::emit::{Emitter, Ty, V};
use super::sizes::Extent;
use mxc_dialects::Attrs;

/// The range `lo..hi` positions along one spatial dimension must lie in.
pub type Span = (i64, Extent);

/// The spans `0..n` of an image's spatial sizes `sizes`.
pub fn spans(sizes: &[Extent]) -> Vec<Span> {
    sizes.iter().map(|n| (0, n.clone())).collect()
}

/// Strides, dilations and pads (begins, then ends) of an N-d window.
pub struct Window {
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    pub pads: Vec<usize>,
}

impl Window {
    pub fn from_attrs(attrs: &Attrs) -> Result<Window, String> {
        Ok(Window {
            strides: attrs.dims("strides")?,
            dilations: attrs.dims("dilations")?,
            pads: attrs.dims("pads")?,
        })
    }

    /// Whether a window of `kernel` is one pixel, stride 1, no padding: each output pixel reads
    /// its input pixel alone (a convolution of it is a product of the image's pixels).
    pub fn pointwise(&self, kernel: &[usize]) -> bool {
        kernel.iter().all(|&k| k == 1) && self.strides.iter().all(|&s| s == 1) && self.pads.iter().all(|&p| p == 0)
    }

    pub fn spatial(&self) -> usize {
        self.strides.len()
    }

    pub fn pad_begin(&self, d: usize) -> i64 {
        self.pads[d] as i64
    }

    pub fn pad_end(&self, d: usize) -> i64 {
        self.pads[d + self.spatial()] as i64
    }

    /// The input positions `o * stride + k * dilation - pad_begin` of every spatial dimension.
    pub fn positions(&self, e: &mut Emitter, o: &[V], k: &[V]) -> Vec<V> {
        (0..self.spatial())
            .map(|d| {
                e.lin(
                    &[(&o[d], self.strides[d] as i64), (&k[d], self.dilations[d] as i64)],
                    -self.pad_begin(d),
                )
            })
            .collect()
    }

    /// The conditions `lo[d] <= pos[d] < hi[d]`, leaving out those that hold for every output
    /// position below `out[d]` and kernel offset below `kernel[d]`.
    pub fn inside(&self, e: &mut Emitter, pos: &[V], bounds: &[Span], out: &[Extent], kernel: &[usize]) -> Vec<V> {
        let mut conds = Vec::new();
        for d in 0..self.spatial() {
            let (lo, hi) = &bounds[d];
            let (below, above) = self.leaves(d, (*lo, hi), &out[d], kernel[d]);
            if below {
                let c = e.idx(*lo);
                conds.push(e.cmp_idx("sge", &pos[d], &c));
            }
            if above {
                let c = e.extent_value(hi);
                conds.push(e.cmp_idx("slt", &pos[d], &c));
            }
        }
        conds
    }

    /// The kernel offsets `k_lo..k_hi` along dimension `d` at which output position `o` reads
    /// inside `lo..hi` (`lo <= o * stride + k * dilation - pad_begin < hi`), for a kernel of
    /// `kernel` offsets and `out` output positions: computed per position, or the whole kernel
    /// where no position can leave the range.
    pub fn range_inside(
        &self,
        e: &mut Emitter,
        d: usize,
        (lo, hi): &Span,
        (out, kernel): (&Extent, usize),
        o: &V,
    ) -> (V, V) {
        let (s, dil, pad) = (self.strides[d] as i64, self.dilations[d] as i64, self.pad_begin(d));
        let zero = e.idx(0);
        let whole = e.idx(kernel as i64);
        if self.leaves(d, (*lo, hi), out, kernel) == (false, false) {
            return (zero, whole);
        }
        // k >= ceil((lo + pad - o * s) / dil) and k < ceil((hi + pad - o * s) / dil)
        let dv = e.idx(dil);
        let lo = e.idx(*lo);
        let hi = e.extent_value(hi);
        let [first, end] = [lo, hi].map(|bound| {
            let t = e.lin(&[(o, -s), (&bound, 1)], pad);
            e.op("t", Ty::Index, &format!("arith.ceildivsi {t}, {dv} : index"))
        });
        let first = e.op("t", Ty::Index, &format!("arith.maxsi {first}, {zero} : index"));
        let end = e.min_idx(&end, &whole);
        (first, end)
    }

    /// Whether some position of dimension `d` falls below `lo`, and whether some falls at or
    /// above `hi`, for output positions below `out` and kernel offsets below `kernel`. Where
    /// `out` or `hi` is known only at run time, a position may reach `hi`.
    pub fn leaves(&self, d: usize, (lo, hi): (i64, &Extent), out: &Extent, kernel: usize) -> (bool, bool) {
        let least = -self.pad_begin(d);
        let below = least < lo;
        let (Extent::Fixed(out), Extent::Fixed(hi)) = (out, hi) else {
            return (below, true);
        };
        let most = (*out as i64 - 1) * self.strides[d] as i64 + (kernel as i64 - 1) * self.dilations[d] as i64 + least;
        (below, most >= *hi as i64)
    }
}
