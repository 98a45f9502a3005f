//! Integration tests of the `mxc` command and the crates behind it: the ONNX backend node
//! suite, the repo's real models against onnxruntime, the textual IR, and bad input.

mod attention;
mod bad_input;
mod cache;
mod cli;
mod common;
mod control_flow;
mod cpu_kernels;
mod dynamic;
mod eval_vs_ref;
mod explain;
mod filecheck;
mod folding;
mod gpu;
mod gpu_amd;
mod gpu_blocks;
mod gpu_runtime;
mod layout;
mod limits;
mod microsoft_ops;
mod models;
mod mxr;
mod node_suite;
mod opt;
mod pipeline;
mod recognise;
mod rule_files;
mod rules;
mod rules_check;
mod sequences;
mod sizes;
mod strings;
mod text;
mod threads;
mod trust;
mod verify;
