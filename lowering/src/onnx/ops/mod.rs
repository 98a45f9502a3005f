//! The op parsers, one file per family of ONNX ops. Each file's `register` adds its parsers
//! to the registry with the opset ranges they implement.

mod activation;
mod axes;
mod constant;
mod control;
mod conv;
mod elementwise;
mod layout;
mod linalg;
mod logic;
mod norm;
mod pad;
mod padding;
mod pool;
mod rearrange;
mod reduce;
mod shape;

use super::registry::Registry;

/// Adds every parser to `r`.
pub fn register(r: &mut Registry) {
    activation::register(r);
    constant::register(r);
    control::register(r);
    conv::register(r);
    elementwise::register(r);
    layout::register(r);
    linalg::register(r);
    logic::register(r);
    norm::register(r);
    pad::register(r);
    pool::register(r);
    rearrange::register(r);
    reduce::register(r);
    shape::register(r);
}
