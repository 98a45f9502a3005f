//! Symbolic input dimensions (issue 13): a model compiled once with `--shape x=n[1..16]{1, 4}x8`
//! (or from its `dim_param`s) holds a program for each optimal size; `mxc run` takes the one for
//! its inputs' sizes, runs a batch no program is compiled for in parts when the batch's items
//! are independent, and refuses a size out of range, or one it cannot make, naming the symbol.

use crate::common::{float_value, ints, model_bytes, mxc, node, stderr, text};
use mxc_dialects::Tensor;
use mxc_kernels::npy;
use mxc_onnx::proto;
use std::path::Path;

/// An f32 initializer.
fn weight(name: &str, dims: &[i64], values: &[f32]) -> proto::TensorProto {
    proto::TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(proto::tensor_proto::DataType::Float as i32),
        float_data: values.to_vec(),
        ..Default::default()
    }
}

fn axis(value: i64) -> proto::AttributeProto {
    proto::AttributeProto {
        name: Some("axis".into()),
        r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
        i: Some(value),
        ..Default::default()
    }
}

/// x: f32[batch, 8] → y = softmax(relu(x · w + b)) over `softmax_axis` (1 keeps the rows
/// apart, 0 mixes them).
fn model(dir: &Path, softmax_axis: i64) -> String {
    let w: Vec<f32> = (0..32).map(|i| ((i * 7) % 11) as f32 * 0.125 - 0.5).collect();
    let graph = proto::GraphProto {
        name: Some("rows".into()),
        node: vec![
            node("MatMul", &["x", "w"], "xw", vec![]),
            node("Add", &["xw", "b"], "z", vec![]),
            node("Relu", &["z"], "r", vec![]),
            node("Softmax", &["r"], "y", vec![axis(softmax_axis)]),
        ],
        initializer: vec![weight("w", &[8, 4], &w), weight("b", &[4], &[0.25, -0.5, 0.0, 1.0])],
        input: vec![float_value("x", &["batch", "8"])],
        output: vec![float_value("y", &["batch", "4"])],
        ..Default::default()
    };
    let path = dir.join(format!("rows{softmax_axis}.onnx"));
    std::fs::write(&path, model_bytes(graph)).unwrap();
    path.to_str().unwrap().to_string()
}

/// A batch of `n` rows of x, as an .npy file.
fn batch(dir: &Path, n: usize) -> String {
    let values: Vec<f32> = (0..n * 8).map(|i| ((i * 5) % 13) as f32 * 0.25 - 1.5).collect();
    let path = dir.join(format!("x{n}.npy"));
    npy::write(&path, &Tensor::from_f32s(vec![n, 8], &values)).unwrap();
    path.to_str().unwrap().to_string()
}

/// `mxc run FILE --input x=X -o OUT`'s y, which must succeed.
fn run_y(file: &str, x: &str, out: &Path) -> Tensor {
    let run = mxc(&["run", file, "--input", &format!("x={x}"), "-o", out.to_str().unwrap()]);
    assert!(run.status.success(), "mxc run {file} x={x}: {}", stderr(&run));
    npy::read(&out.join("y.npy")).unwrap()
}

fn close(a: &Tensor, b: &Tensor) -> bool {
    a.shape() == b.shape()
        && a.to_f64_vec()
            .iter()
            .zip(b.to_f64_vec())
            .all(|(x, y)| (x - y).abs() <= 1e-5)
}

#[test]
fn a_batch_compiles_once_and_runs_at_every_size_in_range() {
    let dir = tempfile::tempdir().unwrap();
    let onnx = model(dir.path(), 1);
    let file = dir.path().join("rows.mxr");
    let file = file.to_str().unwrap();
    let compile = mxc(&["compile", &onnx, "--shape", "x=n[1..16]{1, 4}x8", "-o", file]);
    let said = stderr(&compile);
    assert!(compile.status.success(), "{said}");
    assert!(said.contains("rows.mxr (n=1): "), "{said}");
    assert!(said.contains("rows.mxr (n=4): "), "{said}");
    assert!(said.contains("n counts independent items"), "{said}");
    // the same model and options give the same bytes
    let again = dir.path().join("again.mxr");
    assert!(mxc(&[
        "compile",
        &onnx,
        "--shape",
        "x=n[1..16]{1, 4}x8",
        "-o",
        again.to_str().unwrap()
    ])
    .status
    .success());
    assert!(
        std::fs::read(file).unwrap() == std::fs::read(&again).unwrap(),
        "two compiles differ"
    );
    let params = mxc(&["params", file]);
    let shown = String::from_utf8_lossy(&params.stdout);
    assert!(shown.contains("x: tensor<n[1..16]{1, 4}x8xf32>"), "{shown}");
    assert!(
        shown.contains("outputs:\n  y: tensor<n[1..16]{1, 4}x4xf32>\n"),
        "{shown}"
    );
    assert!(shown.contains("  n=4:\n    output y: tensor<4x4xf32>"), "{shown}");
    assert!(
        shown.contains("  n[1..16]{1, 4}: runs any size in range (independent items: other sizes in parts)"),
        "{shown}"
    );
    // the optimal sizes run their own programs, the others in parts (3 = 1 + 1 + 1,
    // 9 = 4 + 4 + 1); each as the model compiled now for that size computes it
    for n in [1, 4, 3, 9, 16] {
        let x = batch(dir.path(), n);
        let dynamic = run_y(file, &x, &dir.path().join(format!("dynamic{n}")));
        let fixed = run_y(&onnx, &x, &dir.path().join(format!("fixed{n}")));
        assert_eq!(dynamic.shape(), [n, 4]);
        assert!(
            close(&dynamic, &fixed),
            "n={n}: {:?} against {:?}",
            dynamic.to_f64_vec(),
            fixed.to_f64_vec()
        );
    }
    let perf = mxc(&["perf", file, "--shape", "x=4x8", "-n", "3"]);
    let report = String::from_utf8_lossy(&perf.stdout);
    assert!(report.starts_with("the program for n=4\n"), "{report}{}", stderr(&perf));
    let perf = mxc(&["perf", file, "--shape", "x=9x8", "-n", "3"]);
    let report = String::from_utf8_lossy(&perf.stdout);
    assert!(
        report.contains("ran n=9 in parts of 4 + 4 + 1"),
        "{report}{}",
        stderr(&perf)
    );
    // out of range, and a fixed dimension that differs
    let big = batch(dir.path(), 17);
    let out = mxc(&["run", file, "--input", &format!("x={big}")]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "error: input `x` dimension 0: n is 17, outside its range [1..16]"
    );
    let wide = dir.path().join("wide.npy");
    npy::write(&wide, &Tensor::from_f32s(vec![2, 9], &[0.0; 18])).unwrap();
    let out = mxc(&["run", file, "--input", &format!("x={}", wide.display())]);
    assert_eq!(
        stderr(&out).trim(),
        "error: input `x` dimension 1 is 9, the program takes 8"
    );
}

#[test]
fn a_size_between_the_optimal_ones_runs_in_the_program_for_every_size() {
    let dir = tempfile::tempdir().unwrap();
    let onnx = model(dir.path(), 0);
    let file = dir.path().join("mixed.mxr");
    let file = file.to_str().unwrap();
    let compile = mxc(&["compile", &onnx, "--shape", "x=n[1..16]{1, 4}x8", "-o", file]);
    let said = stderr(&compile);
    assert!(compile.status.success(), "{said}");
    assert!(
        said.contains("n runs only at the compiled sizes: at n=4, mx.softmax (on tensor<4x4xf32>): it normalises over the item axis 0"),
        "{said}"
    );
    assert!(
        said.contains("sizes between the compiled ones run in the program for every size"),
        "{said}"
    );
    let params = mxc(&["params", file]);
    assert!(
        String::from_utf8_lossy(&params.stdout).contains("others in the program for every size"),
        "{}",
        String::from_utf8_lossy(&params.stdout)
    );
    // an optimal size runs its own program, another the generic one: both as a file for it alone
    for n in [4, 3, 16] {
        let x = batch(dir.path(), n);
        let dynamic = run_y(file, &x, &dir.path().join(format!("out{n}")));
        let fixed = run_y(&onnx, &x, &dir.path().join(format!("fixed{n}")));
        assert!(close(&dynamic, &fixed), "n = {n}");
    }
}

#[test]
fn a_size_no_program_is_compiled_for_is_refused_when_the_items_mix() {
    let dir = tempfile::tempdir().unwrap();
    // a linear resize does not import over symbols: no program for every size
    let onnx = resized_model(dir.path(), true);
    let file = dir.path().join("mixed.mxr");
    let file = file.to_str().unwrap();
    let compile = mxc(&["compile", &onnx, "--shape", "x=n[1..16]{1, 4}x1x4x4", "-o", file]);
    assert!(compile.status.success(), "{}", stderr(&compile));
    let values = vec![0.5f32; 3 * 16];
    let x = dir.path().join("x3.npy");
    npy::write(&x, &Tensor::from_f32s(vec![3, 1, 4, 4], &values)).unwrap();
    let out = mxc(&["run", file, "--input", &format!("x={}", x.display())]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        "error: no program in this file runs n=3: it holds programs for (n=1), (n=4) \
         and no program for every size (`mxc compile` said why): compile with this size among the optimal ones"
    );
}

#[test]
fn a_dim_param_without_optimal_sizes_compiles_into_one_program_for_every_size() {
    let dir = tempfile::tempdir().unwrap();
    // rows kept apart, or mixed by a softmax over the batch: either way one program, its
    // kernels taking the batch at run time
    for softmax_axis in [1, 0] {
        let onnx = model(dir.path(), softmax_axis);
        let file = dir.path().join(format!("m{softmax_axis}.mxr"));
        let out = mxc(&["compile", &onnx, "-o", file.to_str().unwrap()]);
        let said = stderr(&out);
        assert!(out.status.success(), "{said}");
        assert!(said.contains("(every size in range)"), "{said}");
        let params = mxc(&["params", file.to_str().unwrap()]);
        let params = String::from_utf8_lossy(&params.stdout).to_string();
        assert!(
            params.contains("batch in [1..4096]: runs any size in range"),
            "{params}"
        );
        for n in [1, 6] {
            let x = batch(dir.path(), n);
            let dynamic = run_y(
                file.to_str().unwrap(),
                &x,
                &dir.path().join(format!("d{softmax_axis}_{n}")),
            );
            let fixed = run_y(&onnx, &x, &dir.path().join(format!("f{softmax_axis}_{n}")));
            assert!(close(&dynamic, &fixed), "softmax over axis {softmax_axis}, batch {n}");
        }
    }
    let mixed = model(dir.path(), 0);
    let file = dir.path().join("mixed.mxr");
    // the dim_param's own name takes the range and optimals given
    let out = mxc(&[
        "compile",
        &mixed,
        "--shape",
        "x=batch{2}x8",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let params = mxc(&["params", file.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&params.stdout).contains("x: tensor<batch{2}x8xf32>"));
    // fixed sizes still make a one-program file
    let out = mxc(&["compile", &mixed, "--shape", "x=2x8", "-o", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let params = mxc(&["params", file.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&params.stdout).contains("x: tensor<2x8xf32>"));
}

/// x: f32[batch, 1, 4, 4] → y = relu(bilinear resize by 2), then a softmax over the batch
/// when `mixed`: a model that does not import over symbols (a linear resize reads input
/// positions a table lists per size).
fn resized_model(dir: &Path, mixed: bool) -> String {
    let mut nodes = vec![
        node("Resize", &["x", "", "scales"], "c", vec![text("mode", "linear")]),
        node("Relu", &["c"], if mixed { "r" } else { "y" }, vec![]),
    ];
    if mixed {
        nodes.push(node("Softmax", &["r"], "y", vec![axis(0)]));
    }
    let graph = proto::GraphProto {
        name: Some("resized".into()),
        node: nodes,
        initializer: vec![weight("scales", &[4], &[1.0, 1.0, 2.0, 2.0])],
        input: vec![float_value("x", &["batch", "1", "4", "4"])],
        output: vec![float_value("y", &["batch", "1", "8", "8"])],
        ..Default::default()
    };
    let path = dir.join(format!("resized{}.onnx", u8::from(mixed)));
    std::fs::write(&path, model_bytes(graph)).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn without_a_program_for_every_size_independent_items_run_in_parts() {
    let dir = tempfile::tempdir().unwrap();
    // images kept apart: compiled for one, any batch runs in parts of it
    let onnx = resized_model(dir.path(), false);
    let file = dir.path().join("m.mxr");
    let out = mxc(&["compile", &onnx, "-o", file.to_str().unwrap()]);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(
            "no program for every size: the model does not import over symbols (node #0 (output \"c\") (Resize): \
             over symbolic sizes, Resize is a nearest upsampling by whole scales: \
             mode \"linear\" is not one)"
        ),
        "{said}"
    );
    assert!(
        said.contains("batch had no optimal size: compiled for batch=1, other sizes run in parts of it"),
        "{said}"
    );
    let values: Vec<f32> = (0..3 * 16).map(|i| ((i * 5) % 13) as f32 * 0.25 - 1.5).collect();
    let x = dir.path().join("x3.npy");
    npy::write(&x, &Tensor::from_f32s(vec![3, 1, 4, 4], &values)).unwrap();
    let x = x.to_str().unwrap();
    let dynamic = run_y(file.to_str().unwrap(), x, &dir.path().join("dynamic3"));
    let fixed = run_y(&onnx, x, &dir.path().join("fixed3"));
    assert!(close(&dynamic, &fixed));
    // images mixed by a softmax over the batch: asked for optimal sizes, saying why
    let mixed = resized_model(dir.path(), true);
    let file = dir.path().join("mixed.mxr");
    let out = mxc(&["compile", &mixed, "-o", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(
            "input `x` dimension 0 is batch in [1..4096], with no optimal size to compile for, \
             and its items are not independent (other sizes cannot run in parts of one): \
             give some, as in --shape x=batch[1..4096]{1}x1x4x4 \
             (no program for every size: the model does not import over symbols"
        ),
        "{err}"
    );
    assert!(
        err.contains("batch runs only at the compiled sizes: at batch=2, mx.softmax"),
        "{err}"
    );
    assert!(!file.exists(), "nothing is written");
}

#[test]
fn a_file_of_programs_by_size_is_signed_and_checked_whole() {
    let dir = tempfile::tempdir().unwrap();
    let onnx = model(dir.path(), 1);
    let key = dir.path().join("k");
    assert!(mxc(&["keygen", key.to_str().unwrap()]).status.success());
    let file = dir.path().join("signed.mxr");
    let file = file.to_str().unwrap();
    let secret = key.with_extension("key");
    let out = mxc(&[
        "compile",
        &onnx,
        "--shape",
        "x=n[1..8]{1, 2}x8",
        "-o",
        file,
        "--sign",
        secret.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let x = batch(dir.path(), 2);
    let public = key.with_extension("pub");
    let trusted = mxc(&[
        "run",
        file,
        "--input",
        &format!("x={x}"),
        "--trust",
        public.to_str().unwrap(),
    ]);
    assert!(trusted.status.success(), "{}", stderr(&trusted));
    // one byte changed in a program inside: the whole file's digest no longer matches
    let mut bytes = std::fs::read(file).unwrap();
    let at = bytes.len() - 200;
    bytes[at] ^= 1;
    std::fs::write(file, &bytes).unwrap();
    let out = mxc(&["run", file, "--input", &format!("x={x}")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("digest mismatch: the file is corrupt"),
        "{}",
        stderr(&out)
    );
}

/// x: f32[1, 3, height, width] → a detector's shape in small: two strided convolutions, the
/// coarser level upsampled (nearest, by 2) and concatenated with the finer, split in two
/// halves, one max-pooled and added to the other, and a transposed convolution back to the
/// image's size: y f32[1, 2, height, width]. Consistent only where height and width are
/// multiples of 4.
fn detector_model(dir: &Path) -> String {
    let values = |n: usize| -> Vec<f32> { (0..n).map(|i| ((i * 7) % 11) as f32 * 0.125 - 0.6).collect() };
    let window = |stride: i64| vec![ints("pads", &[1, 1, 1, 1]), ints("strides", &[stride, stride])];
    let split = proto::NodeProto {
        op_type: Some("Split".into()),
        input: vec!["joined".into(), "halves".into()],
        output: vec!["a".into(), "b".into()],
        attribute: vec![axis(1)],
        ..Default::default()
    };
    let pool = vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])];
    let graph = proto::GraphProto {
        name: Some("detector".into()),
        node: vec![
            node("Conv", &["x", "w1"], "c1", window(2)),
            node("Relu", &["c1"], "fine", vec![]),
            node("Conv", &["fine", "w2"], "coarse", window(2)),
            node("Resize", &["coarse", "", "scales"], "up", vec![]),
            node("Concat", &["fine", "up"], "joined", vec![axis(1)]),
            split,
            node("MaxPool", &["a"], "pooled", pool),
            node("Add", &["pooled", "b"], "sum", vec![]),
            node("ConvTranspose", &["sum", "wt"], "y", vec![ints("strides", &[2, 2])]),
        ],
        initializer: vec![
            weight("w1", &[4, 3, 3, 3], &values(108)),
            weight("w2", &[4, 4, 3, 3], &values(144)),
            weight("scales", &[4], &[1.0, 1.0, 2.0, 2.0]),
            weight("wt", &[4, 2, 2, 2], &values(32)),
            crate::common::int64_initializer("halves", &[4, 4]),
        ],
        input: vec![float_value("x", &["1", "3", "height", "width"])],
        output: vec![float_value("y", &["1", "2", "height", "width"])],
        ..Default::default()
    };
    let path = dir.join("detector.onnx");
    std::fs::write(&path, model_bytes(graph)).unwrap();
    path.to_str().unwrap().to_string()
}

/// An image of `height x width` for the detector, as an .npy file.
fn image(dir: &Path, height: usize, width: usize) -> String {
    let values: Vec<f32> = (0..3 * height * width)
        .map(|i| ((i * 5) % 17) as f32 * 0.125 - 1.0)
        .collect();
    let path = dir.join(format!("image{height}x{width}.npy"));
    npy::write(&path, &Tensor::from_f32s(vec![1, 3, height, width], &values)).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn an_image_model_consistent_at_multiples_of_its_stride_compiles_into_one_program_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let onnx = detector_model(dir.path());
    let file = dir.path().join("detector.mxr");
    let out = mxc(&["compile", &onnx, "-o", file.to_str().unwrap()]);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("the model is consistent only at sizes in steps of 4"),
        "{said}"
    );
    assert!(
        said.contains("its program takes x: [1, 3, height_in_4s[1..1024] * 4, width_in_4s[1..1024] * 4]"),
        "{said}"
    );
    assert!(said.contains("(every size in range)"), "{said}");
    let file = file.to_str().unwrap();
    let run = mxc(&["perf", file, "--shape", "x=1x3x8x12", "-n", "1"]);
    assert!(run.status.success(), "{}", stderr(&run));
    for (height, width) in [(8, 12), (20, 16), (36, 44)] {
        let x = image(dir.path(), height, width);
        let generic = run_y(file, &x, &dir.path().join(format!("g{height}x{width}")));
        let fixed = run_y(&onnx, &x, &dir.path().join(format!("f{height}x{width}")));
        assert_eq!(generic.shape(), [1, 2, height, width]);
        assert!(close(&generic, &fixed), "at {height} x {width}");
    }
    // a size the model is not consistent at is refused, naming the dimension and the step
    let x = image(dir.path(), 10, 12);
    let run = mxc(&[
        "run",
        file,
        "--input",
        &format!("x={x}"),
        "-o",
        dir.path().join("o").to_str().unwrap(),
    ]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        stderr(&run)
            .contains("input `x` dimension 2 is 10, not a multiple of 4 (the program takes height_in_4s[1..1024] * 4)"),
        "{}",
        stderr(&run)
    );
}
