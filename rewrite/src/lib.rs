//! The rewrite engine: `mx` graphs in an e-graph (egg), rewritten by rules written as data,
//! with types and constant values tracked per e-class, and extracted back to `mx` graphs.

pub mod lang;
