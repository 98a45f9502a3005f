//! The rewrite engine: `mx` graphs in an e-graph (egg), rewritten by rules written as data,
//! with types and constant values tracked per e-class, and extracted back to `mx` graphs.
//!
//! - `lang`: the egg language `Mx` (ops with attribute leaves, inputs, constants, results);
//! - `analysis`: per-class type and constant value, constant folding;
//! - `constant`: constants as e-nodes, known or deferred (folded weights computed when written);
//! - `convert`: `Graph` to e-graph and a selection back to a verified `Graph`;
//! - `cost`: per-target cost models; `extract`: sharing-aware extraction;
//! - `fuse` and `library`: fused kernels and library calls offered to a second extraction;
//! - `precision`: `--fp16` / `--bf16` / `--half-as-f32`, a rewrite of the program before the rest;
//! - `runner`: `optimize`, the entry point;
//! - `explain`: `optimize` with the reasons for each kernel (`mxc explain`).

pub mod analysis;
pub mod constant;
pub mod convert;
pub mod cost;
mod error;
pub mod explain;
pub mod extract;
pub mod fuse;
pub mod lang;
pub mod library;
pub mod precision;
mod refine;
pub mod rules;
pub mod runner;

pub use analysis::MxAnalysis;
pub use cost::{CostModel, LinearCost};
pub use error::RewriteError;
pub use lang::Mx;
pub use runner::{optimize, OptimizeOptions, Optimized, StageHook, Stats};

/// A rewrite rule as egg runs it on mx e-graphs.
pub type MxRewrite = egg::Rewrite<Mx, MxAnalysis>;

#[cfg(test)]
mod tests;
