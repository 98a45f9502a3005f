//! The op parsers, one file per family of ONNX ops. Each file's `register` adds its parsers
//! to the registry with the opset ranges they implement.

mod activation;
mod argmax;
mod attention;
mod axes;
mod bitwise;
mod build;
mod causal_conv;
mod constant;
mod control;
mod conv;
mod einsum;
mod elementwise;
mod flex_attention;
mod index;
mod layout;
mod linalg;
mod linear_attention;
mod logic;
mod loss;
mod math;
mod microsoft;
mod ml;
mod norm;
mod pad;
mod padding;
mod pool;
mod quantize;
mod rearrange;
mod recurrent;
mod reduce;
mod resize;
mod rotary;
mod sample;
mod scan;
mod shape;
mod signal;
mod training;

use super::registry::Registry;

/// Adds every parser to `r`.
pub fn register(r: &mut Registry) {
    activation::register(r);
    argmax::register(r);
    bitwise::register(r);
    causal_conv::register(r);
    attention::register(r);
    constant::register(r);
    control::register(r);
    conv::register(r);
    einsum::register(r);
    elementwise::register(r);
    flex_attention::register(r);
    index::register(r);
    layout::register(r);
    linalg::register(r);
    linear_attention::register(r);
    logic::register(r);
    loss::register(r);
    math::register(r);
    ml::register(r);
    microsoft::register(r);
    norm::register(r);
    pad::register(r);
    pool::register(r);
    quantize::register(r);
    rearrange::register(r);
    recurrent::register(r);
    reduce::register(r);
    rotary::register(r);
    scan::register(r);
    resize::register(r);
    sample::register(r);
    shape::register(r);
    signal::register(r);
    training::register(r);
}
