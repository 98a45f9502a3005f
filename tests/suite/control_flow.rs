//! Control flow at run time: `mx.if` and `mx.loop` programs written in the text form,
//! compiled for each target, saved and loaded as `.mxr`, run with values that take each path
//! and checked against values computed here; and the ONNX models of
//! `scripts/models/control_flow.py` (`If`, `Loop`, `Scan`, nested) compiled to `.mxr` files,
//! so that conditions and trip counts are known only when they run, against onnxruntime.

use crate::common::{
    cache_dir, compile_and_load, data_files, generated_cases, mismatch, mxc, read_pb, run_file, stderr,
};
use mxc_codegen::Target;
use mxc_dialects::{text, DType, Tensor};
use mxc_kernels::{Executable, RunError};
use std::collections::HashMap;
use std::path::Path;

fn run(exe: &Executable, inputs: &[(&str, Tensor)]) -> Result<Vec<Vec<f64>>, RunError> {
    let inputs: HashMap<String, Tensor> = inputs.iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
    Ok(exe.run(&inputs)?.into_iter().map(|(_, t)| t.to_f64_vec()).collect())
}

fn flag(v: bool) -> Tensor {
    Tensor::from_i64s(DType::Bool, vec![], &[v as i64])
}

fn count(n: i64) -> Tensor {
    Tensor::from_i64s(DType::I64, vec![], &[n])
}

/// `y = c ? relu(x) * w : x - w`, `w` captured by both branches.
const IF: &str = r#"graph "choose" (%arg0: tensor<bool> "c", %arg1: tensor<3xf32> "x") {
  %0 = mx.constant {value = dense<[2.0, 3.0, 4.0]> : tensor<3xf32>} : tensor<3xf32>
  %1 = mx.if %arg0, %arg1, %0 {else_branch = graph "else" (%arg0: tensor<3xf32> "x", %arg1: tensor<3xf32> "w") {
    %0 = mx.sub %arg0, %arg1 : tensor<3xf32>
    return "y" = %0
  }, then_branch = graph "then" (%arg0: tensor<3xf32> "x", %arg1: tensor<3xf32> "w") {
    %0 = mx.relu %arg0 : tensor<3xf32>
    %1 = mx.mul %0, %arg1 : tensor<3xf32>
    return "y" = %1
  }} : tensor<3xf32>
  return "y" = %1
}
"#;

#[test]
fn an_if_runs_the_branch_its_condition_names() {
    let x = Tensor::from_f32s(vec![3], &[-1.0, 0.5, 2.0]);
    for target in [Target::Ref, Target::Cpu] {
        let exe = compile_and_load(IF, target);
        let then = run(&exe, &[("c", flag(true)), ("x", x.clone())]).unwrap();
        assert_eq!(then, [vec![0.0, 1.5, 8.0]], "{target}");
        let otherwise = run(&exe, &[("c", flag(false)), ("x", x.clone())]).unwrap();
        assert_eq!(otherwise, [vec![-3.0, -2.5, -2.0]], "{target}");
    }
}

/// Doubles `acc` (plus the captured `x`) while the trip count allows and its sum stays below
/// 100, also counting the iterations in an i64 carried value.
const LOOP: &str = r#"graph "grow" (%arg0: tensor<i64> "n", %arg1: tensor<2xf32> "x") {
  %0 = mx.constant {value = dense<[1]> : tensor<bool>} : tensor<bool>
  %1 = mx.constant {value = dense<[1.0, 1.0]> : tensor<2xf32>} : tensor<2xf32>
  %2 = mx.constant {value = dense<[0]> : tensor<i64>} : tensor<i64>
  %3, %4 = mx.loop %arg0, %0, %1, %2, %arg1 {body = graph "body" (%arg0: tensor<i64> "i", %arg1: tensor<bool> "cond", %arg2: tensor<2xf32> "acc", %arg3: tensor<i64> "k", %arg4: tensor<2xf32> "x") {
    %0 = mx.add %arg2, %arg2 : tensor<2xf32>
    %1 = mx.add %0, %arg4 : tensor<2xf32>
    %2 = mx.reduce_sum %1 {axes = [0], keepdims = 0} : tensor<f32>
    %3 = mx.constant {value = dense<[100.0]> : tensor<f32>} : tensor<f32>
    %4 = mx.less %2, %3 : tensor<bool>
    %5 = mx.constant {value = dense<[1]> : tensor<i64>} : tensor<i64>
    %6 = mx.add %arg3, %5 : tensor<i64>
    return "cond" = %4, "acc" = %1, "k" = %6
  }, carried = 2, iterations = -1} : tensor<2xf32>, tensor<i64>
  return "acc" = %3, "k" = %4
}
"#;

#[test]
fn a_loop_runs_while_its_trip_count_and_condition_allow() {
    let x = Tensor::from_f32s(vec![2], &[1.0, 0.0]);
    for target in [Target::Ref, Target::Cpu] {
        let exe = compile_and_load(LOOP, target);
        // by hand: acc = 2 acc + x from [1, 1]: [3, 2] (5), [7, 4] (11), [15, 8] (23), [31, 16] (47),
        // [63, 32] (95), [127, 64] (191, stops)
        let cases = [
            (0, vec![1.0, 1.0], 0.0),
            (2, vec![7.0, 4.0], 2.0),
            (100, vec![127.0, 64.0], 6.0),
        ];
        for (n, acc, k) in cases {
            let out = run(&exe, &[("n", count(n)), ("x", x.clone())]).unwrap();
            assert_eq!(out, [acc, vec![k]], "{target}, n = {n}");
        }
    }
}

/// Scans `i * x` over a loop compiled for 3 iterations, stopping when the condition input says.
const SCAN: &str = r#"graph "scan" (%arg0: tensor<bool> "go", %arg1: tensor<2xf32> "x") {
  %0 = mx.constant {value = dense<[3]> : tensor<i64>} : tensor<i64>
  %1 = mx.loop %0, %arg0, %arg1 {body = graph "body" (%arg0: tensor<i64> "i", %arg1: tensor<bool> "cond", %arg2: tensor<2xf32> "x") {
    %0 = mx.cast %arg0 {to = f32} : tensor<f32>
    %1 = mx.mul %arg2, %0 : tensor<2xf32>
    return "cond" = %arg1, "y" = %1
  }, carried = 0, iterations = 3} : tensor<3x2xf32>
  return "y" = %1
}
"#;

#[test]
fn scan_outputs_stack_each_iteration_and_a_short_loop_is_an_error() {
    let x = Tensor::from_f32s(vec![2], &[1.0, -2.0]);
    for target in [Target::Ref, Target::Cpu] {
        let exe = compile_and_load(SCAN, target);
        let out = run(&exe, &[("go", flag(true)), ("x", x.clone())]).unwrap();
        assert_eq!(out, [vec![0.0, -0.0, 1.0, -2.0, 2.0, -4.0]], "{target}");
        let err = run(&exe, &[("go", flag(false)), ("x", x.clone())])
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "mx.loop (op #1 of graph \"scan\") ran 0 iterations, but its scan outputs were compiled for 3 (a length known only at run time needs dynamic shapes)",
            "{target}"
        );
    }
}

#[test]
fn regions_print_and_parse_back() {
    for src in [IF, LOOP, SCAN] {
        let g = text::parse(src).unwrap();
        assert_eq!(text::print(&g), src);
    }
}

/// Compiles `dir/model.onnx` for `target` into `out` and runs the file on the case's inputs.
fn compiled_case_matches_onnxruntime(dir: &Path, target: &str, out: &Path) {
    let case = dir.file_name().unwrap().to_string_lossy();
    let model = dir.join("model.onnx");
    let file = out.join(format!("{case}.{target}.mxr"));
    let compiled = mxc(&[
        "compile",
        model.to_str().unwrap(),
        "--target",
        target,
        "-q",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(compiled.status.success(), "{case} on {target}: {}", stderr(&compiled));
    let set = dir.join("test_data_set_0");
    let actual = run_file(&model, &file, &set, target, &[], out).unwrap_or_else(|e| panic!("{case} on {target}: {e}"));
    let expected = data_files(&set, "output_");
    assert_eq!(actual.len(), expected.len(), "{case} on {target}: number of outputs");
    for (a, f) in actual.iter().zip(expected) {
        let (name, e) = read_pb(&f).unwrap();
        if let Some(why) = mismatch(a, &e, 1e-4, 1e-5) {
            panic!("{case} on {target}, output `{name}`: {why}");
        }
    }
}

#[test]
fn onnx_control_flow_matches_onnxruntime_on_ref_and_cpu() {
    let out = tempfile::tempdir().unwrap();
    for dir in generated_cases("control_flow") {
        for target in ["ref", "cpu"] {
            compiled_case_matches_onnxruntime(&dir, target, out.path());
        }
    }
}

#[test]
fn explain_lists_the_kernels_inside_each_region() {
    let root = cache_dir("models/control_flow");
    for (case, regions) in [
        ("loop_runtime", &["region body"][..]),
        ("if_runtime_then", &["region else_branch", "region then_branch"]),
    ] {
        let model = root.join(case).join("model.onnx");
        let out = mxc(&["explain", model.to_str().unwrap(), "--target", "cpu"]);
        assert!(out.status.success(), "{case}: {}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("runs on the host, each region's kernels as the target made them"),
            "{case}:\n{text}"
        );
        for region in regions {
            let at = text
                .find(region)
                .unwrap_or_else(|| panic!("{case}: no `{region}` in\n{text}"));
            // the region's first kernel follows its line
            let rest = &text[at..];
            assert!(
                rest.lines()
                    .nth(1)
                    .is_some_and(|l| l.trim_start().starts_with("kernel 0: ")),
                "{case}:\n{text}"
            );
        }
    }
}
