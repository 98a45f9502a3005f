//! Integer depthwise convolutions channels last: `conv_nhwc_integer_depthwise`, the exact i32
//! sums of a u8 image less its zero point under each channel's window, times i8 weights packed
//! a column per channel (`[ceil(C / 16), kh * kw, 16]`).
//!
//! On a vector unit it is `conv_tiled.rs`'s depthwise kernel on f32 lanes: the weights
//! converted once in the kernel's preamble, the bytes as they are read, the sums converted
//! back to i32 (a pixel inside the image starts its sums from `-zero_point x sum(w)`, one at
//! the border subtracts the zero point from each byte). The op bounds the window so that every
//! sum is an integer below 2^24, which f32 holds exactly: the result is the integer one to the
//! bit, reading a quarter of the f32 kernel's bytes. Without a vector unit (`ref`), plain
//! loops sum the centred values in i32.

use super::buffer::Buf;
use super::conv_tiled;
use super::emit::{fixed, Emitter};
use super::integer::I32;
use super::tile::PANEL;
use super::window::{spans, Window};
use mxc_dialects::Attrs;

/// `out = depthwise_conv(x - x_zero, unpack(wp))` (`conv_nhwc_integer_depthwise`).
pub fn conv_nhwc_integer_depthwise(e: &mut Emitter, attrs: &Attrs, ins: &[Buf], out: &Buf) -> Result<(), String> {
    let window = Window::from_attrs(attrs)?;
    let kernel = attrs.dims("kernel")?;
    if !conv_tiled::lower_integer_depthwise(e, &window, &kernel, ins, out) {
        plain_loops(e, &window, &kernel, ins, out);
    }
    Ok(())
}

/// Each element summed on its own over the window positions inside the input, in i32.
fn plain_loops(e: &mut Emitter, window: &Window, kernel: &[usize], ins: &[Buf], out: &Buf) {
    let (x, wp, x_zero) = (&ins[0], &ins[1], &ins[2]);
    let bounds = spans(&fixed(&x.shape[1..3]));
    let out_hw = fixed(&out.shape[1..3]);
    e.nest(&out.shape, |e, idx| {
        let [n, oh, ow, c] = [0, 1, 2, 3].map(|d| idx[d].clone());
        let zero = e.read(x_zero, &[]);
        let zero = e.convert(&zero, I32);
        let (panel, lane) = (e.div_idx(&c, PANEL as i64), e.rem_idx(&c, PANEL as i64));
        let init = e.zero(I32);
        let sums = e.nest_acc(kernel, &[init], |e, k, acc| {
            let at = window.positions(e, &[oh.clone(), ow.clone()], k);
            let inside = window.inside(e, &at, &bounds, &out_hw, kernel);
            let nothing = e.zero(I32);
            let product = e.when(&inside, &[nothing], |e| {
                let v = e.read(x, &[n.clone(), at[0].clone(), at[1].clone(), c.clone()]);
                let v = e.convert(&v, I32);
                let centred = e.sub(&v, &zero);
                let tap = e.lin(&[(&k[0], kernel[1] as i64), (&k[1], 1)], 0);
                let w = e.read(wp, &[panel.clone(), tap, lane.clone()]);
                let w = e.convert(&w, I32);
                vec![e.mul(&centred, &w)]
            });
            vec![e.add(&acc[0], &product[0])]
        });
        e.write(out, idx, &sums[0]);
    });
}
