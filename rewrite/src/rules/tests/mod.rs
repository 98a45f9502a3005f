//! Tests of the rule language: rewrites on small e-graphs, errors with their positions, and
//! the built-in rule files.

mod analysis;
mod builtin;
mod constants;
mod errors;
mod fusion;
mod harness;
mod limits;
mod rewrite;
