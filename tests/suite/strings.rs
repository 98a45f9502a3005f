//! Strings: a program in the text form with string inputs, constants, host steps (the string
//! ops and data movement of strings), an `if` and a `loop` carrying strings, compiled for each
//! target, saved and loaded as an `.mxr`, run and checked against values worked out by hand;
//! strings through `mxc run` (`.npy` unicode arrays in and out); and the ONNX node suite's
//! string cases imported with their inputs and run by the evaluator (the suite itself runs
//! them compiled, `node_suite.rs`).

use crate::common::{cache_dir, compile_and_load, data_files, mxc, stderr};
use mxc_codegen::{compile, CompileOptions, Target};
use mxc_dialects::{text, DType, Tensor};
use mxc_kernels::mxr::{self, Mxr};
use mxc_onnx::data::{read_value_file, DataKind, DataValue};
use std::collections::HashMap;

/// `y = gather(c ? x ++ ["-a", "-b", "-c"] : upper(x ++ ...), i)`, then "!" appended `n`
/// times by a loop; `m` whether each of `y` (before the loop) is lowercase letters, a dash
/// and a letter.
const TAG: &str = r#"graph "tag" (%arg0: tensor<bool> "c", %arg1: tensor<3xstring> "x", %arg2: tensor<2xi64> "i", %arg3: tensor<i64> "n") {
  %0 = mx.constant {value = dense<["-a", "-b", "-c"]> : tensor<3xstring>} : tensor<3xstring>
  %1 = mx.string_concat %arg1, %0 : tensor<3xstring>
  %2 = mx.if %arg0, %1 {else_branch = graph "else" (%arg0: tensor<3xstring> "s") {
    %0 = mx.string_case %arg0 {to = "upper"} : tensor<3xstring>
    return "s" = %0
  }, then_branch = graph "then" (%arg0: tensor<3xstring> "s") {
    return "s" = %arg0
  }} : tensor<3xstring>
  %3 = mx.gather %2, %arg2 {axis = 0} : tensor<2xstring>
  %4 = mx.regex_full_match %3 {pattern = "[a-z]+-[a-z]"} : tensor<2xbool>
  %5 = mx.constant {value = dense<[1]> : tensor<bool>} : tensor<bool>
  %6 = mx.loop %arg3, %5, %3 {body = graph "body" (%arg0: tensor<i64> "k", %arg1: tensor<bool> "cond", %arg2: tensor<2xstring> "acc") {
    %0 = mx.constant {value = dense<["!"]> : tensor<1xstring>} : tensor<1xstring>
    %1 = mx.string_concat %arg2, %0 : tensor<2xstring>
    return "cond" = %arg1, "acc" = %1
  }, carried = 1, iterations = -1} : tensor<2xstring>
  return "y" = %6, "m" = %4
}
"#;

fn strings(values: &[&str]) -> Tensor {
    Tensor::from_strings(vec![values.len()], values.iter().map(|s| s.to_string()).collect())
}

#[test]
fn a_compiled_program_runs_on_strings() {
    let x = strings(&["ab", "", "é"]);
    for target in [Target::Ref, Target::Cpu] {
        let exe = compile_and_load(TAG, target);
        let run = |c: bool, i: [i64; 2], n: i64| {
            let inputs: HashMap<String, Tensor> = [
                ("c", Tensor::from_i64s(DType::Bool, vec![], &[c as i64])),
                ("x", x.clone()),
                ("i", Tensor::from_i64s(DType::I64, vec![2], &i)),
                ("n", Tensor::from_i64s(DType::I64, vec![], &[n])),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            let outputs = exe.run(&inputs).unwrap_or_else(|e| panic!("{target}: {e}"));
            let y: Vec<String> = outputs[0].1.strings().unwrap().into_iter().map(String::from).collect();
            (y, outputs[1].1.to_i64_vec())
        };
        assert_eq!(
            run(true, [0, 2], 0),
            (vec!["ab-a".into(), "é-c".into()], vec![1, 0]),
            "{target}"
        );
        assert_eq!(
            run(false, [2, 1], 2),
            (vec!["É-C!!".into(), "-B!!".into()], vec![0, 0]),
            "{target}"
        );
        // the strings a run makes are its own: the same program runs again the same way
        assert_eq!(
            run(true, [1, 1], 3),
            (vec!["-b!!!".into(), "-b!!!".into()], vec![0, 0]),
            "{target}"
        );
    }
}

#[test]
fn strings_go_through_mxc_run_as_numpy_unicode_arrays() {
    let tmp = tempfile::tempdir().unwrap();
    let c = compile(&text::parse(TAG).unwrap(), Target::Cpu, &CompileOptions::default()).unwrap();
    let mxr = tmp.path().join("tag.mxr");
    std::fs::write(
        &mxr,
        mxr::encode(&Mxr::new("cpu", "test", "", c.program, c.library), None),
    )
    .unwrap();
    let inputs = [
        ("x", strings(&["ab", "", "é"])),
        ("c", Tensor::from_i64s(DType::Bool, vec![], &[0])),
        ("i", Tensor::from_i64s(DType::I64, vec![2], &[0, 2])),
        ("n", Tensor::from_i64s(DType::I64, vec![], &[1])),
    ];
    let out = tmp.path().join("out");
    let mut args = vec!["run".to_string(), mxr.display().to_string()];
    for (name, value) in &inputs {
        let file = tmp.path().join(format!("{name}.npy"));
        mxc_kernels::npy::write(&file, value).unwrap();
        args.extend(["--input".into(), format!("{name}={}", file.display())]);
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    // without `-o` the outputs are printed
    let printed = mxc(&argv);
    assert!(printed.status.success(), "{}", stderr(&printed));
    let printed = String::from_utf8_lossy(&printed.stdout);
    assert!(printed.contains(r#"y: [2] string ["AB-A!", "É-C!"]"#), "{printed}");
    let out_dir = out.display().to_string();
    let run = mxc(&[&argv[..], &["-o", &out_dir]].concat());
    assert!(run.status.success(), "{}", stderr(&run));
    let y = mxc_kernels::npy::read(&out.join("y.npy")).unwrap();
    assert_eq!(y, strings(&["AB-A!", "É-C!"]));
}

fn tensor(path: &std::path::Path) -> Tensor {
    match read_value_file(path, DataKind::Tensor).unwrap() {
        DataValue::Tensor(t) => t,
        other => panic!("{}: not a tensor: {other:?}", path.display()),
    }
}

#[test]
fn string_cases_match_through_the_evaluator() {
    let words = ["string", "strnorm", "regex", "label_encoder", "equal_string"];
    let mut failures = Vec::new();
    let mut count = 0;
    for entry in std::fs::read_dir(cache_dir("onnx-backend-tests/node")).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        if !words.iter().any(|w| name.contains(w)) {
            continue;
        }
        count += 1;
        let (set, model) = (dir.join("test_data_set_0"), dir.join("model.onnx"));
        let mut opts = mxc_onnx::ImportOptions::default();
        let names = mxc_onnx::model_input_kinds(&model).unwrap();
        let inputs: Vec<_> = data_files(&set, "input_").iter().map(|f| tensor(f)).collect();
        for ((n, _), t) in names.iter().zip(&inputs) {
            opts.specialize.insert(n.clone(), t.clone());
        }
        let outputs = mxc_onnx::import_file(&model, &opts)
            .map_err(|e| e.to_string())
            .and_then(|g| mxc_dialects::eval::run(&g, &inputs));
        match outputs {
            Err(e) => failures.push(format!("{name}: {e}")),
            Ok(outputs) => {
                for (k, (actual, f)) in outputs.iter().zip(data_files(&set, "output_")).enumerate() {
                    if *actual != tensor(&f) {
                        failures.push(format!("{name}: output {k} differs"));
                    }
                }
            }
        }
    }
    assert_eq!(count, 26, "the suite's string cases");
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn explain_marks_the_ops_on_strings_as_host_steps() {
    let model = cache_dir("onnx-backend-tests/node/test_ai_onnx_ml_label_encoder_tensor_mapping").join("model.onnx");
    let out = mxc(&["explain", model.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("kernel 1 (on the host: strings): %2 = mx.equal %0: tensor<5x1xstring>"),
        "{text}"
    );
    assert!(text.contains("kernel 2: %3 = mx.cast %2: tensor<5x3xbool>"), "{text}");
}
